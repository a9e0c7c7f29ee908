"""The command line: ``mcp-agent serve | query | tools | doctor``.

Thin on purpose: parse the arguments, load the config, call into the library, print. Logs and
progress go to stderr; stdout carries only the command's output (and, for ``serve --stdio``,
only the MCP protocol).

Exit codes: 0 success; 1 the run (or a check) ended without success; 2 bad usage or config.

The config file is ``--config F`` when given, else the file named by ``$MCP_AGENT_CONFIG``
(for launchers that own the arguments, such as the MCP Inspector), else ``agent.json`` in the
current folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import anyio
from pydantic import ValidationError

from . import __version__
from .config import AgentConfig, GatewayConfig, load_config
from .exceptions import ConfigError, StateError

if TYPE_CHECKING:
    from .state.base import State

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
CONFIG_VARIABLE = "MCP_AGENT_CONFIG"
DEFAULT_CONFIG = "agent.json"

logger = logging.getLogger("mcp_agent")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-agent", description="An MCP gateway agent.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: debug)")
    parser.add_argument("--version", action="version", version=f"mcp-agent {__version__}")
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
    serve.add_argument("--port", type=int, help="port, 0..65535 (default: gateway.port, 8765; 0: any free port)")
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

    tools = add("tools", "list every tool and every server's state")
    tools.add_argument("--json", action="store_true", help="print JSON")

    add("doctor", "check the config, the model server and every tool server")
    return parser


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


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
    args = _parser().parse_args(argv)
    _setup_logging(args.verbose)
    if args.command == "query" and not args.question.strip():
        print(
            'mcp-agent: query: the question is empty; ask something, e.g. mcp-agent query "Is port 8000 in use?"',
            file=sys.stderr,
        )
        return EXIT_USAGE
    path, origin = config_path(args.config)
    try:
        config = load_config(path)
        if args.command == "serve":
            config = with_bind_overrides(config, args.host, args.port)
    except ConfigError as exc:
        named = f" (named by ${CONFIG_VARIABLE})" if origin == CONFIG_VARIABLE else ""
        print(f"mcp-agent: {exc}{named}", file=sys.stderr)
        return EXIT_USAGE
    handler = {"serve": _serve, "query": _query, "tools": _tools, "doctor": _doctor}[args.command]
    try:
        return int(anyio.run(handler, config, args))
    except ConfigError as exc:
        print(f"mcp-agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("mcp-agent: interrupted", file=sys.stderr)
        return 130


# --------------------------------------------------------------------------------------------
# tools


async def _tools(config: AgentConfig, args: argparse.Namespace) -> int:
    from ._paths import state_dir
    from .providers.endpoints import resolve_endpoint
    from .tools.hub import open_tool_hub

    dialect = resolve_endpoint(config.llm).provider
    timeout = config.limits.tool_timeout_seconds
    async with open_tool_hub(config.servers(), default_timeout=timeout, state_dir=state_dir()) as hub:
        report = tools_report(hub, dialect)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_tools(report, sys.stdout)
    return EXIT_OK


def tools_report(hub: Any, dialect: str) -> dict[str, Any]:
    """The ``tools --json`` object of DESIGN.md."""
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
            for spec in hub.list_tools()
        ],
        "servers": [
            {
                "name": status.name,
                "status": status.status,
                "error": status.error,
                "tool_count": status.tool_count,
                "startup_ms": None if status.startup_ms is None else round(status.startup_ms, 1),
            }
            for status in hub.status()
        ],
    }


def print_tools(report: dict[str, Any], out: TextIO) -> None:
    servers = report["servers"]
    print(f"{len(report['tools'])} tools from {len(servers)} servers", file=out)
    for server in servers:
        took = f" in {server['startup_ms']:.0f} ms" if server["startup_ms"] is not None else ""
        line = f"  {server['name']}: {server['status']}, {server['tool_count']} tools{took}"
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
    from ._approver import TerminalApprover, TerminalReader, on_a_terminal
    from ._globs import unmatched_globs
    from .loop.agent import Agent
    from .loop.sessions import valid_session_id
    from .progress import ProgressPrinter

    printer = None if args.quiet else ProgressPrinter(sys.stderr, max_rounds=config.limits.max_rounds)
    async with contextlib.AsyncExitStack() as stack:
        options: dict[str, Any] = {}
        if args.session:
            if not valid_session_id(args.session):
                raise ConfigError(
                    f"--session {args.session!r} is not a session id: use 1-128 letters, digits and . _ : @ - "
                    "(starting with a letter or digit)"
                )
            options["state"] = await session_state(config, stack)
        agent = await stack.enter_async_context(Agent.from_config(config, **options))
        names = [spec.name for spec in agent.tools.list_tools()]
        for glob in unmatched_globs(args.approve, names):
            logger.warning("%s", glob.describe("--approve"))
        reader = TerminalReader(sys.stdin.fileno()) if on_a_terminal() else None
        approver = TerminalApprover(
            agent.approvals, approve=args.approve, reader=reader, out=sys.stderr, then=printer, quiet=args.quiet
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
    from ._paths import state_dir
    from .loop._records import open_agent_state
    from .loop.sessions import import_session_files

    state = await open_agent_state(config, default=state_dir() / "state.db")
    stack.push_async_callback(state.aclose)
    try:
        await import_session_files(state_dir() / "sessions", state.sessions)
    except StateError as exc:
        logger.warning("could not import the conversations of %s: %s", state_dir() / "sessions", exc)
    return state


# --------------------------------------------------------------------------------------------
# serve and doctor


async def _serve(config: AgentConfig, args: argparse.Namespace) -> int:
    from .gateway.serve import serve

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
