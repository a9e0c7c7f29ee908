"""Pure Chat Completions answer code: stream chunks and whole completions folded into a ``Turn``.

``ChunkAccumulator`` folds chunks by tool-call slot with every quirk of ``llm-wire.md`` §4.5
(missing index, index always 0, a different id at an occupied index, ids on every chunk,
``name: ""`` continuations, object arguments, whole calls in one chunk, ``tool_calls: []``,
foreign call types; the legacy ``function_call`` is a call only when there are no ``tool_calls``:
llama-cpp-python sends both, with different names); reasoning from ``reasoning_content``,
``reasoning`` or ``thinking`` (first present) and from ``<think>`` blocks
(``textcalls/_think_stream.py`` while streaming); usage from ``usage``,
``x_groq.usage`` or llama.cpp ``timings``. ``finish_turn`` makes the ``Turn``: ids generated when
missing or repeated, arguments parsed tolerantly, then the finishing step every provider shares
(``_turns.finish_turn``: the text fallback when there are no native calls and the style allows
it, usage estimated when the server sent none). Requests are built by ``_request.py``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...exceptions import ProviderResponseError
from ...messages import DEFAULT_MAX_ARGUMENT_CHARS, Delta, JSONObject, ToolCall, Turn, Usage, parse_arguments
from .. import _turns
from .._classify import classify_error
from .._turns import join_reasoning, new_call_id
from .._usage import reported_usage, sum_counts, token_count
from ..base import ModelRequest
from ..textcalls import split_reasoning
from ..textcalls._think_stream import ThinkFilter
from ._request import ToolCallStyle

__all__ = ["ChunkAccumulator", "finish_turn", "parse_usage"]

logger = logging.getLogger(__name__)

REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _usage_from(data: Mapping[str, Any]) -> Usage | None:
    prompt = data.get("prompt_tokens", data.get("input_tokens"))
    completion = data.get("completion_tokens", data.get("output_tokens"))
    if prompt is None and completion is None:
        return None
    return reported_usage(token_count(prompt), token_count(completion), token_count(data.get("total_tokens")))


def parse_usage(chunk: Mapping[str, Any]) -> Usage | None:
    """Usage from ``usage``, else ``x_groq.usage``, else llama.cpp ``timings``; None if none."""
    usage = chunk.get("usage")
    if isinstance(usage, dict) and (found := _usage_from(usage)) is not None:
        return found
    groq = chunk.get("x_groq")
    if (
        isinstance(groq, dict)
        and isinstance(groq.get("usage"), dict)
        and (found := _usage_from(groq["usage"]))
    ):
        return found
    timings = chunk.get("timings")
    if isinstance(timings, dict) and ("predicted_n" in timings or "prompt_n" in timings):
        prompt = sum_counts(token_count(timings.get("prompt_n")), token_count(timings.get("cache_n")))
        return reported_usage(prompt, token_count(timings.get("predicted_n")))
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _reasoning_of(delta: Mapping[str, Any]) -> str:
    for name in REASONING_FIELDS:
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


class _Slot:
    __slots__ = ("foreign", "id", "name", "obj", "parts", "position")

    def __init__(self, position: int) -> None:
        self.position = position
        self.id = ""
        self.name = ""
        self.parts: list[str] = []  # argument fragments, joined once at the end
        self.obj: Any = None
        self.foreign = False

    @property
    def text(self) -> str:
        if self.obj is not None:
            return json.dumps(self.obj, ensure_ascii=False)
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def complete(self) -> bool:
        if self.obj is not None:
            return True
        try:
            return isinstance(json.loads(self.text), dict)
        except ValueError:
            return False


_CallFields = tuple[int | None, str, str, Any, Any]


def _call_fields(tc: Mapping[str, Any]) -> _CallFields:
    """(index, id, name, arguments, type) of one tool-call entry, with wrong types dropped."""
    fn = tc.get("function")
    if not isinstance(fn, dict):
        fn = {}
    call_id = tc.get("id")
    if isinstance(call_id, int) and not isinstance(call_id, bool):
        call_id = str(call_id)
    name = fn.get("name")
    return (
        _int(tc.get("index")),
        call_id if isinstance(call_id, str) else "",
        name if isinstance(name, str) else "",
        fn.get("arguments"),
        tc.get("type"),
    )


def _update(slot: _Slot, fields: _CallFields) -> str:
    """Merge one entry into its slot; returns the new argument text (for the delta)."""
    _, call_id, name, args, kind = fields
    if call_id and not slot.id:
        slot.id = call_id
    if name and not slot.name:
        slot.name = name
    if isinstance(kind, str) and kind and kind != "function":
        slot.foreign = True
    if isinstance(args, dict | list):  # an object: replace, never concatenate
        slot.obj = args
        slot.parts = []
        return slot.text
    if isinstance(args, str) and args:
        if slot.obj is not None:
            slot.parts = [slot.text]
            slot.obj = None
        slot.parts.append(args)
        return args
    return ""


class ChunkAccumulator:
    """Folds a stream's chunks (or one completion) into the parts of a turn.

    ``feed`` returns the ``Delta`` values to report; it raises the classified ``ProviderError``
    when a chunk carries an error. Read ``finished`` (a finish reason or ``[DONE]`` was seen) and
    ``has_output`` to tell a complete stream from a truncated one.
    """

    def __init__(self) -> None:
        self.content_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.slots: list[_Slot] = []
        self.legacy: _Slot | None = None
        """The legacy ``function_call``: a call only when the answer has no ``tool_calls``."""
        self._by_index: dict[int, _Slot] = {}
        self._think = ThinkFilter()
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._timings: Usage | None = None
        self.completion_id: str | None = None
        self.done = False
        self.chunks = 0

    @property
    def finished(self) -> bool:
        return self.done or self.finish_reason is not None

    @property
    def has_output(self) -> bool:
        return bool(self.content_parts or self.reasoning_parts or self.slots or self.legacy)

    @property
    def call_slots(self) -> list[_Slot]:
        """The calls of the answer: ``tool_calls``, else the legacy ``function_call``."""
        if self.slots or self.legacy is None:
            return self.slots
        return [self.legacy]

    @property
    def final_usage(self) -> Usage | None:
        return self.usage or self._timings

    def flush(self) -> list[Delta]:
        """Deltas for content held back while it looked like the start of a ``<think>`` tag."""
        return [Delta(kind, text) for kind, text in self._think.flush()]

    def _common(self, chunk: Mapping[str, Any]) -> None:
        if chunk.get("error"):
            raise classify_error(None, chunk)
        if self.completion_id is None and isinstance(chunk.get("id"), str):
            self.completion_id = chunk["id"]
        usage = parse_usage(chunk)
        if usage is not None:
            if isinstance(chunk.get("usage"), dict) or isinstance(chunk.get("x_groq"), dict):
                self.usage = usage
            else:
                self._timings = usage

    def feed(self, chunk: Mapping[str, Any]) -> list[Delta]:
        """Fold one streamed chunk; returns the deltas it adds."""
        self.chunks += 1
        self._common(chunk)
        out: list[Delta] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return out
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = choice.get("message")  # a server that streams whole messages
            if isinstance(delta, dict):
                self._delta(delta, out)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return out

    def feed_completion(self, body: Mapping[str, Any]) -> None:
        """Fold a whole (non-streamed) completion."""
        self._common(body)
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderResponseError("the answer has no choices", retryable=True)
        choice = choices[0]
        message = choice.get("message")
        message = message if isinstance(message, dict) else {}
        reasoning = _reasoning_of(message)
        if reasoning:
            self.reasoning_parts.append(reasoning)
        content = _text_of(message.get("content"))
        if content:
            self.content_parts.append(content)
        calls = message.get("tool_calls")
        for tc in calls if isinstance(calls, list) else ():
            if isinstance(tc, dict):
                _update(self._open(None), _call_fields(tc))
        if isinstance(message.get("function_call"), dict):
            self.legacy = self.legacy or _Slot(0)
            _update(self.legacy, _call_fields({"function": message["function_call"]}))
        reason = choice.get("finish_reason")
        self.finish_reason = reason if isinstance(reason, str) and reason else self.finish_reason
        self.done = True

    # ------------------------------------------------------------------------------ deltas

    def _delta(self, delta: Mapping[str, Any], out: list[Delta]) -> None:
        reasoning = _reasoning_of(delta)
        if reasoning:
            self.reasoning_parts.append(reasoning)
            out.append(Delta("reasoning", reasoning))
        content = _text_of(delta.get("content"))
        if content:
            self.content_parts.append(content)
            out.extend(Delta(kind, text) for kind, text in self._think.feed(content))
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, tc in enumerate(calls):
                if isinstance(tc, dict):
                    self._call(tc, position, out)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            self._legacy_call(legacy, out)

    def _call(self, tc: Mapping[str, Any], position: int, out: list[Delta]) -> None:
        fields = _call_fields(tc)
        slot = self._slot_for(fields[0], fields[1], fields[2], fields[3], position)
        had_name = bool(slot.name)
        fragment = _update(slot, fields)
        if fragment or (slot.name and not had_name):
            out.append(Delta("tool_call", fragment, index=slot.position, name=slot.name or None))

    def _legacy_call(self, function: Mapping[str, Any], out: list[Delta]) -> None:
        """A legacy ``function_call`` delta: kept aside, reported only while no tool call came."""
        slot = self.legacy = self.legacy or _Slot(0)
        had_name = bool(slot.name)
        fragment = _update(slot, _call_fields({"function": function}))
        if not self.slots and (fragment or (slot.name and not had_name)):
            out.append(Delta("tool_call", fragment, index=0, name=slot.name or None))

    def _open(self, index: int | None) -> _Slot:
        slot = _Slot(len(self.slots))
        self.slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        return slot

    def _by_id(self, call_id: str) -> _Slot | None:
        for slot in reversed(self.slots):
            if slot.id == call_id:
                return slot
        return None

    @staticmethod
    def _another_whole_call(slot: _Slot, call_id: str, name: str, args: Any) -> bool:
        """A named delta with arguments arriving at a slot already holding a complete call."""
        has_args = (
            bool(args) if isinstance(args, dict | list) else isinstance(args, str) and bool(args.strip())
        )
        return bool(
            name and slot.name and has_args and not (call_id and call_id == slot.id) and slot.complete()
        )

    def _slot_for(self, index: int | None, call_id: str, name: str, args: Any, position: int) -> _Slot:
        if index is not None:
            slot = self._by_index.get(index)
            if slot is None:
                return self._open(index)
            if call_id and slot.id and call_id != slot.id:  # Ollama: index always 0
                return self._by_id(call_id) or self._open(index)
            if self._another_whole_call(slot, call_id, name, args):
                return self._open(index)
            return slot
        if call_id:
            return self._by_id(call_id) or self._open(None)
        if self.slots and not (position > 0 and name):
            last = self.slots[-1]
            if not self._another_whole_call(last, call_id, name, args):
                return last
        return self._open(None)


def _build_calls(slots: Sequence[_Slot], max_chars: int) -> list[ToolCall]:
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for slot in slots:
        if slot.foreign or not slot.name:
            if slot.name or slot.text:
                logger.info("ignoring a tool call without a name or of a foreign type (%r)", slot.name)
            continue
        raw: str | None = None
        error: str | None = None
        if isinstance(slot.obj, dict):
            arguments: JSONObject = dict(slot.obj)
        elif not slot.text.strip() and slot.obj is None:
            arguments = {}
        elif max_chars and len(slot.text) > max_chars:  # not parsed at all; bound_arguments says why
            arguments, raw = {}, slot.text
        else:
            try:
                value = json.loads(slot.text)
            except ValueError:
                value = None
            if isinstance(value, dict):
                arguments = value
            else:
                arguments, error = parse_arguments(slot.text)
                raw = slot.text
        call_id = slot.id
        if not call_id or call_id in seen:
            call_id = new_call_id()
        seen.add(call_id)
        calls.append(
            ToolCall(id=call_id, name=slot.name, arguments=arguments, error=error, raw_arguments=raw)
        )
    return calls


def finish_turn(
    acc: ChunkAccumulator,
    request: ModelRequest,
    *,
    style: ToolCallStyle = "auto",
    request_id: str | None = None,
    max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS,
) -> Turn:
    """The ``Turn`` of a folded answer.

    Native calls decide whether the turn calls tools (never ``finish_reason``). Without them, and
    unless ``style`` is ``native``, calls written as text are extracted (offered tools only) by
    the shared step. ``<think>`` blocks are split off the content here, always, so the content
    is stripped and empty blocks (Qwen3 with thinking off) vanish too; reasoning never reaches
    the content. The server's ``finish_reason`` is kept, even for calls read from the text.
    Argument text longer than ``max_argument_chars`` is not parsed (``_turns.bound_arguments``).
    """
    think, content = split_reasoning("".join(acc.content_parts))
    parsed = Turn(
        content=content,
        reasoning=join_reasoning("".join(acc.reasoning_parts).strip(), think),
        tool_calls=tuple(_build_calls(acc.call_slots, max_argument_chars)),
        finish_reason=acc.finish_reason,
        usage=acc.final_usage or Usage(),
        request_id=request_id or acc.completion_id,
    )
    turn = _turns.finish_turn(parsed, request, style=style, max_argument_chars=max_argument_chars)
    return replace(turn, finish_reason=acc.finish_reason)
