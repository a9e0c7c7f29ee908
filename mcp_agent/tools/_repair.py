"""Repair of server answers before the MCP SDK's strict validation sees them (mcp-sdk-2.md G1, G2).

The SDK 2.x client validates every result against the negotiated protocol version, all or
nothing: one tool with ``inputSchema: {}`` makes the whole ``tools/list`` fail, and a
non-object ``structuredContent`` makes a call fail. ``ResponseRepairer`` sits between a
transport's read stream and the ``ClientSession`` and mends each response on the way:

- ``tools/list``: a tool without a usable object ``inputSchema`` gets ``{"type": "object"}``
  for the SDK's eyes; a tool that still does not validate is dropped with a note, so one
  sloppy tool never hides the others. ``outputSchema`` is always removed (G2): we pass
  ``structuredContent`` through as data and the model reads text, so the SDK's output
  validation could only turn a working call into a ``RuntimeError``. The untouched wire dict of
  every tool is kept in ``raw_tools``: our own schema compiler sees the schema as the server
  sent it and reports what it changed.
- ``tools/call``: content beyond ``MAX_CONTENT_PARTS`` parts is dropped with a note, and a
  result of more than ``MAX_RESULT_VALUES`` JSON values keeps only its text (before the SDK
  validates a million parts); a ``structuredContent`` that is not an object is removed (its JSON is added
  as text when the result has no text). Results are not validated here (the SDK does that on
  every call); the connection turns the SDK's rejection of a broken result into an error result.

The functions that decide are pure; ``ResponseRepairer.pump`` is the stream filter.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client._transport import ReadStream
from mcp.shared.message import SessionMessage
from mcp_types import methods as _methods
from pydantic import ValidationError

from ._big_messages import bound_result

logger = logging.getLogger(__name__)

DEFAULT_VERSION = "2025-11-25"
"""The protocol version assumed until the server's initialize result names one."""
_EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Repaired:
    """One repaired result.

    Attributes:
        result: the result as the SDK should see it.
        notes: what was changed, one short sentence each (empty when nothing was).
        raw_tools: for a tools listing, every tool's wire dict as the server sent it, by name.
    """

    result: dict[str, Any]
    notes: tuple[str, ...] = ()
    raw_tools: Mapping[str, dict[str, Any]] = field(default_factory=dict)


def describe_validation_error(exc: ValidationError) -> str:
    """The first problem of a pydantic error, as ``where: what``."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "<root>"
    return f"{where}: {error['msg']}"


def _surface_check(method: str, version: str, data: Mapping[str, Any]) -> None:
    try:
        _methods.validate_server_result(method, version, data)
    except ValidationError:
        raise
    except (KeyError, ValueError):
        pass  # an unknown version or method: only the version-free model can judge


def repair_tools_result(result: Mapping[str, Any], version: str = DEFAULT_VERSION) -> Repaired:
    """Mend a ``tools/list`` result tool by tool (pure).

    Args:
        result: the result dict as received.
        version: the negotiated protocol version.
    """
    tools = result.get("tools")
    if not isinstance(tools, list):
        return Repaired(
            dict(result), ("tools/list: 'tools' is not a list; no tools",) if tools is not None else ()
        )
    notes: list[str] = []
    kept: list[dict[str, Any]] = []
    raw: dict[str, dict[str, Any]] = {}
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            notes.append(f"tools[{index}]: dropped, not a tool with a name")
            continue
        name = tool["name"]
        if name in raw:
            notes.append(f"{name}: dropped, duplicate name")
            continue
        fixed = {k: v for k, v in tool.items() if k != "outputSchema"}
        schema = tool.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            fixed["inputSchema"] = dict(_EMPTY_OBJECT_SCHEMA)
            notes.append(f"{name}: inputSchema {_describe_schema(schema)} replaced for the SDK")
        try:
            _surface_check("tools/list", version, {"tools": [fixed]})
            types.Tool.model_validate(fixed, by_name=False)
        except ValidationError as exc:
            notes.append(f"{name}: dropped, invalid tool ({describe_validation_error(exc)})")
            continue
        raw[name] = tool
        kept.append(fixed)
    repaired = dict(result)
    repaired["tools"] = kept
    return Repaired(repaired, tuple(notes), raw)


def _describe_schema(schema: Any) -> str:
    if schema is None:
        return "missing"
    if not isinstance(schema, dict):
        return f"of type {type(schema).__name__}"
    if not schema:
        return "{}"
    return f"with type {schema.get('type')!r}"


def repair_call_result(result: Mapping[str, Any]) -> Repaired:
    """Mend a ``tools/call`` result (pure): a result too big to handle cheaply is cut down
    (``bound_result``), and a non-object ``structuredContent`` is moved to text.

    Anything else that is wrong is left for the SDK to reject; the caller turns that rejection
    into an error result. A result that needs nothing comes back as the same object.
    """
    result, notes = bound_result(result)
    structured = result.get("structuredContent")
    if structured is None or isinstance(structured, dict):
        return Repaired(result if isinstance(result, dict) else dict(result), notes)
    fixed = {k: v for k, v in result.items() if k != "structuredContent"}
    content = fixed.get("content")
    if isinstance(content, list) and not any(
        isinstance(c, dict) and c.get("type") == "text" for c in content
    ):
        fixed["content"] = [*content, {"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]
    return Repaired(fixed, (*notes, f"structuredContent of type {type(structured).__name__} moved to text"))


def _kind(result: Mapping[str, Any]) -> str | None:
    """Which request a result answers, judged by its shape."""
    if isinstance(result.get("protocolVersion"), str) and "capabilities" in result:
        return "initialize"
    if "tools" in result and "content" not in result:
        return "tools/list"
    if "content" in result or "structuredContent" in result:
        return "tools/call"
    return None


class ResponseRepairer:
    """The stream filter between a transport and a ``ClientSession``.

    Attributes:
        server: the server's name, for logs.
        version: the protocol version the server chose (from its initialize result).
        raw_tools: every listed tool's wire dict as the server sent it, by name (pages add).
        ended: set when the transport's read stream ended (the server closed or died).
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self.version = DEFAULT_VERSION
        self.raw_tools: dict[str, dict[str, Any]] = {}
        self.ended = anyio.Event()

    def repair(self, result: dict[str, Any]) -> dict[str, Any]:
        """Repair one result in place of the SDK; return what the session should see."""
        kind = _kind(result)
        if kind == "initialize":
            self.version = result["protocolVersion"]
            return result
        if kind == "tools/list":
            repaired = repair_tools_result(result, self.version)
            self.raw_tools.update(repaired.raw_tools)
        elif kind == "tools/call":
            repaired = repair_call_result(result)
        else:
            return result
        for note in repaired.notes:
            logger.warning("%s: %s", self.server, note)
        return repaired.result

    async def pump(
        self,
        source: ReadStream[SessionMessage | Exception],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Copy ``source`` to ``sink``, repairing results; set ``ended`` when ``source`` ends."""
        try:
            async with sink:
                async for item in source:
                    if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse):
                        item.message.result = self.repair(item.message.result)
                    await sink.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session went away first
        finally:
            self.ended.set()
