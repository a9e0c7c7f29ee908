"""``mcp-agent init``: write a starter agent.json in the current folder, and say what is in it.

1. Refuses to replace an existing file unless ``--force`` (exit 2, nothing asked or written).
2. With ``--from claude|cursor|vscode|PATH``, imports the servers of that client's config file
   (``client_configs.py``); a missing or unreadable file is an error (exit 2), an entry that
   cannot be imported is skipped and said.
3. Looks for a model server on 127.0.0.1's usual ports and for one of its models that takes
   tools (``model_discovery.py``); with none, writes Ollama's default endpoint and
   ``qwen3:8b`` and says how to get them.
4. Writes ``{"llm", "approvals", "mcpServers"}``, 0600 (imported ``env`` values are often
   keys), checks it with the loader every command uses, and prints the path, the model and
   why, the servers, what waits for approval, and the next command.

What waits for approval: ``approvals.requireDestructive`` is written ``true``, so every call
the model makes of a tool whose annotations say ``destructiveHint`` (and not ``readOnlyHint``)
waits for a yes. The servers are not started here (an imported ``npx`` server may download for
minutes, and a tool's annotations are read live at each call anyway, so tools that appear later
are covered); ``mcp-agent doctor`` starts them and names the tools that wait.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..config import load_config
from ..exceptions import ConfigError
from ..state.folder import write_private
from .client_configs import import_servers
from .model_discovery import (
    SUGGESTED_MODEL,
    FoundServer,
    choose,
    find_servers,
    get_model_hint,
    ports_from,
)

__all__ = ["InitRequest", "run_init", "starter_config"]

EXIT_OK, EXIT_USAGE = 0, 2
_PORT_NAMES = {
    11434: "Ollama",
    1234: "LM Studio",
    8080: "llama.cpp",
    8000: "vLLM/Lemonade",
    13305: "Lemonade",
}
_FALLBACK_ENDPOINT = "http://127.0.0.1:11434/v1"


@dataclass(frozen=True)
class InitRequest:
    """What ``init`` was asked, and the machine it runs on (given, so tests choose them)."""

    target: Path
    force: bool
    source: str | None
    environ: Mapping[str, str]
    platform: str
    home: Path
    cwd: Path
    program: str = "mcp-agent"
    """How the next commands are written: as this command was typed (``.venv/bin/mcp-agent``
    after ``make run``, where ``mcp-agent`` is not on PATH; see ``typed_program``)."""


def typed_program(argv0: str, on_path: str | None) -> str:
    """``mcp-agent`` when that is what PATH finds for the running command, else the path it was
    started by (``.venv/bin/mcp-agent``), so the printed next commands run as shown."""
    if not argv0 or Path(argv0).name != "mcp-agent":
        return "mcp-agent"  # python -m mcp_agent, or a test
    if on_path is not None and Path(on_path).resolve() == Path(argv0).resolve():
        return "mcp-agent"
    return argv0


def starter_config(endpoint: str, model: str, servers: Mapping[str, Any]) -> dict[str, Any]:
    """The starter agent.json: the model, destructive tools gated, the servers."""
    return {
        "llm": {"endpoint": endpoint, "model": model},
        "approvals": {"requireDestructive": True},
        "mcpServers": dict(servers),
    }


def _pick(found: list[FoundServer]) -> tuple[FoundServer | None, str, str]:
    """(the server, the model, why) to write: the first server with a model that takes tools."""
    for server in found:
        if (candidate := choose(server)) is not None:
            return server, candidate.name, candidate.why
    if found:
        server = found[0]
        named = [model.name for model in server.models]
        model = SUGGESTED_MODEL if server.kind == "ollama" or not named else named[0]
        return server, model, ""
    return None, SUGGESTED_MODEL, ""


async def run_init(request: InitRequest, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """``mcp-agent init``; returns the exit code (see the module docstring)."""
    target = request.target
    if target.exists() and not request.force:
        print(
            f"mcp-agent: init: {target} exists already; nothing was written "
            f"({request.program} init --force replaces it)",
            file=err,
        )
        return EXIT_USAGE
    try:
        ports = ports_from(request.environ)
    except ValueError as exc:
        print(f"mcp-agent: init: {exc}", file=err)
        return EXIT_USAGE
    servers: dict[str, Any] = {}
    notes: list[str] = []
    files: list[Path] = []
    if request.source is not None:
        imported = import_servers(
            request.source,
            platform=request.platform,
            environ=request.environ,
            home=request.home,
            cwd=request.cwd,
        )
        if imported.problems and not imported.servers:
            for problem in imported.problems:
                print(f"mcp-agent: init --from {request.source}: {problem}", file=err)
            print("mcp-agent: init: nothing was written", file=err)
            return EXIT_USAGE
        servers, files, notes = imported.servers, imported.files, [*imported.problems, *imported.notes]
    found = await find_servers(ports)
    server, model, why = _pick(found)
    endpoint = server.endpoint if server is not None else _FALLBACK_ENDPOINT
    try:
        write_private(target, json.dumps(starter_config(endpoint, model, servers), indent=2) + "\n")
    except OSError as exc:
        print(f"mcp-agent: init: cannot write {target}: {exc.strerror or exc}", file=err)
        return EXIT_USAGE
    _report(request, out, target, server, model, why, ports, servers, files, notes, found)
    return EXIT_OK


def _report(
    request: InitRequest,
    out: TextIO,
    target: Path,
    server: FoundServer | None,
    model: str,
    why: str,
    ports: tuple[int, ...],
    servers: Mapping[str, Any],
    files: list[Path],
    notes: list[str],
    found: list[FoundServer],
) -> None:
    def say(text: str = "") -> None:
        print(text, file=out)

    say(f"wrote {target.resolve()}")
    if server is None:
        tried = ", ".join(
            f"{port} ({_PORT_NAMES[port]})" if port in _PORT_NAMES else str(port) for port in ports
        )
        say(f"  model: no model server answered on 127.0.0.1 (ports {tried});")
        say(
            f"         wrote Ollama's {_FALLBACK_ENDPOINT} with {model}: install Ollama (https://ollama.com),"
        )
        say(f"         then run `ollama serve` and `ollama pull {model}`")
    elif why:
        say(f"  model: {model} on {server.name} at {server.endpoint}: {why}")
    else:
        say(f"  model: {server.name} at {server.endpoint} serves no model that takes tools;")
        say(f"         wrote {model}: {get_model_hint(server.kind)}")
    others = [each for each in found if each is not server]
    for other in others:
        say(f"         (also found {other.name} at {other.endpoint})")
    if request.source is None:
        say(
            f"  servers: none (add them under mcpServers, or run {request.program} init --force "
            "--from claude|cursor|vscode|PATH)"
        )
    else:
        where = ", ".join(str(path) for path in files) or "nothing"
        say(f"  servers: {', '.join(servers) or 'none'} (from {where})")
    for note in notes:
        say(f"    - {note}")
    say(
        "  approval: the model's calls of tools whose annotations say destructiveHint wait for your yes "
        f"(approvals.requireDestructive true); {request.program} doctor names them"
    )
    try:
        load_config(target, environ=request.environ)
    except ConfigError as exc:
        say(f"  check: the file does not load yet: {exc}")
    name = "" if target.resolve() == (request.cwd / "agent.json").resolve() else f" --config {target}"
    program = request.program
    say(f"next: {program} doctor{name}   (checks the model and starts every server)")
    say(f'then: {program} query{name} "What can you do?"   or   {program} serve{name}')
