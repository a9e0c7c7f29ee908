"""Tool schemas: normalisation, per-provider dialects, and the argument pipeline (pure, no I/O).

``compile_tool_schema`` turns any MCP ``inputSchema`` into one normalised JSON Schema (Draft
2020-12, root ``type: object``, every ``$ref`` inlined, draft-04/07 spellings upgraded, invalid
keywords dropped) and four wire forms, each with a note of what was changed:

- ``openai``: the default (non-strict) form. The root's ``anyOf``/``oneOf``/``allOf`` are lifted
  into its properties (the alternatives are described in the root ``description``), the root's
  ``enum``, ``const`` and ``not`` are dropped (OpenAI rejects them at the top) and every object
  gets ``properties``. Everything else is kept: non-strict mode accepts it.
- ``openai_strict``: only when the strict rules keep the meaning. Optional properties become
  required and nullable; this is safe because the argument pipeline drops a ``null`` the model
  sends for an optional property whose schema does not allow null, so the tool sees the property
  left out, as the schema intends. A property that already allowed null keeps ``null`` and so is
  only safe when its default is null or absent. Open maps, ``not``, conditionals, tuple arrays,
  untyped values, arrays without ``items`` and several types at once have no strict form: then
  the variant is left out and the provider sends non-strict. ``oneOf`` becomes ``anyOf`` and a
  mergeable ``allOf`` is folded (the real schema still validates); ``minLength``/``maxLength``,
  ``uniqueItems`` and formats strict mode lacks move into the description as hints.
- ``anthropic``: the root's ``anyOf``/``oneOf``/``allOf`` lifted as for OpenAI; otherwise full
  JSON Schema.
- ``gemini``: the OpenAPI-3.0 ``parameters`` subset: whitelisted keys only; type arrays and
  ``anyOf [X, null]`` become ``X`` + ``nullable``; ``oneOf`` → ``anyOf``, ``allOf`` merged,
  ``const`` → one-value ``enum``; enum values stringified (a non-string enum is sent as a string
  enum, and the pipeline turns ``"2"`` back into ``2``), ``""`` dropped; missing types inferred
  (``string`` when nothing says); a nested object without properties becomes a JSON string,
  which the pipeline parses back. A tool without parameters keeps ``{"type": "object",
  "properties": {}}``: Gemini wants no ``parameters`` at all then, which is the adapter's call.

The argument pipeline (``ArgumentChecker.check``) coerces by schema before it validates, and
never touches a value that already validates: numeric text to numbers, ``"true"``/``"false"``
to booleans, ``"null"`` to null, numbers and booleans to text where a string is wanted, JSON text
to arrays and objects, a single value to a one-item array, the text of an enum value to that
value (and a string to the one enum string equal to it but for case); ``anyOf``/``oneOf``/type
lists are tried in turn. An optional property whose schema refuses ``null`` (or ``""``) and gets
it is dropped. Then ``jsonschema`` validates (Draft 2020-12, formats not checked: the server
has the last word on those) and every violation is reported with its JSON-pointer path.
"""

from __future__ import annotations

import copy
import difflib
import json
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import jsonschema

from .._json import canonical_json
from .._types import JSONObject, JSONSchema

logger = logging.getLogger(__name__)

DIALECTS = ("openai", "openai_strict", "anthropic", "gemini")
"""The wire forms ``CompiledSchema.variants`` may hold (``openai_strict`` only when safe)."""

_MAX_JSON_DEPTH = 100  # input nesting kept; deeper parts are cut
_MAX_SCHEMA_DEPTH = 48  # schema nesting after inlining $refs
_MAX_REF_CHAIN = 16  # $refs expanded inside one another
_MAX_INLINED_NODES = 5_000  # schema nodes visited while inlining, against exponential blow-up
_MAX_CHANGES = 100  # notes kept per compile; the rest are counted
_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_TYPE_ALIASES = {"str": "string", "text": "string", "int": "integer", "long": "integer", "float": "number",
                 "double": "number", "bool": "boolean", "dict": "object", "map": "object", "list": "array",
                 "none": "null"}
_EMPTY: JSONSchema = {"type": "object", "properties": {}}

# Where subschemas sit. Anything else (enum, const, default, examples...) is data, never walked.
_ONE = frozenset({"items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "additionalItems",
                  "contains", "propertyNames", "not", "if", "then", "else", "contentSchema"})
_MAP = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})
_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_BOOL_OK = frozenset({"additionalProperties", "unevaluatedProperties", "items", "unevaluatedItems"})
_META_KEYS = ("$schema", "$id", "$comment", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "$ref",
              "$dynamicRef", "$recursiveRef", "$defs", "definitions")  # whatever inlining left is dropped
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")

# What each keyword's value must be (the Draft 2020-12 meta-schema, checked by hand: fast).
_NUMBER_KEYS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNT_KEYS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minContains", "maxContains",
                         "minProperties", "maxProperties"})
_STRING_KEYS = frozenset({"title", "description", "format", "contentEncoding", "contentMediaType"})
_BOOLEAN_KEYS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})


class _Notes:
    """The ``changes`` of one compile: short sentences, each once, in order, at most 100 listed."""

    def __init__(self) -> None:
        self._items: dict[str, None] = {}
        self._more = 0

    def add(self, text: str) -> None:
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


def _join(path: str, *parts: str) -> str:
    return ".".join(p for p in (path, *parts) if p)


def _at(path: str) -> str:
    return f" at {path}" if path else ""


