"""Error reports: a validator's findings put the way a model can act on them.

``describe`` turns each ``jsonschema`` violation into a small dict: the JSON-pointer ``path`` of
the value, a plain ``message`` ("required property is missing", "wrong type (string)", "unknown
property (did you mean 'port'?)"), what was ``expected`` in a few words (``integer``, ``one of
"a", "b"``) and the value ``received``, shortened when large. Duplicates are dropped and the
reports are sorted by path. Pure, no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

import jsonschema

from ...messages import JSONObject, canonical_json
from ._nodes import infer_type, json_type

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
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "minProperties": "at least {} properties",
    "maxProperties": "at most {} properties",
    "multipleOf": "a multiple of {}",
}


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
                _BOUNDS[keyword].format(canonical_json(value)),
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
            message, expected = "too many items", f"at most {len(schema.get('prefixItems', []))} items"
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
