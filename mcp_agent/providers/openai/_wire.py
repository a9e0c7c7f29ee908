"""The Chat Completions wire: a request to the body of ``POST /chat/completions``, an answer back to a ``Turn``.

**Requests.** History valid for the strictest server (``llm-wire.md`` §1.3, §3.1, §10.10): every tool call
answered right after its assistant message, in call order (a missing result is synthesised as
"not executed", an orphan result dropped, both logged: ``repair_transcript``); arguments always a
JSON **string** (``"{}"`` when empty, never unparseable text); ids and exposed names as they are;
``content: null`` or ``""`` beside calls as the server wants; reasoning only when
``capabilities.send_reasoning``. ``max_tokens`` or ``max_completion_tokens``, ``temperature`` only
when set, ``tool_choice``/``parallel_tool_calls``/``stream_options`` only where accepted.

``toolCallStyle: "text"`` on the wire: no ``tools`` field; the tools are described in the system
prompt in the Hermes format (``<tools>`` JSON, calls as ``<tool_call>{"name", "arguments"}</tool_call>``),
earlier calls are replayed as that text, and results go back as user messages of
``<tool_response>`` blocks (consecutive results merged), which any chat template can render.
Calls found as text in a reply are replayed natively in the other styles.

Images from tools (``Message.images``, already chosen by ``history.fit_images``): Chat Completions
takes images in ``user`` messages only (a ``tool`` message with an ``image_url`` part is a 400:
"Image URLs are only allowed for messages with role 'user'"), and every result of a turn must
follow its assistant message with nothing in between. So the results stay text, and ONE ``user``
message after the last result of the turn carries their images as ``image_url`` data URLs, each
tool's introduced by a text part. In text style they join the ``<tool_response>`` user message.

**Answers**, whole or streamed, are folded into a ``Turn`` by the same ``ChunkAccumulator``
(below). Nothing here opens a connection: the provider (``provider.py``) does the HTTP, hands in
a body or a stream of events, and decides what to do with each outcome.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import anyio
import httpx

from ...exceptions import ProviderError, ProviderResponseError
from ...messages import (
    DEFAULT_MAX_ARGUMENT_CHARS,
    Delta,
    Image,
    JSONObject,
    Message,
    ToolCall,
    ToolSpec,
    Turn,
    Usage,
    parse_arguments,
)
from .. import turns
from ..base import ModelRequest
from ..history import data_url, image_label
from ..http.answers import SSEEvent, parse_sse
from ..http.errors import classify_error, error_info, foreign_answer, request_id_from
from ..servers.endpoints import Capabilities
from ..textcalls import ThinkFilter, split_reasoning
from ..turns import DeltaReporter, join_reasoning, new_call_id, reported_usage, sum_counts, token_count

__all__ = [
    "NOT_EXECUTED",
    "ChunkAccumulator",
    "ToolCallStyle",
    "build_chat_body",
    "finish_turn",
    "parse_usage",
    "repair_transcript",
    "text_tool_prompt",
    "to_openai_messages",
    "to_openai_tools",
]

logger = logging.getLogger(__name__)
answer_logger = logging.getLogger("mcp_agent.providers.openai.provider")
"""Reading an answer logs as the provider: what a server answered is the provider's to tell."""

ToolCallStyle = Literal["auto", "native", "text"]

NOT_EXECUTED = "not executed: no result was recorded for this call"
"""The error result sent for a call that has no result in the history."""


def _cap(text: str, limit: int) -> str:
    return text if not limit or len(text) <= limit else text[: limit - 1] + "…"


def to_openai_tools(tools: Sequence[ToolSpec], caps: Capabilities) -> list[JSONObject]:
    """Tool specs as ``tools`` entries (descriptions cut to ``caps.description_cap``)."""
    out: list[JSONObject] = []
    for spec in tools:
        function: JSONObject = {"name": spec.name}
        if spec.description:
            function["description"] = _cap(spec.description, caps.description_cap)
        function["parameters"] = spec.schema_for("openai")
        out.append({"type": "function", "function": function})
    return out


