"""Known secrets out of every HTTP response: REST answers, event streams, MCP messages, errors.

The secret values the process holds (``_redact.remember_secrets``: API keys, tokens, env and
header values of the config) are masked in each response's headers and body before it leaves.
A body with a ``Content-Length`` is held until it is complete, masked whole and sent with its
new length; a streamed body (SSE: ``/api/v1/events``, the MCP streams) is masked chunk by chunk,
and each chunk is one whole event. With no secret known the middleware is a pass-through.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._redact import SECRETS, mask_secret_bytes


class SecretsMiddleware:
    """Masks the known secret values in every HTTP response (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not len(SECRETS):
            await self.app(scope, receive, send)
            return
        held: Message | None = None  # the response start, while a sized body is gathered
        body = bytearray()

        async def masking_send(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                headers = [(name, mask_secret_bytes(value)) for name, value in message.get("headers", [])]
                message = {**message, "headers": headers}
                sized = any(name.lower() == b"content-length" for name, _ in headers)
                if sized and scope["method"] != "HEAD":
                    held = message
                    return
                await send(message)
            elif message["type"] == "http.response.body" and held is not None:
                body.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                masked = mask_secret_bytes(bytes(body))
                start, held = held, None
                if len(masked) != len(body):
                    sized_headers = MutableHeaders(raw=list(start["headers"]))
                    sized_headers["content-length"] = str(len(masked))
                    start = {**start, "headers": sized_headers.raw}
                await send(start)
                await send({"type": "http.response.body", "body": masked, "more_body": False})
            elif message["type"] == "http.response.body":
                await send({**message, "body": mask_secret_bytes(message.get("body", b""))})
            else:
                await send(message)

        await self.app(scope, receive, masking_send)
