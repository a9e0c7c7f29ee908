"""Tool calls written as text, and reasoning blocks, taken out of a model's content (pure).

Servers without a tool-call parser (or with the wrong template) hand back the model's calls as
text inside ``content``, in one of a dozen family formats (``llm-wire.md`` §5): Qwen3-Coder XML,
Hermes ``<tool_call>{json}``, GLM-4.5 ``<tool_call>name<arg_key>…``, Granite, Phi-4-mini,
Mistral ``[TOOL_CALLS]``, DeepSeek and Kimi K2 special tokens, gpt-oss harmony messages, Llama
JSON / ``<|python_tag|>`` / ``<function=name>{json}``, LM Studio ``[TOOL_REQUEST]``, pythonic
``[f(a=1)]``, Olmo ``<function_calls>``, FunctionGemma and fenced or bare JSON.
``split_reasoning`` separates ``<think>`` blocks (and harmony's analysis channel) from the answer;
``extract_tool_calls`` strips reasoning first (calls inside reasoning are ignored), finds every
call block, keeps the calls that name an offered tool and leaves all other text as content. Bare
JSON counts only when the whole message is call JSON, fenced call JSON only when the fences end
the message. Nothing here does I/O or raises. This module is the parser's face: it decides which
calls count, and splits reasoning off a whole text (``split_reasoning``) or a stream as it comes
(``ThinkFilter``); finding and reading blocks is ``_scan``, reading one call and its values
``_calls``.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ...messages import ToolCall, ToolSpec
from ._calls import RawCall, convert_value, convert_xml_params, whole_message
from ._scan import Scanner, _header, _is_message, is_call, split_harmony

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_MARKERS",
    "MAX_SCAN_CHARS",
    "TextExtraction",
    "ThinkFilter",
    "convert_value",
    "extract_tool_calls",
    "split_reasoning",
]

MAX_SCAN_CHARS = 256_000
"""Calls are looked for in the first this many characters of an answer (about 64 000 tokens, more
than the models that write calls as text produce); the rest stays content as it is. Reading
blocks costs up to a few microseconds a character, so a 60 MB answer must not be read whole."""
MAX_MARKERS = 1000
"""At most this many block starts are tried in one answer; the rest of the text stays content."""


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

_THINK_TAG = re.compile(r"<(/?)(think|thinking)>|<\|message\|>")  # and harmony's <|message|>


def _join(parts: Sequence[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p and not p.isspace())


def split_reasoning(text: str) -> tuple[str, str]:
    """Split reasoning blocks from the answer.

    Handles ``<think>…</think>`` (and ``<thinking>…</thinking>``) anywhere, empty blocks,
    DeepSeek-R1's missing opening tag (text before the first ``</think>`` is reasoning when no
    ``<think>`` opens it) and an unclosed ``<think>`` (everything after it is reasoning, as when
    ``max_tokens`` ran out). Stray closing tags are dropped; a tag written as code
    (`` `<think>` ``, prose about tags) is left alone. gpt-oss harmony messages are sorted too:
    the analysis channel is reasoning, header tokens go, a tool-call message stays as written
    (for ``extract_tool_calls``) and the rest is content.

    Returns:
        ``(reasoning, content)``, both stripped; several reasoning blocks are joined by a blank
        line.
    """
    reasoning, content, _ = _split(text)
    return reasoning, content


def _split(text: str) -> tuple[str, str, bool]:
    """``split_reasoning``, and whether the content may hold harmony messages."""
    if not isinstance(text, str):
        return "", "", False
    harmony = False
    reasoning: list[str] = []
    content: list[str] = []
    pos = 0
    open_tag: str | None = None
    depth = 0
    start = 0
    index = -1
    for m in _THINK_TAG.finditer(text):
        if m.group(2) is None:  # harmony's <|message|>, found in the same pass
            harmony = harmony or open_tag is None
            continue
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
    answer = _join(content)
    if harmony:
        more, pieces = split_harmony(answer)
        reasoning.extend(more)
        answer = _join(pieces)
    return _join(reasoning), answer, harmony


# --------------------------------------------------------------------------- calls


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


def _scan(
    text: str, names: _Names, *, whole: bool = True, harmony: bool = True
) -> tuple[list[ToolCall], list[str], list[str]]:
    """Every call block in text, left to right: ``(calls, rejected names, content pieces)``.

    A block whose calls all name offered tools leaves the content; any other block stays in it.
    A reader that raises is logged and its marker is left as text. When no block was found and
    ``whole`` says text is the whole message, it may still be call JSON or pythonic calls.
    ``harmony`` says it may hold harmony call messages.
    """
    scanner = Scanner(text, names.resolve, complete=whole, harmony=harmony)
    pieces: list[str] = []
    calls: list[ToolCall] = []
    rejected: list[str] = []
    pos = 0  # where the scan goes on
    kept = 0  # start of the text not yet given to pieces
    tried = 0
    while (hit := scanner.next_marker(pos)) is not None:
        tried += 1
        if tried > MAX_MARKERS:
            logger.info(
                "textcalls: more than %d call markers; the rest of the text is left as it is", MAX_MARKERS
            )
            break
        try:
            block = scanner.read(hit)
        except Exception:  # a parser bug must not cost the answer: keep the text
            logger.warning("textcalls: %s parser failed at offset %d", hit.kind, hit.start, exc_info=True)
            block = None
        if block is None or not block.calls:
            pos = hit.start + 1
            continue
        accepted, unknown = _accept(block.calls, hit.kind, names)
        calls.extend(accepted)
        rejected.extend(unknown)
        if len(accepted) == len(block.calls):
            pieces.append(text[kept : hit.start])
            kept = block.end
        pos = max(block.end, hit.start + 1)
    pieces.append(text[kept:])
    if not calls and not rejected and whole:
        found = whole_message(text)
        if found:
            accepted, unknown = _accept(found, "pythonic", names)
            if len(accepted) == len(found):
                return accepted, [], []
            rejected.extend(unknown)
    return calls, rejected, pieces


def _accept(raws: Sequence[RawCall], kind: str, names: _Names) -> tuple[list[ToolCall], list[str]]:
    """The calls among raws that name an offered tool, and the names of the others.

    An accepted call carries the exposed name and a fresh id, and Qwen XML values are typed by
    the tool's schema. A pythonic call that names no tool and has unreadable arguments was not
    meant as a call (``note(this)`` in prose), so its name is not reported.
    """
    calls: list[ToolCall] = []
    unknown: list[str] = []
    for raw in raws:
        spec = names.resolve(raw.name)
        if spec is None:
            if kind != "pythonic" or raw.error is None:
                unknown.append(raw.name)
            continue
        arguments = raw.arguments
        if raw.xml_params is not None:
            arguments = convert_xml_params(raw.xml_params, spec.parameters)
        calls.append(
            ToolCall(
                id="call_" + secrets.token_hex(12),
                name=spec.name,
                arguments=arguments,
                error=raw.error,
                raw_arguments=raw.raw_arguments,
            )
        )
    return calls, unknown


# --------------------------------------------------------------------------- entry point


def extract_tool_calls(text: str, tools: Sequence[ToolSpec]) -> TextExtraction:
    """Find tool calls written as text in a model's content.

    Reasoning is split off first (calls inside it are ignored). Then every call block of the
    formats in ``llm-wire.md`` §5 is found, left to right, whatever the mix of formats. Bare
    JSON, and a pythonic call without brackets, count only when they are the whole message
    (after reasoning); fenced JSON (```` ```json ```` or ```` ``` ````) only when the fences end
    the message (prose may come before them) and hold nothing but call objects (``name`` and
    ``arguments`` or ``parameters``, no other keys, not a tool's schema). So prose that shows a
    JSON example, or a fence of data, is left alone.

    Names: a call is accepted when its name is an offered tool's exposed name; failing that, when
    exactly one offered tool matches it case-insensitively, or by its name without the server
    prefix (``read_file`` for ``fs__read_file``; small models drop prefixes), or after a
    ``functions.`` prefix. The call then carries the exposed name. Any other name is reported in
    ``rejected``, and its block stays in the content as written; a block that mixes offered and
    unknown tools yields the offered calls and also stays in the content.

    Only the first ``MAX_SCAN_CHARS`` characters are searched, and at most ``MAX_MARKERS`` block
    starts are tried: the work stays linear and small whatever the answer's length.

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
        reasoning, body, harmony = _split(text)
        if not tools or not body:
            return TextExtraction(content=body, reasoning=reasoning)
        # The leading newline lets a pythonic line at the very start match like any other line
        # (an anchor in the marker pattern would cost the regex its first-character filter).
        head, tail = body[:MAX_SCAN_CHARS], body[MAX_SCAN_CHARS:]
        calls, rejected, pieces = _scan("\n" + head, _Names(tools), whole=not tail, harmony=harmony)
        if tail and pieces:  # the text beyond the scan goes on the last piece as it is
            pieces[-1] += tail
        content = _join(pieces) if calls else body
        if rejected:
            logger.info("textcalls: call blocks name tools that are not offered: %s", ", ".join(rejected))
        return TextExtraction(
            content=content, reasoning=reasoning, calls=tuple(calls), rejected=tuple(rejected)
        )
    except Exception:  # never cost the answer
        logger.warning("textcalls: extraction failed; the text is kept as content", exc_info=True)
        return TextExtraction(content=body, reasoning=reasoning)


# --------------------------------------------------------------------------------------------
# streaming content routed to text or reasoning at ``<think>`` tags or harmony headers, even
# when a tag is split
#
# Chat Completions servers that run reasoning models often send the reasoning inside the content,
# as ``<think>…</think>`` (or ``<thinking>``) blocks, or, for gpt-oss on a server that does not
# parse harmony, as harmony messages (``<|channel|>analysis<|message|>…<|end|>``). While a stream
# is read, ``ThinkFilter`` says which pieces are answer and which are reasoning, so ``on_delta``
# never shows reasoning as answer; the end of a piece that could be the start of a tag is held
# back until the next piece (or ``flush`` at the end of the stream) decides. After the first
# harmony token the rest of the stream is read as harmony (``_HarmonyStream``): analysis bodies
# are reasoning, final and preamble bodies are text, headers are dropped and a tool-call message
# is not shown at all (it becomes a call). The finished turn is split again, whole, by
# ``split_reasoning``.

Piece = tuple[Literal["text", "reasoning"], str]


class ThinkFilter:
    """Routes streamed content to text or reasoning at ``<think>`` tags, even when split."""

    _TAGS: ClassVar[dict[str, str]] = {"<think>": "</think>", "<thinking>": "</thinking>"}

    def __init__(self) -> None:
        self._close: str | None = None
        self._pending = ""
        self._harmony: _HarmonyStream | None = None
        self._prev = ""  # the last character given out (a token right after a backtick is code)

    def flush(self) -> list[Piece]:
        """What was held back as a possible tag start, at the end of the stream."""
        if self._harmony is not None:
            return self._harmony.flush()
        if self._close is None and _HARMONY_TOKEN.search(self._pending):  # a token held at the very end
            self._harmony = _HarmonyStream(self._prev)
            pending, self._pending = self._pending, ""
            return self._harmony.feed(pending, final=True)
        pending, self._pending = self._pending, ""
        return [("text" if self._close is None else "reasoning", pending)] if pending else []

    def feed(self, text: str) -> list[Piece]:
        """The pieces of ``text`` that are known to be text or reasoning, in order."""
        if self._harmony is not None:
            return self._harmony.feed(text)
        out = self._feed(text)
        for _, piece in reversed(out):
            if piece:
                self._prev = piece[-1]
                break
        return out

    def _feed(self, text: str) -> list[Piece]:
        out: list[Piece] = []
        buf = self._pending + text
        self._pending = ""
        while buf:
            if self._close is None:
                token, hold = _next_token(buf, self._prev)
                found = min(((buf.find(t), t) for t in self._TAGS if t in buf), default=None)
                if token is None and hold < len(buf) and (found is None or hold < found[0]):
                    if hold:
                        out.append(("text", buf[:hold]))
                    self._pending = buf[hold:]
                    break
                if token is not None and (found is None or token.start() < found[0]):
                    if token.start():
                        out.append(("text", buf[: token.start()]))
                    self._harmony = _HarmonyStream(buf[token.start() - 1] if token.start() else self._prev)
                    return out + self._harmony.feed(buf[token.start() :])
                if found is not None:
                    at, tag = found
                    if at:
                        out.append(("text", buf[:at]))
                    self._close, buf = self._TAGS[tag], buf[at + len(tag) :]
                    continue
                keep = _partial_suffix(buf, (*self._TAGS, *_HARMONY_TOKENS))
            else:
                close = self._close
                at = buf.find(close)
                if at >= 0:
                    if at:
                        out.append(("reasoning", buf[:at]))
                    self._close, buf = None, buf[at + len(close) :]
                    continue
                keep = _partial_suffix(buf, (close,))
            kind: Literal["text", "reasoning"] = "text" if self._close is None else "reasoning"
            if len(buf) > keep:
                out.append((kind, buf[: len(buf) - keep]))
            self._pending = buf[len(buf) - keep :]
            break
        return out


def _partial_suffix(text: str, tags: Any) -> int:
    """Length of the longest end of ``text`` that could start one of ``tags``."""
    if "<" not in text[-12:]:
        return 0
    best = 0
    for tag in tags:
        for n in range(min(len(tag) - 1, len(text)), best, -1):
            if text.endswith(tag[:n]):
                best = n
                break
    return best


_HARMONY_TOKENS = (
    "<|start|>",
    "<|channel|>",
    "<|constrain|>",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
)
_HARMONY_TOKEN = re.compile(r"<\|(start|channel|constrain|message|end|call|return)\|>")
_MAX_HEADER = 800
"""A header longer than this is not one (the header parts of ``_scan`` are bounded alike): it is text."""


class _HarmonyStream:
    """Streamed harmony messages routed by channel: analysis is reasoning, final and preambles
    are text, a tool call is not shown, header tokens are dropped. A header that names no known
    channel, no ``assistant`` role and no recipient is prose holding the tokens: shown as text."""

    def __init__(self, prev: str = "") -> None:
        self._state: Literal["out", "head", "body"] = "out"
        self._kind: Literal["text", "reasoning", "hidden"] = "text"
        self._head = ""  # the header so far, tokens and all
        self._pending = ""
        self._prev = prev  # the last character of the text before the buffer

    def flush(self) -> list[Piece]:
        out = self.feed("", final=True)
        self._pending = ""
        return out  # a header cut off before its message is dropped, as the whole-turn split does

    def feed(self, text: str, *, final: bool = False) -> list[Piece]:
        out: list[Piece] = []
        buf = self._pending + text
        self._pending = ""
        while buf:
            if self._state == "head":
                at = buf.find("<|message|>")
                if at < 0:
                    keep = _partial_suffix(buf, ("<|message|>",))
                    self._head += buf[: len(buf) - keep]
                    self._pending = buf[len(buf) - keep :]
                    if len(self._head) > _MAX_HEADER:  # not a header after all
                        out += [("text", self._head)]
                        self._state, self._kind, self._head = "out", "text", ""
                    return out
                self._head += buf[:at]
                buf = buf[at + len("<|message|>") :]
                out += self._open()
                continue
            token, hold = _next_token(buf, self._prev, final=final)
            if token is None:
                keep = (
                    len(buf) - hold
                    if hold < len(buf)
                    else 0
                    if final
                    else _partial_suffix(buf, _HARMONY_TOKENS)
                )
                out += self._piece(buf[: len(buf) - keep])
                self._pending = buf[len(buf) - keep :]
                return out
            out += self._piece(buf[: token.start()])
            self._prev = ">"
            name, buf = token.group(1), buf[token.end() :]
            if name in ("end", "call", "return"):
                self._state, self._kind = "out", "text"
            elif name == "message":  # a message with no header: its body is text
                self._state, self._kind = "body", "text"
            else:
                self._state, self._head = "head", token.group(0)
        return out

    def _open(self) -> list[Piece]:
        """The header is complete: what its message's body is."""
        parts = dict.fromkeys(("start", "channel"), "")
        for m in re.finditer(r"<\|(start|channel|constrain)\|>([^<]*)", self._head):
            parts[m.group(1)] = m.group(2)
        header = _header(parts["start"], parts["channel"])
        head, self._head, self._state = self._head, "", "body"
        if not _is_message(header, parts["start"]):
            self._kind = "text"
            return [("text", head + "<|message|>")]
        if is_call(header):
            self._kind = "hidden"
        else:
            self._kind = "reasoning" if header.channel == "analysis" else "text"
        return []

    def _piece(self, text: str) -> list[Piece]:
        if text:
            self._prev = text[-1]
        if not text or self._kind == "hidden":
            return []
        return [(self._kind, text)]


def _next_token(buf: str, prev: str, *, final: bool = False) -> tuple[re.Match[str] | None, int]:
    """The first harmony token in ``buf`` that is not written as code (a backtick right before
    or after it), and where to hold the buffer back from: a token at its very end waits for the
    next character, to see whether a backtick follows (unless the stream is ``final``).
    ``prev``: the character before ``buf``."""
    for m in _HARMONY_TOKEN.finditer(buf):
        before = buf[m.start() - 1] if m.start() else prev
        if m.end() == len(buf) and not final:
            return (None, m.start()) if before != "`" else (None, len(buf))
        if before == "`" or buf[m.end() : m.end() + 1] == "`":
            continue
        return m, m.start()
    return None, len(buf)
