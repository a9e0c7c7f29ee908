"""Finding tool-call blocks in a model's text and reading each format's block (pure).

``Scanner`` makes one left-to-right pass over one text: it finds the next block start of any
format (``llm-wire.md`` §5) and hands it to that format's reader, which returns the block's calls
and where the block ends, or None when the marker starts no block. The JSON-bearing formats
(Hermes, Granite, Phi, LM Studio, Mistral, ``<|python_tag|>``, fenced JSON) are read by
``Scanner`` itself, the tag and special-token formats by the ``TagReaders`` it inherits, gpt-oss
harmony messages with the header reader of the harmony section. The work stays linear-ish in the
length of the text: markers are found with ``str.find``, every search remembers its last answer
(``Cursor``), and each block is bounded by the next marker of its kind, so thousands of unclosed
markers cost one scan per closing tag.

``Cursor`` holds one text and answers "where is the next X from here" with ``str.find`` or a
pattern, remembering each search's last answer. ``Hit`` is a format's marker found in the text,
``Block`` the calls of one block and where it ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...messages import ToolSpec, parse_arguments
from ._calls import (
    BROKEN,
    RawCall,
    calls_from_value,
    deepseek_call,
    ds_token,
    find_name,
    gemma_value,
    json_error,
    kimi_call,
    pythonic_calls,
    read_value,
    skip_ws,
)

__all__ = [
    "HARMONY_ENDS",
    "KIMI_SECTION_BEGIN",
    "Block",
    "Cursor",
    "Header",
    "Hit",
    "Scanner",
    "TagReaders",
    "consume",
    "is_call",
    "past_any",
    "read_header",
    "skip_fence",
    "split_harmony",
    "strip_newline",
]


@dataclass(frozen=True)
class Hit:
    """A format's marker found in the text."""

    kind: str
    start: int
    end: int


@dataclass
class Block:
    """The calls of one block, and where the block ends."""

    end: int
    calls: list[RawCall]


class Cursor:
    """One text, and searches in it that remember their last answer.

    Args:
        text: the text to scan.
        resolve: the offered tool a written name means, or None; the Qwen XML reader uses it to
            know which ``<parameter=`` lines are structural.
        complete: text is the whole message (not a head cut off a longer one), so a block that
            reaches its end ends the message.
    """

    def __init__(
        self, text: str, resolve: Callable[[str], ToolSpec | None], *, complete: bool = True
    ) -> None:
        self.text = text
        self.resolve = resolve
        self.complete = complete
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
        """The first occurrence of any of ``whats`` at or after start, or len(text)."""
        return min(self.find(w, start) for w in whats)


def skip_fence(text: str, i: int) -> int:
    """Past an opening code fence (```json\\n) at i, if there is one."""
    if text.startswith("```", i):
        nl = text.find("\n", i, i + 40)
        if nl != -1:
            return skip_ws(text, nl + 1)
    return i


def past_any(text: str, i: int, closers: tuple[str, ...]) -> int:
    """Past whichever of ``closers`` follows i (whitespace skipped), if one does."""
    j = skip_ws(text, i)
    for closer in closers:
        if text.startswith(closer, j):
            return j + len(closer)
    return i


def consume(text: str, i: int, *closers: str) -> int:
    """Past each of ``closers`` that follows i in turn (each optional; whitespace skipped)."""
    for closer in closers:
        j = skip_ws(text, i)
        if text.startswith(closer, j):
            i = j + len(closer)
    return i


def strip_newline(value: str) -> str:
    """Value without one leading and one trailing newline (Qwen XML puts them around values)."""
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value


# --------------------------------------------------------------------------------------------
# gpt-oss harmony messages: reasoning, answer and tool calls told apart
#
# gpt-oss writes its output as harmony messages (OpenAI's "harmony response format"). A server
# that does not parse them hands the special tokens back inside the content::
#
#     <|channel|>analysis<|message|>Need the weather.<|end|>
#     <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Tokyo"}<|call|>
#     <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>
#
# A message is an optional ``<|start|>ROLE``, an optional ``<|channel|>CHANNEL``, an optional
# ``<|constrain|>TYPE`` and ``<|message|>``, then its body up to ``<|end|>``, ``<|call|>``,
# ``<|return|>``, the next header or the end of the text. The first message usually has no
# ``<|start|>assistant`` (the prompt ends with it). A recipient (``to=functions.NAME``) may sit in the
# role or the channel part of the header and makes the message a tool call. ``split_harmony``
# sorts the messages: the analysis channel is reasoning, a call message stays as written (for the
# call scanner, which reads it with ``read_header``), anything else (final, a commentary preamble)
# is content. Nothing here does I/O or raises.

