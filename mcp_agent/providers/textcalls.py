"""Tool calls written as text, and reasoning blocks, taken out of a model's content (pure).

Servers without a tool-call parser (or with the wrong template) hand back the model's calls as
text inside ``content``, in one of a dozen family formats (``llm-wire.md`` §5): Qwen3-Coder XML,
Hermes ``<tool_call>{json}``, Granite, Phi-4-mini, Mistral ``[TOOL_CALLS]``, DeepSeek special
tokens, Llama JSON / ``<|python_tag|>`` / ``<function=name>{json}``, LM Studio
``[TOOL_REQUEST]``, pythonic ``[f(a=1)]``, Olmo ``<function_calls>``, FunctionGemma and fenced or
bare JSON. ``split_reasoning`` separates ``<think>`` blocks from the answer; ``extract_tool_calls``
strips reasoning first (calls inside reasoning are ignored), finds every call block, keeps the
calls that name an offered tool and leaves all other text as content. Bare JSON counts only when
the whole message is call JSON. Nothing here does I/O or raises, and the work is linear-ish in
the length of the text: markers are found with ``str.find``, every search remembers its last
answer, and each block is bounded by the next marker of its kind.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._json import parse_arguments
from .._types import JSONObject
from ..messages import ToolCall, ToolSpec

logger = logging.getLogger(__name__)

__all__ = ["TextExtraction", "convert_value", "extract_tool_calls", "split_reasoning"]


@dataclass(frozen=True)
class TextExtraction:
    """What ``extract_tool_calls`` found in a model's text.

    Attributes:
        content: the text outside tool-call blocks and reasoning, stripped. A block that names a
            tool nobody offered stays here, as the model wrote it.
        reasoning: the reasoning found (``<think>`` blocks and friends), "" if none.
        calls: calls to offered tools only, in the order written, with the exposed name and a
            generated id (``call_`` + 24 hex). A call whose arguments could not be read has
            ``error`` set and ``raw_arguments`` kept, so the loop can tell the model.
        rejected: names used in call blocks that match no offered tool (their text stays in
            ``content``), for logs, or for telling the model which names it may use.
    """

    content: str
    reasoning: str = ""
    calls: tuple[ToolCall, ...] = ()
    rejected: tuple[str, ...] = ()


# --------------------------------------------------------------------------- reasoning

_THINK_TAG = re.compile(r"<(/?)(think|thinking)>")


def _join(parts: Sequence[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p and not p.isspace())


def split_reasoning(text: str) -> tuple[str, str]:
    """Split reasoning blocks from the answer.

    Handles ``<think>…</think>`` (and ``<thinking>…</thinking>``) anywhere, empty blocks,
    DeepSeek-R1's missing opening tag (text before the first ``</think>`` is reasoning when no
    ``<think>`` opens it) and an unclosed ``<think>`` (everything after it is reasoning, as when
    ``max_tokens`` ran out). Stray closing tags are dropped; a tag written as code
    (`` `<think>` ``, prose about tags) is left alone.

    Returns:
        ``(reasoning, content)``, both stripped; several reasoning blocks are joined by a blank
        line.
    """
    if not isinstance(text, str):
        return "", ""
    reasoning: list[str] = []
    content: list[str] = []
    pos = 0
    open_tag: str | None = None
    depth = 0
    start = 0
    index = -1
    for m in _THINK_TAG.finditer(text):
        if text[m.start() - 1 : m.start()] == "`" or text[m.end() : m.end() + 1] == "`":
            continue  # a tag written as code (`<think>`) is prose about tags, not a tag
        index += 1
        closing, tag = m.group(1) == "/", m.group(2)
        if open_tag is None:
            if not closing:
                content.append(text[pos : m.start()])
                open_tag, depth, start = tag, 1, m.end()
            elif index == 0 and tag == "think":
                reasoning.append(text[: m.start()])  # DeepSeek-R1: `<think>` was in the prompt
                pos = m.end()
            else:
                content.append(text[pos : m.start()])  # a stray closing tag
                pos = m.end()
        elif tag == open_tag:
            depth += -1 if closing else 1
            if depth == 0:
                reasoning.append(text[start : m.start()])
                open_tag, pos = None, m.end()
    if open_tag is not None:
        reasoning.append(text[start:])
    else:
        content.append(text[pos:])
    return _join(reasoning), _join(content)


# --------------------------------------------------------------------------- values


_BROKEN: Any = object()  # what _read_value returns when no reading gives a JSON-like value

_DECODER = json.JSONDecoder()
_BRACKETS = re.compile(r"[{}\[\]\"'\\]")
_NAME_FIELD = re.compile(r"""["']name["']\s*:\s*["']([^"'\\\n]{1,200})["']""")
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})
_MAX_LENIENT = 100_000
# json_repair costs 3-10 µs a character on shallow text, and turns quadratic on deep nesting
# ("{" * 8000 takes two seconds): it only sees short, shallow text.
_MAX_REPAIR = 32_000
_MAX_REPAIR_DEPTH = 32
_OPEN_CLOSE = re.compile(r"[{}\[\]]")


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
        return _BROKEN
    try:
        return _literal(ast.parse(raw, mode="eval").body)  # single quotes, True/None, true/null
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        pass
    if len(raw) > _MAX_REPAIR or _depth(raw) > _MAX_REPAIR_DEPTH:
        return _BROKEN
    try:
        import json_repair  # costs ~60 ms to import: only on the rare broken input

        value = json_repair.loads(raw)
    except Exception:  # json_repair gives up with assorted errors
        return _BROKEN
    return value if isinstance(value, (dict, list)) and value else _BROKEN


