"""Known secrets out of the stdio transport: what the gateway writes on stdout is masked.

Over HTTP, ``middleware/secrets.py`` masks every response; over stdio there is no HTTP, so the
write stream the MCP server sends on is wrapped: a message whose JSON shows a known secret value
is sent as the same message with the value masked (``***``). Messages without one, and every
message while no secret is known, pass unchanged (one JSON rendering to look).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import mcp_types as types
from mcp.shared._stream_protocols import WriteStream
from mcp.shared.message import SessionMessage

from .._redact import SECRETS, mask_secrets


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
