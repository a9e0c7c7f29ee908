"""The sections of agent.json as pydantic models, one class per object of the file.

``ConfigModel`` is the base of every model: camelCase keys in the file, snake_case in Python,
unknown keys rejected, frozen. Then, in the order a reader meets them in the file: ``llm``
(``LLMConfig``, ``CapabilityOverrides``, fallbacks), ``limits`` and ``approvals``, ``mcpServers``
(stdio and remote servers), ``gateway`` (callers, the bind-host check), ``sessions`` and
``state``, ``telemetry``, and ``AgentConfig``, the whole file. The rest of the package imports
these names from ``config`` (the package's face).
"""

from __future__ import annotations

import difflib
import ipaddress
import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ..exceptions import ConfigError


class ConfigModel(BaseModel):
    """Base: camelCase keys in the file, snake_case in Python, unknown keys rejected, frozen."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )


# The ``llm`` section of agent.json: the model server, what it supports, and its fallbacks.
#
# ``LLMConfig`` says where the model server is and how to talk to it; ``CapabilityOverrides``
# overrides what is known about that kind of server; each ``FallbackConfig`` in ``llm.fallbacks``
# is another model tried when this one fails (``providers/fallback.py``).
class CapabilityOverrides(ConfigModel):
    """What the model server supports. ``None`` means "as known for this kind of server"."""

    tool_choice: bool | None = None
    """Send ``tool_choice`` (Ollama ignores it; most others accept it)."""
    parallel_tool_calls: bool | None = None
    """Send ``parallel_tool_calls: true`` (llama.cpp needs it to emit several calls at once)."""
    stream_usage: bool | None = None
    """Send ``stream_options.include_usage`` so a stream reports token usage."""
    stream_tools: bool | None = None
    """Stream when tools are offered (set false for servers that drop streamed tool calls)."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    """The name of the output-token cap in requests."""
    send_reasoning: bool | None = None
    """Send earlier reasoning back as ``reasoning_content`` (GLM, Kimi, DeepSeek templates)."""


class LLMConfig(ConfigModel):
    """The model server."""

    endpoint: str = "http://localhost:11434/v1"
    """Base URL of an OpenAI-compatible server, with or without ``/v1``; Anthropic and Gemini
    URLs are recognised."""
    model: str = "qwen3:8b"
    provider: Literal["auto", "openai", "anthropic", "gemini"] = "auto"
    """``auto`` picks by the endpoint's host."""
    api_key: str | None = None
    tool_call_style: Literal["auto", "native", "text"] = "auto"
    """``native``: only structured tool calls; ``text``/``auto``: tool calls written as text in the
    answer are also accepted when a turn has no structured calls."""
    tool_choice: Literal["auto", "required", "none"] = "auto"
    """``required``: the first round must call a tool (later rounds are ``auto``); ``none``: the
    model may not call tools. Sent only where the server takes ``tool_choice`` (capabilities);
    llama-server with ``--jinja`` then constrains the answer to a well-formed call."""
    stream: bool = True
    temperature: float | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    request_timeout_seconds: float = Field(default=300, ge=0)
    """Read timeout for one model call (0 = none). Ollama loads models inside the request, so
    keep it long."""
    connect_timeout_seconds: float = Field(default=10, ge=0)
    max_retries: int = Field(default=2, ge=0)
    max_response_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """The most bytes one model response may take, streamed or not (0 = no limit). Beyond it the
    response is abandoned and the run ends ``llm_error``."""
    max_tool_argument_chars: int = Field(default=1_000_000, ge=0)
    """A tool call whose argument text is longer is not parsed: the model gets an error result."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers for every model request."""
    capabilities: CapabilityOverrides = Field(default_factory=CapabilityOverrides)
    vision: bool | Literal["auto"] = "auto"
    """Send the images tools return to the model. ``auto``: for models known to read images
    (hosted: OpenAI gpt-4o/4.1/5, o-series, Claude 3 and later, Gemini; local names that say so:
    llava, qwen2.5-vl, ``-vl``, vision, gemma3, minicpm-v, pixtral...). Off, the model reads a
    placeholder such as ``[image: image/png, 4.0 kB]``."""
    tool_budget: (
        Annotated[int, Field(strict=True, ge=0)] | Annotated[float, Field(gt=0, lt=1)] | Literal["auto"]
    ) = "auto"
    """How many tools one round may offer before the tool router picks them (``tools/router/``):
    a count (``find_tools`` included; 0 = never route), a share of the model's context window
    (0.25: the offered definitions take at most a quarter of it), or ``auto``: 9 tools when the
    model server is local (llama.cpp, Ollama, LM Studio, Lemonade) or the window is at most
    16,384 tokens, every tool otherwise."""
    pinned_tools: list[str] = Field(default_factory=list)
    """Globs on exposed names (``time__*``) of tools offered in every round while routing."""
    fallbacks: list[FallbackConfig] = Field(default_factory=list)
    """Models tried in order when this one fails with a connection error, a 5xx or a rate limit
    (after its retries). Each entry takes any ``llm`` key but ``fallbacks``; a key it leaves out
    is the primary's, except the server's own (``provider``, ``apiKey``, ``headers``,
    ``capabilities``) when the entry names an endpoint on another server."""
    config_file: str = Field(default="agent.json", exclude=True)
    """The config file this section was read from, as given (``load_config`` sets it), so that
    hints name the file to edit."""

    @field_validator("api_key")
    @classmethod
    def _empty_key_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("tool_budget", mode="before")
    @classmethod
    def _one_budget(cls, value: Any) -> Any:
        count = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        share = isinstance(value, float) and 0 < value < 1
        if not (count or share or value == "auto"):
            raise ValueError(
                f"expected a count of tools (0 = never route), a share of the context window "
                f'between 0 and 1, or "auto"; got {value!r}'
            )
        return value