def _map_children(node: JSONObject, fn: Callable[[Any, str, str], Any], path: str) -> JSONObject:
    """A copy of ``node`` with ``fn(subschema, keyword, path)`` applied to each direct subschema."""
    out: JSONObject = {}
    for key, value in node.items():
        if key in _ONE and not (key == "items" and isinstance(value, list)):
            out[key] = fn(value, key, _join(path, key))
        elif key in _MAP and isinstance(value, dict):
            out[key] = {k: fn(v, key, _join(path, key, k)) for k, v in value.items()}
        elif (key in _LIST or key == "items") and isinstance(value, list):
            out[key] = [fn(v, key, _join(path, key, str(i))) for i, v in enumerate(value)]
        elif key == "dependencies" and isinstance(value, dict):  # draft-07: schemas or name lists
            out[key] = {k: v if isinstance(v, list) else fn(v, key, _join(path, key, k)) for k, v in value.items()}
        else:
            out[key] = value
    return out


# --- normalisation -----------------------------------------------------------------------------


def _jsonify(value: Any, depth: int, notes: _Notes) -> Any:
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


class _Inliner:
    """Replaces every ``$ref`` with a copy of its target, resolved against the original document."""

    def __init__(self, root: JSONObject, notes: _Notes) -> None:
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
        if not isinstance(node, dict):
            return node
        self.budget -= 1
        if depth > _MAX_SCHEMA_DEPTH:
            self.notes.add(f"cut the schema below {_MAX_SCHEMA_DEPTH} levels{_at(path)}")
            return {}
        node = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
        ref = next((node[k] for k in _REF_KEYS if isinstance(node.get(k), str)), None)
        if ref is None:
            return _map_children(node, lambda v, _k, p: self.expand(v, p, chain, depth + 1), path)
        siblings = {k: v for k, v in node.items() if k not in _REF_KEYS}
        found, target = self.resolve(ref)
        if not found or not isinstance(target, (dict, bool)):
            self.note("unresolvable", ref, f"unresolvable $ref {ref}{_at(path)} replaced by {{}}")
            replacement: Any = {}
        elif isinstance(target, bool):
            replacement = {} if target else {"not": {}}
        elif ref in chain:
            replacement = _cycle_stub(target)
            self.note("cycle", ref, f"recursive $ref {ref} cut{_at(path)} (replaced by {json.dumps(replacement)})")
        elif len(chain) >= _MAX_REF_CHAIN or self.budget <= 0:
            replacement = _cycle_stub(target)
            why = f"more than {_MAX_REF_CHAIN} $refs deep" if self.budget > 0 else "the schema is too large"
            self.note("cut", ref, f"$ref {ref}{_at(path)} not inlined: {why} (replaced by {json.dumps(replacement)})")
        else:
            self.notes.add(f"inlined $ref {ref}")
            replacement = self.expand(target, path, (*chain, ref), depth)
        expanded = _map_children(siblings, lambda v, _k, p: self.expand(v, p, chain, depth + 1), path)
        return _merge_ref(replacement, expanded)


def _cycle_stub(target: JSONObject) -> JSONSchema:
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


def _fix_type(value: Any) -> str | list[str] | None:
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


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _regex_ok(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    return True


def _fix_keywords(node: JSONObject, path: str, notes: _Notes) -> None:
    """Upgrade old spellings and drop keyword values the meta-schema rejects (in place)."""
    for key in _META_KEYS:
        if key in node:
            del node[key]
            notes.add(f"removed {key}{_at(path)}")
    if "type" in node:
        fixed = _fix_type(node["type"])
        if fixed is None:
            notes.add(f"dropped unknown type {json.dumps(node['type'])}{_at(path)}")
            del node["type"]
        elif fixed != node["type"]:
            notes.add(f"type {json.dumps(node['type'])} read as {json.dumps(fixed)}{_at(path)}")
            node["type"] = fixed
    if "nullable" in node:  # OpenAPI 3.0
        if node.pop("nullable") is True:
            _allow_null(node)
            notes.add(f"nullable: true turned into a null type{_at(path)}")
        else:
            notes.add(f"removed nullable{_at(path)}")
    for key, base in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(key), bool):  # draft-04
            if node.pop(key) and _is_number(node.get(base)):
                node[key] = node.pop(base)
            notes.add(f"draft-04 {key} upgraded{_at(path)}")
    if isinstance(node.get("items"), list):  # draft-07 tuple
        node["prefixItems"] = node.pop("items")
        if "additionalItems" in node:
            node["items"] = node.pop("additionalItems")
        notes.add(f"array form of items turned into prefixItems{_at(path)}")
    if "additionalItems" in node:
        del node["additionalItems"]
        notes.add(f"removed additionalItems{_at(path)}")
    if "dependencies" in node:  # draft-07
        dependencies = node.pop("dependencies")
        for name, dep in dependencies.items() if isinstance(dependencies, dict) else ():
            target = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
            if isinstance(node.get(target, {}), dict):
                node.setdefault(target, {})[name] = dep
        notes.add(f"dependencies split into dependentRequired/dependentSchemas{_at(path)}")
    props = node.get("properties")
    if isinstance(props, dict):  # draft-03 "required": true on a property
        flagged = [k for k, v in props.items() if isinstance(v, dict) and isinstance(v.get("required"), bool)]
        for name in flagged:
            sub = props[name] = dict(props[name])
            if sub.pop("required"):
                required = node.get("required")
                node["required"] = [*(required if isinstance(required, list) else []), name]
            notes.add(f"property-level required moved to the parent{_at(_join(path, 'properties', name))}")
    for key, value in list(node.items()):
        if not _value_ok(key, value):
            del node[key]
            notes.add(f"dropped invalid {key}{_at(path)}")
    for key in ("required", "dependentRequired"):
        if key in node:
            node[key] = _clean_names(node[key]) if key == "required" else {
                k: _clean_names(v) for k, v in node[key].items()}
    for key in _COUNT_KEYS & node.keys():
        node[key] = int(node[key])
    if "patternProperties" in node:
        node["patternProperties"] = {k: v for k, v in node["patternProperties"].items() if _regex_ok(k)}
    if node.get("enum") == []:
        del node["enum"]
        notes.add(f"dropped empty enum{_at(path)}")


