"""Normalisation: any MCP ``inputSchema`` becomes one clean Draft 2020-12 object schema.

``normalise`` makes a plain-JSON copy (string keys, finite numbers, nesting cut at 100 levels),
inlines every ``$ref`` (``_refs``), then walks every subschema: draft-03/04/07 and OpenAPI
spellings are upgraded (``nullable``, boolean ``exclusiveMinimum``, array ``items``,
``dependencies``, property-level ``required``), type aliases such as ``"int"`` are read as JSON
Schema types, and keyword values the meta-schema rejects are dropped. The root is made
``type: object`` with ``properties``; a root of another type is wrapped as the property
``value``. Whatever is changed is noted; nothing raises. Pure, no I/O.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

from ...messages import JSONObject, JSONSchema
from ._nodes import (
    SUBSCHEMA_LISTS,
    SUBSCHEMA_MAPS,
    Notes,
    allow_null,
    at_path,
    infer_type,
    is_number,
    is_whole,
    join_path,
    map_children,
)
from ._refs import inline_refs

EMPTY: JSONSchema = {"type": "object", "properties": {}}
"""The schema of a tool without parameters."""

_MAX_JSON_DEPTH = 100  # input nesting kept; deeper parts are cut
_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_TYPE_ALIASES = {
    "str": "string",
    "text": "string",
    "int": "integer",
    "long": "integer",
    "float": "number",
    "double": "number",
    "bool": "boolean",
    "dict": "object",
    "map": "object",
    "list": "array",
    "none": "null",
}
_BOOL_OK = frozenset({"additionalProperties", "unevaluatedProperties", "items", "unevaluatedItems"})
_META_KEYS = (
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$vocabulary",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "$defs",
    "definitions",
)  # whatever inlining left is dropped

# What each keyword's value must be (the Draft 2020-12 meta-schema, checked by hand: fast).
_NUMBER_KEYS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNT_KEYS = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
    }
)
_STRING_KEYS = frozenset({"title", "description", "format", "contentEncoding", "contentMediaType"})
_BOOLEAN_KEYS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})


def _jsonify(value: Any, depth: int, notes: Notes) -> Any:
    """A plain-JSON copy: str keys, lists, finite numbers; nesting cut at ``_MAX_JSON_DEPTH``."""
    if depth > _MAX_JSON_DEPTH:
        notes.add(f"cut the schema below {_MAX_JSON_DEPTH} levels of nesting")
        return None
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _jsonify(v, depth + 1, notes) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonify(v, depth + 1, notes) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float)):
        return value
    return str(value)


def _fix_type(value: Any) -> str | list[str] | None:
    """The canonical spelling of a ``type`` value (``"int"`` → ``"integer"``), or None if unknown."""
    names = value if isinstance(value, list) else [value]
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            return None
        canonical = name.strip().lower()
        canonical = _TYPE_ALIASES.get(canonical, canonical)
        if canonical not in _TYPES:
            return None
        if canonical not in out:
            out.append(canonical)
    if not out:
        return None
    return out[0] if len(out) == 1 else out


def _regex_ok(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    return True


def _fix_keywords(node: JSONObject, path: str, notes: Notes) -> None:
    """Upgrade old spellings and drop keyword values the meta-schema rejects (in place)."""
    for key in _META_KEYS:
        if key in node:
            del node[key]
            notes.add(f"removed {key}{at_path(path)}")
    if "type" in node:
        fixed = _fix_type(node["type"])
        if fixed is None:
            notes.add(f"dropped unknown type {json.dumps(node['type'])}{at_path(path)}")
            del node["type"]
        elif fixed != node["type"]:
            notes.add(f"type {json.dumps(node['type'])} read as {json.dumps(fixed)}{at_path(path)}")
            node["type"] = fixed
    if "nullable" in node:  # OpenAPI 3.0
        if node.pop("nullable") is True:
            allow_null(node)
            notes.add(f"nullable: true turned into a null type{at_path(path)}")
        else:
            notes.add(f"removed nullable{at_path(path)}")
    for key, base in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(key), bool):  # draft-04
            if node.pop(key) and is_number(node.get(base)):
                node[key] = node.pop(base)
            notes.add(f"draft-04 {key} upgraded{at_path(path)}")
    if isinstance(node.get("items"), list):  # draft-07 tuple
        node["prefixItems"] = node.pop("items")
        if "additionalItems" in node:
            node["items"] = node.pop("additionalItems")
        notes.add(f"array form of items turned into prefixItems{at_path(path)}")
    if "additionalItems" in node:
        del node["additionalItems"]
        notes.add(f"removed additionalItems{at_path(path)}")
    if "dependencies" in node:  # draft-07
        dependencies = node.pop("dependencies")
        for name, dep in dependencies.items() if isinstance(dependencies, dict) else ():
            target = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
            if isinstance(node.get(target, {}), dict):
                node.setdefault(target, {})[name] = dep
        notes.add(f"dependencies split into dependentRequired/dependentSchemas{at_path(path)}")
    props = node.get("properties")
    if isinstance(props, dict):  # draft-03 "required": true on a property
        flagged = [k for k, v in props.items() if isinstance(v, dict) and isinstance(v.get("required"), bool)]
        for name in flagged:
            sub = props[name] = dict(props[name])
            if sub.pop("required"):
                required = node.get("required")
                node["required"] = [*(required if isinstance(required, list) else []), name]
            notes.add(
                f"property-level required moved to the parent{at_path(join_path(path, 'properties', name))}"
            )
    for key, value in list(node.items()):
        if not _value_ok(key, value):
            del node[key]
            notes.add(f"dropped invalid {key}{at_path(path)}")
    for key in ("required", "dependentRequired"):
        if key in node:
            node[key] = (
                _clean_names(node[key])
                if key == "required"
                else {k: _clean_names(v) for k, v in node[key].items()}
            )
    for key in _COUNT_KEYS & node.keys():
        node[key] = int(node[key])
    if "patternProperties" in node:
        node["patternProperties"] = {k: v for k, v in node["patternProperties"].items() if _regex_ok(k)}
    if node.get("enum") == []:
        del node["enum"]
        notes.add(f"dropped empty enum{at_path(path)}")


def _value_ok(key: str, value: Any) -> bool:
    if key in _NUMBER_KEYS:
        return is_number(value)
    if key == "multipleOf":
        return is_number(value) and value > 0
    if key in _COUNT_KEYS:
        return is_number(value) and value >= 0 and is_whole(value)
    if key in _STRING_KEYS:
        return isinstance(value, str)
    if key == "pattern":
        return isinstance(value, str) and _regex_ok(value)
    if key in _BOOLEAN_KEYS:
        return isinstance(value, bool)
    if key in ("enum", "examples", "required"):
        return isinstance(value, list)
    if key == "dependentRequired":
        return isinstance(value, dict) and all(isinstance(v, list) for v in value.values())
    if key in SUBSCHEMA_MAPS:
        return isinstance(value, dict)
    if key in SUBSCHEMA_LISTS:
        return isinstance(value, list) and bool(value)
    return True


def _clean_names(value: list[Any]) -> list[str]:
    return list(dict.fromkeys(v for v in value if isinstance(v, str)))


def _fix(value: Any, keyword: str, path: str, notes: Notes) -> Any:
    """Normalise one subschema (recursively). Never raises."""
    if isinstance(value, bool):
        if keyword in _BOOL_OK:
            return value
        return {} if value else {"not": {}}
    if keyword == "properties" and isinstance(value, str) and (kind := _fix_type(value)) is not None:
        notes.add(f"shorthand {json.dumps(value)} read as a type{at_path(path)}")
        return {"type": kind}
    if not isinstance(value, dict):
        notes.add(f"invalid subschema{at_path(path)} replaced by {{}}")
        return {}
    node = dict(value)
    _fix_keywords(node, path, notes)
    return map_children(node, lambda v, k, p: _fix(v, k, p, notes), path)


def normalise(schema: Any, notes: Notes) -> JSONSchema:
    """The validation schema: a Draft 2020-12 object schema with no ``$ref``. Never raises.

    Args:
        schema: an MCP ``inputSchema`` as sent (anything at all).
        notes: where every change is noted.

    Returns:
        A new object schema; a root of another type is wrapped as the property ``value``.
    """
    if schema is None or schema == {} or schema is True:
        notes.add("no inputSchema: no parameters")
        return copy.deepcopy(EMPTY)
    if not isinstance(schema, dict):
        notes.add(f"inputSchema was {type(schema).__name__}, not an object: no parameters")
        return copy.deepcopy(EMPTY)
    root = _jsonify(schema, 0, notes)
    root = inline_refs(root, notes)
    if "$defs" in schema or "definitions" in schema:
        notes.add("removed $defs")
    root = _fix(root, "", "", notes) if isinstance(root, dict) else {}
    kind = root.get("type")
    if kind is None:
        inferred = infer_type(root)
        if inferred not in (None, "object"):
            return _wrap(root, str(inferred), notes)
        root["type"] = "object"
        if len(root) > 1:
            notes.add("added type: object")
    elif isinstance(kind, list):
        if "object" not in kind:
            return _wrap(root, "/".join(kind), notes)
        root["type"] = "object"
        notes.add(f"root type {json.dumps(kind)} narrowed to object")
    elif kind != "object":
        return _wrap(root, kind, notes)
    if not isinstance(root.get("properties"), dict):
        root["properties"] = {}
        if root.keys() - {"type", "properties"}:
            notes.add("added properties: {}")
    return root


def _wrap(root: JSONSchema, kind: str, notes: Notes) -> JSONSchema:
    notes.add(f"root schema of type {kind} wrapped as the object property 'value'")
    return {"type": "object", "properties": {"value": root}, "required": ["value"]}
