"""The command line: ``mcp-agent serve | query | tools | doctor | login | logout | replay | init``.

Thin on purpose: parse the arguments, load the config, call into the library, print. Logs and
progress go to stderr; stdout carries only the command's output (and, for ``serve --stdio``,
only the MCP protocol).

Exit codes: 0 success; 1 the run (or a check) ended without success, a replay diverged, or
``serve`` stopped because the gateway could not serve any more (``GatewayFailed``: restart it);
2 bad usage or config, or a recording that cannot be read.

The config file is ``--config F`` when given, else the file named by ``$MCP_AGENT_CONFIG``
(for launchers that own the arguments, such as the MCP Inspector), else ``agent.json`` in the
current folder.

Start-up is cheap on purpose: this module imports only the standard library at the top, so
``--help`` and ``--version`` answer before pydantic, httpx or the MCP SDK are loaded; the
arguments are parsed first and each command imports what it uses (``tools`` needs the tool hub
and the config, never the gateway; ``serve`` alone loads uvicorn and Starlette).

Logs go to stderr as text, or as one JSON object per line with ``--log-format json`` (or
``$MCP_AGENT_LOG_FORMAT``); the secrets the config holds are masked in every log line and in
everything the CLI prints (``telemetry/logs.py``, ``_redact.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys

from .._plural import counted
from .._version import __version__
from ..telemetry.logs import LOG_FORMATS

TYPE_CHECKING = False  # not typing's: --help must not pay for importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, TextIO

    from ..config import AgentConfig
    from ..state.base import State

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
CONFIG_VARIABLE = "MCP_AGENT_CONFIG"
DEFAULT_CONFIG = "agent.json"

logger = logging.getLogger("mcp_agent")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-agent", description="An MCP gateway agent.")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: debug)"
    )
    parser.add_argument("--version", action="version", version=f"mcp-agent {__version__}")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="logs on stderr as human text or one JSON object per line "
        "(default: $MCP_AGENT_LOG_FORMAT when set, else text)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.add_argument(
            "--config",
            help=f"the config file (default: ${CONFIG_VARIABLE} when set, else {DEFAULT_CONFIG})",
        )
        return sub

    serve = add("serve", "serve agent_query over SSE and Streamable HTTP (or stdio)")
    serve.add_argument("--host", help="bind address (default: gateway.host, 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, help="port, 0..65535 (default: gateway.port, 8765; 0: any free port)"
    )
    serve.add_argument("--stdio", action="store_true", help="serve MCP over stdin/stdout instead of HTTP")
    serve.add_argument("--stateless", action="store_true", help="stateless Streamable HTTP (for replicas)")

    query = add("query", "run one query and print the answer")
    query.add_argument("question", help="the question")
    query.add_argument("--json", action="store_true", help="print the structured result as JSON")
    query.add_argument("--session", metavar="ID", help="continue (or start) the conversation ID")
    query.add_argument("--quiet", action="store_true", help="no live progress on stderr")
    query.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="GLOB",
        help="approve calls of tools whose exposed name matches GLOB without asking (repeatable); "
        "other calls that need approval are asked on the terminal, or denied without one",
    )

    query.add_argument(
        "--record",
        metavar="FILE",
        help="record the run (model requests and turns, tool calls and results) to FILE as JSON lines, "
        "for mcp-agent replay",
    )

    tools = add("tools", "list every tool and every server's state")
    tools.add_argument("--json", action="store_true", help="print JSON")
    tools.add_argument(
        "--fresh", action="store_true", help="start every server, also those whose tool list is cached"
    )
    pinned = tools.add_mutually_exclusive_group()
    pinned.add_argument(
        "--diff",
        action="store_true",
        help="show, per server, how the tool definitions last seen differ from the pinned ones "
        "(and hidden-instruction findings); reads the state store, starts no server",
    )
    pinned.add_argument(
        "--accept",
        metavar="SERVER",
        help="pin SERVER's tool definitions as last seen; a running gateway sharing the state "
        "store offers them again within seconds",
    )

    add("doctor", "check the config, the model server and every tool server")

    login = add("login", "log in to a remote tool server that needs an OAuth login (opens a browser)")
    login.add_argument("server", help="the server's name in mcpServers")
    login.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for the login in the browser (default: 300)",
    )
    logout = add("logout", "forget the tokens (and the client registration) of a remote tool server")
    logout.add_argument("server", help="the server's name in mcpServers")

    replay_help = "re-run a recorded run with no servers and report the first divergence"
    replay = commands.add_parser("replay", help=replay_help, description=replay_help)
    replay.add_argument("file", help="the recording (mcp-agent query --record, gateway.recordDir)")
    replay.add_argument(
        "--config",
        help="replay with this config's prompt, limits, llm options, approvals and tool filters "
        "(default: the recording's own settings)",
    )
    replay.add_argument("--json", action="store_true", help="print the report as JSON")

    init_help = "write a starter agent.json: a local model server that takes tools, your client's servers"
    init = commands.add_parser("init", help=init_help, description=init_help)
    init.add_argument(
        "--from",
        dest="source",
        metavar="claude|cursor|vscode|PATH",
        help="import the MCP servers of Claude Desktop, Cursor or VS Code (their config on this machine), "
        "or of a file with mcpServers or servers",
    )
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument("--config", help=f"the file to write (default: {DEFAULT_CONFIG} in this folder)")
    return parser


def config_path(given: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The config file to read and where its name came from: ``--config``, else
    ``$MCP_AGENT_CONFIG`` (when set and not empty), else ``agent.json``."""
    if given:
        return given, "--config"
    if environ.get(CONFIG_VARIABLE, "").strip():
        return environ[CONFIG_VARIABLE], CONFIG_VARIABLE
    return DEFAULT_CONFIG, "default"