def _value_ok(key: str, value: Any) -> bool:
    if key in _NUMBER_KEYS:
        return _is_number(value)
    if key == "multipleOf":
        return _is_number(value) and value > 0
    if key in _COUNT_KEYS:
        return _is_number(value) and value >= 0 and _is_whole(value)
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
    if key in _MAP:
        return isinstance(value, dict)
    if key in _LIST:
        return isinstance(value, list) and bool(value)
    return True


def _clean_names(value: list[Any]) -> list[str]:
    return list(dict.fromkeys(v for v in value if isinstance(v, str)))


def _allow_null(node: JSONObject) -> None:
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


def _fix(value: Any, keyword: str, path: str, notes: _Notes) -> Any:
    """Normalise one subschema (recursively). Never raises."""
    if isinstance(value, bool):
        if keyword in _BOOL_OK:
            return value
        return {} if value else {"not": {}}
    if keyword == "properties" and isinstance(value, str) and _fix_type(value) is not None:
        notes.add(f"shorthand {json.dumps(value)} read as a type{_at(path)}")
        return {"type": _fix_type(value)}
    if not isinstance(value, dict):
        notes.add(f"invalid subschema{_at(path)} replaced by {{}}")
        return {}
    node = dict(value)
    _fix_keywords(node, path, notes)
    return _map_children(node, lambda v, k, p: _fix(v, k, p, notes), path)


def _infer_type(node: JSONObject) -> str | None:
    """The type a schema without ``type`` evidently means, from its keywords."""
    keys = node.keys()
    if keys & {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
               "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas"}:
        return "object"
    if keys & {"items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"}:
        return "array"
    if keys & {"minLength", "maxLength", "pattern", "format"}:
        return "string"
    if keys & {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}:
        return "number"
    values = node["enum"] if isinstance(node.get("enum"), list) else [node["const"]] if "const" in node else []
    kinds = {_json_type(v) for v in values}
    return kinds.pop() if len(kinds) == 1 else None


def _json_type(value: Any) -> str:
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


def _normalise(schema: Any, notes: _Notes) -> JSONSchema:
    """The validation schema: a Draft 2020-12 object schema with no ``$ref``. Never raises."""
    if schema is None or schema == {} or schema is True:
        notes.add("no inputSchema: no parameters")
        return copy.deepcopy(_EMPTY)
    if not isinstance(schema, dict):
        notes.add(f"inputSchema was {type(schema).__name__}, not an object: no parameters")
        return copy.deepcopy(_EMPTY)
    root = _jsonify(schema, 0, notes)
    root = _Inliner(root, notes).expand(root, "")
    if "$defs" in schema or "definitions" in schema:
        notes.add("removed $defs")
    root = _fix(root, "", "", notes) if isinstance(root, dict) else {}
    kind = root.get("type")
    if kind is None:
        inferred = _infer_type(root)
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


def _wrap(root: JSONSchema, kind: str, notes: _Notes) -> JSONSchema:
    notes.add(f"root schema of type {kind} wrapped as the object property 'value'")
    return {"type": "object", "properties": {"value": root}, "required": ["value"]}


# --- dialects ----------------------------------------------------------------------------------


def _lift_root(schema: JSONSchema, dialect: str, drop: Iterable[str], notes: _Notes) -> JSONSchema:
    """Move the root's anyOf/oneOf/allOf into its properties; drop the root keys in ``drop``."""
    out = copy.deepcopy(schema)
    props: JSONObject = out.setdefault("properties", {})
    required: list[str] = list(out.get("required", []))
    for branch in out.pop("allOf", []):
        if isinstance(branch, dict):
            for name, sub in branch.get("properties", {}).items():
                props.setdefault(name, sub)
            required += [r for r in branch.get("required", []) if r not in required]
        notes.add(f"{dialect}: merged the top-level allOf into the root")
    for key in ("anyOf", "oneOf"):
        branches = [b for b in out.pop(key, []) if isinstance(b, dict)]
        if not branches:
            continue
        alternatives = []
        for branch in branches:
            for name, sub in branch.get("properties", {}).items():
                if name not in props:
                    props[name] = sub
                elif props[name] != sub and sub not in props[name].get("anyOf", [props[name]]):
                    props[name] = {"anyOf": [*props[name].get("anyOf", [props[name]]), sub]}
            names = branch.get("required") or list(branch.get("properties", {}))
            alternatives.append(", ".join(names) if names else "no arguments")
        common = set.intersection(*(set(b.get("required", [])) for b in branches))
        required += [r for r in sorted(common) if r not in required]
        hint = "Arguments must match one of: " + "; ".join(f"({i}) {a}" for i, a in enumerate(alternatives, 1))
        out["description"] = f"{out['description']} {hint}" if out.get("description") else hint
        notes.add(f"{dialect}: lifted the top-level {key} ({len(branches)} alternatives) into properties")
    if required:
        out["required"] = required
    for key in drop:
        if key in out:
            del out[key]
            notes.add(f"{dialect}: dropped the top-level {key}")
    return out