HARMONY_ENDS = ("<|call|>", "<|end|>", "<|return|>")
"""The tokens that end a harmony message (a new header or the end of the text also does)."""

_TOKEN = re.compile(r"<\|(start|channel|constrain|message|end|call|return)\|>")
_HEAD = re.compile(
    r"(?:<\|start\|>([^<]{0,300}))?(?:<\|channel\|>([^<]{0,300}))?(?:<\|constrain\|>([^<]{0,100}))?<\|message\|>"
)
_CHANNELS = frozenset({"analysis", "commentary", "final"})
_RECIPIENT = re.compile(r"(?:^|\s)to=([^\s<]{1,250})")


@dataclass(frozen=True)
class Header:
    """A harmony message's header: its channel's first word (lowercase) and its recipient."""

    channel: str
    recipient: str


def _header(role: str, channel: str) -> Header:
    words = channel.split()
    found = _RECIPIENT.search(role) or _RECIPIENT.search(channel)
    return Header(words[0].lower() if words else "", found.group(1) if found else "")


def is_call(header: Header) -> bool:
    """Whether a message with this header is a tool call.

    A recipient makes it one, except ``assistant`` (a tool's answer written by the model) and,
    on the analysis channel, a built-in tool (``python``, ``browser.search``): those are part of
    the reasoning. A ``functions.*`` recipient is a call on any channel.
    """
    if not header.recipient or header.recipient == "assistant":
        return False
    return header.channel != "analysis" or header.recipient.startswith("functions.")


def read_header(text: str, i: int) -> tuple[Header, int] | None:
    """The header of the harmony message that starts at i, and where its body starts."""
    m = _HEAD.match(text, i)
    if m is None or (m.group(1) is None and m.group(2) is None):
        return None
    return _header(m.group(1) or "", m.group(2) or ""), m.end()


def split_harmony(text: str) -> tuple[list[str], list[str]]:
    """The reasoning and the content pieces of a text of harmony messages, in order.

    Analysis messages are reasoning; a call message stays in the content as written, tokens and
    all, so the call scanner finds it (and a call to a tool nobody offered stays visible); the
    body of any other message, and text outside messages, is content. Header tokens are
    dropped, and so is a header cut off before its ``<|message|>``. A header that names no
    known channel, no ``assistant`` role and no recipient is prose that happens to hold the
    tokens: it stays as written, and so does a token written as code (`` `<|channel|>` ``).
    """
    reasoning: list[str] = []
    content: list[str] = []
    state = "text"  # text | header | body
    pos = 0  # start of the text not yet given out (prose, or tokens that made no message)
    msg_start = body_start = 0
    parts: dict[str, str] = {}
    part, part_start = "", 0

    def close(end: int, after: int) -> int:
        """Give out the message that ends at end (after its end token); where the text goes on."""
        role = parts.get("start", "")
        header = _header(role, parts.get("channel", ""))
        if not _is_message(header, role):
            return pos  # prose holding tokens: it stays in the text run
        content.append(text[pos:msg_start])
        if state == "header":
            pass  # a header with no message: dropped
        elif is_call(header):
            content.append(text[msg_start:after])
        elif header.channel == "analysis":
            reasoning.append(text[body_start:end])
        else:
            content.append(text[body_start:end])
        return after

    for m in _TOKEN.finditer(text):
        if text[m.start() - 1 : m.start()] == "`" or text[m.end() : m.end() + 1] == "`":
            continue  # a token written as code
        token = m.group(1)
        if token in ("start", "channel", "constrain"):
            if state == "body":
                pos, state = close(m.start(), m.start()), "text"
            if state == "text":
                msg_start, parts, state = m.start(), {}, "header"
            else:
                parts[part] = text[part_start : m.start()]
            part, part_start = token, m.end()
        elif token == "message":
            if state == "header":
                parts[part] = text[part_start : m.start()]
                body_start, state = m.end(), "body"
        elif state != "text":  # an end token
            if state == "header":
                parts[part] = text[part_start : m.start()]
            pos, state = close(m.start(), m.end()), "text"
    if state == "header":
        parts[part] = text[part_start:]
    if state != "text":
        pos = close(len(text), len(text))
    content.append(text[pos:])
    return reasoning, content


