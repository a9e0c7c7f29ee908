"""Checking a model's arguments: the coercions tried before validating, and the error reports.

Models often send ``"3000"`` for an integer or a JSON text for an array. ``Coercer.coerce`` makes
a value fit its schema where a known coercion does it, and never touches a value that already
validates: numeric text to numbers, ``"true"``/``"false"`` to booleans, ``"null"`` to null,
numbers and booleans to text where a string is wanted, JSON text to arrays and objects, a single
value to a one-item array, the text of an enum value to that value (and a string to the one enum
string equal to it but for case); ``allOf`` branches are applied in turn and ``anyOf``/``oneOf``
branches and type lists are tried in turn, the first candidate that validates winning. An
optional property whose schema refuses ``null`` (or ``""``) and gets it is dropped: that is how
models leave a property out. Pure, no I/O.

What still fails is reported by ``describe`` (below) in words a model can act on. The pipeline
that runs both is ``compile.ArgumentChecker``.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable
from typing import Any

import jsonschema

from ..._plural import counted
from ...messages import JSONObject, JSONSchema, canonical_json
from .normalize import enum_values, infer_type, is_number, json_type

_INTEGER_TEXT = re.compile(r"\s*[-+]?[0-9]+\s*")
_NUMBER_TEXT = re.compile(r"\s*[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*")
_TRY_ORDER = ("integer", "number", "boolean", "null", "object", "array", "string")
_NO = object()


class Coercer:
    """Coerces values by one schema, checking candidates with validators built once per subschema.

    Args:
        validator: the compiled validator of the whole schema; each subschema's validator is
            evolved from it on first use and kept.
    """

    def __init__(self, validator: jsonschema.protocols.Validator) -> None:
        self._validator = validator
        self._validators: dict[int, Any] = {}

    def _valid(self, value: Any, schema: Any) -> bool:
        if isinstance(schema, bool):
            return schema
        validator = self._validators.get(id(schema))
        if validator is None:
            validator = self._validators[id(schema)] = self._validator.evolve(schema=schema)
        return bool(validator.is_valid(value))

    def coerce(self, value: Any, schema: Any, known_invalid: bool = False) -> Any:
        """``value`` made to fit ``schema`` where a known coercion does it; else as it was.

        Args:
            value: the value to fit (never changed in place).
            schema: ``value``'s (sub)schema, a part of the validator's schema.
            known_invalid: skip the first validity check (the caller just made it).

        Returns:
            The first candidate that validates; else the value with its parts coerced as far
            as they go; else ``value`` itself.
        """
        if not isinstance(schema, dict) or (not known_invalid and self._valid(value, schema)):
            return value
        for branch in schema.get("allOf", ()):
            value = self.coerce(value, branch)
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
                    candidates.append(
                        self.coerce(converted, schema) if kind in ("object", "array") else converted
                    )
        candidates += _enum_matches(value, schema)
        for key in ("anyOf", "oneOf"):
            for branch in schema.get(key, ()):
                candidate = self.coerce(value, branch)
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
                if (
                    (item is None or item == "")
                    and name not in required
                    and not self._valid(item, props[name])
                ):
                    continue  # an optional property "left out" the way models do it
                out[name] = self.coerce(item, props[name])
            else:
                out[name] = self.coerce(item, extra) if isinstance(extra, dict) else item
        return out

    def _coerce_array(self, value: list[Any], schema: JSONSchema) -> list[Any]:
        prefix = schema.get("prefixItems", [])
        items = schema.get("items")
        out = []
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else items
            out.append(self.coerce(item, sub) if isinstance(sub, dict) else item)
        return out


def _wanted_types(schema: JSONSchema) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        kinds = {kind}
    elif isinstance(kind, list):
        kinds = set(kind)
    else:
        inferred = infer_type(schema)
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
    if kind == "string" and is_number(value):
        return json.dumps(value)
    if kind == "string" and isinstance(value, bool):
        return "true" if value else "false"
    return _NO


def _enum_matches(value: Any, schema: JSONSchema) -> list[Any]:
    """Enum values ``value`` is the text of (``"2"`` → 2), or equals but for case."""
    if not isinstance(value, str):
        return []
    options = enum_values(schema)
    text = value.strip()
    exact = [o for o in options if not isinstance(o, str) and json.dumps(o) == text]
    folded = [o for o in options if isinstance(o, str) and o.casefold() == text.casefold()]
    return exact + (folded if len(folded) == 1 else [])


# ---------------------------------------------------------------- error reports
#
# Error reports: a validator's findings put the way a model can act on them.
#
# ``describe`` turns each ``jsonschema`` violation into a small dict: the JSON-pointer ``path`` of
# the value, a plain ``message`` ("required property is missing", "wrong type (string)", "unknown
# property (did you mean 'port'?)"), what was ``expected`` in a few words (``integer``, ``one of
# "a", "b"``) and the value ``received``, shortened when large. Duplicates are dropped and the
# reports are sorted by path. Pure, no I/O.
MAX_LISTED = 20
"""Enum values listed in an expectation, and violations listed by ``format_errors``."""

_MAX_RECEIVED_CHARS = 200


def _pointer(parts: Iterable[Any]) -> str:
    """A JSON pointer (RFC 6901) to the value at ``parts``; ``""`` for the arguments object."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def shorten(value: Any) -> Any:
    """``value`` as received, or a note of its first 200 characters when its JSON is longer."""
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
        listed = ", ".join(canonical_json(v) for v in values[:MAX_LISTED])
        return f"one of {listed}" + (
            f" (and {len(values) - MAX_LISTED} more)" if len(values) > MAX_LISTED else ""
        )
    kind = schema.get("type")
    if isinstance(kind, list):
        text = " or ".join(kind)
    elif isinstance(kind, str):
        text = kind
    elif "anyOf" in schema or "oneOf" in schema:
        branches: list[Any] = schema.get("anyOf") or schema.get("oneOf") or []
        return " | ".join(_summary(b) for b in branches)
    else:
        text = infer_type(schema) or "any value"
    if kind == "array" and isinstance(schema.get("items"), dict):
        text += f" of {_summary(schema['items'])}"
    if isinstance(schema.get("format"), str):
        text += f" (format {schema['format']})"
    return text