def _openai(schema: JSONSchema, notes: _Notes) -> JSONSchema:
    def visit(node: Any, _key: str, path: str) -> Any:
        if not isinstance(node, dict):
            return node
        node = _map_children(node, visit, path)
        if node.get("type") == "object" and "properties" not in node:
            node["properties"] = {}
            notes.add(f"openai: added properties: {{}}{_at(path)}")
        return node

    out: JSONSchema = visit(_lift_root(schema, "openai", ("enum", "const", "not"), notes), "", "")
    return out


_STRICT_FATAL = ("not", "if", "then", "else", "patternProperties", "propertyNames", "minProperties",
                 "maxProperties", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
                 "unevaluatedItems", "prefixItems", "contains", "minContains", "maxContains", "contentSchema")
_STRICT_KEEP = frozenset({"type", "description", "title", "default", "enum", "pattern", "minimum", "maximum",
                          "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"})
_STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_STRICT_HINTS = {"minLength": "at least {} characters", "maxLength": "at most {} characters",
                 "format": "format: {}", "uniqueItems": "items must be unique"}
_STRICT_MAX_DEPTH = 10
_STRICT_MAX_ENUM = 1000


class _NotStrict(Exception):
    """This schema has no strict form that keeps its meaning (internal)."""


def _allows_null(schema: Any) -> bool:
    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(None))
    except Exception:  # an odd schema: play safe
        return True


def _strict(node: Any, path: str, depth: int, notes: _Notes) -> JSONSchema:
    where = path or "the root"
    if not isinstance(node, dict) or not node:
        raise _NotStrict(f"a value of any type at {where}")
    node = dict(node)
    fatal = [k for k in _STRICT_FATAL if k in node]
    if fatal:
        raise _NotStrict(f"{fatal[0]} at {where}")
    if "allOf" in node:
        for branch in node.pop("allOf"):
            if not isinstance(branch, dict) or any(k in node and node[k] != v for k, v in branch.items()):
                raise _NotStrict(f"an allOf that cannot be merged at {where}")
            node.update(branch)
        notes.add(f"openai_strict: folded allOf{_at(path)}")
    if "oneOf" in node:
        if "anyOf" in node:
            raise _NotStrict(f"oneOf next to anyOf at {where}")
        node["anyOf"] = node.pop("oneOf")
        notes.add(f"openai_strict: oneOf turned into anyOf{_at(path)}")
    if "const" in node:
        if "enum" in node:
            raise _NotStrict(f"const next to enum at {where}")
        node["enum"] = [node.pop("const")]
    if len(node.get("enum", ())) > _STRICT_MAX_ENUM:
        raise _NotStrict(f"more than {_STRICT_MAX_ENUM} enum values at {where}")
    if node.get("default", 0) is None:
        del node["default"]
    if "type" not in node and "enum" in node:
        inferred = _infer_type(node)
        if inferred is None:
            raise _NotStrict(f"an enum of mixed types at {where}")
        node["type"] = inferred
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if len([k for k in kinds if k != "null"]) > 1:
        raise _NotStrict(f"several types at {where}")
    if not kinds and "anyOf" not in node:
        raise _NotStrict(f"a value of any type at {where}")
    out: JSONSchema = {k: v for k, v in node.items() if k in _STRICT_KEEP}
    hints = []
    for key, text in _STRICT_HINTS.items():
        value = node.get(key)
        if value is None or value is False or (key == "format" and value in _STRICT_FORMATS):
            continue
        hints.append(text.format(value))
    if "format" in node and node["format"] in _STRICT_FORMATS:
        out["format"] = node["format"]
    if hints:
        out["description"] = f"{out.get('description', '')} ({'; '.join(hints)})".strip()
        notes.add(f"openai_strict: {', '.join(k for k in _STRICT_HINTS if k in node)} moved to the description"
                  f"{_at(path)}")
    if "anyOf" in node:
        out["anyOf"] = [_strict(b, _join(path, "anyOf", str(i)), depth, notes) for i, b in enumerate(node["anyOf"])]
    if "object" in kinds or "properties" in node:
        if depth >= _STRICT_MAX_DEPTH:
            raise _NotStrict(f"objects nested deeper than {_STRICT_MAX_DEPTH} levels at {where}")
        if node.get("additionalProperties", False) is not False:
            raise _NotStrict(f"an open map (additionalProperties) at {where}")
        props = node.get("properties", {})
        required = node.get("required", [])
        if not props and depth and node.get("additionalProperties") is not False:
            raise _NotStrict(f"an object of any shape at {where}")
        if any(r not in props for r in required):
            raise _NotStrict(f"required names an undeclared property at {where}")
        out_props: JSONObject = {}
        optional = []
        for name, sub in props.items():
            strict_sub = _strict(sub, _join(path, "properties", name), depth + 1, notes)
            if name not in required:
                if _allows_null(sub) and sub.get("default") is not None:
                    raise _NotStrict(f"optional {name!r} allows null and has a default at {where}")
                strict_sub = _nullable(strict_sub)
                optional.append(name)
            out_props[name] = strict_sub
        if optional:
            notes.add(f"openai_strict: optional {', '.join(optional)} made required and nullable{_at(path)}")
        out.update(properties=out_props, required=list(props), additionalProperties=False)
        if "type" not in out:
            out["type"] = "object"
    if "array" in kinds:
        items = node.get("items")
        if not isinstance(items, dict) or not items:
            raise _NotStrict(f"an array of any items at {where}")
        out["items"] = _strict(items, _join(path, "items"), depth, notes)
    return out


