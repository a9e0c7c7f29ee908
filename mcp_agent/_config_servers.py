"""The ``mcpServers`` section of agent.json: one model per tool-server transport, and their union.

An entry with ``command`` is a ``StdioServerConfig`` (a subprocess speaking MCP over
stdin/stdout), one with ``url`` a ``RemoteServerConfig`` (Streamable HTTP or SSE).
``ServerConfig`` is the tagged union that tells them apart, guessing from a misspelt key so
that the error names it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, Tag, field_validator, model_validator

from ._config_model import ConfigModel


class _ServerBase(ConfigModel):
    disabled: bool = False
    allow_tools: list[str] | None = None
    """Only these tools (MCP names; ``*`` globs allowed) are offered. None = all."""
    deny_tools: list[str] = Field(default_factory=list)
    """These tools (MCP names; globs allowed) are never offered."""
    tool_prefix: str | None = None
    """Prefix of exposed names: ``<prefix>__tool``. None = the server's name; "" = bare names."""
    call_timeout_seconds: float | None = Field(default=None, ge=0)
    """Deadline of one call to this server's tools (else ``limits.toolTimeoutSeconds``)."""
    startup_timeout_seconds: float = Field(default=30, ge=0)
    """Deadline for start, handshake and first tool list (0 = none)."""
    max_message_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    """The largest message taken from this server (0 = no limit). A response beyond it fails
    its call with an error naming the size and this key; the connection stays up. At 4 MiB the
    event loop pauses under 70 ms for the worst shape of message (bench_big_results.py); raise it
    for a server that returns big images."""
    lazy: bool = False
    """Start the server only on its first call when its tool list is cached (see README, "Fast
    start"); without a cached list it starts at once to learn it. Stopped after ``idleSeconds``."""
    idle_seconds: float = Field(default=600, ge=0)
    """A lazy server is stopped after this many seconds without calls (0 = never)."""


class StdioServerConfig(_ServerBase):
    """A server run as a subprocess speaking MCP over stdin/stdout.

    The child gets a safe environment (HOME, LOGNAME, PATH, SHELL, TERM, USER) plus ``env``;
    to pass one of our variables through, write ``"env": {"API_KEY": "${API_KEY}"}``.
    """

    type: Literal["stdio"] | None = None
    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class RemoteServerConfig(_ServerBase):
    """A server reached over HTTP: Streamable HTTP (``http``) or the older SSE transport."""

    url: str
    transport: Literal["http", "sse"] = "http"
    type: Literal["http", "sse", "streamable-http", "streamableHttp", "streamable_http"] | None = None
    """Accepted for Cursor/VS Code files; ``sse`` selects SSE, the rest Streamable HTTP."""
    headers: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _type_sets_transport(self) -> RemoteServerConfig:
        if self.type is not None and "transport" not in self.model_fields_set:
            object.__setattr__(self, "transport", "sse" if self.type == "sse" else "http")
        return self

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.match(r"^https?://", value):
            raise ValueError("must start with http:// or https://")
        return value


_STDIO_KEYS = ("command", "args", "env", "cwd")
_REMOTE_KEYS = ("url", "headers", "transport")


def _server_kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        return "remote" if isinstance(value, RemoteServerConfig) else "stdio"
    if not isinstance(value, Mapping):
        return None
    if "url" in value and "command" in value:
        return None
    if "url" in value:
        return "remote"
    if "command" in value:
        return "stdio"
    # neither: guess from a misspelling (``comand``, ``URL``) or the other keys, so that the
    # errors name the unknown key with a did-you-mean instead of only "needs command or url"
    keys = [str(key).lower() for key in value]
    for key in keys:
        if difflib.get_close_matches(key, ["command"], cutoff=0.6):
            return "stdio"
        if difflib.get_close_matches(key, ["url"], cutoff=0.6):
            return "remote"
    if any(key in _STDIO_KEYS for key in keys):
        return "stdio"
    if any(key in _REMOTE_KEYS for key in keys):
        return "remote"
    return None


ServerConfig = Annotated[
    Annotated[StdioServerConfig, Tag("stdio")] | Annotated[RemoteServerConfig, Tag("remote")],
    Discriminator(
        _server_kind,
        custom_error_type="server_kind",
        custom_error_message="a server needs 'command' (stdio) or 'url' (remote), and not both",
    ),
]
"""One entry of ``mcpServers``: stdio when it has ``command``, remote when it has ``url``."""
