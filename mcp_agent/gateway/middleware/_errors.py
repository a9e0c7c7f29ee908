"""The JSON error answer every middleware and REST handler sends: ``{"error": {"message", "type"}}``."""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.types import Send


def error_body(message: str, type_: str) -> bytes:
    """The JSON error document."""
    return json.dumps({"error": {"message": message, "type": type_}}).encode("utf-8")


async def send_error(
    send: Send,
    status: int,
    message: str,
    type_: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Answer an HTTP request with a JSON error (the response must not have started)."""
    body = error_body(message, type_)
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw.extend(
        (key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in (headers or {}).items()
    )
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