def _nullable(schema: JSONSchema) -> JSONSchema:
    schema = dict(schema)
    if "anyOf" in schema and "type" not in schema:
        if not any(b.get("type") == "null" for b in schema["anyOf"]):
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
        return schema
    _allow_null(schema)
    return schema


def _openai_strict(schema: JSONSchema, notes: _Notes) -> JSONSchema | None:
    local = _Notes()
    try:
        for key in ("anyOf", "oneOf", "allOf", "enum", "const", "not"):
            if key in schema:
                raise _NotStrict(f"top-level {key}")
        strict = _strict(schema, "", 0, local)
        if len(canonical_json(strict)) > 120_000:
            raise _NotStrict("over 120,000 characters")
    except _NotStrict as exc:
        notes.add(f"openai_strict: not offered ({exc})")
        return None
    for note in local:
        notes.add(note)
    return strict


_GEMINI_KEYS = frozenset({"type", "format", "title", "description", "nullable", "enum", "items", "minItems",
                          "maxItems", "properties", "required", "minProperties", "maxProperties", "minLength",
                          "maxLength", "pattern", "example", "anyOf", "propertyOrdering", "minimum", "maximum"})
"""Gemini ``parameters`` keys (OpenAPI-3.0 Schema subset; ``default`` left out on purpose)."""
_GEMINI_FORMATS = {"string": {"enum", "date-time"}, "number": {"float", "double"}, "integer": {"int32", "int64"}}
_TYPE_KEYS = {"string": ("minLength", "maxLength", "pattern", "format"), "array": ("items", "minItems", "maxItems"),
              "object": ("properties", "required", "minProperties", "maxProperties"),
              "number": ("minimum", "maximum"), "integer": ("minimum", "maximum")}


def _gemini(schema: Any, path: str, notes: _Notes, root: bool = False) -> JSONSchema:
    def note(text: str) -> None:
        notes.add(f"gemini: {text}{_at(path)}")

    node: JSONObject = dict(schema) if isinstance(schema, dict) else {}
    while "allOf" in node:
        for branch in node.pop("allOf"):
            props = {**branch.get("properties", {}), **node.get("properties", {})}
            required = list(dict.fromkeys([*node.get("required", []), *branch.get("required", [])]))
            node = {**branch, **node}
            node.update({k: v for k, v in (("properties", props), ("required", required)) if v})
        note("merged allOf")
    if "oneOf" in node:
        node.setdefault("anyOf", node["oneOf"])
        del node["oneOf"]
        note("oneOf turned into anyOf")
    nullable = False
    kind = node.get("type")
    if isinstance(kind, list):
        nullable = "null" in kind
        kinds = [k for k in kind if k != "null"]
        if len(kinds) <= 1:
            node["type"] = kinds[0] if kinds else "string"
        else:
            node.pop("type")
            node["anyOf"] = [{"type": k, **{x: node.pop(x) for x in _TYPE_KEYS.get(k, ()) if x in node}}
                             for k in kinds]
        note(f"type {json.dumps(kind)} turned into " + ("nullable" if len(kinds) <= 1 else "anyOf"))
    elif kind == "null":
        node["type"], nullable = "string", True
        note("type null sent as a nullable string")
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(branches) < len(node["anyOf"]):
            nullable = True
            note("anyOf with null turned into nullable")
        if len(branches) == 1 and isinstance(branches[0], dict):
            del node["anyOf"]
            node = {**branches[0], **{k: v for k, v in node.items() if k not in ("type",)}}
            return _gemini({**node, **({"nullable": True} if nullable else {})}, path, notes, root)
        node["anyOf"] = branches
        if not branches:
            del node["anyOf"]
    if "const" in node:
        node.setdefault("enum", [node.pop("const")])
        note("const turned into enum")
    if isinstance(node.get("enum"), list):
        values = node["enum"]
        if None in values:
            nullable = True
        strings = [v if isinstance(v, str) else json.dumps(v) for v in values if v is not None]
        strings = list(dict.fromkeys(s for s in strings if s))
        if strings != values:
            note("enum values sent as non-empty strings")
        if any(not isinstance(v, str) for v in values if v is not None) and node.get("type") != "string":
            node["type"] = "string"
        if strings:
            node["enum"] = strings
        else:
            del node["enum"]
    for key, base, step in (("exclusiveMinimum", "minimum", 1), ("exclusiveMaximum", "maximum", -1)):
        if key in node:
            bound = node.pop(key)
            if node.get("type") == "integer" and _is_whole(bound):
                bound = int(bound) + step
            if base not in node or (node[base] < bound if step > 0 else node[base] > bound):
                node[base] = bound
            note(f"{key} turned into {base}")
    if "examples" in node and "example" not in node and node["examples"]:
        node["example"] = node["examples"][0]
    if "anyOf" in node:
        if "type" in node:
            node["anyOf"] = [{"type": node["type"], **b} if "type" not in b else b for b in node["anyOf"]]
            del node["type"]
        node["anyOf"] = [_gemini(b, _join(path, "anyOf", str(i)), notes) for i, b in enumerate(node["anyOf"])]
    elif "type" not in node:
        node["type"] = _infer_type(node) or "string"
        note(f"missing type set to {node['type']}")
    fmt = node.get("format")
    if fmt is not None and fmt not in _GEMINI_FORMATS.get(node.get("type", ""), ()):
        del node["format"]
        note(f"dropped format {fmt}")
    if node.get("type") == "object":
        declared = node.get("properties")
        if not root and not declared:
            node = {"type": "string", **({"description": node["description"]} if "description" in node else {})}
            node["description"] = f"{node.get('description', '')} (a JSON object, as text)".strip()
            note("object without properties sent as JSON text")
        else:
            node["properties"] = {name: _gemini(sub, _join(path, "properties", name), notes)
                                  for name, sub in (declared or {}).items()}
            required = [r for r in node.get("required", []) if r in node["properties"]]
            node.pop("required", None)
            if required:
                node["required"] = required
    else:
        node.pop("properties", None)
        node.pop("required", None)
    if node.get("type") == "array":
        items = node.get("items")
        node["items"] = _gemini(items if isinstance(items, dict) else {}, _join(path, "items"), notes)
    else:
        node.pop("items", None)
    if not (isinstance(node.get("propertyOrdering"), list)
            and all(isinstance(p, str) for p in node["propertyOrdering"])):
        node.pop("propertyOrdering", None)
    dropped = [k for k in node if k not in _GEMINI_KEYS]
    for key in dropped:
        del node[key]
    if dropped:
        note(f"dropped {', '.join(dropped)}")
    if nullable:
        node["nullable"] = True
    return node


