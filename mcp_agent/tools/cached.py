"""The tools of every server read from the tool cache alone: ``mcp-agent tools`` on a warm cache.

``cached_listing`` answers what the hub would list before any server has started (each server
``idle``, its tools ``from_cache``), but starts nothing and loads nothing of the MCP SDK (about
half a second of imports): it reads the cache files (``cache.py``), filters and compiles the
tools (``_server_tools``) and names them (``_specs``). When a server has no cached list for its
configuration it returns None, and the caller opens the hub, which starts that server.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..config import RemoteServerConfig, StdioServerConfig
from ..messages import ToolSpec
from . import _procfs
from ._orphans import reap_orphans
from ._server_tools import ServerTool, cached_tools
from ._specs import exposed_specs
from .cache import ToolCache
from .status import ServerStatus


def cached_listing(
    servers: Mapping[str, StdioServerConfig | RemoteServerConfig], cache: ToolCache
) -> tuple[tuple[ToolSpec, ...], list[ServerStatus]] | None:
    """``(tools, statuses)`` from the cache, in configuration order; None when a server that is
    not disabled has no usable cached list."""
    tools: list[ServerTool] = []
    disabled: set[str] = set()
    for name, config in servers.items():
        if config.disabled:
            disabled.add(name)
            continue
        cached = cache.load(name, config)
        if cached is None:
            return None
        tools += cached_tools(name, config, cached.tools)
    specs, _, _ = exposed_specs(tools, servers)
    counts: dict[str, int] = {}
    for spec in specs:
        counts[spec.server] = counts.get(spec.server, 0) + 1
    statuses = [
        ServerStatus(name=name, status="disabled", lazy=config.lazy)
        if name in disabled
        else ServerStatus(
            name=name, status="idle", tool_count=counts.get(name, 0), from_cache=True, lazy=config.lazy
        )
        for name, config in servers.items()
    ]
    return specs, statuses


async def reap_what_killed_gateways_left(state_dir: Path) -> None:
    """What a hub does first when it opens (``_orphans.py``): stop the tool servers' children that
    killed gateways left behind. A listing from the cache starts nothing, but it is a start."""
    if _procfs.available():
        await reap_orphans(state_dir / "children")