class FallbackConfig(LLMConfig):
    """One entry of ``llm.fallbacks``: the keys of ``llm`` it sets (``providers/fallback.py``
    fills in the rest from the primary)."""

    @model_validator(mode="after")
    def _not_nested(self) -> FallbackConfig:
        if self.fallbacks:
            raise ValueError(
                "a fallback entry cannot have fallbacks of its own: list them all in llm.fallbacks"
            )
        return self


LLMConfig.model_rebuild()


# What bounds and gates one run: the ``limits`` and ``approvals`` sections of agent.json.
#
# ``Limits`` are the run's budgets and guards (**0 means off** for every number), which a
# caller's request may only tighten (``Limits.tighten``). ``ApprovalsConfig`` names the tool
# calls that wait for a human (``loop/approvals.py``).
class Limits(ConfigModel):
    """Budgets and guards of one run. **0 means off** for every number here."""

    max_rounds: int = Field(default=10, ge=0)
    """At most this many model calls per run."""
    max_tokens: int = Field(default=100_000, ge=0)
    """Total tokens (prompt + completion, summed over the run's model calls)."""
    max_tool_calls: int = Field(default=50, ge=0)
    timeout_seconds: float = Field(default=240, ge=0)
    """Wall-clock deadline of the whole run. The default stays below the 300 s read timeout
    many MCP clients use, so a caller gets the run's own ``timeout`` answer, not its client's."""
    tool_timeout_seconds: float = Field(default=60, ge=0)
    """Deadline of one tool call, unless its server sets ``callTimeoutSeconds``."""
    max_result_chars: int = Field(default=16_000, ge=0)
    """A tool result longer than this is paged: the model gets the first page of this many
    characters, a handle and ``read_result`` for the rest (``pageResults``); else it is cut, with a note."""
    page_results: bool = True
    """Page long results (``loop/pages.py``); false cuts them, with a note."""
    max_paged_bytes: int = Field(default=8_000_000, ge=0)
    """The most bytes the paged results of one run (or one session) hold; its least recently
    read results go first, and a bigger result is kept up to this size."""
    max_paged_bytes_total: int = Field(default=64_000_000, ge=0)
    """The most bytes paged results hold in all: those of runs without a session in the Agent's
    memory, those of sessions in the state store; least recently used go first. Read from the
    config when the Agent and the state start; a query's limits do not change it."""
    max_history_chars: int = Field(default=80_000, ge=0)
    """History is trimmed to this size before each model call."""
    max_parallel_tools: int = Field(default=4, ge=0)
    loop_threshold: int = Field(default=3, ge=0)
    """The N-th identical call (same tool, same arguments) in a run ends it as ``loop_detected``."""
    failure_hint_after: int = Field(default=2, ge=0)
    """After N consecutive failures of a tool its result tells the model not to retry."""
    disable_tool_after: int = Field(default=3, ge=0)
    """After N consecutive failures a tool is withdrawn for the rest of the run."""
    early_stop: bool = False
    """On a budget or loop stop, make one more model call without tools for a best-effort answer."""

    def tighten(self, other: Limits | Mapping[str, Any] | None) -> Limits:
        """These limits, made stricter by ``other`` (a client's request); never looser.

        For each number the smaller non-zero value wins (0 is "off", the loosest). ``early_stop``
        is taken from ``other`` when it sets it, since it changes no budget.
        """
        if other is None:
            return self
        if isinstance(other, Mapping):
            other = Limits.model_validate(other)
        given = other.model_fields_set
        values: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name not in given:
                continue
            mine, theirs = getattr(self, name), getattr(other, name)
            if name == "page_results":  # off (cutting) holds the least memory: either side may choose it
                values[name] = mine and theirs
            elif name == "early_stop" or (theirs and (not mine or theirs < mine)):
                values[name] = theirs
        return self.model_copy(update=values) if values else self


