"""The ``gateway`` section of agent.json: where it listens, who may call it, and its capacities.

``GatewayConfig`` holds the bind address (checked by ``check_host``, which ``serve --host``
shares), the tokens (``authToken`` or named ``callers``, each a ``CallerConfig`` with scopes),
browser origins and hosts, and the caps on queries, queues, sessions and requests.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from ._config_model import ConfigModel

Scope = Literal["query", "approve", "admin"]

_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")


def check_host(value: str) -> str:
    """A bind address as ``gateway.host`` and ``serve --host`` take it: an IPv4 or IPv6 address
    (``[::1]`` loses its brackets), a host name, or ``""`` (every address).

    Raises:
        ValueError: anything else, saying what was probably meant.
    """
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text:
        return ""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if "://" in text or "/" in text:
        raise ValueError(f"{value!r} is a URL or path; give only the host name or address, like 127.0.0.1")
    if text.count(":") == 1:
        raise ValueError(f"{value!r} has a port in it; give the host alone and the port as gateway.port (--port)")
    name = text.removesuffix(".")
    labels = name.split(".")
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{value!r} is not a host name or an IP address (like 127.0.0.1, ::1 or localhost)")
    if labels[-1].isdigit():
        raise ValueError(f"{value!r} is not a valid IPv4 address")
    return text


BindHost = Annotated[str, AfterValidator(check_host)]


class CallerConfig(ConfigModel):
    """One named caller of the gateway: its bearer token and what it may do."""

    token: str = Field(min_length=1)
    scopes: list[Scope] = Field(default_factory=lambda: list[Scope](["query"]), min_length=1)
    """``query``: ask and see its own conversations; ``approve``: resolve any approval;
    ``admin``: see and delete everything."""


class GatewayConfig(ConfigModel):
    host: BindHost = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    auth_token: str | None = None
    """With a token, every route but health needs ``Authorization: Bearer <token>``. Binding a
    non-loopback host without one is refused."""
    description: str = "Answers questions using the tools of this machine."
    allowed_origins: list[str] = Field(default_factory=list)
    """Browser origins allowed to call (besides loopback ones). No wildcard."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Extra Host header values accepted (besides loopback ones and the bind host)."""
    expose_tools: bool = False
    """Also list every inner tool; their calls still pass validation, approval and timeouts."""
    callers: dict[str, CallerConfig] = Field(default_factory=dict)
    """Named callers, each with its own token and scopes; ``authToken`` is the one-caller
    shorthand (a caller named ``owner`` with every scope). A caller sees only its own
    conversations, runs and approvals unless its scopes say more."""
    caller_share: float = Field(default=0.75, gt=0, le=1)
    """With two or more callers, the largest share of each capacity (query slots, queue,
    approvals, conversations, MCP sessions) one caller may hold."""
    max_concurrent_queries: int = Field(default=16, ge=0)
    """Queries (and exposed tool calls) running at once (0 = no cap)."""
    max_queued_queries: int = Field(default=64, ge=0)
    """Queries waiting for a slot when all are taken; beyond this the answer is "busy" (429)."""
    queue_timeout_seconds: float = Field(default=30, ge=0)
    """How long a query waits in the queue before it is answered "busy"."""
    max_mcp_sessions: int = Field(default=1000, ge=1)
    """Open MCP sessions (SSE connections and Streamable HTTP sessions) at once."""
    mcp_session_idle_seconds: float = Field(default=1800, gt=0)
    """A Streamable HTTP session without any request for this long is closed."""
    read_timeout_seconds: float = Field(default=10, ge=0)
    """A request whose headers and body have not all arrived this long after its first byte (or
    a new connection that sends nothing for this long) is closed (0 = no limit)."""
    max_connections: int = Field(default=0, ge=0)
    """Open HTTP connections at once; 0 = three quarters of the file-descriptor limit."""
    progress_interval_seconds: float = Field(default=5, ge=0)
    """While a run waits (model, tool, approval), ``agent_query`` sends a progress notification at
    least this often, to callers that sent a progress token (0 = only one per step)."""
    query_only_schema: bool = False
    """Publish ``agent_query`` with ``query`` as its only input (for clients that cannot send or
    omit optional members); conversations then cannot be continued over MCP."""
    stateless: bool = False
    max_request_bytes: int = Field(default=1_000_000, ge=0)
    max_query_chars: int = Field(default=20_000, ge=0)
    record_dir: str | None = None
    """Record every run to ``<recordDir>/<run id>.jsonl`` (``mcp-agent replay``); relative to the
    config file's folder. None records nothing. The files are the user's alone (0600), and
    ``serve`` refuses a folder another user owns or may write into (``_paths.private_folder``)."""

    @field_validator("auth_token")
    @classmethod
    def _empty_token_is_none(cls, value: str | None) -> str | None:
        """``"${MCP_AGENT_TOKEN:-}"`` with the variable unset means "no token"."""
        return value or None

    @field_validator("callers")
    @classmethod
    def _callers_are_distinct(cls, value: dict[str, CallerConfig]) -> dict[str, CallerConfig]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
                raise ValueError(f"caller name {name!r}: use 1-64 letters, digits, '_', '.', '-'")
        tokens = [caller.token for caller in value.values()]
        if len(set(tokens)) != len(tokens):
            raise ValueError("two callers have the same token; each caller needs its own")
        return value

    @model_validator(mode="after")
    def _owner_token_is_distinct(self) -> GatewayConfig:
        if self.auth_token and any(caller.token == self.auth_token for caller in self.callers.values()):
            raise ValueError("gateway.authToken is also a caller's token; each caller needs its own")
        if "owner" in self.callers and self.auth_token:
            raise ValueError("the caller name 'owner' stands for gateway.authToken; rename that caller")
        return self

    @property
    def has_tokens(self) -> bool:
        """Whether any caller must present a token (``authToken`` or ``callers``)."""
        return bool(self.auth_token or self.callers)
