"""``mcp-agent doctor``: check the config, the model server and every tool server, and say why.

Each check prints one line with a mark (``ok``, ``warn``, ``FAIL``) and, on failure, what to do.
The run fails (exit 1) when the model server is unreachable, the model is missing, a tool
server does not start, a glob in ``approvals.require``, ``allowTools``, ``denyTools`` or a
caller's ``tools`` (``gateway.callers``, ``gateway.oauth.tools``) matches no tool, or the keys
of ``gateway.oauth``'s issuer cannot be fetched; schema changes and config warnings are only reported.

The model server is identified afresh (``servers/identify.py``; the result refreshes the cache that
``query`` and ``serve`` read): its kind, version, context window and where each was read. A
local OpenAI-compatible server is then asked two tiny questions with and without a tool, and
one streamed (``providers/openai/checks.py``): a server that drops the tools it is offered, or cannot
stream tool calls, is warned about, with the hint of its own kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from .._plural import counted
from ..config import AgentConfig, RemoteServerConfig
from ..exceptions import ConfigError, MCPAgentError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import httpx

    from ..messages import ToolSpec
    from ..providers.servers.info import ServerInfo


class _Report:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.failed = False
        self.degraded: list[str] = []
        """Why the gateway's health would say ``degraded`` (the reasons health gives)."""

    def line(self, mark: str, text: str) -> None:
        if mark == "FAIL":
            self.failed = True
        print(f"[{mark:>4}] {text}", file=self.out, flush=True)

    def detail(self, text: str) -> None:
        print(f"       {text}", file=self.out, flush=True)


async def run_doctor(config: AgentConfig, out: TextIO, *, model_timeout: float = 15.0) -> bool:
    """Run every check, printing to ``out``. Returns True when nothing essential failed."""
    report = _Report(out)
    _check_config(config, report)
    await _check_model(config, report, model_timeout)
    await _check_oauth(config, report)
    await _check_servers(config, report)
    if report.degraded:
        report.line("FAIL", f"serve would report health degraded: {'; '.join(report.degraded)}")
    report.line(
        "FAIL" if report.failed else "ok", "some checks failed" if report.failed else "all checks passed"
    )
    return not report.failed


def _check_config(config: AgentConfig, report: _Report) -> None:
    servers = config.servers()
    report.line("ok", f"config valid: {counted(len(servers), 'tool server')}, model {config.llm.model!r}")
    for warning in config.warnings:
        report.line("warn", f"config: {warning}")
    try:
        config.prompt()
    except ConfigError as exc:
        report.line("FAIL", str(exc))
    gateway = config.gateway
    from ..gateway.security import check_bind

    try:
        check_bind(gateway.host, gateway.has_tokens, gateway.allowed_hosts)
    except ConfigError as exc:
        report.line("FAIL", f"serve would refuse to start: {exc}")


async def _check_oauth(config: AgentConfig, report: _Report) -> None:
    """With ``gateway.oauth``: the issuer's keys can be fetched (through its metadata unless
    ``jwksUrl`` is set), else no OAuth caller could be let in."""
    oauth = config.gateway.oauth
    if oauth is None:
        return
    from ..auth.jwks import IssuerKeys, KeysUnavailable

    keys = IssuerKeys(oauth.issuer, oauth.jwks_url)
    found = await keys.fetch_now()
    if isinstance(found, KeysUnavailable):
        report.line("FAIL", f"gateway.oauth: {found.reason}")
        report.detail("OAuth callers would be answered 503 until the issuer's keys can be fetched")
        return
    where = keys.jwks_url if oauth.jwks_url else f"{keys.jwks_url}, named by the issuer's metadata"
    report.line("ok", f"gateway.oauth: {len(found)} signing keys of {oauth.issuer} ({where})")


