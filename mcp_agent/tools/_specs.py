"""The tools the model is offered: servers' tools named and turned into ``ToolSpec``s (pure).

``exposed_specs`` gives each tool its exposed name (``naming.assign_names``: the server's
``toolPrefix`` and the MCP name, collisions resolved) and its ``ToolSpec``; the hub offers them
and routes calls by the names, and ``mcp-agent tools`` lists them from the cache alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..config import RemoteServerConfig, StdioServerConfig
from ..messages import ToolSpec
from ._server_tools import ServerTool
from .naming import NamedTool, assign_names


def exposed_specs(
    tools: Sequence[ServerTool], configs: Mapping[str, StdioServerConfig | RemoteServerConfig]
) -> tuple[tuple[ToolSpec, ...], dict[str, tuple[str, str]], list[str]]:
    """``(specs, names, warnings)``: the specs in the order of ``tools``, each exposed name's
    ``(server, MCP name)``, and the naming warnings (collisions, cut names)."""
    names, warnings = assign_names(
        [NamedTool(t.server, t.mcp_name, configs[t.server].tool_prefix) for t in tools]
    )
    specs: list[ToolSpec] = []
    routes: dict[str, tuple[str, str]] = {}
    for tool in tools:
        exposed = names[(tool.server, tool.mcp_name)]
        specs.append(
            ToolSpec(
                name=exposed,
                description=tool.description,
                parameters=tool.schema.parameters,
                variants=dict(tool.schema.variants),
                server=tool.server,
                mcp_name=tool.mcp_name,
                changes=tuple(tool.schema.changes),
                annotations=dict(tool.annotations),
                timeout_seconds=configs[tool.server].call_timeout_seconds,
                title=tool.title,
                output_schema=tool.output_schema,
            )
        )
        routes[exposed] = (tool.server, tool.mcp_name)
    return tuple(specs), routes, list(warnings)