class ApprovalsConfig(ConfigModel):
    require: list[str] = Field(default_factory=list)
    """Globs on exposed tool names whose calls wait for a human's approval."""
    require_destructive: bool | None = None
    """Gate every tool whose MCP annotations say ``destructiveHint: true`` (and not
    ``readOnlyHint: true``). Not set (the default): the model's own calls (``query``,
    ``agent_query``) wait for approval, a client's direct call of an exposed tool
    (``gateway.exposeTools``) does not, since the client's host asks its own user; true: both
    wait; false: neither."""
    timeout_seconds: float = Field(default=60, ge=0)
    """An unanswered approval is denied after this long (0 = wait for the run's deadline)."""
    max_pending: int = Field(default=64, ge=0)
    """At most this many approvals wait at once (each caller its share); one more is denied at
    once (0 = no cap)."""
    self_approval: bool = False
    """Let a caller without the ``approve`` scope answer, by MCP elicitation, the approvals of its
    own runs. Off by default: many MCP clients answer elicitations automatically, which would
    remove the human check. Callers with ``approve`` (and a gateway without tokens) are asked
    either way."""

    def gates_destructive(self, *, direct: bool = False) -> bool:
        """Whether calls of destructive tools wait for approval: the model's calls, or with
        ``direct`` a client's call of an exposed tool (see ``require_destructive``)."""
        if self.require_destructive is None:
            return not direct
        return self.require_destructive


# The ``policy`` section of agent.json: what the loop does about calls made after untrusted text
# (``loop/provenance.py``), and what it does about tool definitions that change (``tools/pins.py``).
# Two blocks, validated each on its own: provenance (``mode``, ``sideEffects``, ``readOnly``) and
# tool pinning (``pinNewServers``).
Trust = Literal["trusted", "untrusted"]
"""What a tool's results are: text the user and operator vouch for, or text from outside."""


class PolicyConfig(ConfigModel):
    # --- provenance: calls with side effects after the run has read untrusted text ---
    mode: Literal["off", "warn", "enforce"] = "warn"
    """``off``: nothing is checked. ``warn`` (the default): such a call runs, and is logged,
    announced (``ToolCallStarted.flagged``) and kept in the run's record. ``enforce``: it waits
    for an approval that shows the untrusted result before it, or is refused with a reason the
    model reads."""
    side_effects: list[str] = Field(default_factory=list)
    """Globs on exposed tool names that have side effects whatever their annotations say."""
    read_only: list[str] = Field(default_factory=list)
    """Globs on exposed tool names that are free of side effects whatever their annotations say
    (wins over ``sideEffects``)."""

    # --- tool integrity: pinned tool definitions ---
    pin_new_servers: bool = False
    """Hold the tools of a server first seen after pins exist (and tools new to a pinned
    server) until ``mcp-agent tools --accept SERVER``, as a changed tool is held. Off: they are
    pinned on first sight."""