def text_tool_prompt(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section that offers ``tools`` as text (Hermes format)."""
    lines = [json.dumps(t, ensure_ascii=False) for t in to_openai_tools(tools, Capabilities())]
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + "\n".join(lines)
        + "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n'
        "Results come back in a user message, inside <tool_response></tool_response> tags."
    )


_CONTROL_WORD = re.compile(r"\[(?=/?[A-Z][A-Z_]*\])")
"""The ``[`` of a bracketed control word (``[TOOL_RESULTS]``, ``[INST]``, ``[/INST]``...)."""


def tool_response_block(name: str | None, content: str) -> str:
    """One result in text style: ``<tool_response>`` around ``{"name", "content"}`` as JSON.

    The result is data, and must not be able to end its block or open a message of its own:
    JSON already keeps its quotes and line breaks inside the string (a fake ``system:`` line
    stays on the result's one line), and here every ``<`` and ``>`` (a fake
    ``</tool_response>``, chat-template tokens such as ``<|im_start|>`` or ``<|eot_id|>``) and the
    ``[`` of a bracketed control word (``[TOOL_RESULTS]``, ``[INST]``) are written as JSON
    ``\\u`` escapes. Those decode to the same text, so the model loses nothing, but none of
    them appears literally in the prompt for a template or a tokenizer to act on.
    """
    body = json.dumps({"name": name, "content": content}, ensure_ascii=False)
    body = _CONTROL_WORD.sub(r"\\u005b", body.replace("<", "\\u003c").replace(">", "\\u003e"))
    return f"<tool_response>\n{body}\n</tool_response>"


def _arguments_text(call: ToolCall) -> str:
    """Arguments as a JSON string for history: the parsed object, never unparseable text."""
    return json.dumps(call.arguments or {}, ensure_ascii=False)


def repair_transcript(messages: Sequence[Message]) -> list[Message]:
    """The messages with every tool call answered exactly once, right after its call, in order.

    The loop guarantees this already; a stored session edited by hand may not. Results are
    looked for between an assistant message and the next one, so ids reused across turns stay
    apart. A call without a result gets a synthesised error result (``NOT_EXECUTED``); a result
    that answers no call there, or repeats one, is dropped. Both are logged as warnings.
    """
    out: list[Message] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if message.role == "tool":
            logger.warning("dropping a tool result that answers no call (id %r)", message.tool_call_id)
            continue
        out.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        segment: list[Message] = []
        while i < n and messages[i].role != "assistant":
            segment.append(messages[i])
            i += 1
        results = [m for m in segment if m.role == "tool"]
        for call in message.tool_calls:
            match = next((r for r in results if r.tool_call_id == call.id), None)
            if match is None:
                logger.warning(
                    "tool call %s (%s) has no result; sending %r", call.id, call.name, NOT_EXECUTED
                )
                match = Message.tool(call, NOT_EXECUTED, is_error=True)
            else:
                results.remove(match)
            out.append(match)
        for orphan in results:
            logger.warning("dropping a tool result that answers no call (id %r)", orphan.tool_call_id)
        out.extend(m for m in segment if m.role != "tool")
    return out


def _assistant(message: Message, caps: Capabilities, text_tools: bool) -> JSONObject:
    data: JSONObject = {"role": "assistant"}
    if message.tool_calls and text_tools:
        blocks = [
            "<tool_call>\n"
            + json.dumps({"name": c.name, "arguments": c.arguments or {}}, ensure_ascii=False)
            + "\n</tool_call>"
            for c in message.tool_calls
        ]
        data["content"] = "\n".join(([message.content] if message.content.strip() else []) + blocks)
    elif message.tool_calls:
        text = message.content if message.content.strip() else ""
        data["content"] = text if text or not caps.null_content_with_calls else None
        data["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments_text(c)}}
            for c in message.tool_calls
        ]
    else:
        data["content"] = message.content
    if caps.send_reasoning and message.reasoning:
        data["reasoning_content"] = message.reasoning
    return data


def to_openai_messages(
    messages: Sequence[Message], caps: Capabilities, *, text_tools: bool = False
) -> list[JSONObject]:
    """Messages as Chat Completions ``messages`` (after ``repair_transcript``)."""
    out: list[JSONObject] = []
    responses: list[str] = []  # text mode: results waiting to become one user message
    images: list[JSONObject] = []  # image parts of the results waiting for their user message

    def flush() -> None:
        if responses:
            text = "\n".join(responses)
            out.append(
                {"role": "user", "content": [{"type": "text", "text": text}, *images] if images else text}
            )
        elif images:
            out.append({"role": "user", "content": list(images)})
        responses.clear()
        images.clear()

    for message in repair_transcript(messages):
        if message.role == "tool":
            if message.images:
                images.append({"type": "text", "text": image_label(message)})
                images.extend(_image_part(image) for image in message.images)
            if text_tools:
                responses.append(tool_response_block(message.name, message.content))
                continue
            data: JSONObject = {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": message.content,
            }
            if caps.tool_result_name and message.name:
                data["name"] = message.name
            out.append(data)
            continue
        flush()
        if message.role == "assistant":
            out.append(_assistant(message, caps, text_tools))
        else:
            out.append({"role": message.role, "content": message.content})
    flush()
    return out


def _image_part(image: Image) -> JSONObject:
    return {"type": "image_url", "image_url": {"url": data_url(image)}}


def build_chat_body(
    request: ModelRequest,
    *,
    model: str,
    caps: Capabilities,
    stream: bool,
    text_tools: bool = False,
    temperature: float | None = None,
    max_output_tokens: int | None = None,
) -> JSONObject:
    """The JSON body of ``POST /chat/completions``.

    Args:
        request: messages and tools; its temperature and token cap win over the config's.
        model: the model name.
        caps: what the server accepts.
        stream: ask for an SSE stream.
        text_tools: ``toolCallStyle`` text: describe tools in the system prompt, send no ``tools``.
        temperature: the config's temperature (sent only when set).
        max_output_tokens: the config's output cap (sent only when set).
    """
    messages = to_openai_messages(request.messages, caps, text_tools=text_tools)
    if text_tools and request.tools:
        prompt = text_tool_prompt(request.tools)
        if messages and messages[0]["role"] == "system":
            messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{prompt}".lstrip()}
        else:
            messages.insert(0, {"role": "system", "content": prompt})
    body: JSONObject = {"model": model, "messages": messages}
    if request.tools and not text_tools:
        body["tools"] = to_openai_tools(request.tools, caps)
        if (choice := caps.tool_choice_value(request.tool_choice)) is not None:
            body["tool_choice"] = choice
        if caps.parallel_tool_calls:
            body["parallel_tool_calls"] = True
    temp = request.temperature if request.temperature is not None else temperature
    if temp is not None:
        body["temperature"] = temp
    cap = request.max_output_tokens or max_output_tokens
    if cap:
        body[caps.max_tokens_field] = cap
    body["stream"] = stream
    if stream and caps.stream_usage:
        body["stream_options"] = {"include_usage": True}
    return body


# --------------------------------------------------------------------------------------------
# answers: stream chunks and whole completions folded into a ``Turn``
#
# ``ChunkAccumulator`` folds chunks by tool-call slot with every quirk of ``llm-wire.md`` §4.5
# (missing index, index always 0, a different id at an occupied index, ids on every chunk,
# ``name: ""`` continuations, object arguments, whole calls in one chunk, ``tool_calls: []``,
# foreign call types; the legacy ``function_call`` is a call only when there are no ``tool_calls``:
# llama-cpp-python sends both, with different names); reasoning from ``reasoning_content``,
# ``reasoning`` or ``thinking`` (first present) and from ``<think>`` blocks
# (``textcalls.ThinkFilter`` while streaming); usage from ``usage``,
# ``x_groq.usage`` or llama.cpp ``timings``. ``finish_turn`` makes the ``Turn``: ids generated when
# missing or repeated, arguments parsed tolerantly, then the finishing step every provider shares
# (``turns.finish_turn``: the text fallback when there are no native calls and the style allows
# it, usage estimated when the server sent none).


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
    Argument text longer than ``max_argument_chars`` is not parsed (``turns.bound_arguments``).
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
    turn = turns.finish_turn(parsed, request, style=style, max_argument_chars=max_argument_chars)
    return replace(turn, finish_reason=acc.finish_reason)


# --------------------------------------------------------------------------------------------
# a whole answer, once its bytes are in: a ``Turn`` or an error
#
# ``whole_answer`` reads a complete body: JSON (or SSE text, from a server that streamed anyway);
# an error object in a 200 answer (LM Studio) is classified like an error status.
# ``foreign_error`` is the error for an answer that is no Chat Completions API's at all (an HTML
# page: ``http/errors.py``). ``recover_calls`` reads the tool calls in a Groq ``tool_use_failed``
# error's ``failed_generation`` (the model's raw text) unless the style is ``native``.
# ``report_turn`` hands a turn that arrived whole out as deltas, as a stream would have.
# The provider (``provider.py``) does the HTTP and decides what to do with each outcome.


def report_turn(turn: Turn, out: DeltaReporter) -> None:
    """Report a turn that arrived whole (reasoning, text, each call's name) through ``out``."""
    if turn.reasoning:
        out(Delta("reasoning", turn.reasoning))
    if turn.content:
        out(Delta("text", turn.content))
    for index, call in enumerate(turn.tool_calls):
        out(Delta("tool_call", index=index, name=call.name))


def whole_answer(
    response: httpx.Response,
    content: bytes,
    request: ModelRequest,
    style: ToolCallStyle,
    *,
    chat_url: str,
    max_argument_chars: int,
) -> Turn:
    """A complete answer body (``content``): JSON (or, from a server that streamed anyway, SSE text)."""
    request_id = request_id_from(response.headers)
    acc = ChunkAccumulator()
    if "event-stream" in response.headers.get("content-type", ""):
        for event in parse_sse(content.decode("utf-8", "replace")):
            if event.is_done:
                acc.done = True
                break
            try:
                chunk = event.json()
            except ValueError:
                continue
            if isinstance(chunk, Mapping):
                acc.feed(chunk)
        return finish_turn(
            acc, request, style=style, request_id=request_id, max_argument_chars=max_argument_chars
        )
    try:
        data = json.loads(content)
    except ValueError:
        foreign = foreign_error(response, content, chat_url=chat_url)
        if foreign is not None:
            raise foreign from None
        raise ProviderResponseError(
            f"the answer is not JSON: {content[:200].decode('utf-8', 'replace')!r}",
            status=response.status_code,
            request_id=request_id,
            retryable=True,
        ) from None
    if not isinstance(data, Mapping):
        raise ProviderResponseError("the answer is not a JSON object", request_id=request_id, retryable=True)
    if "choices" not in data and error_info(data) is not None:  # LM Studio: HTTP 200, error body
        recovered = recover_calls(data, request, style, max_argument_chars=max_argument_chars)
        if recovered is not None:
            return recovered
        raise classify_error(None, data, response.headers, request_id=request_id)
    try:
        acc.feed_completion(data)
    except ProviderError as exc:
        exc.request_id = exc.request_id or request_id
        raise
    return finish_turn(
        acc, request, style=style, request_id=request_id, max_argument_chars=max_argument_chars
    )


def foreign_error(response: httpx.Response, content: bytes, *, chat_url: str) -> ProviderError | None:
    """The error for an answer that is not from a Chat Completions API (an HTML page...)."""
    error = foreign_answer(response.status_code, response.headers, content, url=chat_url, api="openai")
    if error is not None:
        error.request_id = request_id_from(response.headers)
    return error


def recover_calls(
    body: object, request: ModelRequest, style: ToolCallStyle, *, max_argument_chars: int
) -> Turn | None:
    """Calls from Groq's ``failed_generation`` (the model's raw text), when they can be read."""
    info = error_info(body)
    if info is None or info.code != "tool_use_failed" or not request.tools or style == "native":
        return None
    generation = info.raw.get("failed_generation")
    if not isinstance(generation, str) or not generation.strip():
        return None
    turn = turns.finish_turn(
        Turn(content=generation), request, style=style, max_argument_chars=max_argument_chars
    )
    if not turn.tool_calls:
        return None
    answer_logger.info("read %d tool call(s) from the server's failed_generation", len(turn.tool_calls))
    return turn


# --------------------------------------------------------------------------------------------
# a streamed answer: its server-sent events folded into a ``ChunkAccumulator``
#
# ``fold_stream`` feeds each event's chunk to the accumulator and reports its deltas, until
# ``[DONE]`` or the end of the body: keep-alive pings and empty events are skipped, a chunk that is
# not JSON is logged and skipped, an ``event: error`` is read as an error chunk, and a Groq
# ``tool_use_failed`` error before anything was handed out is read for its calls
# (``recover_calls``). After ``[DONE]``, ``drain`` reads the rest of the body so the
# connection can be reused. ``EarlyEnd`` is how the provider learns that a stream ended (or broke
# off) before it handed anything out, so that it asks again without streaming (``provider.py``).

DRAIN_SECONDS = 1.0
"""After ``[DONE]``, how long to wait for the end of the body so the connection can be reused."""


class EarlyEnd(Exception):
    """The stream ended (``broke``: broke off) before anything was handed out."""

    def __init__(self, message: str, *, broke: bool = False) -> None:
        super().__init__(message)
        self.broke = broke


async def drain(events: AsyncIterator[SSEEvent]) -> None:
    """Read what follows ``[DONE]`` (the end of the chunked body) so the connection is reused."""
    with anyio.move_on_after(DRAIN_SECONDS):
        try:
            async for _ in events:
                pass
        except httpx.TransportError:
            pass


async def fold_stream(
    events: AsyncIterator[SSEEvent],
    acc: ChunkAccumulator,
    out: DeltaReporter,
    request: ModelRequest,
    style: ToolCallStyle,
    request_id: str | None,
    *,
    max_argument_chars: int,
) -> Turn | None:
    """Feed the stream's events to ``acc`` until ``[DONE]`` or EOF; a Turn only when recovered."""
    async for event in events:
        data = event.data.strip()
        if event.event == "ping" or not data:
            continue
        if event.is_done:
            acc.done = True
            return None
        try:
            chunk = json.loads(data)
        except ValueError:
            answer_logger.warning("skipping a stream chunk that is not JSON: %.120r", data)
            continue
        if event.event == "error" and not (isinstance(chunk, dict) and chunk.get("error")):
            chunk = {"error": chunk}
        if not isinstance(chunk, dict):
            continue
        try:
            deltas = acc.feed(chunk)
        except ProviderError as exc:
            recovered = (
                None
                if out.count
                else recover_calls(chunk, request, style, max_argument_chars=max_argument_chars)
            )
            if recovered is not None:
                return recovered
            exc.request_id = exc.request_id or request_id
            if out.count:  # text was handed out: asking again would repeat it
                exc.retryable, exc.terminal = False, False
            raise
        for delta in deltas:
            out(delta)
    return None
