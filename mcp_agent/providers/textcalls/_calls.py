"""One tool call as a model wrote it, and the JSON-like values inside it (pure).

A ``RawCall`` is a call before its name is checked against the offered tools. It comes from a
JSON call object (``{"name", "arguments" | "parameters"}``, maybe wrapped as ``{"function": …}``
or with its arguments written flat), from Python call syntax (``[f(a=1), g(b="x")]``, read with
``ast``), from FunctionGemma's ``call:name{k:v}`` values or from a DeepSeek call body.
``whole_message`` says whether a whole message is nothing but call JSON or pythonic calls, the
one case where bare JSON counts as a call. The call readers return None for text that is no
call of their kind, and a call with ``error`` set when it is one whose arguments cannot be read.

Values (below): models write call arguments as JSON, nearly-JSON or, in Qwen3-Coder XML, as raw
text typed by the tool's schema; ``read_value`` and ``convert_value`` read them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...messages import JSONObject, parse_arguments

__all__ = [
    "BROKEN",
    "PY_LITERALS",
    "RawCall",
    "calls_from_value",
    "convert_value",
    "convert_xml_params",
    "deepseek_call",
    "ds_token",
    "find_name",
    "gemma_value",
    "json_error",
    "kimi_call",
    "literal",
    "pythonic_calls",
    "read_value",
    "skip_ws",
    "whole_message",
]


@dataclass
class RawCall:
    """One call as written, before its name is checked."""

    name: str
    arguments: JSONObject = field(default_factory=dict)
    error: str | None = None
    raw_arguments: str | None = None
    xml_params: dict[str, str] | None = None  # Qwen XML: raw texts, converted by the tool's schema


# --------------------------------------------------------------------------- JSON call objects

_NAME_FIELD = re.compile(r"""["']name["']\s*:\s*["']([^"'\\\n]{1,200})["']""")
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})


def calls_from_value(value: Any, raw: str | None, *, strict: bool) -> list[RawCall] | None:
    """Calls from a parsed JSON value: one call object, or a list of them.

    ``raw`` is the text of a value that came out of a JSON repair (kept as the calls'
    ``raw_arguments``), None for a value read strictly. One item that is no call object makes
    the whole value none.
    """
    items = value if isinstance(value, list) else [value]
    out: list[RawCall] = []
    for item in items:
        call = _call_from_object(item, strict=strict, repaired=raw is not None)
        if call is None:
            return None
        name, arguments, error, raw_args = call
        out.append(RawCall(name, arguments, error, raw_args if raw_args is not None else raw))
    return out or None


def _call_from_object(
    item: Any, *, strict: bool, repaired: bool = False
) -> tuple[str, JSONObject, str | None, str | None] | None:
    """``(name, arguments, error, raw_arguments)`` from a call object, or None if it is none.

    A call object has a string ``name`` and ``arguments`` or ``parameters`` (an object, or JSON
    text of one), maybe wrapped as ``{"function": {...}}``. ``strict`` (for bare JSON) also
    demands the arguments key and no keys beyond the call's own; otherwise keys beyond the call's
    own, with no arguments key, are the arguments written flat. ``repaired`` says the object came
    out of a JSON repair: one that lost its arguments key to odd keys is then an error, not a
    call without arguments.
    """
    if not isinstance(item, dict):
        return None
    if "name" not in item and isinstance(item.get("function"), dict):
        if strict and set(item) - {"function", "type", "id"}:
            return None
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    if strict and (set(item) - _CALL_KEYS or not {"arguments", "parameters"} & set(item)):
        return None
    if strict and _is_schema(item.get("parameters", item.get("arguments"))):
        return None  # a tool's definition ({"name", "parameters": schema}), not a call
    extra = set(item) - _CALL_KEYS
    if extra and not {"arguments", "parameters"} & set(item):
        if repaired:  # the repair lost the arguments key to odd keys
            return name, {}, "the arguments could not be read as JSON", None
        return name, {k: item[k] for k in item if k in extra}, None, None  # arguments written flat
    args = item["arguments"] if "arguments" in item else item.get("parameters")
    if args is not None and not isinstance(args, (str, Mapping)):
        return name, {}, f"arguments must be a JSON object, got {type(args).__name__}", json.dumps(args)
    arguments, error = parse_arguments(args)
    raw: str | None = None
    if isinstance(args, str) and args.strip():
        try:
            json.loads(args)
        except ValueError:
            raw = args
    return name, arguments, error, raw


def _is_schema(value: Any) -> bool:
    """Whether value looks like an object's JSON Schema (``type: object`` and ``properties``)."""
    return (
        isinstance(value, Mapping)
        and value.get("type") == "object"
        and isinstance(value.get("properties"), Mapping)
    )