# The ``mcpServers`` section of agent.json: one model per tool-server transport, and their union.
#
# An entry with ``command`` is a ``StdioServerConfig`` (a subprocess speaking MCP over
# stdin/stdout), one with ``url`` a ``RemoteServerConfig`` (Streamable HTTP or SSE).
# ``ServerConfig`` is the tagged union that tells them apart, guessing from a misspelt key so
# that the error names it.
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
    protocol: Literal["auto", "legacy", "2026-07-28"] = "auto"
    """The protocol era spoken to the server: ``auto`` probes with ``server/discover`` and falls
    back to ``initialize``; ``legacy`` always sends ``initialize``; ``2026-07-28`` only
    ``server/discover`` (a server that does not answer it fails its start). See
    ``tools/server/era.py``."""
    discover_timeout_seconds: float = Field(default=2, gt=0)
    """How long the ``auto`` probe waits for ``server/discover`` before falling back to
    ``initialize`` (a server that ignores unknown requests costs this once; its era is then
    cached)."""
    trust: Trust | dict[str, Trust] | None = None
    """Whether this server's results are trusted text: one word for all its tools, or globs on
    its tools' MCP names mapped to a word (the first that matches wins). None, or a tool no
    glob matches: its ``openWorldHint`` decides (``loop/provenance.py``)."""


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


class OAuthConfig(ConfigModel):
    """How the gateway logs in to a remote server as an OAuth client (``mcpServers.NAME.oauth``).

    Everything is optional: ``{}`` discovers the authorization server from the server's 401 and
    registers itself (a Client ID Metadata Document when ``clientMetadataUrl`` is set and the
    server supports it, else dynamic registration). See ``auth/upstream.py``.
    """

    client_id: str | None = None
    """A client registered beforehand with the authorization server (no registration then)."""
    client_secret: str | None = None
    """The secret of ``clientId``, sent as the authorization server advertises
    (``client_secret_basic``, else ``client_secret_post``, else not at all for ``none``)."""
    scopes: list[str] | None = None
    """``authorization_code``: scopes asked for beside those the server names in its challenge or
    metadata. ``client_credentials``: the scopes asked for, instead of the server's (plus those a
    403 ``insufficient_scope`` names)."""
    client_metadata_url: str | None = None
    """An HTTPS URL (with a path) of this client's Client ID Metadata Document, used as its
    ``client_id`` where the authorization server supports it."""
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    """``authorization_code``: a person logs in once with ``mcp-agent login NAME``;
    ``client_credentials``: the gateway logs in by itself at start-up (needs ``clientId`` and
    ``clientSecret`` or ``privateKeyFile``)."""
    private_key_file: str | None = None
    """For ``client_credentials``: a PEM private key; the gateway signs a ``private_key_jwt``
    assertion with it instead of sending ``clientSecret``."""
    private_key_algorithm: str = "RS256"
    """The JWS algorithm of the ``private_key_jwt`` assertion (``RS256``, ``ES256``...)."""
    issuer: str | None = None
    """For ``client_credentials``: the issuer of the authorization server the client belongs
    to; its credentials are then sent to no other."""

    @field_validator("client_metadata_url")
    @classmethod
    def _cimd_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not re.match(r"^https://[^/]+/.+", value):
            raise ValueError("must be an https:// URL with a path (the Client ID Metadata Document)")
        return value

    @field_validator("issuer")
    @classmethod
    def _issuer_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://", value):
            raise ValueError("must be the authorization server's http(s):// issuer URL")
        return value

    @model_validator(mode="after")
    def _grant_needs(self) -> OAuthConfig:
        if self.grant == "client_credentials":
            if not self.client_id:
                raise ValueError("grant client_credentials needs clientId")
            if not self.client_secret and not self.private_key_file:
                raise ValueError("grant client_credentials needs clientSecret or privateKeyFile")
        elif self.private_key_file:
            raise ValueError("privateKeyFile is only for grant client_credentials")
        if self.client_secret and not self.client_id:
            raise ValueError("clientSecret needs clientId")
        return self


