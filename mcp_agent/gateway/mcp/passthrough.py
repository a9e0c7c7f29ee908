"""Inner tools and their results as ``exposeTools`` passes them on (pure, no I/O).

- ``exposed_tool``: a tool keeps its ``title``, ``annotations`` and ``outputSchema`` under its
  exposed name, and its ``inputSchema`` as the server sent it, every keyword kept (``$schema``,
  ``$defs``, ``$anchor``, ``$ref``, composition, conditionals): the normalised ``parameters`` are
  for the model and for checking arguments, never for what clients are shown. (The SDK's server
  writes the root keywords its model of an input schema declares first; JSON object members have
  no order.) The SDK validates a whole ``tools/list`` answer before sending it, all or nothing
  (mcp-sdk-2.md G2), so each tool is checked against both protocol eras' schemas first: a
  server's ``inputSchema`` that does not pass (not an object schema, say) is replaced by the
  normalised one, with a warning; an ``outputSchema`` that is not an object schema or not a valid
  JSON Schema is dropped (a client could not check results against it); and a tool that still
  does not pass loses its optional fields rather than breaking the list.
- ``tool_result_to_mcp``: the server's own content parts (text cut to ``maxResultChars`` by the
  Agent, images, audio, resource links and embedded resources whole) and its
  ``structuredContent``. A call that did not run (invalid arguments, denied, timed out) has only
  the guard's text.
- The output contract: a client (the Python SDK, for one) rejects a successful result without
  ``structuredContent``, or one that does not match the advertised ``outputSchema``, with an
  exception that hides the result. So the gateway checks what it sends against what it
  advertised, and a result that breaks the contract goes out as an error result: the server's
  parts kept, plus a text part that says what is wrong.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp_types import methods as _methods
from pydantic import TypeAdapter, ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable

from ...messages import JSONObject, ToolResult, ToolSpec

logger = logging.getLogger(__name__)

ERA_ENVELOPES: dict[str, dict[str, Any]] = {
    "2025-11-25": {},
    "2026-07-28": {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"},
}
"""One protocol version of each schema era the SDK validates results against, with the fields
of a list result it fills in itself (the cache hints, the result type)."""
_CONTENT = TypeAdapter[types.ContentBlock](types.ContentBlock)


def object_schema(schema: Mapping[str, Any]) -> JSONObject:
    """The SDK refuses a tool whose input schema is not an object schema (mcp-sdk-2.md G2)."""
    out = dict(schema)
    out["type"] = "object"
    out.setdefault("properties", {})
    return out


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator | None:
    """A compiled validator for a schema (as canonical JSON), or None when it is not valid.

    As the SDK's client builds it: the dialect the schema names, ``$ref`` resolved only within
    the schema itself.
    """
    schema = json.loads(schema_json)
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    return cls(schema, registry=Registry())


def _schema_json(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), default=str)


def advertised_output_schema(spec: ToolSpec) -> JSONObject | None:
    """The ``outputSchema`` the gateway advertises for ``spec``: the server's, when it is an
    object schema and a valid JSON Schema; else None."""
    schema = spec.output_schema
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    if _validator(_schema_json(schema)) is None:
        return None
    return dict(schema)


def _annotations(annotations: Mapping[str, Any]) -> types.ToolAnnotations | None:
    if not annotations:
        return None
    try:
        return types.ToolAnnotations.model_validate(dict(annotations), by_name=False)
    except ValidationError:
        return None


def _passes(tool: types.Tool) -> bool:
    tools = [tool.model_dump(by_alias=True, exclude_none=True, mode="json")]
    try:
        for version, envelope in ERA_ENVELOPES.items():
            _methods.validate_server_result("tools/list", version, {**envelope, "tools": tools})
    except ValidationError:
        return False
    return True


def _input_schema_problem(schema: JSONObject) -> str | None:
    """Why the SDK would refuse to list ``schema`` as an ``inputSchema`` (None: it would not)."""
    tool = {"name": "t", "inputSchema": schema}
    for version, envelope in ERA_ENVELOPES.items():
        try:
            _methods.validate_server_result("tools/list", version, {**envelope, "tools": [tool]})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"][3:]) or "<root>"
            return f"fails the {version} schema at {where}: {error['msg']}"
    return None


def _normalised_instead(spec: ToolSpec, sent: JSONObject, warned: set[tuple[str, str]] | None) -> bool:
    """Whether the server's ``inputSchema`` of ``spec`` must give way to the normalised one (and
    say why, once per tool and schema in ``warned``)."""
    problem = _input_schema_problem(sent)
    if problem is None:
        return False
    key = (spec.name, _schema_json(sent))
    if warned is None or key not in warned:
        if warned is not None:
            warned.add(key)
        logger.warning(
            "exposeTools: %s is listed with the gateway's normalised input schema: the server's %s",
            spec.name,
            problem,
        )
    return True


def _listed(spec: ToolSpec, input_schema: JSONObject) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description or None,
        input_schema=input_schema,
        output_schema=advertised_output_schema(spec),
        annotations=_annotations(spec.annotations),
    )


def exposed_tool(spec: ToolSpec, *, warned: set[tuple[str, str]] | None = None) -> types.Tool:
    """``spec`` as the gateway lists it (see the module docstring).

    Args:
        warned: the ``(tool, schema)`` pairs whose schema was already warned about, added to (a
            listing is asked for often: one warning each); None: warn every time.
    """
    sent = spec.input_schema
    tool = _listed(spec, object_schema(spec.parameters) if sent is None else sent)
    if _passes(tool):
        return tool
    if sent is not None and _normalised_instead(spec, sent, warned):
        tool = _listed(spec, object_schema(spec.parameters))
        if _passes(tool):
            return tool
    logger.warning("exposeTools: %s is listed without its title, annotations and outputSchema", spec.name)
    return types.Tool(name=spec.name, description=spec.description or None, input_schema=tool.input_schema)


def content_blocks(parts: Sequence[JSONObject]) -> list[types.ContentBlock]:
    """Wire content parts as the SDK's content blocks; a part it cannot take becomes a note."""
    blocks: list[types.ContentBlock] = []
    for part in parts:
        try:
            blocks.append(_CONTENT.validate_python(part, by_name=False))
        except ValidationError:
            kind = part.get("type") if isinstance(part, Mapping) else None
            blocks.append(types.TextContent(text=f"[{kind or 'unrecognised'} content not passed on]"))
    return blocks