def find_name(region: str) -> str | None:
    """The ``"name": "..."`` of a call object too broken to parse, if it says one."""
    m = _NAME_FIELD.search(region)
    return m.group(1) if m else None


# --------------------------------------------------------------------------- whole messages

_NAME_LIKE = re.compile(r"[A-Za-z_][\w.\-]*")


def whole_message(text: str) -> list[RawCall] | None:
    """Calls when the whole message is call JSON (bare, fenced) or pythonic calls, else None."""
    body = _unfence(text.strip())
    if not body:
        return None
    if body[0] in "{[":
        found = _json_calls(body)
        if found or body[0] == "{":
            return found
    if (body[0] == "[" or _NAME_LIKE.match(body)) and body.rstrip("]").rstrip().endswith(")"):
        return pythonic_calls(body)
    return None


def _json_calls(body: str) -> list[RawCall] | None:
    """Calls from successive call JSON values filling all of body (split by space, ``;``, ``,``)."""
    raws: list[RawCall] = []
    i = 0
    while i < len(body):
        if body[i] not in "{[":
            return None
        value, end, _ = read_value(body, i, len(body), need="name")
        found = None if value is BROKEN else calls_from_value(value, None, strict=True)
        if found is None:  # stop at the first value that is not a call: it is no call message
            return None
        raws.extend(found)
        i = skip_ws(body, end)
        if body[i : i + 1] in (";", ","):
            i = skip_ws(body, i + 1)
    return raws or None


def _unfence(text: str) -> str:
    """The inside of a ```` ``` ```` code fence that is all of text, else text."""
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        nl = text.find("\n")
        if nl != -1:
            return text[nl + 1 : -3].strip()
    return text


# --------------------------------------------------------------------------- pythonic calls

# a hyphenated name where a call's name stands: at the start, or after `[`, `,`, `;` or space
_HYPHENATED = re.compile(r"(?:^|(?<=[\[,;\s]))[A-Za-z_][\w.]*(?:-[\w.]+)+(?=\s*\()")
_ALIAS = re.compile(r"_tc_\d+_")


def pythonic_calls(source: str) -> list[RawCall] | None:
    """Calls from ``[f(a=1), g(b="x")]``, ``f(a=1)`` or ``name.call(a=1)``, read with ``ast``."""
    source = source.strip()
    if not source or len(source) > 200_000:
        return None
    hyphens: dict[str, str] = {}

    def _alias(m: re.Match[str]) -> str:  # tool names may hold '-', which Python reads as minus
        alias = f"_tc_{len(hyphens)}_"
        hyphens[alias] = m.group(0)
        return alias

    source = _HYPHENATED.sub(_alias, source)
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    elements = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    raws: list[RawCall] = []
    for element in elements:
        if not isinstance(element, ast.Call):
            return None
        name = _dotted(element.func)
        if name is None:
            return None
        name = hyphens.get(name, name)
        if name.endswith(".call"):  # Llama 3.1 built-in tools: brave_search.call(query=...)
            name = name[: -len(".call")]
        arguments: JSONObject = {}
        problems: list[str] = []
        if element.args:
            problems.append("positional arguments are not supported: name every argument")
        for keyword in element.keywords:
            if keyword.arg is None:
                problems.append("**kwargs are not supported")
                continue
            try:
                arguments[keyword.arg] = literal(keyword.value)
            except (ValueError, TypeError):
                problems.append(f"argument {keyword.arg!r} is not a literal value")
        if hyphens:  # a string value that held such a name gets it back
            arguments = _unalias(arguments, hyphens)
        error = "; ".join(problems) or None
        raw = ast.get_source_segment(source, element) if error else None
        raws.append(RawCall(name, arguments, error, raw))
    return raws or None