class RemoteServerConfig(_ServerBase):
    """A server reached over HTTP: Streamable HTTP (``http``) or the older SSE transport."""

    url: str
    transport: Literal["http", "sse"] = "http"
    type: Literal["http", "sse", "streamable-http", "streamableHttp", "streamable_http"] | None = None
    """Accepted for Cursor/VS Code files; ``sse`` selects SSE, the rest Streamable HTTP."""
    headers: dict[str, str] = Field(default_factory=dict)
    oauth: OAuthConfig | None = None
    """Log in to the server as an OAuth client (``mcp-agent login NAME``). Without it, a server
    that answers 401 with an OAuth challenge is treated as ``"oauth": {}``."""

    @model_validator(mode="after")
    def _type_sets_transport(self) -> RemoteServerConfig:
        if self.type is not None and "transport" not in self.model_fields_set:
            object.__setattr__(self, "transport", "sse" if self.type == "sse" else "http")
        if self.oauth is not None and any(name.lower() == "authorization" for name in self.headers):
            raise ValueError("set either oauth or an Authorization header, not both")
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


# The ``gateway`` section of agent.json: where it listens, who may call it, and its capacities.
#
# ``GatewayConfig`` holds the bind address (checked by ``check_host``, which ``serve --host``
# shares), the tokens (``authToken`` or named ``callers``, each a ``CallerConfig`` with scopes),
# browser origins and hosts, and the caps on queries, queues, sessions and requests.
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
        raise ValueError(
            f"{value!r} has a port in it; give the host alone and the port as gateway.port (--port)"
        )
    name = text.removesuffix(".")
    labels = name.split(".")
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{value!r} is not a host name or an IP address (like 127.0.0.1, ::1 or localhost)")
    if labels[-1].isdigit():
        raise ValueError(f"{value!r} is not a valid IPv4 address")
    return text


BindHost = Annotated[str, AfterValidator(check_host)]


class CallerToolsConfig(ConfigModel):
    """``gateway.callers.NAME.tools``: the tools a caller may use, as fnmatch globs over exposed
    names (``time__*``, ``*__write_*``). ``deny`` wins over ``allow``; no ``allow`` = every tool."""

    allow: list[Annotated[str, Field(min_length=1)]] | None = None
    deny: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(
                'expected an object such as {"allow": ["time__*"], "deny": ["*__write_*"]} '
                f"(globs over exposed names), got {type(value).__name__} {value!r}"
            )
        return value


class CallerConfig(ConfigModel):
    """One named caller of the gateway: its bearer token and what it may do."""

    token: str = Field(min_length=1)
    scopes: list[Scope] = Field(default_factory=lambda: list[Scope](["query"]), min_length=1)
    """``query``: ask and see its own conversations; ``approve``: resolve any approval;
    ``admin``: see and delete everything."""
    tools: CallerToolsConfig | None = None
    """The tools this caller may use (its ``agent_query``, ``exposeTools`` and REST); None: all."""


