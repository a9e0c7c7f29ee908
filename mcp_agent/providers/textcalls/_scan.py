"""Where tool-call blocks start in a model's text, and the readers of the JSON-bearing formats (pure).

``Scanner`` makes one left-to-right pass over one text. ``next_marker`` finds the next block
start of any format (``llm-wire.md`` §5: ``<tool_call>`` (Hermes, Granite, Qwen XML, GLM),
``<function=``, ``<|tool_call|>``, ``functools[``, ``[TOOL_CALLS]``, ``[TOOL_REQUEST]``,
``<|python_tag|>``, ``<function_calls>``, ``<start_function_call>``, Kimi K2 and DeepSeek tokens,
harmony ``<|start|>``/``<|channel|>`` headers, code fences, a line of pythonic calls) and
``read`` hands it to that format's reader, which returns the block's calls and where it ends, or
None when the marker starts no block. The JSON-bearing formats are read here (Hermes, Granite,
Phi, LM Studio, Mistral, ``<|python_tag|>``, fenced JSON), the tag and token formats by
``_tag_readers.TagReaders``. The work stays linear-ish in the length of the text: markers are
found with ``str.find``, every search remembers its last answer, and each block is bounded by
the next marker of its kind, so thousands of unclosed markers cost one scan per closing tag.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ...messages import ToolSpec, parse_arguments
from ._calls import RawCall, calls_from_value, ds_token, find_name, pythonic_calls
from ._cursor import Block, Hit, consume, skip_fence
from ._tag_readers import KIMI_SECTION_BEGIN, TagReaders
from ._values import BROKEN, json_error, read_value, skip_ws

__all__ = ["Block", "Hit", "Scanner"]

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
        ``arguments`` or ``parameters``, nothing else; ``_calls.calls_from_value`` strict), with
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