def _read_value(text: str, start: int, limit: int, *, need: str = "") -> tuple[Any, int, bool]:
    """Read one JSON value at ``start``: strictly, else leniently up to its closing bracket.

    The lenient reading is tried only when the text holds ``need`` (a call object must say
    ``name``): repairs cost far more than strict parsing, and garbage would pay them too.

    Returns:
        ``(value, end, repaired)``; value is ``_BROKEN`` when nothing could be read, and end is
        then where the attempt stopped (at most ``limit``).
    """
    try:
        value, end = _DECODER.raw_decode(text, start)
        return value, end, False
    except (ValueError, RecursionError):
        pass
    end = _balanced_end(text, start, limit)
    raw = text[start:end]
    return (_lenient(raw) if need in raw else _BROKEN), end, True


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


def _find_name(region: str) -> str | None:
    """The ``"name": "..."`` of a call object too broken to parse, if it says one."""
    m = _NAME_FIELD.search(region)
    return m.group(1) if m else None


def _types_of(schema: Mapping[str, Any]) -> set[str]:
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


_INT = re.compile(r"[+-]?\d+")


def _as_kind(kind: str, text: str) -> Any:
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


def _convert_xml_params(params: Mapping[str, str], schema: Any) -> JSONObject:
    """All of a Qwen XML call's parameters converted by the tool's object schema."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    return {name: convert_value(value, props.get(name)) for name, value in params.items()}


# --------------------------------------------------------------------------- names


class _Names:
    """Offered tool names, and how a name written by a model maps onto one.

    Exact match first; then a case-insensitive match; then the name without its server prefix
    (``read_file`` for ``fs__read_file``, which small models write). The two loose matches count
    only when exactly one offered tool fits; they map to the exposed name.
    """

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.exact: dict[str, ToolSpec] = {}
        self.folded: dict[str, list[ToolSpec]] = {}
        self.short: dict[str, list[ToolSpec]] = {}
        for spec in tools:
            self.exact.setdefault(spec.name, spec)
            self.folded.setdefault(spec.name.casefold(), []).append(spec)
            short = spec.mcp_name or spec.name.partition("__")[2]
            if short and short.casefold() != spec.name.casefold():
                self.short.setdefault(short.casefold(), []).append(spec)

    def resolve(self, name: str) -> ToolSpec | None:
        name = name.strip().strip("\"'`").strip()
        if name.startswith("functions."):
            name = name[len("functions.") :]
        spec = self.exact.get(name)
        if spec is not None:
            return spec
        for table in (self.folded, self.short):
            found = table.get(name.casefold())
            if found and len(found) == 1:
                return found[0]
        return None


# --------------------------------------------------------------------------- blocks


@dataclass
class _Raw:
    """One call as written, before its name is checked."""

    name: str
    arguments: JSONObject = field(default_factory=dict)
    error: str | None = None
    raw_arguments: str | None = None
    xml_params: dict[str, str] | None = None  # Qwen XML: raw texts, converted by the tool's schema


@dataclass
class _Block:
    end: int
    calls: list[_Raw]


@dataclass(frozen=True)
class _Hit:
    """A format's marker found in the text."""

    kind: str
    start: int
    end: int