def _is_message(header: Header, role: str) -> bool:
    """Whether a header is a harmony message's: a known channel, the assistant role or a recipient."""
    return header.channel in _CHANNELS or role.strip().startswith("assistant") or bool(header.recipient)


# --------------------------------------------------------------------------------------------
# readers of the tag and special-token formats
#
# ``TagReaders`` adds one reader per format to ``Cursor`` (``llm-wire.md`` §5): Qwen3-Coder XML
# and Llama's ``<function=name>{json}``, GLM-4.5 ``<arg_key>``/``<arg_value>`` pairs, Olmo
# ``<function_calls>``, FunctionGemma, DeepSeek and Kimi K2 call tokens, gpt-oss harmony call
# messages and a line of pythonic calls. ``Scanner`` (below) finds the markers and reads the
# JSON-bearing formats. A reader returns the block's calls and where the block ends, or None
# when its marker starts no block; each block is bounded by the next marker of its kind, found
# with the cursor's remembering searches, so the work stays linear-ish in the text's length.

KIMI_SECTION_BEGIN = re.compile(r"<\|tool_calls?_section_begin\|>")
_KIMI_SECTION_END = re.compile(r"<\|tool_calls?_section_end\|>")
_DS_CALLS_BEGIN = re.compile(ds_token("tool_calls_begin"))
_DS_CALLS_END = re.compile(ds_token("tool_calls_end"))
_DS_CALL_BEGIN = re.compile(ds_token("tool_call_begin"))
_DS_CALL_END = re.compile(ds_token("tool_call_end"))
_FUNC_HEAD = re.compile(r"<function=([^>\n]{1,200})>")
_PARAM_HEAD = re.compile(r"<parameter=([^>\n]{1,200})>")
_PARAM_LINE = re.compile(r"\n[ \t]*<parameter=([^>\n]{1,200})>")
_GEMMA_HEAD = re.compile(r"\s*call:([A-Za-z0-9_.\-]{1,200})\s*\{")
_GLM_NAME = re.compile(r"([A-Za-z_][\w.\-:]{0,199})[ \t]*(?=\r?\n|<arg_key>|</tool_call>)")