# --- compile -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompiledSchema:
    """A tool's input schema, normalised and compiled for each provider dialect.

    Attributes:
        parameters: the normalised schema: what arguments are validated against, and the wire
            form for servers with no dialect of their own (local OpenAI-compatible ones use
            ``variants["openai"]``).
        variants: the wire form per dialect (:data:`DIALECTS`); ``openai_strict`` is present only
            when the strict form keeps the schema's meaning.
        changes: what was changed, as short sentences; dialect ones start with the dialect.
    """

    parameters: JSONSchema
    variants: dict[str, JSONSchema] = field(default_factory=dict)
    changes: tuple[str, ...] = ()


def compile_tool_schema(schema: Any) -> CompiledSchema:
    """Normalise an MCP ``inputSchema`` and compile it for every dialect.

    Args:
        schema: the tool's ``inputSchema`` exactly as the server sent it (anything at all).

    Returns:
        The compiled schema. Never raises: whatever cannot be kept is dropped and noted.
    """
    notes = _Notes()
    try:
        parameters = _normalise(schema, notes)
        variants = {"openai": _openai(parameters, notes)}
        strict = _openai_strict(parameters, notes)
        if strict is not None:
            variants["openai_strict"] = strict
        variants["anthropic"] = _lift_root(parameters, "anthropic", (), notes)
        lifted = _lift_root(parameters, "gemini", ("enum", "const", "not"), notes)
        variants["gemini"] = _gemini(lifted, "", notes, root=True)
    except Exception as exc:  # a bug here must not cost the tool: fall back to no parameters
        logger.exception("could not compile a tool schema")
        empty = copy.deepcopy(_EMPTY)
        return CompiledSchema(
            parameters=empty,
            variants={d: copy.deepcopy(_EMPTY) for d in DIALECTS if d != "openai_strict"},
            changes=(f"schema could not be compiled ({type(exc).__name__}): no parameters",),
        )
    return CompiledSchema(parameters=parameters, variants=variants, changes=tuple(notes))


# --- the argument pipeline ---------------------------------------------------------------------

_INTEGER_TEXT = re.compile(r"\s*[-+]?[0-9]+\s*")
_NUMBER_TEXT = re.compile(r"\s*[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*")
_TRY_ORDER = ("integer", "number", "boolean", "null", "object", "array", "string")
_NO = object()
_MAX_RECEIVED_CHARS = 200
_MAX_LISTED = 20


