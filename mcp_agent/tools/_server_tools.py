"""A server's tools and results as the hub sees them: filtered, compiled, converted.

``server_tool`` turns one listed MCP tool (wire JSON) into a ``ServerTool`` (or None: skipped by
``allowTools``/``denyTools``, needing task-augmented execution, or with a schema that cannot be
compiled), ``cached_tools`` does it for a cached list (this module needs nothing of the MCP
SDK but its types' names, so that ``tools/cached.py`` lists cached tools without loading it);
``filter_warnings`` names the ``allowTools``/``denyTools`` globs that match none of
the listed tools; ``call_result`` turns a ``CallToolResult`` into the ``ToolResult`` the model reads.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import RemoteServerConfig, StdioServerConfig
from ..config.globs import unmatched_globs
from ..messages import JSONObject, ToolResult
from .content import content_to_text
from .schema import CompiledSchema, compile_tool_schema

if TYPE_CHECKING:
    import mcp_types as types

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
    server: str,
    config: StdioServerConfig | RemoteServerConfig,
    raw: JSONObject,
    *,
    name: str,
    description: str,
    task_required: bool = False,
) -> ServerTool | None:
    """A listed tool as offered by ``server``, or None when it is not offered.

    Args:
        raw: the tool as the server sent it (wire JSON, before the repair), whose
            ``inputSchema`` is compiled and whose ``annotations``, ``title`` and ``outputSchema``
            are kept.
        name, description: the tool's name and description (as the SDK read them, or as cached).
        task_required: it needs task-augmented execution (``execution.taskSupport: required``).
    """
    if task_required:
        logger.warning("%s: skipping tool %s: it requires task-augmented execution", server, name)
        return None
    if not tool_allowed(name, config.allow_tools, config.deny_tools):
        return None
    try:
        schema = compile_tool_schema(raw.get("inputSchema"))
    except Exception:
        logger.exception("%s: skipping tool %s: its input schema could not be compiled", server, name)
        return None
    annotations = raw.get("annotations")
    title = raw.get("title")
    output_schema = raw.get("outputSchema")
    return ServerTool(
        server=server,
        mcp_name=name,
        description=description,
        schema=schema,
        annotations=dict(annotations) if isinstance(annotations, dict) else {},
        title=title if isinstance(title, str) and title else None,
        output_schema=dict(output_schema) if isinstance(output_schema, dict) else None,
    )


def cached_tools(
    server: str, config: StdioServerConfig | RemoteServerConfig, raws: Iterable[JSONObject]
) -> tuple[ServerTool, ...]:
    """The tools of a cached list (wire JSON, as the server sent them), filtered and compiled."""
    tools: list[ServerTool] = []
    for raw in raws:
        description = raw.get("description")
        execution = raw.get("execution")
        tool = server_tool(
            server,
            config,
            raw,
            name=str(raw["name"]),
            description=description if isinstance(description, str) else "",
            task_required=isinstance(execution, dict) and execution.get("taskSupport") == "required",
        )
        if tool is not None:
            tools.append(tool)
    return tuple(tools)


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