class TagReaders(Cursor):
    """A cursor with the readers of the tag and special-token formats (``_<kind>`` each)."""

    def _function(self, hit: Hit) -> Block | None:
        got = self._xml_function(hit.start, wrapped=False)
        return Block(got[1], [got[0]]) if got else None

    def _xml_function(self, i: int, *, wrapped: bool) -> tuple[RawCall, int] | None:
        """``<function=NAME>`` with Qwen XML parameters or a JSON body (Llama), at i."""
        text = self.text
        head = _FUNC_HEAD.match(text, i)
        if head is None:
            return None
        name = head.group(1).strip().strip("\"'")
        j = skip_ws(text, head.end())
        if text[j : j + 1] == "{":  # Llama: <function=name>{"city": "Tokyo"}</function>
            limit = self.first(j, "</function>", "<function=")
            value, end, repaired = read_value(text, j, limit)
            if isinstance(value, dict):
                raw_json = text[j:end] if repaired else None
                return RawCall(name, value, None, raw_json), consume(text, end, "</function>")
            raw = text[j:limit].strip() if value is BROKEN else text[j:end]
            arguments, error = parse_arguments(raw)
            return RawCall(name, arguments, error, raw), consume(text, max(end, limit), "</function>")
        spec = self.resolve(name)
        props = spec.parameters.get("properties") if spec is not None else None
        known = set(props) if isinstance(props, dict) and props else None  # None: any name
        region = self.first(head.end(), "\n<function=", "<tool_call>")
        params: dict[str, str] = {}
        p = head.end()
        while True:
            q = skip_ws(text, p)
            ph = _PARAM_HEAD.match(text, q)
            if ph is None or q >= region:
                break
            value_end, p = self._param_end(ph.end(), region, known)
            params[ph.group(1).strip().strip("\"'")] = strip_newline(text[ph.end() : value_end])
        q = skip_ws(text, p)
        closed = text.startswith("</function>", q)
        if not (params or closed or wrapped):
            return None  # a bare `<function=x>` in prose
        end = q + len("</function>") if closed else p
        return RawCall(name, xml_params=params), end

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

    def _olmo(self, hit: Hit) -> Block | None:
        end = self.first(hit.end, "</function_calls>", "<function_calls>")
        raws: list[RawCall] = []
        for line in self.text[hit.end : end].splitlines():
            if line.strip():
                got = pythonic_calls(line)
                if not got:
                    return None
                raws.extend(got)
        return Block(consume(self.text, end, "</function_calls>"), raws) if raws else None

    def _gemma(self, hit: Hit) -> Block | None:
        text = self.text
        end = self.first(hit.end, "<end_function_call>", "<start_function_call>")
        head = _GEMMA_HEAD.match(text, hit.end, end)
        if head is None:
            return None
        try:
            value, _ = gemma_value(text[head.end() - 1 : end], 0)
        except (ValueError, IndexError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raw = text[head.end() - 1 : end]
            return Block(
                consume(text, end, "<end_function_call>"),
                [RawCall(head.group(1), {}, "arguments are not readable", raw)],
            )
        return Block(consume(text, end, "<end_function_call>"), [RawCall(head.group(1), value)])

    def _deepseek(self, hit: Hit) -> Block | None:
        text = self.text
        if KIMI_SECTION_BEGIN.match(text, hit.start):
            return self._kimi(hit)
        i = hit.end if _DS_CALLS_BEGIN.match(text, hit.start) else hit.start
        raws, i = self._token_calls(i)
        if not raws:
            return None
        close = _DS_CALLS_END.match(text, skip_ws(text, i))
        return Block(close.end() if close else i, raws)

    def _kimi(self, hit: Hit) -> Block | None:
        """Kimi K2: a section of ``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{json}<|tool_call_end|>``."""
        raws, i = self._token_calls(hit.end, _KIMI_SECTION_END)
        if not raws:
            return None
        close = _KIMI_SECTION_END.match(self.text, skip_ws(self.text, i))
        return Block(close.end() if close else i, raws)

    def _token_calls(self, i: int, *ends: re.Pattern[str]) -> tuple[list[RawCall], int]:
        """The calls between ``<|tool_call_begin|>`` and ``<|tool_call_end|>`` tokens from i on
        (DeepSeek's, fullwidth or ASCII, and Kimi's), and where they end."""
        text = self.text
        raws: list[RawCall] = []
        while (cm := _DS_CALL_BEGIN.match(text, skip_ws(text, i))) is not None:
            end = min(
                self.find(_DS_CALL_END, cm.end()),
                self.find(_DS_CALL_BEGIN, cm.end()),
                self.find(_DS_CALLS_END, cm.end()),
                *(self.find(e, cm.end()) for e in ends),
            )
            inner = text[cm.end() : end]
            raw = deepseek_call(inner)
            if raw is None and (kimi := kimi_call(inner)) is not None:
                raw, used = kimi
                end = cm.end() + used
            if raw is None:
                break  # the calls read so far stand; the unreadable one stays text
            raws.append(raw)
            close = _DS_CALL_END.match(text, skip_ws(text, end))
            i = close.end() if close else end
        return raws, i

    def _harmony(self, hit: Hit) -> Block | None:
        """A gpt-oss harmony message with a recipient: ``…to=functions.NAME…<|message|>{json}<|call|>``."""
        text = self.text
        got = read_header(text, hit.start)
        if got is None or not is_call(got[0]):
            return None
        header, j = got
        limit = self.first(j, *HARMONY_ENDS, "<|start|>", "<|channel|>")
        name = header.recipient.removeprefix("functions.")
        j = skip_ws(text, j)
        if text[j : j + 1] in ("{", "["):
            value, end, repaired = read_value(text, j, limit)
            if isinstance(value, dict):
                return Block(
                    past_any(text, end, HARMONY_ENDS),
                    [RawCall(name, value, None, text[j:end] if repaired else None)],
                )
        raw = text[j:limit].strip()
        arguments, error = parse_arguments(raw)
        return Block(
            past_any(text, limit, HARMONY_ENDS), [RawCall(name, arguments, error, raw if error else None)]
        )

    def _glm(self, i: int) -> Block | None:
        """GLM-4.5/4.7: ``<tool_call>NAME``, then ``<arg_key>K</arg_key><arg_value>V</arg_value>`` pairs.

        Values are raw text, typed later by the tool's schema. A value left open ends where its
        call does (the next ``<arg_key>``, ``</tool_call>`` or ``<tool_call>``).
        """
        text = self.text
        head = _GLM_NAME.match(text, i)
        if head is None:
            return None
        name = head.group(1)
        params: dict[str, str] = {}
        p = skip_ws(text, head.end())
        while text.startswith("<arg_key>", p):
            key_end = self.find("</arg_key>", p)
            q = skip_ws(text, key_end + len("</arg_key>"))
            if key_end - p > 300 or not text.startswith("<arg_value>", q):
                stop = self.first(p, "</tool_call>", "<tool_call>")
                raw = text[p:stop].strip()
                error = (
                    "an <arg_key> without its <arg_value>: write <arg_key>K</arg_key><arg_value>V</arg_value>"
                )
                return Block(consume(text, stop, "</tool_call>"), [RawCall(name, {}, error, raw)])
            key = text[p + len("<arg_key>") : key_end].strip()
            start = q + len("<arg_value>")
            close = self.find("</arg_value>", start)
            if close < self.find("<tool_call>", start):
                p = skip_ws(text, close + len("</arg_value>"))
            else:  # left open: the value ends with its call
                close = p = self.first(start, "<arg_key>", "</tool_call>", "<tool_call>")
            params[key] = text[start:close]
        closed = text.startswith("</tool_call>", p)
        if not (params or closed):
            return None  # `<tool_call>` and a word, in prose
        return Block(p + len("</tool_call>") if closed else p, [RawCall(name, xml_params=params)])

    def _pythonic(self, hit: Hit) -> Block | None:
        end = self.find("\n", hit.start + 1)
        line = self.text[hit.start : end].strip()
        if not line.endswith("]"):
            return None
        raws = pythonic_calls(line)
        return Block(end, raws) if raws else None


# --------------------------------------------------------------------------------------------
# where blocks start, and the readers of the JSON-bearing formats
#
# ``Scanner`` makes one left-to-right pass over one text. ``next_marker`` finds the next block
# start of any format (``llm-wire.md`` §5: ``<tool_call>`` (Hermes, Granite, Qwen XML, GLM),
# ``<function=``, ``<|tool_call|>``, ``functools[``, ``[TOOL_CALLS]``, ``[TOOL_REQUEST]``,
# ``<|python_tag|>``, ``<function_calls>``, ``<start_function_call>``, Kimi K2 and DeepSeek tokens,
# harmony ``<|start|>``/``<|channel|>`` headers, code fences, a line of pythonic calls) and
# ``read`` hands it to that format's reader, which returns the block's calls and where it ends, or
# None when the marker starts no block. The JSON-bearing formats are read here (Hermes, Granite,
# Phi, LM Studio, Mistral, ``<|python_tag|>``, fenced JSON), the tag and token formats by
# ``TagReaders`` (above). The work stays linear-ish in the length of the text: markers are
# found with ``str.find``, every search remembers its last answer, and each block is bounded by
# the next marker of its kind, so thousands of unclosed markers cost one scan per closing tag.

# Where each format's blocks start; the kind names the reader (``Scanner._<kind>``). Literals
# are found with str.find; the patterns begin with a literal character, so the regex engine
# skips ahead fast too. (One alternation of all of them would cost ten times more: the engine
# would try every branch at every character.) Every marker costs a search of the whole text,
# about a tenth of the time ordinary prose takes: markers that can only matter in some texts
# are searched for only in those (_HARMONY_MARKERS, _FENCE_MARKER; see ``Scanner``), and Kimi's
# section token shares DeepSeek's pattern (its tokens look alike).
_Marker = tuple[str, str | re.Pattern[str]]
_MARKERS: tuple[_Marker, ...] = (
    ("tool_call", "<tool_call>"),
    ("function", "<function="),
    ("granite", "<|tool_call|>"),
    ("phi", "functools["),
    ("mistral", "[TOOL_CALLS]"),
    ("lmstudio", "[TOOL_REQUEST]"),
    ("python_tag", "<|python_tag|>"),
    ("olmo", "<function_calls>"),
    ("gemma", "<start_function_call>"),
    (
        "deepseek",  # and Kimi K2
        re.compile(
            f"{ds_token('tool_calls_begin')}|{ds_token('tool_call_begin')}|{KIMI_SECTION_BEGIN.pattern}"
        ),
    ),
    ("pythonic", re.compile(r"\n[ \t]*\[(?=[A-Za-z_][\w.\-]*\()")),  # a line of pythonic calls
)
_HARMONY_MARKERS: tuple[_Marker, ...] = (("harmony", "<|start|>"), ("harmony", "<|channel|>"))
_FENCE_MARKER: _Marker = ("fence", "```")
_MISTRAL_CALL = re.compile(r"([A-Za-z0-9_.\-]{1,200})(?:\[CALL_ID\][A-Za-z0-9_\-]{0,64})?(\[ARGS\])?")
_PY_END = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|\n")
_FENCE_LABELS = frozenset({"", "json"})


class Scanner(TagReaders):
    """One pass over one text: finds call blocks left to right.

    Args:
        text: the text to scan.
        resolve: the offered tool a written name means, or None; the Qwen XML reader uses it to
            know which ``<parameter=`` lines are structural.
        complete: text is the whole message (not a head cut off a longer one), so a block that
            reaches its end ends the message.
        harmony: text may hold gpt-oss harmony call messages (``split_reasoning`` saw a
            ``<|message|>``); without it their headers are not searched for.
    """

    def __init__(
        self,
        text: str,
        resolve: Callable[[str], ToolSpec | None],
        *,
        complete: bool = True,
        harmony: bool = True,
    ) -> None:
        super().__init__(text, resolve, complete=complete)
        # fenced calls must end the message: without a fence at its end, no fence is searched for
        fence = (_FENCE_MARKER,) if complete and text.rstrip().endswith("```") else ()
        self._markers = _MARKERS + (_HARMONY_MARKERS if harmony else ()) + fence
        self._fences_fail_before = 0  # fences before this index belong to a run already refused

    def next_marker(self, pos: int) -> Hit | None:
        """The first marker of any format at or after pos."""
        best: tuple[int, str, str | re.Pattern[str]] | None = None
        for kind, what in self._markers:
            at = self.find(what, pos)
            if at < len(self.text) and (best is None or at < best[0]):
                best = (at, kind, what)
        if best is None:
            return None
        at, kind, what = best
        if isinstance(what, str):
            return Hit(kind, at, at + len(what))
        m = what.match(self.text, at)
        return Hit(kind, at, m.end() if m else at + 1)

    def read(self, hit: Hit) -> Block | None:
        """The block that starts at hit, read by its format's reader; None if none starts there."""
        reader: Callable[[Hit], Block | None] = getattr(self, "_" + hit.kind)
        return reader(hit)

    # -- JSON-bearing blocks ------------------------------------------------------------

    def _json_block(self, i: int, limit: int, *closers: str) -> Block | None:
        """A JSON call object or list at i (after an optional fence); the block may end at limit."""
        text = self.text
        i = skip_ws(text, i)
        fenced = skip_fence(text, i)
        if fenced != i:
            i, closers = fenced, ("```", *closers)
        if text[i : i + 1] not in ("{", "["):
            return None
        value, end, repaired = read_value(text, i, limit, need="name")
        if value is BROKEN:
            name = find_name(text[i:limit])
            if name is None:
                return None
            raw = text[i:limit].strip()
            return Block(consume(text, limit, *closers), [RawCall(name, {}, json_error(raw), raw)])
        raws = calls_from_value(value, text[i:end] if repaired else None, strict=False)
        if raws is None:
            return None
        return Block(consume(text, end, *closers), raws)

    def _tool_call(self, hit: Hit) -> Block | None:
        text = self.text
        i = skip_ws(text, hit.end)
        limit = self.first(i, "</tool_call>", "<tool_call>")
        if text.startswith("<function=", i):
            raws: list[RawCall] = []
            end = i
            while text.startswith("<function=", i):
                got = self._xml_function(i, wrapped=True)
                if got is None:
                    break
                raws.append(got[0])
                end = got[1]
                i = skip_ws(text, end)
            if not raws:
                return None
            return Block(consume(text, end, "</tool_call>"), raws)
        if text[i : i + 1] not in ("{", "[", "`"):
            return self._glm(i)
        return self._json_block(i, limit, "</tool_call>")

    def _granite(self, hit: Hit) -> Block | None:
        limit = self.first(hit.end, "<|/tool_call|>", "<|tool_call|>")
        return self._json_block(hit.end, limit, "<|/tool_call|>")

    def _phi(self, hit: Hit) -> Block | None:
        limit = self.first(hit.end, "functools[")
        return self._json_block(hit.end - 1, limit)

    def _lmstudio(self, hit: Hit) -> Block | None:
        limit = self.first(hit.end, "[END_TOOL_REQUEST]", "[TOOL_REQUEST]")
        return self._json_block(hit.end, limit, "[END_TOOL_REQUEST]")

    def _mistral(self, hit: Hit) -> Block | None:
        text = self.text
        limit = self.find("[TOOL_CALLS]", hit.end)
        i = skip_ws(text, hit.end)
        if text[i : i + 1] in ("[", "{") or text.startswith("```", i):
            return self._json_block(i, limit)  # pre-v11: a JSON list after the token
        raws: list[RawCall] = []
        end = i
        while True:  # v11: name[ARGS]{...}, maybe name[CALL_ID]id[ARGS]{...}
            head = _MISTRAL_CALL.match(text, i)
            if head is None or (head.group(2) is None and text[head.end() : head.end() + 1] != "{"):
                break
            j = skip_ws(text, head.end())
            value, end, repaired = read_value(text, j, limit)
            if isinstance(value, dict):
                raws.append(RawCall(head.group(1), value, None, text[j:end] if repaired else None))
            else:
                raw = text[j:limit].strip() if value is BROKEN else text[j:end]
                end = limit if value is BROKEN else end
                arguments, error = parse_arguments(raw)
                raws.append(RawCall(head.group(1), arguments, error, raw))
            i = skip_ws(text, end)
        if not raws:
            return None
        return Block(end, raws)

    def _python_tag(self, hit: Hit) -> Block | None:
        text = self.text
        i = skip_ws(text, hit.end)
        if text[i : i + 1] != "{":  # a built-in tool: brave_search.call(query="...")
            line_end = self.first(i, _PY_END, "<|python_tag|>")
            raws = pythonic_calls(text[i:line_end])
            return Block(consume(text, line_end, "<|eom_id|>", "<|eot_id|>"), raws) if raws else None
        limit = self.first(i, "<|python_tag|>", "<|eom_id|>", "<|eot_id|>")
        raws = []
        end = i
        while text[i : i + 1] == "{":  # several calls: {...}; {...}
            block = self._json_block(i, limit)
            if block is None:
                break
            raws.extend(block.calls)
            end = i = block.end
            i = skip_ws(text, i)
            if text[i : i + 1] in (";", ","):
                i = skip_ws(text, i + 1)
        if not raws:
            return None
        return Block(consume(text, end, "<|eom_id|>", "<|eot_id|>"), raws)

    # -- fenced JSON ----------------------------------------------------------------------

    def _fence(self, hit: Hit) -> Block | None:
        """Fenced call JSON (```` ```json ```` or ```` ``` ````) that ends the message.

        Every fence from hit to the end of the text must hold nothing but call objects (a name,
        ``arguments`` or ``parameters``, nothing else; ``calls_from_value`` strict), with
        only whitespace between and after the fences. A fence followed by prose, or one that
        holds anything else, is the model showing JSON, and stays content. A run of fences that
        fails is remembered, so each fence is read once.
        """
        if hit.start < self._fences_fail_before:
            return None
        text = self.text
        raws: list[RawCall] = []
        i = hit.start
        while (block := self._fenced_calls(i)) is not None:
            raws.extend(block.calls)
            i = skip_ws(text, block.end)
            if i >= len(text):
                return Block(block.end, raws) if self.complete else None
        self._fences_fail_before = max(i, hit.start + 1)
        return None

    def _fenced_calls(self, i: int) -> Block | None:
        """The calls of the fence at i when it holds only call JSON values, else None."""
        text = self.text
        if not text.startswith("```", i):
            return None
        nl = text.find("\n", i, i + 40)
        if nl == -1 or text[i + 3 : nl].strip().lower() not in _FENCE_LABELS:
            return None
        j = skip_ws(text, nl + 1)
        limit = self.find("```", j)
        raws: list[RawCall] = []
        while text[j : j + 1] in ("{", "["):
            value, end, repaired = read_value(text, j, limit, need="name")
            found = (
                None
                if value is BROKEN
                else calls_from_value(value, text[j:end] if repaired else None, strict=True)
            )
            if found is None:
                return None
            raws.extend(found)
            j = skip_ws(text, end)
            if text[j : j + 1] in (",", ";"):
                j = skip_ws(text, j + 1)
        if not raws or j != limit or limit >= len(text):
            return None
        return Block(limit + 3, raws)