@dataclass(frozen=True)
class ArgumentCheck:
    """The outcome of the argument pipeline.

    Attributes:
        arguments: the arguments after coercion: what is sent to the tool when ``ok``.
        errors: one dict per violation: ``path`` (a JSON pointer, ``""`` for the arguments
            object itself), ``message``, ``expected`` and, except for a missing property,
            ``received`` (the value found, shortened to a note when large).
    """

    arguments: JSONObject
    errors: tuple[JSONObject, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the arguments are valid."""
        return not self.errors


class ArgumentChecker:
    """Coerces and validates arguments against one tool's schema.

    The schema is normalised and its validator compiled once, here; ``check`` is then cheap,
    and cheapest for arguments that are already valid. Use :func:`checker_for` to share one
    checker per schema.

    Args:
        schema: the tool's input schema, raw or already normalised (``CompiledSchema.parameters``).
    """

    def __init__(self, schema: JSONSchema) -> None:
        self.schema = _normalise(schema, _Notes())
        self._validator = jsonschema.Draft202012Validator(self.schema)
        self._validators: dict[int, Any] = {}

    def check(self, arguments: JSONObject) -> ArgumentCheck:
        """Coerce ``arguments`` by the schema, then validate them.

        Never raises: when the validator itself fails on an odd schema, the arguments pass
        unchanged and the server judges them.
        """
        if not isinstance(arguments, dict):
            return ArgumentCheck({}, ({"path": "", "message": "the arguments must be a JSON object",
                                       "expected": "object", "received": _shorten(arguments)},))
        try:
            if self._validator.is_valid(arguments):
                return ArgumentCheck(arguments)
            coerced = self._coerce(arguments, self.schema, known_invalid=True)
            errors = _describe(self._validator.iter_errors(coerced))
        except Exception:
            logger.warning("argument validation failed on schema %s", canonical_json(self.schema)[:200],
                           exc_info=True)
            return ArgumentCheck(arguments)
        return ArgumentCheck(coerced, errors)

    def _valid(self, value: Any, schema: Any) -> bool:
        if isinstance(schema, bool):
            return schema
        validator = self._validators.get(id(schema))
        if validator is None:
            validator = self._validators[id(schema)] = self._validator.evolve(schema=schema)
        return bool(validator.is_valid(value))

    def _coerce(self, value: Any, schema: Any, known_invalid: bool = False) -> Any:
        """``value`` made to fit ``schema`` where a known coercion does it; else as it was."""
        if not isinstance(schema, dict) or (not known_invalid and self._valid(value, schema)):
            return value
        for branch in schema.get("allOf", ()):
            value = self._coerce(value, branch)
        kinds = _wanted_types(schema)
        candidates = []
        structural = _NO
        if isinstance(value, dict) and "object" in kinds:
            structural = self._coerce_object(value, schema)
        elif isinstance(value, list) and "array" in kinds:
            structural = self._coerce_array(value, schema)
        if structural is not _NO:
            candidates.append(structural)
        for kind in _TRY_ORDER:
            if kind in kinds:
                converted = _convert(value, kind)
                if converted is not _NO:
                    candidates.append(self._coerce(converted, schema) if kind in ("object", "array") else converted)
        candidates += _enum_matches(value, schema)
        for key in ("anyOf", "oneOf"):
            for branch in schema.get(key, ()):
                candidate = self._coerce(value, branch)
                if candidate is not value:
                    candidates.append(candidate)
        for candidate in candidates:
            if self._valid(candidate, schema):
                return candidate
        return structural if structural is not _NO else value

    def _coerce_object(self, value: JSONObject, schema: JSONSchema) -> JSONObject:
        props = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties")
        out: JSONObject = {}
        for name, item in value.items():
            if name in props:
                if (item is None or item == "") and name not in required and not self._valid(item, props[name]):
                    continue  # an optional property "left out" the way models do it
                out[name] = self._coerce(item, props[name])
            else:
                out[name] = self._coerce(item, extra) if isinstance(extra, dict) else item
        return out

    def _coerce_array(self, value: list[Any], schema: JSONSchema) -> list[Any]:
        prefix = schema.get("prefixItems", [])
        items = schema.get("items")
        out = []
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else items
            out.append(self._coerce(item, sub) if isinstance(sub, dict) else item)
        return out


def _wanted_types(schema: JSONSchema) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        kinds = {kind}
    elif isinstance(kind, list):
        kinds = set(kind)
    else:
        inferred = _infer_type(schema)
        kinds = {inferred} if inferred else set()
    return kinds


def _convert(value: Any, kind: str) -> Any:
    """``value`` converted to JSON type ``kind`` by one known coercion, or ``_NO``."""
    if isinstance(value, str) and len(value) <= 1000:
        text = value.strip()
        if kind in ("integer", "number") and _NUMBER_TEXT.fullmatch(value):
            if _INTEGER_TEXT.fullmatch(value):
                return int(text)
            number = float(text)
            if kind == "integer" and number.is_integer() and abs(number) < 2**53:
                return int(number)
            if kind == "number" and math.isfinite(number):
                return number
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind == "null" and text.lower() == "null":
            return None
        if kind in ("object", "array") and text[:1] in "[{" and text:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict if kind == "object" else list):
                return parsed
    if kind == "array" and value is not None and not isinstance(value, list):
        return [value]
    if kind == "string" and _is_number(value):
        return json.dumps(value)
    if kind == "string" and isinstance(value, bool):
        return "true" if value else "false"
    return _NO


def _enum_matches(value: Any, schema: JSONSchema) -> list[Any]:
    """Enum values ``value`` is the text of (``"2"`` → 2), or equals but for case."""
    if not isinstance(value, str):
        return []
    options = schema["enum"] if isinstance(schema.get("enum"), list) else (
        [schema["const"]] if "const" in schema else [])
    text = value.strip()
    exact = [o for o in options if not isinstance(o, str) and json.dumps(o) == text]
    folded = [o for o in options if isinstance(o, str) and o.casefold() == text.casefold()]
    return exact + (folded if len(folded) == 1 else [])


# --- errors ------------------------------------------------------------------------------------


def _pointer(parts: Iterable[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _shorten(value: Any) -> Any:
    text = canonical_json(value)
    if len(text) <= _MAX_RECEIVED_CHARS:
        return value
    return f"{text[:_MAX_RECEIVED_CHARS]}... ({len(text)} characters in all)"


def _summary(schema: Any) -> str:
    """A few words on what ``schema`` accepts: ``integer``, ``one of "a", "b"``, ``object``."""
    if not isinstance(schema, dict):
        return "anything" if schema else "nothing"
    if "const" in schema:
        return f"exactly {canonical_json(schema['const'])}"
    if isinstance(schema.get("enum"), list):
        values = schema["enum"]
        listed = ", ".join(canonical_json(v) for v in values[:_MAX_LISTED])
        return f"one of {listed}" + (f" (and {len(values) - _MAX_LISTED} more)" if len(values) > _MAX_LISTED else "")
    kind = schema.get("type")
    if isinstance(kind, list):
        text = " or ".join(kind)
    elif isinstance(kind, str):
        text = kind
    elif "anyOf" in schema or "oneOf" in schema:
        branches: list[Any] = schema.get("anyOf") or schema.get("oneOf") or []
        return " | ".join(_summary(b) for b in branches)
    else:
        text = _infer_type(schema) or "any value"
    if kind == "array" and isinstance(schema.get("items"), dict):
        text += f" of {_summary(schema['items'])}"
    if isinstance(schema.get("format"), str):
        text += f" (format {schema['format']})"
    return text


_BOUNDS = {"minimum": ">= {}", "maximum": "<= {}", "exclusiveMinimum": "> {}", "exclusiveMaximum": "< {}",
           "minLength": "at least {} characters", "maxLength": "at most {} characters",
           "minItems": "at least {} items", "maxItems": "at most {} items",
           "minProperties": "at least {} properties", "maxProperties": "at most {} properties",
           "multipleOf": "a multiple of {}"}


def _describe(errors: Iterable[jsonschema.ValidationError]) -> tuple[JSONObject, ...]:
    out: list[JSONObject] = []
    seen: set[tuple[str, str]] = set()
    for error in errors:
        path = list(error.absolute_path)
        keyword = str(error.validator)
        schema = error.schema if isinstance(error.schema, dict) else {}
        instance = error.instance
        value = error.validator_value
        if keyword == "required" and isinstance(instance, dict) and isinstance(value, list):
            props = schema.get("properties", {})
            for name in value:
                if name not in instance and (_pointer([*path, name]), keyword) not in seen:
                    seen.add((_pointer([*path, name]), keyword))
                    out.append({"path": _pointer([*path, name]), "message": "required property is missing",
                                "expected": _summary(props.get(name, True))})
            continue
        if keyword == "additionalProperties" and isinstance(instance, dict) and value is False:
            known = list(schema.get("properties", {}))
            patterns = list(schema.get("patternProperties", {}))
            for name in instance:
                if name in known or any(re.search(p, name) for p in patterns):
                    continue
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                out.append({"path": _pointer([*path, name]), "message": f"unknown property{hint}",
                            "expected": "one of the known properties: " + (", ".join(known) or "(none)"),
                            "received": _shorten(instance[name])})
            continue
        if keyword == "type":
            message, expected = f"wrong type ({_json_type(instance)})", " or ".join(value) if isinstance(
                value, list) else str(value)
        elif keyword in ("enum", "const"):
            message, expected = "not an allowed value", _summary({keyword: value})
        elif keyword in _BOUNDS:
            message, expected = f"out of bounds ({keyword} {canonical_json(value)})", _BOUNDS[keyword].format(
                canonical_json(value))
        elif keyword in ("anyOf", "oneOf"):
            message = "matches none of the allowed shapes" if keyword == "anyOf" else (
                "must match exactly one of the allowed shapes")
            expected = " | ".join(_summary(b) for b in value) if isinstance(value, list) else str(value)
        elif keyword == "pattern":
            message, expected = "does not match the pattern", f"a string matching {value}"
        elif keyword == "items" and value is False:
            message, expected = "too many items", f"at most {len(schema.get('prefixItems', []))} items"
        elif keyword == "uniqueItems":
            message, expected = "items are not unique", "unique items"
        else:
            message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
            expected = f"{keyword}: {canonical_json(value)[:_MAX_RECEIVED_CHARS]}"
        if (_pointer(path), message) in seen:
            continue
        seen.add((_pointer(path), message))
        out.append({"path": _pointer(path), "message": message, "expected": expected,
                    "received": _shorten(instance)})
    out.sort(key=lambda e: e["path"])
    return tuple(out)


def format_errors(name: str, check: ArgumentCheck) -> str:
    """The tool-result text the model reads when its arguments are invalid.

    Args:
        name: the tool's exposed name.
        check: a failed check.

    Returns:
        One line per violation (at most 20 listed), then what to do; ``""`` when ``check`` is ok.
    """
    if check.ok:
        return ""
    count = len(check.errors)
    lines = [f"Invalid arguments for {name} ({count} problem{'s' if count != 1 else ''}):"]
    for error in check.errors[:_MAX_LISTED]:
        line = f"- {error['path'] or '(arguments)'}: {error['message']}; expected {error['expected']}"
        if "received" in error:
            line += f"; received {canonical_json(error['received'])}"
        lines.append(line)
    if count > _MAX_LISTED:
        lines.append(f"- ... and {count - _MAX_LISTED} more")
    lines.append("Call the tool again with corrected arguments.")
    return "\n".join(lines)


_CACHE: OrderedDict[str, ArgumentChecker] = OrderedDict()
_CACHE_SIZE = 512


def checker_for(schema: JSONSchema) -> ArgumentChecker:
    """The shared :class:`ArgumentChecker` for ``schema`` (an LRU cache of 512, keyed by content)."""
    try:
        key = canonical_json(schema)
    except (TypeError, ValueError, RecursionError):
        return ArgumentChecker(schema)
    checker = _CACHE.get(key)
    if checker is None:
        checker = _CACHE[key] = ArgumentChecker(schema)
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return checker
