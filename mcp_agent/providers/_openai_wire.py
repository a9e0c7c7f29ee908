"""Pure Chat Completions wire code: requests out, chunks and completions in (no I/O).

Outgoing (``build_chat_body``): history valid for the strictest server (``llm-wire.md`` §1.3,
§3.1, §10.10): every tool call answered right after its assistant message, in call order (a
missing result is synthesised as "not executed", an orphan result dropped, both logged);
arguments always a JSON **string** (``"{}"`` when empty, never unparseable text); ids and exposed
names as they are; ``content: null`` or ``""`` beside calls as the server wants; reasoning only
when ``capabilities.send_reasoning``. ``max_tokens`` or ``max_completion_tokens``, ``temperature``
only when set, ``tool_choice``/``parallel_tool_calls``/``stream_options`` only where accepted.

``toolCallStyle: "text"`` on the wire: no ``tools`` field; the tools are described in the system
prompt in the Hermes format (``<tools>`` JSON, calls as ``<tool_call>{"name", "arguments"}</tool_call>``),
earlier calls are replayed as that text, and results go back as user messages of
``<tool_response>`` blocks (consecutive results merged), which any chat template can render.
Calls found as text in a reply are replayed natively in the other styles.

Incoming (``ChunkAccumulator``): chunks folded by tool-call slot with every quirk of §4.5
(missing index, index always 0, a different id at an occupied index, ids on every chunk,
``name: ""`` continuations, object arguments, whole calls in one chunk, ``tool_calls: []``,
foreign call types); reasoning from ``reasoning_content``, ``reasoning`` or ``thinking`` (first
present) and from ``<think>`` blocks; usage from ``usage``, ``x_groq.usage`` or llama.cpp
``timings``. ``finish_turn`` makes the ``Turn``: ids generated when missing or repeated,
arguments parsed tolerantly, the text fallback run when there are no native calls and the style
allows it, usage estimated (about 4 characters a token) when the server sent none.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from .._json import parse_arguments
from .._types import JSONObject
from ..exceptions import ProviderResponseError
from ..messages import Delta, Message, ToolCall, ToolSpec, Turn, Usage
from .base import ModelRequest
from .endpoints import Capabilities
from .retry import classify_error
from .textcalls import extract_tool_calls, split_reasoning

__all__ = [
    "ChunkAccumulator",
    "ToolCallStyle",
    "build_chat_body",
    "estimate_usage",
    "finish_turn",
    "new_call_id",
    "parse_usage",
    "repair_transcript",
    "text_tool_prompt",
    "to_openai_messages",
    "to_openai_tools",
]

logger = logging.getLogger(__name__)

ToolCallStyle = Literal["auto", "native", "text"]

REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
NOT_EXECUTED = "not executed: no result was recorded for this call"


def new_call_id() -> str:
    """A fresh tool-call id: ``call_`` and 24 hex digits."""
    return "call_" + secrets.token_hex(12)


# --------------------------------------------------------------------------------------------
# outgoing


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

    def flush() -> None:
        if responses:
            out.append({"role": "user", "content": "\n".join(responses)})
            responses.clear()

    for message in repair_transcript(messages):
        if message.role == "tool":
            if text_tools:
                body = json.dumps({"name": message.name, "content": message.content}, ensure_ascii=False)
                responses.append(f"<tool_response>\n{body}\n</tool_response>")
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
        if caps.tool_choice:
            body["tool_choice"] = "auto"
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
# incoming


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _usage_from(data: Mapping[str, Any]) -> Usage | None:
    prompt = _int(data.get("prompt_tokens", data.get("input_tokens")))
    completion = _int(data.get("completion_tokens", data.get("output_tokens")))
    if prompt is None and completion is None:
        return None
    prompt, completion = prompt or 0, completion or 0
    total = _int(data.get("total_tokens")) or prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


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
    if isinstance(timings, dict):
        predicted = _int(timings.get("predicted_n"))
        prompt = _int(timings.get("prompt_n"))
        if predicted is not None or prompt is not None:
            prompt = (prompt or 0) + (_int(timings.get("cache_n")) or 0)
            return Usage(
                prompt_tokens=prompt, completion_tokens=predicted or 0, total_tokens=prompt + (predicted or 0)
            )
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


class _ThinkFilter:
    """Routes streamed content to text or reasoning at ``<think>`` tags, even when split."""

    _TAGS: ClassVar[dict[str, str]] = {"<think>": "</think>", "<thinking>": "</thinking>"}

    def __init__(self) -> None:
        self._close: str | None = None
        self._pending = ""

    def flush(self) -> list[tuple[Literal["text", "reasoning"], str]]:
        """What was held back as a possible tag start, at the end of the stream."""
        pending, self._pending = self._pending, ""
        return [("text" if self._close is None else "reasoning", pending)] if pending else []

    def feed(self, text: str) -> list[tuple[Literal["text", "reasoning"], str]]:
        out: list[tuple[Literal["text", "reasoning"], str]] = []
        buf = self._pending + text
        self._pending = ""
        while buf:
            if self._close is None:
                found = min(((buf.find(t), t) for t in self._TAGS if t in buf), default=None)
                if found is not None:
                    at, tag = found
                    if at:
                        out.append(("text", buf[:at]))
                    self._close, buf = self._TAGS[tag], buf[at + len(tag) :]
                    continue
                keep = _partial_suffix(buf, self._TAGS)
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
        self._by_index: dict[int, _Slot] = {}
        self._think = _ThinkFilter()
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
        return bool(self.content_parts or self.reasoning_parts or self.slots)

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
            _update(self._open(None), _call_fields({"function": message["function_call"]}))
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
            self._call({"index": 0, "function": legacy}, 0, out)

    def _call(self, tc: Mapping[str, Any], position: int, out: list[Delta]) -> None:
        fields = _call_fields(tc)
        slot = self._slot_for(fields[0], fields[1], fields[2], fields[3], position)
        had_name = bool(slot.name)
        fragment = _update(slot, fields)
        if fragment or (slot.name and not had_name):
            out.append(Delta("tool_call", fragment, index=slot.position, name=slot.name or None))

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


def _build_calls(slots: Sequence[_Slot]) -> list[ToolCall]:
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


def estimate_usage(request: ModelRequest, output_chars: int) -> Usage:
    """Usage estimated at about four characters a token, marked ``estimated``."""
    chars = 0
    for m in request.messages:
        chars += len(m.content) + len(m.reasoning)
        for call in m.tool_calls:
            chars += len(call.name) + len(json.dumps(call.arguments, ensure_ascii=False))
    for spec in request.tools:
        chars += len(spec.name) + len(spec.description) + len(json.dumps(spec.schema_for("openai")))
    prompt, completion = math.ceil(chars / 4), math.ceil(output_chars / 4)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion, estimated=True
    )


def finish_turn(
    acc: ChunkAccumulator,
    request: ModelRequest,
    *,
    style: ToolCallStyle = "auto",
    request_id: str | None = None,
) -> Turn:
    """The ``Turn`` of a folded answer.

    Native calls decide whether the turn calls tools (never ``finish_reason``). Without them,
    and unless ``style`` is ``native``, calls written as text are extracted (offered tools only).
    Reasoning never reaches the content.
    """
    raw_content = "".join(acc.content_parts)
    field_reasoning = "".join(acc.reasoning_parts).strip()
    calls = _build_calls(acc.slots)
    reasoning, content = split_reasoning(raw_content)
    if not calls and style != "native" and request.tools and raw_content.strip():
        found = extract_tool_calls(raw_content, request.tools)
        if found.calls:
            calls, content, reasoning = list(found.calls), found.content, found.reasoning
    if calls and not content.strip():
        content = ""
    reasoning = "\n\n".join(part for part in (field_reasoning, reasoning) if part)
    usage = acc.final_usage
    if usage is None:
        output = len(raw_content) + len(field_reasoning) + sum(len(s.text) + len(s.name) for s in acc.slots)
        usage = estimate_usage(request, output)
    return Turn(
        content=content,
        reasoning=reasoning,
        tool_calls=tuple(calls),
        finish_reason=acc.finish_reason,
        usage=usage,
        request_id=request_id or acc.completion_id,
    )
