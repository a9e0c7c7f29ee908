"""Readers of the tag and special-token formats of tool calls written as text (pure).

``TagReaders`` adds one reader per format to ``Cursor`` (``llm-wire.md`` §5): Qwen3-Coder XML
and Llama's ``<function=name>{json}``, GLM-4.5 ``<arg_key>``/``<arg_value>`` pairs, Olmo
``<function_calls>``, FunctionGemma, DeepSeek and Kimi K2 call tokens, gpt-oss harmony call
messages and a line of pythonic calls. ``_scan.Scanner`` finds the markers and reads the
JSON-bearing formats. A reader returns the block's calls and where the block ends, or None
when its marker starts no block; each block is bounded by the next marker of its kind, found
with the cursor's remembering searches, so the work stays linear-ish in the text's length.
"""

from __future__ import annotations

import re

from ...messages import parse_arguments
from ._calls import RawCall, deepseek_call, ds_token, gemma_value, kimi_call, pythonic_calls
from ._cursor import Block, Cursor, Hit, consume, past_any, strip_newline
from ._harmony import HARMONY_ENDS, is_call, read_header
from ._values import BROKEN, read_value, skip_ws

__all__ = ["KIMI_SECTION_BEGIN", "TagReaders"]

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
