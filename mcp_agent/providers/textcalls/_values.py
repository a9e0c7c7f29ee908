"""Reading JSON-like values out of model text, and typing Qwen XML parameter values (pure).

Models write call arguments as JSON, nearly-JSON (single quotes, Python's ``True``/``None``,
trailing commas) or, in Qwen3-Coder XML, as raw text to be typed by the tool's schema.
``read_value`` reads one value at a position strictly, then leniently up to its closing bracket;
the lenient reading (``ast`` literals, then ``json_repair``) is bounded in size and nesting
because repairs cost far more than parsing and turn quadratic on deep nesting. ``convert_value``
types a Qwen XML value by its JSON Schema as vLLM does. Nothing here does I/O, and neither
``read_value`` nor ``convert_value`` raises: an unreadable value is ``BROKEN``, or stays text.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from ...messages import JSONObject

__all__ = [
    "BROKEN",
    "PY_LITERALS",
    "convert_value",
    "convert_xml_params",
    "json_error",
    "literal",
    "read_value",
    "skip_ws",
]

BROKEN: Any = object()  # what read_value returns when no reading gives a JSON-like value

PY_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}

_DECODER = json.JSONDecoder()
_BRACKETS = re.compile(r"[{}\[\]\"'\\]")
_OPEN_CLOSE = re.compile(r"[{}\[\]]")
_MAX_LENIENT = 100_000
# json_repair costs 3-10 µs a character on shallow text, and turns quadratic on deep nesting
# ("{" * 8000 takes two seconds): it only sees short, shallow text.
_MAX_REPAIR = 32_000
_MAX_REPAIR_DEPTH = 32
_INT = re.compile(r"[+-]?\d+")


def skip_ws(text: str, i: int) -> int:
    """The first index at or after i that is not whitespace (or len(text))."""
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    return i


# --------------------------------------------------------------------------- reading


def read_value(text: str, start: int, limit: int, *, need: str = "") -> tuple[Any, int, bool]:
    """Read one JSON value at ``start``: strictly, else leniently up to its closing bracket.

    The lenient reading is tried only when the text holds ``need`` (a call object must say
    ``name``): repairs cost far more than strict parsing, and garbage would pay them too.

    Returns:
        ``(value, end, repaired)``; value is ``BROKEN`` when nothing could be read, and end is
        then where the attempt stopped (at most ``limit``).
    """
    try:
        value, end = _decode(text, start, limit)
        return value, end, False
    except (ValueError, RecursionError):
        pass
    end = _balanced_end(text, start, limit)
    raw = text[start:end]
    return (_lenient(raw) if need in raw else BROKEN), end, True


def _decode(text: str, start: int, limit: int) -> tuple[Any, int]:
    """``raw_decode`` at start, on a window of text that grows only while the value may go on.

    A ``JSONDecodeError`` counts the newlines from the start of the string it was given up to
    the error, so decoding in place in a long text costs O(start) per failure: quadratic over a
    text of many markers. A window that starts at ``start`` costs only what the value spans. It
    starts at ``limit`` (the block's natural end) and doubles while the error could be the cut
    (at the window's end, or an unterminated string), so a value that holds its block's closing
    tag inside a string still reads whole. A value closed inside the window reads as it would
    in the whole text.

    Raises:
        ValueError: no JSON value starts at ``start``.
    """
    end = min(len(text), max(limit, start + 16))
    while True:
        window = text[start:end]
        try:
            value, used = _DECODER.raw_decode(window)
        except json.JSONDecodeError as exc:
            cut = exc.pos >= len(window) - 1 or exc.msg.startswith("Unterminated string")
            if not cut or end >= len(text):
                raise
            end = min(len(text), start + 2 * (end - start))
            continue
        return value, start + used


def _balanced_end(text: str, start: int, limit: int) -> int:
    """The end of the bracketed value at start (quotes respected), or limit when it never closes."""
    depth, quote, skip = 0, "", -1
    for m in _BRACKETS.finditer(text, start, limit):
        i, c = m.start(), m.group()
        if i < skip:
            continue
        if quote:
            if c == "\\":
                skip = i + 2
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "{[":
            depth += 1
        else:
            depth -= 1
            if depth <= 0:
                return i + 1
    return limit


def _depth(text: str) -> int:
    """The deepest bracket nesting in text (quotes ignored: an estimate that errs deep)."""
    depth = deepest = 0
    for m in _OPEN_CLOSE.finditer(text):
        depth = depth + 1 if m.group() in "{[" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def _lenient(raw: str) -> Any:
    """A JSON-like value from nearly-JSON text: Python literals, single quotes, light repairs."""
    raw = raw.strip()
    if not raw or len(raw) > _MAX_LENIENT:
        return BROKEN
    try:
        return literal(ast.parse(raw, mode="eval").body)  # single quotes, True/None, true/null
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        pass
    if len(raw) > _MAX_REPAIR or _depth(raw) > _MAX_REPAIR_DEPTH:
        return BROKEN
    try:
        import json_repair  # costs ~60 ms to import: only on the rare broken input

        value = json_repair.loads(raw)
    except Exception:  # json_repair gives up with assorted errors
        return BROKEN
    return value if isinstance(value, (dict, list)) and value else BROKEN


def literal(node: ast.AST) -> Any:
    """A literal value from an AST node; JSON's true/false/null are accepted too.

    Raises:
        ValueError: the node is not a literal (a name, a call, ``**`` in a dict, ...).
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in PY_LITERALS:
        return PY_LITERALS[node.id]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if key_node is None:
                raise ValueError("** in a dict literal")
            key = literal(key_node)
            out[key if isinstance(key, str) else json.dumps(key)] = literal(value_node)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise ValueError("not a literal")


def json_error(raw: str) -> str:
    """Why raw is not JSON, for the model (with the decoder's message and position if it has one)."""
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"the tool call is not valid JSON ({exc.msg} at position {exc.pos})"
    except Exception:  # RecursionError on deep nesting
        pass
    return "the tool call is not valid JSON"


# --------------------------------------------------------------------------- Qwen XML values


def convert_value(text: str, schema: Any) -> Any:
    """A Qwen XML parameter's raw text converted by its JSON Schema type, as vLLM does.

    Strings stay text; integer, number and boolean are parsed; object and array go through
    ``json.loads``, then Python literals. ``null``/``None`` become None when the schema allows
    null or the type is not a string. Text that does not fit its type stays text, for the
    validator to report.
    """
    if not isinstance(schema, Mapping):
        return text
    kinds = _types_of(schema)
    stripped = text.strip()
    if stripped.lower() in ("null", "none") and ("null" in kinds or (kinds and "string" not in kinds)):
        return None
    if not kinds or "string" in kinds:
        return text
    for kind in ("integer", "number", "boolean", "object", "array"):
        if kind in kinds:
            try:
                return _as_kind(kind, stripped)
            except (ValueError, OverflowError, RecursionError):
                pass
    return text


def convert_xml_params(params: Mapping[str, str], schema: Any) -> JSONObject:
    """All of a Qwen XML call's parameters converted by the tool's object schema."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    return {name: convert_value(value, props.get(name)) for name, value in params.items()}


def _types_of(schema: Mapping[str, Any]) -> set[str]:
    """Every type a schema allows: its ``type`` (string or list), its anyOf/oneOf branches, nullable."""
    kinds: set[str] = set()
    for part in (
        schema,
        *(s for k in ("anyOf", "oneOf") for s in schema.get(k) or () if isinstance(s, Mapping)),
    ):
        declared = part.get("type")
        if isinstance(declared, str):
            kinds.add(declared)
        elif isinstance(declared, list):
            kinds.update(t for t in declared if isinstance(t, str))
    if schema.get("nullable") is True:
        kinds.add("null")
    return kinds


def _as_kind(kind: str, text: str) -> Any:
    """Text read as one JSON Schema type; ValueError when it is not one."""
    if kind == "integer":
        if _INT.fullmatch(text):
            return int(text)
        number = float(text)
        if number.is_integer():
            return int(number)
    elif kind == "number":
        if _INT.fullmatch(text):
            return int(text)
        number = float(text)
        if number == number and abs(number) != float("inf"):
            return number
    elif kind == "boolean":
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
    elif kind in ("object", "array"):
        want = dict if kind == "object" else list
        try:
            value = json.loads(text)
        except ValueError:
            value = _lenient(text)
        if isinstance(value, want):
            return value
    raise ValueError(f"not {kind}")
