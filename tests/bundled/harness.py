"""Start bundled servers as real stdio subprocesses (all at once) and load them as modules.

``open_clients`` starts every server concurrently, each held open by its own task (a
client's cancel scopes must be entered and left in one task), and yields the connected SDK
clients by name; ``call`` calls one tool and returns its text. ``load_server`` imports a server script in-process so its pure helpers can be
table-tested; importing does not start serving.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters, stdio_client

SERVERS_DIR = Path(__file__).resolve().parents[2] / "servers"


@dataclass(frozen=True)
class ServerSpec:
    """How to start one server: the script's stem, extra env, and an optional command prefix."""

    name: str
    script: str
    env: Mapping[str, str] = field(default_factory=dict)
    prefix: tuple[str, ...] = ()
    optional: bool = False
    """A server that may fail to start (it is then absent from the clients, not an error)."""


def load_server(stem: str) -> ModuleType:
    """Import ``servers/<stem>.py`` as the module ``bundled_<stem>`` (cached)."""
    name = f"bundled_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SERVERS_DIR / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def params(spec: ServerSpec) -> StdioServerParameters:
    """The stdio parameters that run ``spec`` with this interpreter."""
    script = str(SERVERS_DIR / f"{spec.script}.py")
    argv = [*spec.prefix, sys.executable, script]
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(spec.env))


@asynccontextmanager
async def open_clients(
    specs: list[ServerSpec], errlog: TextIO, timeout: float = 30
) -> AsyncIterator[dict[str, Client]]:
    """Connected clients for every spec, started concurrently; all closed on exit.

    An optional spec whose server fails to start is left out of the clients.
    """
    clients: dict[str, Client] = {}
    settled: set[str] = set()
    ready = anyio.Event()
    stop = anyio.Event()

    def settle(name: str) -> None:
        settled.add(name)
        if len(settled) == len(specs):
            ready.set()

    async def hold(spec: ServerSpec) -> None:
        try:
            async with Client(stdio_client(params(spec), errlog=errlog), mode="legacy") as client:
                clients[spec.name] = client
                settle(spec.name)
                await stop.wait()
        except Exception:
            if not spec.optional or spec.name in clients:
                raise
            settle(spec.name)

    async with anyio.create_task_group() as tg:
        for spec in specs:
            tg.start_soon(hold, spec)
        with anyio.fail_after(timeout):
            await ready.wait()
        try:
            yield clients
        finally:
            stop.set()


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> tuple[str, bool]:
    """Call a tool; return its text and whether it is an error."""
    with anyio.fail_after(20):
        result = await client.call_tool(tool, args or {})
    text = "\n".join(part.text for part in result.content if part.type == "text")
    return text, bool(result.is_error)