async def _check_model(config: AgentConfig, report: _Report, timeout: float) -> None:
    from ..providers.factory import build_client
    from ..providers.servers.endpoints import resolve_endpoint
    from ..providers.servers.identify import list_models, model_present

    endpoint = resolve_endpoint(config.llm)
    where = f"{endpoint.provider} API at {endpoint.base_url}"
    try:
        async with build_client(config.llm) as client:
            with anyio.fail_after(timeout):
                models = await list_models(config.llm, client)
    except TimeoutError:
        report.line("FAIL", f"model server did not answer in {timeout:g} s ({where})")
        report.degraded.append("model server unreachable")
        return
    except MCPAgentError as exc:
        report.line("FAIL", f"model server: {exc}")
        report.degraded.append("model server unreachable")
        return
    report.line("ok", f"model server reachable ({where}), {counted(len(models), 'model')}")
    present = model_present(config.llm.model, models)
    if present:
        report.line("ok", f"model {config.llm.model!r} is available")
    elif not models:
        report.line("warn", f"the server listed no models; cannot confirm {config.llm.model!r}")
    else:
        shown = ", ".join(models[:10]) + (" ..." if len(models) > 10 else "")
        report.line("FAIL", f"model {config.llm.model!r} is not offered by the server (it has: {shown})")
        report.degraded.append(f"model {config.llm.model!r} is not on the model server")
        if endpoint.kind == "ollama":
            report.detail(f"pull it with `ollama pull {config.llm.model}`")
    if endpoint.provider == "openai":
        async with build_client(config.llm) as client:
            await _check_server(config, client, report, check_tools=present or not models)


async def _check_server(
    config: AgentConfig, client: httpx.AsyncClient, report: _Report, *, check_tools: bool
) -> None:
    """What the server is, and (for a local one, when the model is there) what it does with tools."""
    from ..providers.factory import apply_server_info, create_provider
    from ..providers.openai import OpenAICompatProvider
    from ..providers.openai.checks import check_stream_tools, check_tools_kept, tools_hint
    from ..providers.servers.endpoints import SERVER_NAMES
    from ..providers.servers.identify import CACHE_FILE, known_server, remember
    from ..providers.servers.info import sized_for_server
    from ..state.folder import private_state_dir

    cache = private_state_dir() / CACHE_FILE
    info = await known_server(config.llm, client, state_dir=cache.parent, refresh=True)
    name = SERVER_NAMES.get(info.kind, info.kind)
    version = f" {info.version}" if info.version else ""
    if info.source == "probe":
        report.line("ok", f"server identified: {name}{version} ({info.evidence})")
    else:
        report.line("warn", f"server not identified ({info.evidence}); taken for {name} from its address")
    if info.context_window:
        sized = sized_for_server(config, info).limits.max_history_chars
        window = f"{info.context_window} tokens ({info.context_source})"
        report.line("ok", f"context window: {window}; history kept to {sized} characters")
        _check_window(config, info, report)
    elif info.source == "probe":
        report.line("warn", f"context window: {name} does not say; set limits.maxHistoryChars to fit it")
        report.detail("about 3.5 characters a token, less the answer's room: 10000 for a 4096-token window")
    provider = create_provider(config.llm, client)
    if not (check_tools and isinstance(provider, OpenAICompatProvider)) or info.source == "host":
        return
    apply_server_info(provider, info)
    kept = await check_tools_kept(provider)
    counts = f"prompt_tokens {kept.without} without a tool, {kept.with_tool} with one"
    if kept.dropped:
        report.line("warn", f"the server drops the tools it is offered ({counts}): the model never sees them")
        report.detail(tools_hint(info.kind))
        remember(cache, config.llm, tools_dropped=True)
    elif kept.dropped is False:
        report.line("ok", f"tools reach the model ({counts})")
        remember(cache, config.llm, tools_dropped=False)
    else:
        report.line("warn", f"could not check that tools reach the model: {kept.error}")
    if not provider.endpoint.capabilities.stream_tools:
        report.line("ok", f"{name} cannot stream tool calls: asked without streaming when tools are offered")
    elif (problem := await check_stream_tools(provider)) is not None:
        report.line("warn", f"the server cannot stream tool calls ({problem})")
        report.detail(
            "remembered: requests with tools go unstreamed (llm.capabilities.streamTools overrides)"
        )
        remember(cache, config.llm, stream_tools=False)