class OAuthToolRule(ConfigModel):
    """One rule of ``gateway.oauth.tools``: the tools an OAuth caller gets when its token matches.

    A rule matches a token that has the token scope ``scope``, or whose claim ``claim`` is
    ``value`` (or, a list, holds it), or every token (neither ``scope`` nor ``claim``). The
    caller gets the union of what its matching rules allow; the ``deny`` of any of them wins.
    """

    scope: str | None = Field(default=None, min_length=1)
    """A token scope (as the token says it, prefix and all) that makes the rule match."""
    claim: str | None = Field(default=None, min_length=1)
    """A claim of the token (top level) that makes the rule match when it is ``value``."""
    value: str | None = None
    """The value ``claim`` must have (a string claim) or hold (a list claim)."""
    tools: CallerToolsConfig
    """The tools the rule gives: ``{"allow": [...], "deny": [...]}`` globs over exposed names."""

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(
                'expected an object such as {"scope": "agent:web", "tools": {"allow": ["web__*"]}} '
                f"got {type(value).__name__} {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _one_condition(self) -> OAuthToolRule:
        if self.scope is not None and self.claim is not None:
            raise ValueError(
                "give either scope or claim (with value), not both; "
                "two rules with the same tools say 'either'"
            )
        if (self.claim is None) != (self.value is None):
            raise ValueError('claim and value go together, as in {"claim": "groups", "value": "ops"}')
        return self


ASYMMETRIC_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
"""The JWT algorithms ``gateway.oauth.algorithms`` may name: signatures with a public key only."""


def check_http_url(value: str) -> str:
    """An absolute http(s) URL without a fragment; plain http only for a loopback host."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL (like https://id.example.com)")
    if parts.fragment:
        raise ValueError(f"{value!r} has a fragment ('#...'); leave it out")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ValueError(f"{value!r} uses plain http on a host other than this machine; use https")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OAuthResourceConfig(ConfigModel):
    """``gateway.oauth``: the gateway as an OAuth protected resource (``mcp_agent/auth/resource.py``).

    Callers present JWT access tokens from ``issuer``; each token names its caller (``callerClaim``)
    and carries scopes (``scopesClaim``) that map to the caller scopes. Static tokens keep working.
    """

    issuer: str
    """The authorization server whose tokens are accepted (its ``iss``)."""
    resource: str | None = None
    """The gateway's public URL of ``/mcp`` (RFC 9728's resource); default
    ``http://<gateway.host>:<gateway.port>/mcp``, which needs a specific host."""
    audience: str | None = None
    """The ``aud`` a token must carry; default ``resource``."""
    jwks_url: str | None = None
    """Where the issuer's keys are; default the ``jwks_uri`` of its metadata (RFC 8414, OIDC)."""
    required_scopes: list[str] = Field(default_factory=list)
    """Token scopes every token must have (else 403 ``insufficient_scope``)."""
    caller_claim: str = Field(default="sub", min_length=1)
    """The claim that names the caller (the caller is ``oauth:<value>``)."""
    scopes_claim: str = Field(default="scope", min_length=1)
    """The claim with the token's scopes: a space-separated string or a list."""
    scope_prefix: str = ""
    """Token scope ``<prefix>query`` is caller scope ``query`` (same for approve, admin)."""
    scope_map: dict[str, list[Scope]] | None = None
    """Instead of same-named scopes: token scope -> the caller scopes it gives."""
    algorithms: list[str] = Field(default_factory=lambda: list(ASYMMETRIC_ALGORITHMS), min_length=1)
    """JWT algorithms accepted (signatures with a public key only; never ``none`` or ``HS*``)."""
    clock_skew_seconds: float = Field(default=60, ge=0, le=300)
    """Leeway for ``exp`` and ``nbf``."""
    jwks_cache_seconds: float = Field(default=3600, gt=0)
    """How long the issuer's keys are kept before they are fetched again."""
    jwks_refetch_seconds: float = Field(default=30, ge=0)
    """The least time between two fetches of the keys caused by unknown key ids."""
    tools: list[OAuthToolRule] | None = Field(default=None, min_length=1)
    """The tools of OAuth callers, by their token's scopes or a claim (``OAuthToolRule``); a
    token that matches no rule gets no tool. None: every OAuth caller has every tool."""

    @field_validator("issuer")
    @classmethod
    def _issuer_is_url(cls, value: str) -> str:
        check_http_url(value)
        if "?" in value:
            raise ValueError(f"{value!r} has a query; an issuer has none")
        return value

    @field_validator("resource", "audience", "jwks_url")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        wrong = [name for name in value if name not in ASYMMETRIC_ALGORITHMS]
        if wrong:
            raise ValueError(
                f"{', '.join(map(repr, wrong))} not allowed; "
                f"use public-key algorithms only: {', '.join(ASYMMETRIC_ALGORITHMS)}"
            )
        return value


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
    fast_calls: bool = True
    """Answer a 2026-07-28 client's ``tools/call`` of ``agent_query`` (or, with ``exposeTools``, of
    an inner tool) on a lean path past the SDK's HTTP machinery (``gateway/mcp/fast_call.py``;
    the same handler, the same answer). ``false``: every request takes the SDK's path."""
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
    input_timeout_seconds: float = Field(default=300, ge=0)
    """How long an exposed call waits for a 2025-era client to answer, over its back channel,
    the questions of an upstream's ``input_required`` round (an elicitation a person fills in);
    that time does not count against ``toolTimeoutSeconds`` (0 = as long as the client stays).
    300 s is the read timeout many MCP clients give the call itself."""
    query_only_schema: bool = False
    """Publish ``agent_query`` with ``query`` as its only input (for clients that cannot send or
    omit optional members); conversations then cannot be continued over MCP."""
    stateless: bool = False
    max_request_bytes: int = Field(default=1_000_000, ge=0)
    max_query_chars: int = Field(default=20_000, ge=0)
    oauth: OAuthResourceConfig | None = None
    """Accept OAuth access tokens (JWTs of ``oauth.issuer``) beside the static tokens."""
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
        unreachable = self.host in ("", "0.0.0.0", "::") or self.port == 0
        if self.oauth is not None and self.oauth.resource is None and unreachable:
            raise ValueError(
                "gateway.oauth.resource: set it to the gateway's public URL of /mcp "
                f"(gateway.host {self.host!r}, port {self.port} say nothing a client can reach)"
            )
        return self

    @property
    def oauth_resource(self) -> str | None:
        """The gateway's resource URL for OAuth (``oauth.resource``, else from host and port)."""
        if self.oauth is None:
            return None
        if self.oauth.resource:
            return self.oauth.resource
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"

    @property
    def has_tokens(self) -> bool:
        """Whether any caller must present a token (``authToken``, ``callers`` or ``oauth``)."""
        return bool(self.auth_token or self.callers or self.oauth)


