"""A server's tools and results as the hub sees them: filtered, compiled, converted.

``server_tool`` turns one listed MCP tool into a ``ServerTool`` (or None: skipped by
``allowTools``/``denyTools``, needing task-augmented execution, or with a schema that cannot be
compiled); ``filter_warnings`` names the ``allowTools``/``denyTools`` globs that match none of
the listed tools; ``call_result`` turns a ``CallToolResult`` into the ``ToolResult`` the model reads.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from .._globs import unmatched_globs
from .._types import JSONObject
from ..config import RemoteServerConfig, StdioServerConfig
from ..messages import ToolResult
from .content import content_to_text
from .schema import CompiledSchema, compile_tool_schema

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerTool:
    """A tool as its server offers it, after allow/deny and schema compilation, before naming.

    Attributes:
        server: the server's name.
        mcp_name: the tool's name on its server.
        description: the tool's description.
        schema: the compiled input schema.
        annotations: the MCP tool annotations, wire spelling (``readOnlyHint``...).
        title: the tool's title, or None.
        output_schema: the tool's ``outputSchema`` as the server sent it (the repair hides it
            from the SDK, see ``_repair``), or None when it sent none or not an object.
    """

    server: str
    mcp_name: str
    description: str
    schema: CompiledSchema
    annotations: Mapping[str, Any] = field(default_factory=dict)
    title: str | None = None
    output_schema: JSONObject | None = None


def tool_allowed(name: str, allow: list[str] | None, deny: list[str]) -> bool:
    """Whether ``allowTools``/``denyTools`` (fnmatch globs on MCP names) let a tool through."""
    if allow is not None and not any(fnmatch.fnmatchcase(name, pattern) for pattern in allow):
        return False
    return not any(fnmatch.fnmatchcase(name, pattern) for pattern in deny)


def filter_warnings(
    server: str, config: StdioServerConfig | RemoteServerConfig, names: Iterable[str]
) -> tuple[str, ...]:
    """One line per ``allowTools``/``denyTools`` glob of ``server`` that matches none of ``names``
    (the MCP names it listed), with the nearest names."""
    names = list(names)
    filters = (("allowTools", config.allow_tools or []), ("denyTools", config.deny_tools))
    return tuple(
        glob.describe(f"mcpServers.{server}.{key}")
        for key, patterns in filters
        for glob in unmatched_globs(patterns, names)
    )


def server_tool(
    server: str, config: StdioServerConfig | RemoteServerConfig, tool: types.Tool, raw: JSONObject | None
) -> ServerTool | None:
    """``tool`` as offered by ``server``, or None when it is not offered.

    Args:
        raw: the tool as the server sent it (before the repair), whose ``inputSchema`` is
            compiled; None to use the SDK's own copy.
    """
    if tool.execution is not None and tool.execution.task_support == "required":
        logger.warning("%s: skipping tool %s: it requires task-augmented execution", server, tool.name)
        return None
    if not tool_allowed(tool.name, config.allow_tools, config.deny_tools):
        return None
    if raw is None:  # not seen by the repairer (cannot happen on our transports)
        raw = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    try:
        schema = compile_tool_schema(raw.get("inputSchema"))
    except Exception:
        logger.exception("%s: skipping tool %s: its input schema could not be compiled", server, tool.name)
        return None
    annotations = raw.get("annotations")
    title = raw.get("title")
    output_schema = raw.get("outputSchema")
    return ServerTool(
        server=server,
        mcp_name=tool.name,
        description=tool.description or "",
        schema=schema,
        annotations=dict(annotations) if isinstance(annotations, dict) else {},
        title=title if isinstance(title, str) and title else None,
        output_schema=dict(output_schema) if isinstance(output_schema, dict) else None,
    )


def call_result(result: types.CallToolResult, start: float) -> ToolResult:
    """The ToolResult of a call that started at ``start`` (``time.perf_counter()``)."""
    content = tuple(part.model_dump(by_alias=True, exclude_none=True, mode="json") for part in result.content)
    structured = result.structured_content
    return ToolResult(
        text=content_to_text(list(content), structured),
        is_error=bool(result.is_error),
        content=content,
        structured=structured,
        elapsed_ms=(time.perf_counter() - start) * 1000,
    )
