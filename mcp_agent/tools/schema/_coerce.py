"""Coercion: the fixes the argument pipeline tries before it validates a model's arguments.

Models often send ``"3000"`` for an integer or a JSON text for an array. ``Coercer.coerce`` makes
a value fit its schema where a known coercion does it, and never touches a value that already
validates: numeric text to numbers, ``"true"``/``"false"`` to booleans, ``"null"`` to null,
numbers and booleans to text where a string is wanted, JSON text to arrays and objects, a single
value to a one-item array, the text of an enum value to that value (and a string to the one enum
string equal to it but for case); ``allOf`` branches are applied in turn and ``anyOf``/``oneOf``
branches and type lists are tried in turn, the first candidate that validates winning. An
optional property whose schema refuses ``null`` (or ``""``) and gets it is dropped: that is how
models leave a property out. Pure, no I/O.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import jsonschema

from ...messages import JSONObject, JSONSchema
from ._nodes import enum_values, infer_type, is_number

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