def _raws_from_value(value: Any, raw: str | None, *, strict: bool) -> list[_Raw] | None:
    """Calls from a parsed JSON value: one call object, or a list of them."""
    items = value if isinstance(value, list) else [value]
    out: list[_Raw] = []
    for item in items:
        call = _call_from_object(item, strict=strict, repaired=raw is not None)
        if call is None:
            return None
        name, arguments, error, raw_args = call
        out.append(_Raw(name, arguments, error, raw_args if raw_args is not None else raw))
    return out or None


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    return i


def _skip_fence(text: str, i: int) -> int:
    """Past an opening code fence (```json\\n) at i, if there is one."""
    if text.startswith("```", i):
        nl = text.find("\n", i, i + 40)
        if nl != -1:
            return _skip_ws(text, nl + 1)
    return i


def _consume(text: str, i: int, *closers: str) -> int:
    """Past each of ``closers`` that follows i in turn (each optional; whitespace skipped)."""
    for closer in closers:
        j = _skip_ws(text, i)
        if text.startswith(closer, j):
            i = j + len(closer)
    return i


def _ds(word: str) -> str:
    # DeepSeek's special tokens, fullwidth (｜ ▁) or as ASCII look-alikes
    return "<[|｜]" + word.replace("_", "[_▁]") + "[|｜]>"


_DS_CALLS_BEGIN = re.compile(_ds("tool_calls_begin"))
_DS_CALLS_END = re.compile(_ds("tool_calls_end"))
_DS_CALL_BEGIN = re.compile(_ds("tool_call_begin"))
_DS_CALL_END = re.compile(_ds("tool_call_end"))
_DS_SEP = re.compile(_ds("tool_sep"))

# Where each format's blocks start. Literals are found with str.find; the two patterns begin
# with a literal character, so the regex engine skips ahead fast too. (One alternation of all of
# them would cost ten times more: the engine would try every branch at every character.)
_MARKERS: tuple[tuple[str, str | re.Pattern[str]], ...] = (
    ("tool_call", "<tool_call>"),
    ("function", "<function="),
    ("granite", "<|tool_call|>"),
    ("phi", "functools["),
    ("mistral", "[TOOL_CALLS]"),
    ("lmstudio", "[TOOL_REQUEST]"),
    ("python_tag", "<|python_tag|>"),
    ("olmo", "<function_calls>"),
    ("gemma", "<start_function_call>"),
    ("deepseek", re.compile(f"{_ds('tool_calls_begin')}|{_ds('tool_call_begin')}")),
    ("pythonic", re.compile(r"\n[ \t]*\[(?=[A-Za-z_][\w.\-]*\()")),  # a line of pythonic calls
)
_FUNC_HEAD = re.compile(r"<function=([^>\n]{1,200})>")
_PARAM_HEAD = re.compile(r"<parameter=([^>\n]{1,200})>")
_PARAM_LINE = re.compile(r"\n[ \t]*<parameter=([^>\n]{1,200})>")
_MISTRAL_CALL = re.compile(r"([A-Za-z0-9_.\-]{1,200})(?:\[CALL_ID\][A-Za-z0-9_\-]{0,64})?(\[ARGS\])?")
_PY_END = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|\n")
_NAME_LIKE = re.compile(r"[A-Za-z_][\w.\-]*")
_GEMMA_HEAD = re.compile(r"\s*call:([A-Za-z0-9_.\-]{1,200})\s*\{")


