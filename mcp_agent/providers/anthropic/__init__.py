"""The native Anthropic Messages API: the provider and its wire format."""

from __future__ import annotations

from .provider import AnthropicProvider

__all__ = ["AnthropicProvider"]
