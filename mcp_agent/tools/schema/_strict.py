"""The ``openai_strict`` dialect: OpenAI's strict function schemas, offered only when safe.

Strict mode wants every object closed (``additionalProperties: false``) with every property
required, and knows only a subset of JSON Schema. Optional properties become required and
nullable; this is safe because the argument pipeline drops a ``null`` the model sends for an
optional property whose schema does not allow null, so the tool sees the property left out, as
the schema intends. A property that already allowed null keeps ``null`` and so is only safe when
its default is null or absent. Open maps, ``not``, conditionals, tuple arrays, untyped values,
arrays without ``items`` and several types at once have no strict form: then the variant is left
out (with a note saying why) and the provider sends non-strict. ``oneOf`` becomes ``anyOf`` and a
mergeable ``allOf`` is folded (the real schema still validates); ``minLength``/``maxLength``,
``uniqueItems`` and formats strict mode lacks move into the description as hints. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from ...messages import JSONObject, JSONSchema, canonical_json
from ._nodes import Notes, allow_null, at_path, infer_type, join_path

_STRICT_FATAL = (
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "contentSchema",
)
_STRICT_KEEP = frozenset(
    {
        "type",
        "description",
        "title",
        "default",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_STRICT_HINTS = {
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "format": "format: {}",
    "uniqueItems": "items must be unique",
}
_STRICT_MAX_DEPTH = 10
_STRICT_MAX_ENUM = 1000


def openai_strict(schema: JSONSchema, notes: Notes) -> JSONSchema | None:
    """The strict form of a normalised schema, or None when strict mode cannot keep its meaning.

    Args:
        schema: the normalised schema; a root ``anyOf``/``oneOf``/``allOf``/``enum``/``const``/
            ``not`` has no strict form.
        notes: where the changes are noted, or why no strict form is offered.

    Returns:
        The strict schema, or None (and a note ``openai_strict: not offered (...)``).
    """
    local = Notes()
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


class _NotStrict(Exception):
    """This schema has no strict form that keeps its meaning (internal)."""


def _allows_null(schema: Any) -> bool:
    """True when ``schema`` accepts null (or is too odd to tell)."""
    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(None))
    except Exception:  # an odd schema: play safe
        return True


def _strict(node: Any, path: str, depth: int, notes: Notes) -> JSONSchema:
    """The strict form of one subschema; raises ``_NotStrict`` naming what has none."""
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
        notes.add(f"openai_strict: folded allOf{at_path(path)}")
    if "oneOf" in node:
        if "anyOf" in node:
            raise _NotStrict(f"oneOf next to anyOf at {where}")
        node["anyOf"] = node.pop("oneOf")
        notes.add(f"openai_strict: oneOf turned into anyOf{at_path(path)}")
    if "const" in node:
        if "enum" in node:
            raise _NotStrict(f"const next to enum at {where}")
        node["enum"] = [node.pop("const")]
    if len(node.get("enum", ())) > _STRICT_MAX_ENUM:
        raise _NotStrict(f"more than {_STRICT_MAX_ENUM} enum values at {where}")
    if node.get("default", 0) is None:
        del node["default"]
    if "type" not in node and "enum" in node:
        inferred = infer_type(node)
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
        notes.add(
            f"openai_strict: {', '.join(k for k in _STRICT_HINTS if k in node)} moved to the description"
            f"{at_path(path)}"
        )
    if "anyOf" in node:
        out["anyOf"] = [
            _strict(b, join_path(path, "anyOf", str(i)), depth, notes) for i, b in enumerate(node["anyOf"])
        ]
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
            strict_sub = _strict(sub, join_path(path, "properties", name), depth + 1, notes)
            if name not in required:
                if _allows_null(sub) and sub.get("default") is not None:
                    raise _NotStrict(f"optional {name!r} allows null and has a default at {where}")
                strict_sub = _nullable(strict_sub)
                optional.append(name)
            out_props[name] = strict_sub
        if optional:
            notes.add(
                f"openai_strict: optional {', '.join(optional)} made required and nullable{at_path(path)}"
            )
        out.update(properties=out_props, required=list(props), additionalProperties=False)
        if "type" not in out:
            out["type"] = "object"
    if "array" in kinds:
        items = node.get("items")
        if not isinstance(items, dict) or not items:
            raise _NotStrict(f"an array of any items at {where}")
        out["items"] = _strict(items, join_path(path, "items"), depth, notes)
    return out


def _nullable(schema: JSONSchema) -> JSONSchema:
    """A copy of a strict ``schema`` that also accepts null."""
    schema = dict(schema)
    if "anyOf" in schema and "type" not in schema:
        if not any(b.get("type") == "null" for b in schema["anyOf"]):
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
        return schema
    allow_null(schema)
    return schema
