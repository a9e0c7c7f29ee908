"""Normalisation: any MCP ``inputSchema`` becomes one clean Draft 2020-12 object schema.

``normalise`` makes a plain-JSON copy (string keys, finite numbers, nesting cut at 100 levels),
inlines every ``$ref`` (``inline_refs``, below), then walks every subschema: draft-03/04/07 and OpenAPI
spellings are upgraded (``nullable``, boolean ``exclusiveMinimum``, array ``items``,
``dependencies``, property-level ``required``), type aliases such as ``"int"`` are read as JSON
Schema types, and keyword values the meta-schema rejects are dropped. The root is made
``type: object`` with ``properties``; a root of another type is wrapped as the property
``value``. Whatever is changed is noted; nothing raises. Pure, no I/O.

Below it, the ``$ref`` inliner and what every schema pass shares (``map_children``,
``infer_type``, ``Notes``...): the dialects, coercion and the error reports use them too.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

from ...messages import JSONObject, JSONSchema

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
    _enum_of_elements(node, path, notes)


def _enum_of_elements(node: JSONObject, path: str, notes: Notes) -> None:
    """An array whose ``enum`` holds no array lists the allowed elements (a common way of writing
    ``items.enum``; read as written, no value could pass): the enum moves into ``items``."""
    enum = node.get("enum")
    if node.get("type") != "array" or not isinstance(enum, list) or any(isinstance(v, list) for v in enum):
        return
    del node["enum"]
    items = node.get("items")
    if items is None or items is True:
        node["items"] = {"enum": enum}
    elif isinstance(items, dict) and "enum" not in items:
        node["items"] = {**items, "enum": enum}
    else:
        notes.add(f"dropped an enum of no arrays on an array{at_path(path)}")
        return
    notes.add(f"enum of the elements moved into items{at_path(path)}")


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


# ---------------------------------------------------------------------- $ref
#
# ``$ref`` inlining with a cycle guard: the schema a tool sends becomes one self-contained tree.
#
# Every ``$ref`` (also ``$dynamicRef``/``$recursiveRef``) that points into the same document, by JSON
# pointer or anchor, is replaced by a copy of its target, resolved against the original document;
# sibling keywords win over the target's, and ``properties``/``required`` are merged. A recursive
# ``$ref``, one more than 16 deep in a chain of them, or any ``$ref`` met after 5,000 nodes have been
# expanded (against exponential blow-up) is not inlined but replaced by a stub of its target's type;
# nesting deeper than 48 levels is cut; an unresolvable ``$ref`` (another document, a bad pointer)
# becomes ``{}``. Each of these is noted once per ``$ref``. ``$defs``/``definitions`` are dropped
# on the way. Pure, no I/O.
_MAX_SCHEMA_DEPTH = 48  # schema nesting after inlining $refs
_MAX_REF_CHAIN = 16  # $refs expanded inside one another
_MAX_INLINED_NODES = 5_000  # schema nodes visited while inlining, against exponential blow-up
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def inline_refs(root: JSONObject, notes: Notes) -> Any:
    """``root`` (a plain-JSON schema document) with every ``$ref`` inlined and ``$defs`` dropped.

    Args:
        root: the schema document; ``$ref``s are resolved against it.
        notes: where what was inlined or cut is noted.

    Returns:
        The expanded copy; ``root`` is not changed.
    """
    return _Inliner(root, notes).expand(root, "")


class _Inliner:
    """Replaces every ``$ref`` with a copy of its target, resolved against the original document."""

    def __init__(self, root: JSONObject, notes: Notes) -> None:
        self.root = root
        self.notes = notes
        self.budget = _MAX_INLINED_NODES
        self._anchors: dict[str, Any] | None = None
        self._noted: set[tuple[str, str]] = set()

    def note(self, kind: str, ref: str, text: str) -> None:
        """One note per kind and $ref (the first place it happens), however often it happens."""
        if (kind, ref) not in self._noted:
            self._noted.add((kind, ref))
            self.notes.add(text)

    def resolve(self, ref: str) -> tuple[bool, Any]:
        """``(found, target)`` for a ``$ref`` within this document: a JSON pointer or an anchor."""
        base, _, fragment = ref.partition("#")
        if base and base != self.root.get("$id"):
            return False, None
        fragment = unquote(fragment)
        if not fragment:
            return True, self.root
        if not fragment.startswith("/"):
            anchors = self._anchor_index()
            return (fragment in anchors), anchors.get(fragment)
        node: Any = self.root
        for token in fragment[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and re.fullmatch(r"[0-9]+", token) and int(token) < len(node):
                node = node[int(token)]
            else:
                return False, None
        return True, node

    def _anchor_index(self) -> dict[str, Any]:
        if self._anchors is None:
            self._anchors = {}
            stack: list[Any] = [self.root]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    for key in ("$anchor", "$dynamicAnchor"):
                        if isinstance(node.get(key), str):
                            self._anchors.setdefault(node[key], node)
                    if isinstance(node.get("$id"), str) and node["$id"].startswith("#"):
                        self._anchors.setdefault(node["$id"][1:], node)
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)
        return self._anchors

    def expand(self, node: Any, path: str, chain: tuple[str, ...] = (), depth: int = 0) -> Any:
        """``node`` with its ``$ref``s inlined; ``chain`` holds the $refs being expanded around it."""
        if not isinstance(node, dict):
            return node
        self.budget -= 1
        if depth > _MAX_SCHEMA_DEPTH:
            self.notes.add(f"cut the schema below {_MAX_SCHEMA_DEPTH} levels{at_path(path)}")
            return {}
        node = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
        ref = next((node[k] for k in _REF_KEYS if isinstance(node.get(k), str)), None)

        def child(value: Any, _keyword: str, child_path: str) -> Any:
            return self.expand(value, child_path, chain, depth + 1)

        if ref is None:
            return map_children(node, child, path)
        siblings = {k: v for k, v in node.items() if k not in _REF_KEYS}
        found, target = self.resolve(ref)
        if not found or not isinstance(target, (dict, bool)):
            self.note("unresolvable", ref, f"unresolvable $ref {ref}{at_path(path)} replaced by {{}}")
            replacement: Any = {}
        elif isinstance(target, bool):
            replacement = {} if target else {"not": {}}
        elif ref in chain:
            replacement = _cycle_stub(target)
            self.note(
                "cycle",
                ref,
                f"recursive $ref {ref} cut{at_path(path)} (replaced by {json.dumps(replacement)})",
            )
        elif len(chain) >= _MAX_REF_CHAIN or self.budget <= 0:
            replacement = _cycle_stub(target)
            why = f"more than {_MAX_REF_CHAIN} $refs deep" if self.budget > 0 else "the schema is too large"
            self.note(
                "cut",
                ref,
                f"$ref {ref}{at_path(path)} not inlined: {why} (replaced by {json.dumps(replacement)})",
            )
        else:
            self.notes.add(f"inlined $ref {ref}")
            replacement = self.expand(target, path, (*chain, ref), depth)
        return _merge_ref(replacement, map_children(siblings, child, path))


def _cycle_stub(target: JSONObject) -> JSONSchema:
    """What stands in for a $ref that is not inlined: only the target's type."""
    kind = target.get("type")
    if isinstance(kind, (str, list)):
        return {"type": kind}
    return {"type": "object"} if "properties" in target else {}


def _merge_ref(target: Any, siblings: JSONObject) -> Any:
    """``$ref`` plus sibling keywords: the siblings win, ``properties`` and ``required`` are merged."""
    if not siblings:
        return target
    if not isinstance(target, dict):
        return siblings
    merged = dict(target)
    for key, value in siblings.items():
        if key == "properties" and isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = {**merged[key], **value}
        elif key == "required" and isinstance(merged.get(key), list) and isinstance(value, list):
            merged[key] = list(dict.fromkeys([*merged[key], *value]))
        else:
            merged[key] = value
    return merged


# ---------------------------------------------------------------------- nodes
#
# What every schema pass shares: where subschemas sit, JSON types, and the notes of a compile.
#
# A JSON Schema node holds subschemas under a few keywords (one schema, a map of them or a list of
# them); everything else (``enum``, ``const``, ``default``, ``examples``...) is data and is never
# walked. ``map_children`` applies a function to each direct subschema; ``infer_type`` reads the
# type an untyped schema evidently means; ``allow_null`` widens a schema to accept null; ``Notes``
# collects the short sentences a compile reports as ``changes``. Pure functions, no I/O, used by
# normalisation, the dialects, coercion and the error reports alike.
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
