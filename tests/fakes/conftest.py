"""The fixtures the fake model server's own tests share with the provider tests."""

from __future__ import annotations

from tests.providers.conftest import http_client, model_server

__all__ = ["http_client", "model_server"]