def structured_problem(structured: Any, schema: Mapping[str, Any]) -> str | None:
    """Why ``structured`` breaks a tool's ``outputSchema`` (None: it does not)."""
    if structured is None:
        return "it advertises an outputSchema but returned no structuredContent"
    validator = _validator(_schema_json(schema))
    if validator is None:
        return None
    try:
        error = best_match(validator.iter_errors(structured))
    except Unresolvable as exc:
        return f"its outputSchema cannot be resolved ({exc})"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "<root>"
    return f"its structuredContent does not match its outputSchema at {where}: {error.message}"


def tool_result_to_mcp(
    result: ToolResult, *, name: str = "", output_schema: Mapping[str, Any] | None = None
) -> types.CallToolResult:
    """An inner tool's guarded result as MCP content (see the module docstring).

    Args:
        result: the Agent's result of the call (``Agent.call_tool``).
        name: the tool's exposed name, for the contract note.
        output_schema: what ``tools/list`` advertised for the tool (None: nothing to keep).
    """
    content: list[types.ContentBlock] = (
        content_blocks(result.content) if result.content else [types.TextContent(text=result.text)]
    )
    structured = dict(result.structured) if isinstance(result.structured, Mapping) else None
    is_error = result.is_error
    if output_schema is not None and not is_error:
        problem = structured_problem(structured, output_schema)
        if problem is not None:
            is_error = True
            content.append(
                types.TextContent(text=f"[mcp-agent: tool {name} broke its output contract: {problem}]")
            )
    return types.CallToolResult(content=content, structured_content=structured, is_error=is_error)