_BOUNDS = {
    "minimum": ">= {}",
    "maximum": "<= {}",
    "exclusiveMinimum": "> {}",
    "exclusiveMaximum": "< {}",
    "minLength": "at least {}",
    "maxLength": "at most {}",
    "minItems": "at least {}",
    "maxItems": "at most {}",
    "minProperties": "at least {}",
    "maxProperties": "at most {}",
    "multipleOf": "a multiple of {}",
}
BOUND_NOUNS = {
    "minLength": ("character", None),
    "maxLength": ("character", None),
    "minItems": ("item", None),
    "maxItems": ("item", None),
    "minProperties": ("property", "properties"),
    "maxProperties": ("property", "properties"),
}
"""The noun a count bound counts, singular and plural (None: with an s)."""


def bound_text(keyword: str, value: Any, template: str) -> str:
    """``template`` filled with ``value``, counted in the noun of ``keyword`` when it has one
    (``at least 1 character``)."""
    if keyword in BOUND_NOUNS and isinstance(value, int) and not isinstance(value, bool):
        return template.format(counted(value, *BOUND_NOUNS[keyword]))
    return template.format(canonical_json(value))


def describe(errors: Iterable[jsonschema.ValidationError]) -> tuple[JSONObject, ...]:
    """One report per violation, sorted by path (the ``errors`` of an ``ArgumentCheck``).

    Args:
        errors: what the validator found (``iter_errors``).

    Returns:
        Dicts with ``path`` (a JSON pointer), ``message``, ``expected`` and, except for a
        missing property, ``received``; one per path and message.
    """
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
                where = _pointer([*path, name])
                if name not in instance and (where, keyword) not in seen:
                    seen.add((where, keyword))
                    out.append(
                        {
                            "path": where,
                            "message": "required property is missing",
                            "expected": _summary(props.get(name, True)),
                        }
                    )
            continue
        if keyword == "additionalProperties" and isinstance(instance, dict) and value is False:
            known = list(schema.get("properties", {}))
            patterns = list(schema.get("patternProperties", {}))
            for name in instance:
                if name in known or any(re.search(p, name) for p in patterns):
                    continue
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                out.append(
                    {
                        "path": _pointer([*path, name]),
                        "message": f"unknown property{hint}",
                        "expected": "one of the known properties: " + (", ".join(known) or "(none)"),
                        "received": shorten(instance[name]),
                    }
                )
            continue
        if keyword == "type":
            message, expected = (
                f"wrong type ({json_type(instance)})",
                " or ".join(value) if isinstance(value, list) else str(value),
            )
        elif keyword in ("enum", "const"):
            message, expected = "not an allowed value", _summary({keyword: value})
        elif keyword in _BOUNDS:
            message, expected = (
                f"out of bounds ({keyword} {canonical_json(value)})",
                bound_text(keyword, value, _BOUNDS[keyword]),
            )
        elif keyword in ("anyOf", "oneOf"):
            message = (
                "matches none of the allowed shapes"
                if keyword == "anyOf"
                else ("must match exactly one of the allowed shapes")
            )
            expected = " | ".join(_summary(b) for b in value) if isinstance(value, list) else str(value)
        elif keyword == "pattern":
            message, expected = "does not match the pattern", f"a string matching {value}"
        elif keyword == "items" and value is False:
            message, expected = (
                "too many items",
                f"at most {counted(len(schema.get('prefixItems', [])), 'item')}",
            )
        elif keyword == "uniqueItems":
            message, expected = "items are not unique", "unique items"
        else:
            message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
            expected = f"{keyword}: {canonical_json(value)[:_MAX_RECEIVED_CHARS]}"
        if (_pointer(path), message) in seen:
            continue
        seen.add((_pointer(path), message))
        out.append(
            {"path": _pointer(path), "message": message, "expected": expected, "received": shorten(instance)}
        )
    out.sort(key=lambda e: e["path"])
    return tuple(out)
