"""The stdio transport's two streams as the gateway wraps them: secrets masked going out, and
lines that are no JSON-RPC message answered coming in.

Over HTTP, ``SecretsMiddleware`` in ``middleware.py`` masks every response; over stdio there is no HTTP, so the
write stream the MCP server sends on is wrapped: a message whose JSON shows a known secret value
is sent as the same message with the value masked (``***``). Messages without one, and every
message while no secret is known, pass unchanged (one JSON rendering to look).

Over HTTP a body that is not a JSON-RPC message gets a 400; the SDK's stdio transport hands such a
line to the server as an exception, which drops it with a debug log: the client waits forever for
an answer that never comes. ``AnsweringReadStream`` answers it instead, as JSON-RPC 2.0 says
(``-32700`` for text that is not JSON, ``-32600`` for JSON that is not a valid message, with the
request's id when it has one), and logs a warning on stderr.
"""

from __future__ import annotations

import json
import logging
from types import TracebackType
from typing import Any

import mcp_types as types
import pydantic
from anyio import ClosedResourceError, EndOfStream
from mcp.shared.message import SessionMessage

from ..._redact import SECRETS, mask_secrets
from .._internals import ReadStream, WriteStream

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SHOWN_CHARS = 200


class MaskedWriteStream:
    """A ``WriteStream[SessionMessage]`` that masks known secrets, over another one."""

    def __init__(self, inner: WriteStream[SessionMessage]) -> None:
        self.inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        if len(SECRETS):
            wire = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            masked = mask_secrets(wire)
            if masked != wire:
                message = types.jsonrpc_message_adapter.validate_json(masked, by_name=False)
                item = SessionMessage(message, metadata=item.metadata)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> MaskedWriteStream:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self.inner.__aexit__(exc_type, exc_val, exc_tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def error_for(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering an input line the transport could not read as a message."""
    errors = exc.errors() if isinstance(exc, pydantic.ValidationError) else []
    raw = errors[0].get("input") if errors else None
    if (errors and errors[0].get("type") == "json_invalid") or not errors:
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON"),
        )
    request_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    message = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=INVALID_REQUEST, message=message)
    )


def _shown(exc: Exception) -> str:
    errors = exc.errors() if isinstance(exc, pydantic.ValidationError) else []
    raw = errors[0].get("input") if errors else exc
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str) if errors else repr(raw)
    return mask_secrets(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…")


class AnsweringReadStream:
    """A ``ReadStream`` of the stdio transport that answers (on ``write``) every item that is an
    exception instead of a message, and passes only messages on (see the module docstring)."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage]
    ) -> None:
        self.inner = inner
        self.write = write

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self.inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = error_for(item)
            logger.warning("stdio: answered %s to a malformed line: %s", answer.error.code, _shown(item))
            await self.write.send(SessionMessage(answer))

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (EndOfStream, ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> AnsweringReadStream:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self.inner.__aexit__(exc_type, exc_val, exc_tb)

    def __getattr__(self, name: str) -> Any:  # ``last_context``, which the SDK reads if present
        return getattr(self.inner, name)