def destructive_gating(
    config: AgentConfig, tools: Sequence[tuple[str, Mapping[str, Any]]]
) -> tuple[str, str]:
    """The mark and line that say which tools wait for approval because their annotations say
    ``destructiveHint``, and why (``approvals.requireDestructive``, on unless set false)."""
    from ..loop.approvals import is_destructive

    names = [name for name, annotations in tools if is_destructive(annotations)]
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    setting = config.approvals.require_destructive
    if not names:
        return "ok", "no tool declares destructiveHint: none waits for approval on that account"
    if setting is False:
        return "warn", f"destructive tools run without approval (approvals.requireDestructive false): {shown}"
    why = "true" if setting else "not set, so on by default"
    return (
        "ok",
        f"the model's calls of destructive tools wait for approval: {shown} "
        f"(their annotations say destructiveHint; approvals.requireDestructive {why})",
    )


def _check_window(config: AgentConfig, info: ServerInfo, report: _Report) -> None:
    """A warning for each explicit limit the server's context window cannot hold."""
    from ..providers.servers.info import window_overruns

    for problem in window_overruns(config, info):
        report.line("warn", f"context window: {problem}")


async def _check_servers(config: AgentConfig, report: _Report) -> None:
    from ..gateway.callers import gateway_tool_glob_warnings
    from ..loop.approvals import require_warnings
    from ..providers.servers.endpoints import resolve_endpoint
    from ..state.folder import private_state_dir
    from ..tools.hub import open_tool_hub

    servers = config.servers()
    if not servers:
        report.line("warn", "no tool servers configured (mcpServers or serversDir)")
        return
    timeout = config.limits.tool_timeout_seconds
    # every server is really started (a cached list does not count as up), and each says how
    # its cached list compared
    async with open_tool_hub(
        servers, default_timeout=timeout, state_dir=private_state_dir(), start="wait"
    ) as hub:
        tools = hub.list_tools()
        for status in hub.status():
            server = servers.get(status.name)
            kind = "remote" if isinstance(server, RemoteServerConfig) else "stdio"
            if status.status == "up":
                took = f" in {status.startup_ms:.0f} ms" if status.startup_ms is not None else ""
                junk = f", {counted(status.junk_lines, 'junk line')} on stdout" if status.junk_lines else ""
                cache = f" ({status.cache_note})" if status.cache_note else ""
                era = f", protocol {status.protocol_version}" if status.protocol_version else ""
                report.line(
                    "ok",
                    f"server {status.name} ({kind}): up{took}, {counted(status.tool_count, 'tool')}{era}{junk}{cache}",
                )
            elif status.status == "disabled":
                report.line("ok", f"server {status.name}: disabled in config")
            else:
                report.line("FAIL", f"server {status.name} ({kind}): {status.status}: {status.error}")
            for warning in status.glob_warnings:
                report.line("FAIL", warning)
        down = [status.name for status in hub.status() if status.status not in ("up", "disabled")]
        if down:
            report.degraded.append(
                f"tool server{'s' if len(down) > 1 else ''} down: {', '.join(sorted(down))}"
            )
        for warning in require_warnings(config.approvals.require, hub, down=down):
            report.line("FAIL", warning)
        report.line(*destructive_gating(config, [(spec.name, spec.annotations) for spec in tools]))
        for warning in gateway_tool_glob_warnings(config.gateway, [spec.name for spec in tools]):
            report.line("FAIL", warning)
        dialect = resolve_endpoint(config.llm).provider
        changed = [spec for spec in tools if spec.changes_for(dialect)]
        report.line(
            "ok",
            f"{counted(len(tools), 'tool')} offered; for the {dialect} API the schema compiler changed {len(changed)}",
        )
        for spec in changed:
            for change in spec.changes_for(dialect):
                report.detail(f"{spec.name}: {change}")
        _check_hidden(tools, report)


def _check_hidden(tools: Sequence[ToolSpec], report: _Report) -> None:
    """Warn about each tool whose definition holds signs of hidden instructions (``tools/hidden.py``)."""
    from ..tools.hidden import findings

    flagged = 0
    for spec in tools:
        found = findings(
            {
                "description": spec.description,
                "title": spec.title,
                "inputSchema": spec.input_schema,
                "outputSchema": spec.output_schema,
            }
        )
        if found:
            flagged += 1
            report.line(
                "warn", f"tool {spec.name}: signs of hidden instructions (read its definition before use)"
            )
            for finding in found:
                report.detail(str(finding))
    if not flagged:
        report.line("ok", "no tool description holds signs of hidden instructions")
