"""What every schema pass shares: where subschemas sit, JSON types, and the notes of a compile.

A JSON Schema node holds subschemas under a few keywords (one schema, a map of them or a list of
them); everything else (``enum``, ``const``, ``default``, ``examples``...) is data and is never
walked. ``map_children`` applies a function to each direct subschema; ``infer_type`` reads the
type an untyped schema evidently means; ``allow_null`` widens a schema to accept null; ``Notes``
collects the short sentences a compile reports as ``changes``. Pure functions, no I/O, used by
normalisation, the dialects, coercion and the error reports alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ...messages import JSONObject

_MAX_CHANGES = 100  # notes kept per compile; the rest are counted

# Where subschemas sit. Anything else (enum, const, default, examples...) is data, never walked.
_SUBSCHEMA = frozenset(
    {
        "items",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "additionalItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})
SUBSCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})


class Notes:
    """The ``changes`` of one compile: short sentences, each once, in order, at most 100 listed."""

    def __init__(self) -> None:
        self._items: dict[str, None] = {}
        self._more = 0

    def add(self, text: str) -> None:
        """Note ``text`` unless it is already noted (past the cap, only count it)."""
        if text in self._items:
            return
        if len(self._items) < _MAX_CHANGES:
            self._items[text] = None
        else:
            self._more += 1

    def __iter__(self) -> Iterator[str]:
        yield from self._items
        if self._more:
            yield f"... and {self._more} more changes"


def join_path(path: str, *parts: str) -> str:
    """A dotted path for notes: ``join_path("properties.a", "items")`` → ``properties.a.items``."""
    return ".".join(p for p in (path, *parts) if p)


def at_path(path: str) -> str:
    """``" at <path>"`` for a note, or ``""`` at the root."""
    return f" at {path}" if path else ""


def map_children(node: JSONObject, fn: Callable[[Any, str, str], Any], path: str) -> JSONObject:
    """A copy of ``node`` with ``fn(subschema, keyword, path)`` applied to each direct subschema."""
    out: JSONObject = {}
    for key, value in node.items():
        if key in _SUBSCHEMA and not (key == "items" and isinstance(value, list)):
            out[key] = fn(value, key, join_path(path, key))
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: fn(v, key, join_path(path, key, k)) for k, v in value.items()}
        elif (key in SUBSCHEMA_LISTS or key == "items") and isinstance(value, list):
            out[key] = [fn(v, key, join_path(path, key, str(i))) for i, v in enumerate(value)]
        elif key == "dependencies" and isinstance(value, dict):  # draft-07: schemas or name lists
            out[key] = {
                k: v if isinstance(v, list) else fn(v, key, join_path(path, key, k)) for k, v in value.items()
            }
        else:
            out[key] = value
    return out


def is_number(value: Any) -> bool:
    """True for a JSON number (a bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_whole(value: Any) -> bool:
    """True for an int or a float with no fractional part."""
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def json_type(value: Any) -> str:
    """The JSON Schema type name of a JSON value (``integer`` for ints, ``number`` for floats)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def enum_values(node: JSONObject) -> list[Any]:
    """The values ``node``'s ``enum`` (or else ``const``) allows; ``[]`` when it has neither."""
    return node["enum"] if isinstance(node.get("enum"), list) else [node["const"]] if "const" in node else []


def infer_type(node: JSONObject) -> str | None:
    """The type a schema without ``type`` evidently means, from its keywords."""
    keys = node.keys()
    if keys & {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
    }:
        return "object"
    if keys & {"items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"}:
        return "array"
    if keys & {"minLength", "maxLength", "pattern", "format"}:
        return "string"
    if keys & {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}:
        return "number"
    kinds = {json_type(v) for v in enum_values(node)}
    return kinds.pop() if len(kinds) == 1 else None


def allow_null(node: JSONObject) -> None:
    """Make ``node`` accept null too (in place): via its ``type``, else its ``anyOf``/``oneOf``; and its enum."""
    kind = node.get("type")
    if isinstance(kind, str) and kind != "null":
        node["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        node["type"] = [*kind, "null"]
    elif kind is None:
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list) and {"type": "null"} not in node[key]:
                node[key] = [*node[key], {"type": "null"}]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