def with_bind_overrides(config: AgentConfig, host: str | None, port: int | None) -> AgentConfig:
    """``config`` with ``serve --host/--port``, checked by the rules of ``gateway.host/port``.

    Raises:
        ConfigError: the host is not a host name or address, or the port is not 0..65535.
    """
    from pydantic import ValidationError

    from ..config import GatewayConfig
    from ..exceptions import ConfigError

    overrides = {key: value for key, value in (("host", host), ("port", port)) if value is not None}
    if not overrides:
        return config
    try:
        gateway = GatewayConfig.model_validate({**config.gateway.model_dump(), **overrides})
    except ValidationError as exc:
        error = exc.errors()[0]
        if error["loc"] and error["loc"][0] == "port":
            raise ConfigError(f"--port {port}: give a port from 0 to 65535 (0: any free port)") from None
        raise ConfigError(f"--host: {str(error['msg']).removeprefix('Value error, ')}") from None
    return config.model_copy(update={"gateway": gateway})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    from ..telemetry.logs import log_format, log_uncaught, setup_logging, unwrap_streams, wrap_streams

    args = _parser().parse_args(argv)  # --help and --version end here, having loaded nothing heavy
    try:
        args.log_format = log_format(args.log_format, os.environ)
    except ValueError as exc:
        print(f"mcp-agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    handler = setup_logging(args.verbose, args.log_format)
    if args.log_format == "json":
        sys.excepthook = log_uncaught
    # under serve --stdio, stdout is the protocol's alone (the SDK takes it over)
    wrap_streams(stdout=not (args.command == "serve" and args.stdio), json_stderr=args.log_format == "json")
    try:
        return _command(args, handler)
    except BrokenPipeError:  # stdout's reader went away (``mcp-agent tools | head``): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # so that Python's own flush at exit fails quietly
        return EXIT_OK
    finally:
        unwrap_streams()


def _command(args: argparse.Namespace, handler: logging.Handler) -> int:
    from ..telemetry.logs import say

    def fail(message: str, code: int = EXIT_USAGE) -> int:
        if args.log_format == "json":
            say(handler, message, level=logging.ERROR)
        else:
            print(f"mcp-agent: {message}", file=sys.stderr)
        return code

    if args.command == "replay":
        return _replay(args, fail)
    if args.command == "init":
        return _init(args)
    if args.command == "query" and not args.question.strip():
        return fail(
            'query: the question is empty; ask something, e.g. mcp-agent query "Is port 8000 in use?"'
        )
    import anyio

    from ..config import load_config
    from ..exceptions import ConfigError, GatewayFailed, LoginFailed

    path, origin = config_path(args.config)
    try:
        config = load_config(path)
        if args.command == "serve":
            config = with_bind_overrides(config, args.host, args.port)
    except ConfigError as exc:
        named = f" (named by ${CONFIG_VARIABLE})" if origin == CONFIG_VARIABLE else ""
        return fail(f"{exc}{named}")
    command = {
        "serve": _serve,
        "query": _query,
        "tools": _tools,
        "doctor": _doctor,
        "login": _login,
        "logout": _logout,
    }[args.command]
    try:
        return int(anyio.run(command, config, args))
    except ConfigError as exc:
        return fail(str(exc))
    except LoginFailed as exc:
        return fail(str(exc), EXIT_FAILED)
    except GatewayFailed as exc:  # exit 1: a supervisor restarts it
        return fail(f"{exc}; exiting 1, for a supervisor to restart it", EXIT_FAILED)
    except KeyboardInterrupt:
        print("mcp-agent: interrupted", file=sys.stderr)
        return 130


# --------------------------------------------------------------------------------------------
# login, logout


def _remote_server(config: AgentConfig, name: str) -> Any:
    from ..config import RemoteServerConfig
    from ..exceptions import ConfigError

    servers = config.servers()
    server = servers.get(name)
    if server is None:
        known = ", ".join(sorted(servers)) or "none"
        raise ConfigError(f"no server {name!r} in mcpServers (servers: {known})")
    if not isinstance(server, RemoteServerConfig):
        raise ConfigError(f"server {name!r} is not a remote server (url): it needs no login")
    return server


async def _login(config: AgentConfig, args: argparse.Namespace) -> int:
    from ..auth.login import log_in
    from ..auth.token_store import tokens_folder
    from ..state.folder import private_state_dir

    server = _remote_server(config, args.server)
    store = await log_in(args.server, server, folder=tokens_folder(private_state_dir()), timeout=args.timeout)
    print(f"logged in to {args.server}; its tokens are in {store.path}")
    return EXIT_OK


async def _logout(config: AgentConfig, args: argparse.Namespace) -> int:
    from ..auth.login import log_out
    from ..auth.token_store import tokens_folder
    from ..state.folder import private_state_dir

    server = _remote_server(config, args.server)
    if log_out(args.server, server, folder=tokens_folder(private_state_dir())):
        print(f"logged out of {args.server}: its tokens and client registration are forgotten")
    else:
        print(f"{args.server}: no login was stored")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# tools


async def _tools(config: AgentConfig, args: argparse.Namespace) -> int:
    from ..providers.servers.endpoints import resolve_endpoint
    from ..state.folder import private_state_dir

    if args.diff or args.accept is not None:
        return await _pins(config, args)

    dialect = resolve_endpoint(config.llm).provider
    listed = None if args.fresh else await _cached_listing(config)
    if listed is not None:  # every list is cached: nothing to start, and no MCP SDK to load
        report = tools_report(listed[0], listed[1], dialect)
    else:
        from ..tools.hub import open_tool_hub

        # a server whose list is cached is not started: its list is shown "from cache"
        async with open_tool_hub(
            config.servers(),
            default_timeout=config.limits.tool_timeout_seconds,
            state_dir=private_state_dir(),
            start="wait" if args.fresh else "on_call",
        ) as hub:
            report = tools_report(hub.list_tools(), hub.status(), dialect)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_tools(report, sys.stdout)
    return EXIT_OK


async def _pins(config: AgentConfig, args: argparse.Namespace) -> int:
    """``tools --diff`` and ``tools --accept SERVER``, over the state store the gateway shares."""
    from ..tools.pins import ToolPins, pin_report

    if args.accept is not None and args.accept not in config.mcp_servers:
        known = ", ".join(sorted(config.mcp_servers)) or "none"
        print(
            f"mcp-agent: tools --accept: no server {args.accept!r} in mcpServers (known: {known})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    async with contextlib.AsyncExitStack() as stack:
        state = await session_state(config, stack)
        if args.accept is not None:
            before = pin_report(await state.pins.list("pinned"), await state.pins.list("seen"))
            pin = await ToolPins(state.pins).accept(args.accept, by="cli")
            if pin is None:
                print(f"server {args.accept}: no tools seen yet; nothing to accept", file=sys.stderr)
                return EXIT_USAGE
            entry = next((e for e in before if e["server"] == args.accept), None)
            changed = [c["tool"] for c in entry["changes"]] if entry else []
            what = f"{len(changed)} changed: {', '.join(changed)}" if changed else "no change"
            print(f"server {args.accept}: {counted(len(pin.tools), 'tool definition')} pinned ({what})")
            return EXIT_OK
        report = pin_report(await state.pins.list("pinned"), await state.pins.list("seen"))
    if args.json:
        print(json.dumps({"servers": report}, indent=2))
    else:
        print_pin_report(report, sys.stdout)
    return EXIT_OK


def print_pin_report(report: Sequence[dict[str, Any]], out: TextIO) -> None:
    """``tools --diff`` for people: per server, its changes as a diff, then its findings."""
    if not report:
        print("no tool definitions pinned yet: they are pinned when a server first lists its tools", file=out)
    for entry in report:
        server, changes = entry["server"], entry["changes"]
        if entry["pinned_at"] is None:
            print(f"{server}: new server, not pinned yet (mcp-agent tools --accept {server})", file=out)
        elif changes:
            print(
                f"{server}: {counted(len(changes), 'tool')} changed since pinned (mcp-agent tools --accept {server})",
                file=out,
            )
        else:
            print(f"{server}: as pinned", file=out)
        if entry["diff"]:
            print(entry["diff"], file=out)
        for finding in entry["findings"]:
            print(
                f"  ! {finding['tool']}: {finding['where']}: {finding['what']}: {finding['excerpt']}",
                file=out,
            )


async def _cached_listing(config: AgentConfig) -> Any:
    """Every server's tools from the tool cache, or None when one has no cached list. What
    killed gateways left is reaped first, as a hub does when it opens."""
    from ..state.folder import private_state_dir
    from ..tools.cache import ToolCache, cached_listing
    from ..tools.stdio.processes import reap_what_killed_gateways_left

    await reap_what_killed_gateways_left(private_state_dir())
    from ..auth.token_store import tokens_folder

    folder = private_state_dir()
    return cached_listing(config.servers(), ToolCache.of_state_dir(folder), tokens_folder(folder))


def tools_report(tools: Sequence[Any], statuses: Sequence[Any], dialect: str) -> dict[str, Any]:
    """The ``tools --json`` object of DESIGN.md, from the hub's tools and statuses (or the cache's)."""
    return {
        "tools": [
            {
                "server": spec.server,
                "name": spec.mcp_name,
                "exposed_name": spec.name,
                "description": spec.description,
                "parameters": spec.schema_for(dialect),
                "changes": list(spec.changes_for(dialect)),
            }
            for spec in tools
        ],
        "servers": [
            {
                "name": status.name,
                "status": status.status,
                "error": status.error,
                "tool_count": status.tool_count,
                "startup_ms": None if status.startup_ms is None else round(status.startup_ms, 1),
                "from_cache": status.from_cache,
                "protocol_version": status.protocol_version,
            }
            for status in statuses
        ],
    }


def print_tools(report: dict[str, Any], out: TextIO) -> None:
    servers = report["servers"]
    print(f"{counted(len(report['tools']), 'tool')} from {counted(len(servers), 'server')}", file=out)
    for server in servers:
        took = f" in {server['startup_ms']:.0f} ms" if server["startup_ms"] is not None else ""
        if server.get("from_cache"):
            line = f"  {server['name']}: {counted(server['tool_count'], 'tool')} from cache (not started; --fresh starts it)"
        else:
            line = f"  {server['name']}: {server['status']}, {counted(server['tool_count'], 'tool')}{took}"
        if server["error"]:
            line += f"\n      {server['error']}"
        print(line, file=out)
    for tool in report["tools"]:
        params = ", ".join(tool["parameters"].get("properties", {}))
        print(f"\n{tool['exposed_name']}({params})", file=out)
        description = " ".join(tool["description"].split())
        if description:
            print(f"    {description[:200]}{'…' if len(description) > 200 else ''}", file=out)
        for change in tool["changes"]:
            print(f"    schema: {change}", file=out)


# --------------------------------------------------------------------------------------------
# query


async def _query(config: AgentConfig, args: argparse.Namespace) -> int:
    import anyio

    from ..assembly import open_agent
    from ..config.globs import unmatched_globs
    from ..exceptions import ConfigError
    from ..state.records import valid_session_id
    from .approver import TerminalApprover, TerminalReader, on_a_terminal
    from .progress import ProgressPrinter

    printer = None if args.quiet else ProgressPrinter(sys.stderr, max_rounds=config.limits.max_rounds)
    async with contextlib.AsyncExitStack() as stack:
        state = None
        if args.session:
            if not valid_session_id(args.session):
                raise ConfigError(
                    f"--session {args.session!r} is not a session id: use 1-128 letters, digits and . _ : @ - "
                    "(starting with a letter or digit)"
                )
            state = await session_state(config, stack)
        # the tool definitions are pinned in the store the gateway shares, with or without --session
        pins = (state or await session_state(config, stack)).pins
        agent = await stack.enter_async_context(
            open_agent(config, state=state, record=args.record or None, pins=pins)
        )
        names = [spec.name for spec in agent.tools.list_tools()]
        for glob in unmatched_globs(args.approve, names):
            logger.warning("%s", glob.describe("--approve"))
        reader = TerminalReader(sys.stdin.fileno()) if on_a_terminal() else None
        approver = TerminalApprover(
            agent.approvals,
            approve=args.approve,
            reader=reader,
            out=sys.stderr,
            then=printer,
            quiet=args.quiet,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(approver.serve)
            result = await agent.query(args.question, session_id=args.session, events=approver)
            tg.cancel_scope.cancel()
    if args.json:
        print(json.dumps(result.to_structured(), indent=2))
    elif result.ok:
        if result.detail:  # an early-stop answer, or one cut off at the length limit: say so
            print(f"mcp-agent: {result.detail}", file=sys.stderr)
        print(result.answer)
    else:
        print(result.error_text(), file=sys.stderr)
        if result.answer:
            print(result.answer)
    return EXIT_OK if result.ok else EXIT_FAILED


async def session_state(config: AgentConfig, stack: contextlib.AsyncExitStack) -> State:
    """The state ``query --session`` keeps conversations in: ``state.url``, else SQLite at
    ``state.db`` in the state folder (``$MCP_AGENT_STATE_DIR``, else ``$XDG_STATE_HOME/mcp-agent``,
    else ``~/.local/state/mcp-agent``), the gateway's own default, so ``serve`` and ``query`` share
    conversations. The JSON files earlier versions kept in ``sessions/`` there are imported into it
    once (``import_session_files``)."""
    from ..exceptions import StateError
    from ..state import import_session_files, open_agent_state
    from ..state.folder import private_state_dir

    folder = private_state_dir()
    state = await open_agent_state(config, default=folder / "state.db")
    stack.push_async_callback(state.aclose)
    try:
        await import_session_files(folder / "sessions", state.sessions)
    except StateError as exc:
        logger.warning("could not import the conversations of %s: %s", folder / "sessions", exc)
    return state


# --------------------------------------------------------------------------------------------
# init


def _init(args: argparse.Namespace) -> int:
    """``mcp-agent init``: 0 written, 2 a file exists (without --force) or bad --from."""
    import shutil
    from pathlib import Path

    import anyio

    from .init import InitRequest, run_init, typed_program

    request = InitRequest(
        target=Path(args.config or DEFAULT_CONFIG),
        force=args.force,
        source=args.source,
        environ=os.environ,
        platform=sys.platform,
        home=Path.home(),
        cwd=Path.cwd(),
        program=typed_program(sys.argv[0], shutil.which("mcp-agent")),
    )
    return int(anyio.run(run_init, request))


# --------------------------------------------------------------------------------------------
# replay


def _replay(args: argparse.Namespace, fail: Any) -> int:
    """``mcp-agent replay FILE``: 0 identical, 1 diverged, 2 an unreadable recording or config."""
    import anyio

    from ..exceptions import ConfigError
    from ..loop.recording import RecordingError
    from ..replay import replay

    try:
        report = anyio.run(lambda: replay(args.file, config=args.config))
    except (RecordingError, ConfigError) as exc:
        return int(fail(f"replay: {exc}"))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.describe())
    return EXIT_OK if report.identical else EXIT_FAILED


# --------------------------------------------------------------------------------------------
# serve and doctor


async def _serve(config: AgentConfig, args: argparse.Namespace) -> int:
    from ..gateway.serve import serve

    def ready(host: str, port: int) -> None:
        url = f"http://{host}:{port}"
        print(
            f"mcp-agent: serving {url}  (Streamable HTTP {url}/mcp, SSE {url}/sse, dashboard {url}/)",
            file=sys.stderr,
            flush=True,
        )

    await serve(
        config,  # --host and --port are in config.gateway already (main checked them)
        stdio=args.stdio,
        stateless=args.stateless,
        on_ready=None if args.stdio else ready,
    )
    return EXIT_OK


async def _doctor(config: AgentConfig, args: argparse.Namespace) -> int:
    from .doctor import run_doctor

    ok = await run_doctor(config, sys.stdout)
    return EXIT_OK if ok else EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