def _dotted(node: ast.AST) -> str | None:
    """The dotted name a call is made on (``f``, ``brave_search.call``), None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _unalias(value: Any, hyphens: dict[str, str]) -> Any:
    """Value with every hyphenated-name alias inside its strings put back."""
    if isinstance(value, str):
        return _ALIAS.sub(lambda m: hyphens.get(m.group(), m.group()), value)
    if isinstance(value, list):
        return [_unalias(v, hyphens) for v in value]
    if isinstance(value, dict):
        return {k: _unalias(v, hyphens) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- FunctionGemma, DeepSeek


def gemma_value(s: str, i: int) -> tuple[Any, int]:
    """One FunctionGemma value at i: {k:v,...}, [v,...], <escape>text<escape>, or a bare scalar.

    Returns:
        ``(value, end)``. Raises ValueError or IndexError on text that is no such value.
    """
    i = skip_ws(s, i)
    if s.startswith("<escape>", i):
        j = s.find("<escape>", i + 8)
        j = len(s) if j == -1 else j
        return s[i + 8 : j], j + 8
    if s[i] in "{[":
        is_obj = s[i] == "{"
        items: list[Any] = []
        obj: dict[str, Any] = {}
        close = "}" if is_obj else "]"
        i += 1
        while True:
            i = skip_ws(s, i)
            if i >= len(s) or s[i] == close:
                return (obj if is_obj else items), i + 1
            if is_obj:
                colon = s.index(":", i)
                key = s[i:colon].strip().strip("\"'")
                obj[key], i = gemma_value(s, colon + 1)
            else:
                value, i = gemma_value(s, i)
                items.append(value)
            i = skip_ws(s, i)
            if i < len(s) and s[i] == ",":
                i += 1
    j = i
    while j < len(s) and s[j] not in ",}]":
        j += 1
    if j == i:  # a stray closing bracket: nothing to read, and no progress would be made
        raise ValueError(f"no value at {i}")
    word = s[i:j].strip()
    if word in PY_LITERALS:
        return PY_LITERALS[word], j
    for kind in (int, float):
        try:
            return kind(word), j
        except ValueError:
            pass
    return word, j


def ds_token(word: str) -> str:
    """A pattern for DeepSeek's special token ``word``, fullwidth (｜ ▁) or as ASCII look-alikes."""
    return "<[|｜]" + word.replace("_", "[_▁]") + "[|｜]>"


_DS_SEP = re.compile(ds_token("tool_sep"))


def deepseek_call(inner: str) -> RawCall | None:
    """The call between DeepSeek's call tokens, or None when it names no function.

    V3 writes ``function<sep>name``, a newline and fenced JSON; V3.1 writes ``name<sep>{json}``.
    """
    sep = _DS_SEP.search(inner)
    if sep is None:
        return None
    left, right = inner[: sep.start()].strip(), inner[sep.end() :]
    if left == "function" and not right.lstrip().startswith("{"):  # V3: type, name on one line
        name, _, right = right.lstrip().partition("\n")
        name = name.strip()
    else:  # V3.1: name<sep>{json}
        name = left
    if not name:
        return None
    raw = _unfence(right.strip())
    arguments, error = parse_arguments(raw)
    return RawCall(name, arguments, error, raw if error else None)


# --------------------------------------------------------------------------- Kimi K2

_KIMI_ARGS = "<|tool_call_argument_begin|>"
_KIMI_NAME = re.compile(r"(?:functions\.)?([A-Za-z_][\w.\-]{0,199}?)(?::\d{1,6})?")


def kimi_call(inner: str) -> tuple[RawCall, int] | None:
    """The call after Kimi K2's ``<|tool_call_begin|>``, and where it ends in inner; or None.

    Kimi writes ``functions.NAME:INDEX<|tool_call_argument_begin|>{json}`` (the ``functions.``
    prefix and the index are dropped from the name) between ``<|tool_call_begin|>`` and
    ``<|tool_call_end|>``, the same ASCII tokens as DeepSeek's look-alikes. The call ends with
    its JSON object, so text after a call cut off before its end token is not taken for it.
    """
    head, found, _ = inner.partition(_KIMI_ARGS)
    name = _KIMI_NAME.fullmatch(head.strip())
    if not found or name is None:
        return None
    j = skip_ws(inner, len(head) + len(_KIMI_ARGS))
    if inner[j : j + 1] == "{":
        value, end, repaired = read_value(inner, j, len(inner))
        if isinstance(value, dict):
            return RawCall(name.group(1), value, None, inner[j:end] if repaired else None), end
    raw = inner[j:].strip()
    arguments, error = parse_arguments(raw)
    return RawCall(name.group(1), arguments, error, raw if error else None), len(inner)


# --------------------------------------------------------------------------------------------
# JSON-like values out of model text, and Qwen XML parameter values typed
#
# Models write call arguments as JSON, nearly-JSON (single quotes, Python's ``True``/``None``,
# trailing commas) or, in Qwen3-Coder XML, as raw text to be typed by the tool's schema.
# ``read_value`` reads one value at a position strictly, then leniently up to its closing bracket;
# the lenient reading (``ast`` literals, then ``json_repair``) is bounded in size and nesting
# because repairs cost far more than parsing and turn quadratic on deep nesting. ``convert_value``
# types a Qwen XML value by its JSON Schema as vLLM does. Nothing here does I/O, and neither
# ``read_value`` nor ``convert_value`` raises: an unreadable value is ``BROKEN``, or stays text.

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