# The ``sessions`` and ``state`` sections of agent.json: what is kept, where, and for how long.
#
# ``SessionsConfig`` bounds conversations (idle time, count); ``StateConfig`` says where
# conversations, approvals and run records are stored (``mcp_agent.state``) and how long run
# records are kept (``RunRetentionConfig``).
class SessionsConfig(ConfigModel):
    ttl_seconds: float = Field(default=1800, ge=0)
    """A conversation idle this long is forgotten (0 = never)."""
    max_sessions: int = Field(default=1000, ge=0)
    """Beyond this count the oldest idle conversations are dropped, first those of the caller
    holding the most, and no caller holds more than its share (0 = no cap)."""


class RunRetentionConfig(ConfigModel):
    max_count: int = Field(default=10_000, ge=0)
    """Run records kept; the oldest finished ones go first (0 = no cap)."""
    max_age_days: float = Field(default=30, ge=0)
    """Finished run records (and decided approvals) older than this go (0 = kept forever)."""


class StateConfig(ConfigModel):
    """Where conversations, approvals and run records are kept (``mcp_agent.state``)."""

    url: str | None = None
    """``sqlite:///PATH`` (``~`` expanded; a relative path is relative to this file's folder),
    ``redis://HOST:PORT/DB`` or ``memory://``. Unset: ``serve`` and ``query --session`` use
    ``sqlite:///$MCP_AGENT_STATE_DIR/state.db``; an ``Agent`` built in code keeps it in memory."""
    max_session_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    """A conversation whose stored transcript (JSON) is bigger is not saved; the run still
    answers, and says so (0 = no cap)."""
    lease_seconds: float = Field(default=30, ge=1)
    """A session lock or a gateway's liveness lease lapses this long after its holder stopped
    renewing it (a holder that died, on another host; on this host a dead process is seen at once)."""
    max_outage_seconds: float = Field(default=300, ge=0)
    """A store that keeps failing (every heartbeat, a third of ``lease_seconds`` apart) for this
    long makes ``serve`` stop and exit 1, so that its supervisor restarts it: a restart reconnects
    (a Redis that failed over to another address), or fails at start with an error saying what is
    wrong with the store, where a process left running would only answer errors. Shorter
    outages (a Redis restart, a disk full until logs rotate) are ridden out: running queries go
    on, and the store is used again once it works. 0 = never exit for this."""
    runs: RunRetentionConfig = Field(default_factory=RunRetentionConfig)

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is not None and value.split("://", 1)[0].lower() not in (
            "memory",
            "sqlite",
            "redis",
            "rediss",
        ):
            raise ValueError(f"{value!r}: use sqlite:///PATH, redis://HOST:PORT/DB or memory://")
        return value


