"""Provider dialects: the wire forms one normalised tool schema is compiled to.

``compile_variants`` turns the normalised schema into ``openai`` (the default, non-strict form),
``openai_strict`` (only when the strict rules keep the meaning; see ``_strict``),
``anthropic`` (the root's ``anyOf``/``oneOf``/``allOf`` lifted into its properties, as for
OpenAI; otherwise full JSON Schema) and ``gemini`` (the OpenAPI-3.0 ``parameters`` subset). Each
change a dialect makes is noted with the dialect's name first; the normalised schema itself is
never changed. Pure, no I/O.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from ...messages import JSONObject, JSONSchema
from ._nodes import Notes, at_path, infer_type, is_whole, join_path, map_children
from ._strict import openai_strict

_GEMINI_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "minimum",
        "maximum",
    }
)
"""Gemini ``parameters`` keys (OpenAPI-3.0 Schema subset; ``default`` left out on purpose)."""
_GEMINI_FORMATS = {
    "string": {"enum", "date-time"},
    "number": {"float", "double"},
    "integer": {"int32", "int64"},
}
_TYPE_KEYS = {
    "string": ("minLength", "maxLength", "pattern", "format"),
    "array": ("items", "minItems", "maxItems"),
    "object": ("properties", "required", "minProperties", "maxProperties"),
    "number": ("minimum", "maximum"),
    "integer": ("minimum", "maximum"),
}


def compile_variants(parameters: JSONSchema, notes: Notes) -> dict[str, JSONSchema]:
    """Every dialect's wire form of ``parameters`` (``openai_strict`` only when it is safe).

    Args:
        parameters: the normalised schema (``_normalize.normalise``).
        notes: where each dialect notes what it changed.

    Returns:
        The wire forms by dialect name, in the order of ``schema.DIALECTS``.
    """
    variants = {"openai": _openai(parameters, notes)}
    strict = openai_strict(parameters, notes)
    if strict is not None:
        variants["openai_strict"] = strict
    variants["anthropic"] = _lift_root(parameters, "anthropic", (), notes)
    lifted = _lift_root(parameters, "gemini", ("enum", "const", "not"), notes)
    variants["gemini"] = _gemini(lifted, "", notes, root=True)
    return variants


def _lift_root(schema: JSONSchema, dialect: str, drop: Iterable[str], notes: Notes) -> JSONSchema:
    """Move the root's anyOf/oneOf/allOf into its properties; drop the root keys in ``drop``.

    The alternatives of an ``anyOf``/``oneOf`` are described in the root ``description``, and
    the properties every alternative requires are added to the root's ``required``.
    """
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
        hint = "Arguments must match one of: " + "; ".join(
            f"({i}) {a}" for i, a in enumerate(alternatives, 1)
        )
        out["description"] = f"{out['description']} {hint}" if out.get("description") else hint
        notes.add(f"{dialect}: lifted the top-level {key} ({len(branches)} alternatives) into properties")
    if required:
        out["required"] = required
    for key in drop:
        if key in out:
            del out[key]
            notes.add(f"{dialect}: dropped the top-level {key}")
    return out


def _openai(schema: JSONSchema, notes: Notes) -> JSONSchema:
    """The default (non-strict) OpenAI form.

    The root's ``anyOf``/``oneOf``/``allOf`` are lifted into its properties, the root's ``enum``,
    ``const`` and ``not`` are dropped (OpenAI rejects them at the top) and every object gets
    ``properties``. Everything else is kept: non-strict mode accepts it.
    """

    def visit(node: Any, _key: str, path: str) -> Any:
        if not isinstance(node, dict):
            return node
        node = map_children(node, visit, path)
        if node.get("type") == "object" and "properties" not in node:
            node["properties"] = {}
            notes.add(f"openai: added properties: {{}}{at_path(path)}")
        return node

    out: JSONSchema = visit(_lift_root(schema, "openai", ("enum", "const", "not"), notes), "", "")
    return out


def _gemini(schema: Any, path: str, notes: Notes, root: bool = False) -> JSONSchema:
    """The Gemini form: the OpenAPI-3.0 ``parameters`` subset (run on the lifted root).

    Whitelisted keys only; type arrays and ``anyOf [X, null]`` become ``X`` + ``nullable``;
    ``oneOf`` → ``anyOf``, ``allOf`` merged, ``const`` → one-value ``enum``; enum values
    stringified (a non-string enum is sent as a string enum, and the argument pipeline turns
    ``"2"`` back into ``2``), ``""`` dropped; missing types inferred (``string`` when nothing
    says); a nested object without properties becomes a JSON string, which the pipeline parses
    back. A tool without parameters keeps ``{"type": "object", "properties": {}}``: Gemini wants
    no ``parameters`` at all then, which is the adapter's call.
    """

    def note(text: str) -> None:
        notes.add(f"gemini: {text}{at_path(path)}")

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
            node["anyOf"] = [
                {"type": k, **{x: node.pop(x) for x in _TYPE_KEYS.get(k, ()) if x in node}} for k in kinds
            ]
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
            if node.get("type") == "integer" and is_whole(bound):
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
        node["anyOf"] = [
            _gemini(b, join_path(path, "anyOf", str(i)), notes) for i, b in enumerate(node["anyOf"])
        ]
    elif "type" not in node:
        node["type"] = infer_type(node) or "string"
        note(f"missing type set to {node['type']}")
    fmt = node.get("format")
    if fmt is not None and fmt not in _GEMINI_FORMATS.get(node.get("type", ""), ()):
        del node["format"]
        note(f"dropped format {fmt}")
    if node.get("type") == "object":
        declared = node.get("properties")
        if not root and not declared:
            node = {
                "type": "string",
                **({"description": node["description"]} if "description" in node else {}),
            }
            node["description"] = f"{node.get('description', '')} (a JSON object, as text)".strip()
            note("object without properties sent as JSON text")
        else:
            node["properties"] = {
                name: _gemini(sub, join_path(path, "properties", name), notes)
                for name, sub in (declared or {}).items()
            }
            required = [r for r in node.get("required", []) if r in node["properties"]]
            node.pop("required", None)
            if required:
                node["required"] = required
    else:
        node.pop("properties", None)
        node.pop("required", None)
    if node.get("type") == "array":
        items = node.get("items")
        node["items"] = _gemini(items if isinstance(items, dict) else {}, join_path(path, "items"), notes)
    else:
        node.pop("items", None)
    if not (
        isinstance(node.get("propertyOrdering"), list)
        and all(isinstance(p, str) for p in node["propertyOrdering"])
    ):
        node.pop("propertyOrdering", None)
    dropped = [k for k in node if k not in _GEMINI_KEYS]
    for key in dropped:
        del node[key]
    if dropped:
        note(f"dropped {', '.join(dropped)}")
    if nullable:
        node["nullable"] = True
    return node
