"""Tool schemas: normalisation, per-provider compilation, and the argument pipeline (pure).

FIRST CUT: the signatures are settled; the internals are being completed (issue 2, item 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema

from .._types import JSONObject, JSONSchema


@dataclass(frozen=True)
class CompiledSchema:
    """A tool's input schema, normalised and compiled for each provider dialect."""

    parameters: JSONSchema
    variants: dict[str, JSONSchema] = field(default_factory=dict)
    changes: tuple[str, ...] = ()


def compile_tool_schema(schema: Any) -> CompiledSchema:
    """Normalise an MCP ``inputSchema`` and compile it for every dialect."""
    changes: list[str] = []
    if not isinstance(schema, dict) or not schema:
        changes.append("missing inputSchema: no parameters")
        schema = {}
    params = {k: v for k, v in schema.items() if k not in ("$schema", "$id", "$comment")}
    if params.get("type") != "object":
        params["type"] = "object"
    params.setdefault("properties", {})
    return CompiledSchema(parameters=params, variants={}, changes=tuple(changes))


@dataclass(frozen=True)
class ArgumentCheck:
    """The outcome of the argument pipeline: coerced arguments, or the violations."""

    arguments: JSONObject
    errors: tuple[JSONObject, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


class ArgumentChecker:
    """Coerces and validates arguments against one schema (validator compiled once)."""

    def __init__(self, schema: JSONSchema) -> None:
        self.schema = schema
        self._validator = jsonschema.Draft202012Validator(schema)

    def check(self, arguments: JSONObject) -> ArgumentCheck:
        errors = tuple(
            {"path": "/" + "/".join(map(str, e.absolute_path)), "message": e.message, "received": e.instance}
            for e in self._validator.iter_errors(arguments)
        )
        return ArgumentCheck(arguments=arguments, errors=errors)


def checker_for(schema: JSONSchema) -> ArgumentChecker:
    """A cached ArgumentChecker for ``schema``."""
    return ArgumentChecker(schema)


def format_errors(name: str, check: ArgumentCheck) -> str:
    """The error text the model reads when its arguments are invalid."""
    lines = [f"Invalid arguments for {name}:"]
    lines += [f"- {e['path']}: {e['message']}" for e in check.errors]
    return "\n".join(lines)