# The ``telemetry`` section of agent.json: OpenTelemetry traces (``mcp_agent.telemetry.base``).
class TelemetryConfig(ConfigModel):
    """OpenTelemetry traces (README "Traces"); the standard ``OTEL_*`` variables do the rest."""

    enabled: bool = True
    """Record spans of each run (to the application's TracerProvider, or to the one set up from the
    ``OTEL_*`` variables). False: no spans, and no provider is set up."""
    capture_content: bool = False
    """Put prompts, answers, tool arguments and tool results on the spans (secrets redacted)."""
    service_name: str | None = None
    """``service.name`` of a TracerProvider set up from the environment (``OTEL_SERVICE_NAME`` wins;
    default ``mcp-agent``)."""


# The whole of agent.json as one model, ``AgentConfig``, and the built-in system prompt.
#
# ``AgentConfig`` gathers the sections (the classes above), checks what
# spans them, and answers the questions that need the config file's folder: the system prompt
# (inline, from ``systemPromptFile``, or ``DEFAULT_SYSTEM_PROMPT``), the state URL, and every
# tool server (``mcpServers`` plus the scripts in ``serversDir``). Reading the file is
# ``config/load.py``'s business.
logger = logging.getLogger("mcp_agent.config")

DEFAULT_SYSTEM_PROMPT = """\
You are a careful assistant with tools. Use a tool when the question needs facts you cannot know \
(this machine's state, files, the web, the current time); answer directly when you can.
Call tools with exactly the arguments their schemas ask for. When a tool reports an error, read it: \
fix the arguments once if the error says how, otherwise answer with what you know and say what failed.
Never call the same tool with the same arguments twice. When you have enough to answer, answer \
plainly and briefly, and stop calling tools."""


class AgentConfig(ConfigModel):
    """The whole of agent.json."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    limits: Limits = Field(default_factory=Limits)
    mcp_servers: dict[str, ServerConfig] = Field(default_factory=dict)
    servers_dir: str | None = None
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)

    base_dir: Path = Field(default=Path("."), exclude=True)
    """The folder relative paths are resolved against (the config file's folder)."""
    warnings: tuple[str, ...] = Field(default=(), exclude=True)
    """What the loader let pass with a warning (unknown top-level keys)."""

    @model_validator(mode="after")
    def _one_prompt(self) -> AgentConfig:
        if self.system_prompt is not None and self.system_prompt_file is not None:
            raise ValueError("set systemPrompt or systemPromptFile, not both")
        return self

    def prompt(self) -> str:
        """The system prompt: inline, from ``systemPromptFile``, or the built-in default."""
        if self.system_prompt is not None:
            return self.system_prompt
        if self.system_prompt_file is not None:
            path = self.base_dir / self.system_prompt_file
            try:
                return path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"systemPromptFile: cannot read {path}: {exc}", "systemPromptFile") from exc
        return DEFAULT_SYSTEM_PROMPT

    def state_url(self, default: str | os.PathLike[str] | None = None) -> str:
        """``state.url``, a relative SQLite path made relative to this file's folder; when unset,
        ``sqlite:///`` on ``default`` (a database file), or ``memory://`` without one."""
        url = self.state.url
        if url is None:
            return f"sqlite:///{os.fspath(default)}" if default is not None else "memory://"
        scheme, _, rest = url.partition("://")
        if scheme.lower() == "sqlite" and rest.startswith("/"):
            path = rest[1:]
            if path and not path.startswith("~") and not os.path.isabs(path):
                return f"sqlite:///{self.base_dir / path}"
        return url

    def servers(self) -> dict[str, StdioServerConfig | RemoteServerConfig]:
        """Every tool server: ``mcpServers`` plus the scripts found in ``serversDir``.

        A script is named by its file stem and run with this interpreter; an ``mcpServers``
        entry of the same name wins. Files starting with ``_`` are skipped.
        """
        servers: dict[str, StdioServerConfig | RemoteServerConfig] = {}
        if self.servers_dir:
            folder = self.base_dir / self.servers_dir
            if folder.is_dir():
                for script in sorted(folder.glob("*.py")):
                    if script.name.startswith("_"):
                        continue
                    servers[script.stem] = StdioServerConfig(
                        command=sys.executable, args=[str(script.resolve())]
                    )
            else:
                logger.warning("serversDir %s is not a folder; no servers discovered there", folder)
        servers.update(self.mcp_servers)
        return servers