class _Scanner:
    """One pass over one text: finds call blocks left to right."""

    def __init__(self, text: str, names: _Names) -> None:
        self.text = text
        self.names = names
        self._cache: dict[Any, tuple[int, int]] = {}

    # Each search remembers where it looked and what it found, so a text with many markers
    # and no closing tags costs one scan per closing tag, not one per marker.
    def find(self, what: str | re.Pattern[str], start: int) -> int:
        """The first occurrence of ``what`` at or after start, or len(text)."""
        hit = self._cache.get(what)
        if hit is not None and hit[0] <= start and (start <= hit[1]):
            return hit[1]
        if isinstance(what, str):
            i = self.text.find(what, start)
            found = i if i != -1 else len(self.text)
        else:
            m = what.search(self.text, start)
            found = m.start() if m else len(self.text)
        self._cache[what] = (start, found)
        return found

    def first(self, start: int, *whats: str | re.Pattern[str]) -> int:
        return min(self.find(w, start) for w in whats)

    def next_marker(self, pos: int) -> _Hit | None:
        """The first marker of any format at or after pos."""
        best: tuple[int, str, str | re.Pattern[str]] | None = None
        for kind, what in _MARKERS:
            at = self.find(what, pos)
            if at < len(self.text) and (best is None or at < best[0]):
                best = (at, kind, what)
        if best is None:
            return None
        at, kind, what = best
        if isinstance(what, str):
            return _Hit(kind, at, at + len(what))
        m = what.match(self.text, at)
        return _Hit(kind, at, m.end() if m else at + 1)

    def scan(self) -> tuple[list[ToolCall], list[str], list[str]]:
        text = self.text
        pieces: list[str] = []
        calls: list[ToolCall] = []
        rejected: list[str] = []
        pos = 0  # where the scan goes on
        kept = 0  # start of the text not yet given to pieces
        while (hit := self.next_marker(pos)) is not None:
            try:
                block = getattr(self, "_" + hit.kind)(hit)
            except Exception:  # a parser bug must not cost the answer: keep the text
                logger.warning("textcalls: %s parser failed at offset %d", hit.kind, hit.start, exc_info=True)
                block = None
            if block is None or not block.calls:
                pos = hit.start + 1
                continue
            accepted = 0
            for raw in block.calls:
                call = self._finish(raw)
                if call is not None:
                    calls.append(call)
                    accepted += 1
                elif _looks_meant(raw, hit.kind):
                    rejected.append(raw.name)
            if accepted == len(block.calls):
                pieces.append(text[kept : hit.start])
                kept = block.end
            pos = max(block.end, hit.start + 1)
        pieces.append(text[kept:])
        if not calls and not rejected:
            whole = _whole_message(text)
            if whole:
                found = [c for c in map(self._finish, whole) if c is not None]
                if len(found) == len(whole):
                    return found, [], []
                unknown = [r for r in whole if self.names.resolve(r.name) is None]
                rejected.extend(r.name for r in unknown if _looks_meant(r, "pythonic"))
        return calls, rejected, pieces

    def _finish(self, raw: _Raw) -> ToolCall | None:
        spec = self.names.resolve(raw.name)
        if spec is None:
            return None
        arguments, error, raw_arguments = raw.arguments, raw.error, raw.raw_arguments
        if raw.xml_params is not None:
            arguments = _convert_xml_params(raw.xml_params, spec.parameters)
        return ToolCall(
            id="call_" + secrets.token_hex(12),
            name=spec.name,
            arguments=arguments,
            error=error,
            raw_arguments=raw_arguments,
        )

    # -- JSON-bearing blocks ------------------------------------------------------------

    def _json_block(self, i: int, limit: int, *closers: str) -> _Block | None:
        """A JSON call object or list at i (after an optional fence); the block may end at limit."""
        text = self.text
        i = _skip_ws(text, i)
        fenced = _skip_fence(text, i)
        if fenced != i:
            i, closers = fenced, ("```", *closers)
        if text[i : i + 1] not in ("{", "["):
            return None
        value, end, repaired = _read_value(text, i, limit, need="name")
        if value is _BROKEN:
            name = _find_name(text[i:limit])
            if name is None:
                return None
            raw = text[i:limit].strip()
            return _Block(_consume(text, limit, *closers), [_Raw(name, {}, _json_error(raw), raw)])
        raws = _raws_from_value(value, text[i:end] if repaired else None, strict=False)
        if raws is None:
            return None
        return _Block(_consume(text, end, *closers), raws)

    def _tool_call(self, hit: _Hit) -> _Block | None:
        text = self.text
        i = _skip_ws(text, hit.end)
        limit = self.first(i, "</tool_call>", "<tool_call>")
        if text.startswith("<function=", i):
            raws: list[_Raw] = []
            end = i
            while text.startswith("<function=", i):
                got = self._xml_function(i, wrapped=True)
                if got is None:
                    break
                raws.append(got[0])
                end = got[1]
                i = _skip_ws(text, end)
            if not raws:
                return None
            return _Block(_consume(text, end, "</tool_call>"), raws)
        return self._json_block(i, limit, "</tool_call>")

    def _granite(self, hit: _Hit) -> _Block | None:
        limit = self.first(hit.end, "<|/tool_call|>", "<|tool_call|>")
        return self._json_block(hit.end, limit, "<|/tool_call|>")

    def _phi(self, hit: _Hit) -> _Block | None:
        limit = self.first(hit.end, "functools[")
        return self._json_block(hit.end - 1, limit)

    def _lmstudio(self, hit: _Hit) -> _Block | None:
        limit = self.first(hit.end, "[END_TOOL_REQUEST]", "[TOOL_REQUEST]")
        return self._json_block(hit.end, limit, "[END_TOOL_REQUEST]")

    def _mistral(self, hit: _Hit) -> _Block | None:
        text = self.text
        limit = self.find("[TOOL_CALLS]", hit.end)
        i = _skip_ws(text, hit.end)
        if text[i : i + 1] in ("[", "{") or text.startswith("```", i):
            return self._json_block(i, limit)  # pre-v11: a JSON list after the token
        raws: list[_Raw] = []
        end = i
        while True:  # v11: name[ARGS]{...}, maybe name[CALL_ID]id[ARGS]{...}
            head = _MISTRAL_CALL.match(text, i)
            if head is None or (head.group(2) is None and text[head.end() : head.end() + 1] != "{"):
                break
            j = _skip_ws(text, head.end())
            value, end, repaired = _read_value(text, j, limit)
            if isinstance(value, dict):
                raws.append(_Raw(head.group(1), value, None, text[j:end] if repaired else None))
            else:
                raw = text[j:limit].strip() if value is _BROKEN else text[j:end]
                end = limit if value is _BROKEN else end
                arguments, error = parse_arguments(raw)
                raws.append(_Raw(head.group(1), arguments, error, raw))
            i = _skip_ws(text, end)
        if not raws:
            return None
        return _Block(end, raws)

    def _python_tag(self, hit: _Hit) -> _Block | None:
        text = self.text
        i = _skip_ws(text, hit.end)
        if text[i : i + 1] != "{":  # a built-in tool: brave_search.call(query="...")
            line_end = self.first(i, _PY_END, "<|python_tag|>")
            raws = _pythonic(text[i:line_end])
            return _Block(_consume(text, line_end, "<|eom_id|>", "<|eot_id|>"), raws) if raws else None
        limit = self.first(i, "<|python_tag|>", "<|eom_id|>", "<|eot_id|>")
        raws = []
        end = i
        while text[i : i + 1] == "{":  # several calls: {...}; {...}
            block = self._json_block(i, limit)
            if block is None:
                break
            raws.extend(block.calls)
            end = i = block.end
            i = _skip_ws(text, i)
            if text[i : i + 1] in (";", ","):
                i = _skip_ws(text, i + 1)
        if not raws:
            return None
        return _Block(_consume(text, end, "<|eom_id|>", "<|eot_id|>"), raws)

    # -- XML and tag formats ------------------------------------------------------------

    def _function(self, hit: _Hit) -> _Block | None:
        got = self._xml_function(hit.start, wrapped=False)
        return _Block(got[1], [got[0]]) if got else None

    def _xml_function(self, i: int, *, wrapped: bool) -> tuple[_Raw, int] | None:
        """``<function=NAME>`` with Qwen XML parameters or a JSON body (Llama), at i."""
        text = self.text
        head = _FUNC_HEAD.match(text, i)
        if head is None:
            return None
        name = head.group(1).strip().strip("\"'")
        j = _skip_ws(text, head.end())
        if text[j : j + 1] == "{":  # Llama: <function=name>{"city": "Tokyo"}</function>
            limit = self.first(j, "</function>", "<function=")
            value, end, repaired = _read_value(text, j, limit)
            if isinstance(value, dict):
                raw_json = text[j:end] if repaired else None
                return _Raw(name, value, None, raw_json), _consume(text, end, "</function>")
            raw = text[j:limit].strip() if value is _BROKEN else text[j:end]
            arguments, error = parse_arguments(raw)
            return _Raw(name, arguments, error, raw), _consume(text, max(end, limit), "</function>")
        spec = self.names.resolve(name)
        props = spec.parameters.get("properties") if spec is not None else None
        known = set(props) if isinstance(props, dict) and props else None  # None: any name
        region = self.first(head.end(), "\n<function=", "<tool_call>")
        params: dict[str, str] = {}
        p = head.end()
        while True:
            q = _skip_ws(text, p)
            ph = _PARAM_HEAD.match(text, q)
            if ph is None or q >= region:
                break
            value_end, p = self._param_end(ph.end(), region, known)
            params[ph.group(1).strip().strip("\"'")] = _strip_newline(text[ph.end() : value_end])
        q = _skip_ws(text, p)
        closed = text.startswith("</function>", q)
        if not (params or closed or wrapped):
            return None  # a bare `<function=x>` in prose
        end = q + len("</function>") if closed else p
        return _Raw(name, xml_params=params), end

    def _param_end(self, start: int, region: int, known: set[str] | None) -> tuple[int, int]:
        """Where a parameter's value ends, and where scanning goes on after it."""
        close = self.find("</parameter>", start)
        nxt = region
        for pm in _PARAM_LINE.finditer(self.text, start, min(close, region)):
            if known is None or pm.group(1).strip().strip("\"'") in known:
                nxt = pm.start()
                break
        if close < nxt:
            return close, close + len("</parameter>")
        end = min(nxt, self.find("</function>", start))
        return end, end

    def _olmo(self, hit: _Hit) -> _Block | None:
        end = self.first(hit.end, "</function_calls>", "<function_calls>")
        raws: list[_Raw] = []
        for line in self.text[hit.end : end].splitlines():
            if line.strip():
                got = _pythonic(line)
                if not got:
                    return None
                raws.extend(got)
        return _Block(_consume(self.text, end, "</function_calls>"), raws) if raws else None

    def _gemma(self, hit: _Hit) -> _Block | None:
        text = self.text
        end = self.first(hit.end, "<end_function_call>", "<start_function_call>")
        head = _GEMMA_HEAD.match(text, hit.end, end)
        if head is None:
            return None
        try:
            value, _ = _gemma_value(text[head.end() - 1 : end], 0)
        except (ValueError, IndexError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raw = text[head.end() - 1 : end]
            return _Block(
                _consume(text, end, "<end_function_call>"),
                [_Raw(head.group(1), {}, "arguments are not readable", raw)],
            )
        return _Block(_consume(text, end, "<end_function_call>"), [_Raw(head.group(1), value)])

    def _deepseek(self, hit: _Hit) -> _Block | None:
        text = self.text
        i = hit.end if _DS_CALLS_BEGIN.match(text, hit.start) else hit.start
        raws: list[_Raw] = []
        while (cm := _DS_CALL_BEGIN.match(text, _skip_ws(text, i))) is not None:
            end = min(
                self.find(_DS_CALL_END, cm.end()),
                self.find(_DS_CALL_BEGIN, cm.end()),
                self.find(_DS_CALLS_END, cm.end()),
            )
            raw = _deepseek_call(text[cm.end() : end])
            if raw is None:
                break  # the calls read so far stand; the unreadable one stays text
            raws.append(raw)
            close = _DS_CALL_END.match(text, end)
            i = close.end() if close else end
        if not raws:
            return None
        close = _DS_CALLS_END.match(text, _skip_ws(text, i))
        return _Block(close.end() if close else i, raws)

    def _pythonic(self, hit: _Hit) -> _Block | None:
        end = self.find("\n", hit.start + 1)
        line = self.text[hit.start : end].strip()
        if not line.endswith("]"):
            return None
        raws = _pythonic(line)
        return _Block(end, raws) if raws else None


# --------------------------------------------------------------------------- helpers


def _looks_meant(raw: _Raw, kind: str) -> bool:
    """Whether an unknown call was meant as one: ``note(this)`` in prose is not."""
    return kind != "pythonic" or raw.error is None


def _strip_newline(value: str) -> str:
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value


def _json_error(raw: str) -> str:
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"the tool call is not valid JSON ({exc.msg} at position {exc.pos})"
    except Exception:  # RecursionError on deep nesting
        pass
    return "the tool call is not valid JSON"


def _deepseek_call(inner: str) -> _Raw | None:
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
    return _Raw(name, arguments, error, raw if error else None)


def _unfence(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        nl = text.find("\n")
        if nl != -1:
            return text[nl + 1 : -3].strip()
    return text


_PY_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def _literal(node: ast.AST) -> Any:
    """A literal value from an AST node; JSON's true/false/null are accepted too."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in _PY_LITERALS:
        return _PY_LITERALS[node.id]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if key_node is None:
                raise ValueError("** in a dict literal")
            key = _literal(key_node)
            out[key if isinstance(key, str) else json.dumps(key)] = _literal(value_node)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise ValueError("not a literal")


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


# a hyphenated name where a call's name stands: at the start, or after `[`, `,`, `;` or space
_HYPHENATED = re.compile(r"(?:^|(?<=[\[,;\s]))[A-Za-z_][\w.]*(?:-[\w.]+)+(?=\s*\()")
_ALIAS = re.compile(r"_tc_\d+_")


def _pythonic(source: str) -> list[_Raw] | None:
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
    raws: list[_Raw] = []
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
                arguments[keyword.arg] = _literal(keyword.value)
            except (ValueError, TypeError):
                problems.append(f"argument {keyword.arg!r} is not a literal value")
        if hyphens:  # a string value that held such a name gets it back
            arguments = _unalias(arguments, hyphens)
        error = "; ".join(problems) or None
        raw = ast.get_source_segment(source, element) if error else None
        raws.append(_Raw(name, arguments, error, raw))
    return raws or None


def _unalias(value: Any, hyphens: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _ALIAS.sub(lambda m: hyphens.get(m.group(), m.group()), value)
    if isinstance(value, list):
        return [_unalias(v, hyphens) for v in value]
    if isinstance(value, dict):
        return {k: _unalias(v, hyphens) for k, v in value.items()}
    return value


def _gemma_value(s: str, i: int) -> tuple[Any, int]:
    """One FunctionGemma value at i: {k:v,...}, [v,...], <escape>text<escape>, or a bare scalar."""
    i = _skip_ws(s, i)
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
            i = _skip_ws(s, i)
            if i >= len(s) or s[i] == close:
                return (obj if is_obj else items), i + 1
            if is_obj:
                colon = s.index(":", i)
                key = s[i:colon].strip().strip("\"'")
                obj[key], i = _gemma_value(s, colon + 1)
            else:
                value, i = _gemma_value(s, i)
                items.append(value)
            i = _skip_ws(s, i)
            if i < len(s) and s[i] == ",":
                i += 1
    j = i
    while j < len(s) and s[j] not in ",}]":
        j += 1
    word = s[i:j].strip()
    if word in _PY_LITERALS:
        return _PY_LITERALS[word], j
    for kind in (int, float):
        try:
            return kind(word), j
        except ValueError:
            pass
    return word, j


def _json_calls(body: str) -> list[_Raw] | None:
    """Calls from successive call JSON values filling all of body (split by space, ``;``, ``,``)."""
    raws: list[_Raw] = []
    i = 0
    while i < len(body):
        if body[i] not in "{[":
            return None
        value, end, _ = _read_value(body, i, len(body), need="name")
        found = None if value is _BROKEN else _raws_from_value(value, None, strict=True)
        if found is None:  # stop at the first value that is not a call: it is no call message
            return None
        raws.extend(found)
        i = _skip_ws(body, end)
        if body[i : i + 1] in (";", ","):
            i = _skip_ws(body, i + 1)
    return raws or None


def _whole_message(text: str) -> list[_Raw] | None:
    """Calls when the whole message is call JSON (bare, fenced) or pythonic calls, else None."""
    body = _unfence(text.strip())
    if not body:
        return None
    if body[0] in "{[":
        found = _json_calls(body)
        if found or body[0] == "{":
            return found
    if (body[0] == "[" or _NAME_LIKE.match(body)) and body.rstrip("]").rstrip().endswith(")"):
        return _pythonic(body)
    return None


# --------------------------------------------------------------------------- entry point


def extract_tool_calls(text: str, tools: Sequence[ToolSpec]) -> TextExtraction:
    """Find tool calls written as text in a model's content.

    Reasoning is split off first (calls inside it are ignored). Then every call block of the
    formats in ``llm-wire.md`` §5 is found, left to right, whatever the mix of formats. Bare or
    fenced JSON, and a pythonic call without brackets, count only when they are the whole
    message (after reasoning), so prose that shows a JSON example is left alone.

    Names: a call is accepted when its name is an offered tool's exposed name; failing that, when
    exactly one offered tool matches it case-insensitively, or by its name without the server
    prefix (``read_file`` for ``fs__read_file``; small models drop prefixes), or after a
    ``functions.`` prefix. The call then carries the exposed name. Any other name is reported in
    ``rejected``, and its block stays in the content as written; a block that mixes offered and
    unknown tools yields the offered calls and also stays in the content.

    Args:
        text: the assistant's content as the server sent it.
        tools: the tools offered on this turn.

    Returns:
        The content, the reasoning and the calls. Never raises.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    reasoning, body = "", text.strip()
    try:
        reasoning, body = split_reasoning(text)
        if not tools or not body:
            return TextExtraction(content=body, reasoning=reasoning)
        # The leading newline lets a pythonic line at the very start match like any other line
        # (an anchor in the marker pattern would cost the regex its first-character filter).
        calls, rejected, pieces = _Scanner("\n" + body, _Names(tools)).scan()
        content = _join(pieces) if calls else body
        if rejected:
            logger.info("textcalls: call blocks name tools that are not offered: %s", ", ".join(rejected))
        return TextExtraction(
            content=content, reasoning=reasoning, calls=tuple(calls), rejected=tuple(rejected)
        )
    except Exception:  # never cost the answer
        logger.warning("textcalls: extraction failed; the text is kept as content", exc_info=True)
        return TextExtraction(content=body, reasoning=reasoning)
