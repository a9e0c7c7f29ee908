"""Compiling a tool schema: an MCP ``inputSchema`` once, to every provider's dialect (pure).

``compile_tool_schema`` turns any ``inputSchema`` into a ``CompiledSchema``: one normalised
Draft 2020-12 object schema with every ``$ref`` inlined (``normalize.py``), its wire form for each provider dialect (``compile_variants``
and ``openai_strict``, below) and a note of each change made. ``ArgumentChecker.check`` (shared per schema
through ``checker_for``) is the argument pipeline: it coerces by schema before it validates
(``arguments.Coercer``), and never touches arguments that already validate; then ``jsonschema`` validates
(Draft 2020-12, formats not checked: the server has the last word on those) and every violation
is reported with its JSON-pointer path (``arguments.describe``); ``format_errors`` writes the
report the model reads. Neither compiling nor checking ever raises.
"""

from __future__ import annotations

import copy
import json
import logging
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ...messages import JSONObject, JSONSchema, canonical_json
from .arguments import BOUND_NOUNS, MAX_LISTED, Coercer, bound_text, describe, shorten
from .normalize import (
    EMPTY,
    Notes,
    allow_null,
    at_path,
    infer_type,
    is_whole,
    join_path,
    map_children,
    normalise,
)

logger = logging.getLogger(__name__)

DIALECTS = ("openai", "openai_strict", "anthropic", "gemini")
"""The wire forms ``CompiledSchema.variants`` may hold (``openai_strict`` only when safe)."""


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
    notes = Notes()
    try:
        parameters = normalise(schema, notes)
        variants = compile_variants(parameters, notes)
    except Exception as exc:  # a bug here must not cost the tool: fall back to no parameters
        logger.exception("could not compile a tool schema")
        empty = copy.deepcopy(EMPTY)
        return CompiledSchema(
            parameters=empty,
            variants={d: copy.deepcopy(EMPTY) for d in DIALECTS if d != "openai_strict"},
            changes=(f"schema could not be compiled ({type(exc).__name__}): no parameters",),
        )
    return CompiledSchema(parameters=parameters, variants=variants, changes=tuple(notes))


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
        self.schema = normalise(schema, Notes())
        self._validator = jsonschema.Draft202012Validator(self.schema)
        self._coercer = Coercer(self._validator)

    def check(self, arguments: JSONObject) -> ArgumentCheck:
        """Coerce ``arguments`` by the schema, then validate them.

        Never raises: when the validator itself fails on an odd schema, the arguments pass
        unchanged and the server judges them.
        """
        if not isinstance(arguments, dict):
            return ArgumentCheck(
                {},
                (
                    {
                        "path": "",
                        "message": "the arguments must be a JSON object",
                        "expected": "object",
                        "received": shorten(arguments),
                    },
                ),
            )
        try:
            if self._validator.is_valid(arguments):
                return ArgumentCheck(arguments)
            coerced = self._coercer.coerce(arguments, self.schema, known_invalid=True)
            errors = describe(self._validator.iter_errors(coerced))
        except Exception:
            logger.warning(
                "argument validation failed on schema %s", canonical_json(self.schema)[:200], exc_info=True
            )
            return ArgumentCheck(arguments)
        return ArgumentCheck(coerced, errors)


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
    for error in check.errors[:MAX_LISTED]:
        line = f"- {error['path'] or '(arguments)'}: {error['message']}; expected {error['expected']}"
        if "received" in error:
            line += f"; received {canonical_json(error['received'])}"
        lines.append(line)
    if count > MAX_LISTED:
        lines.append(f"- ... and {count - MAX_LISTED} more")
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


# -------------------------------------------------------------------- dialects
#
# Provider dialects: the wire forms one normalised tool schema is compiled to.
#
# ``compile_variants`` turns the normalised schema into ``openai`` (the default, non-strict form),
# ``openai_strict`` (only when the strict rules keep the meaning; see below),
# ``anthropic`` (the root's ``anyOf``/``oneOf``/``allOf`` lifted into its properties, as for
# OpenAI; otherwise full JSON Schema) and ``gemini`` (the OpenAPI-3.0 ``parameters`` subset). Each
# change a dialect makes is noted with the dialect's name first; the normalised schema itself is
# never changed. Pure, no I/O.
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
        parameters: the normalised schema (``normalize.normalise``).
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


# --------------------------------------------------------------- openai_strict
#
# The ``openai_strict`` dialect: OpenAI's strict function schemas, offered only when safe.
#
# Strict mode wants every object closed (``additionalProperties: false``) with every property
# required, and knows only a subset of JSON Schema. Optional properties become required and
# nullable; this is safe because the argument pipeline drops a ``null`` the model sends for an
# optional property whose schema does not allow null, so the tool sees the property left out, as
# the schema intends. A property that already allowed null keeps ``null`` and so is only safe when
# its default is null or absent. Open maps, ``not``, conditionals, tuple arrays, untyped values,
# arrays without ``items`` and several types at once have no strict form: then the variant is left
# out (with a note saying why) and the provider sends non-strict. ``oneOf`` becomes ``anyOf`` and a
# mergeable ``allOf`` is folded (the real schema still validates); ``minLength``/``maxLength``,
# ``uniqueItems`` and formats strict mode lacks move into the description as hints. Pure, no I/O.
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
    "minLength": "at least {}",
    "maxLength": "at most {}",
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
        hints.append(bound_text(key, value, text) if key in BOUND_NOUNS else text.format(value))
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
