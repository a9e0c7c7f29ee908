"""Pure conversion between mcp_agent values and the Anthropic Messages API (no I/O).

Outgoing: ``build_request`` turns a ``ModelRequest`` into the JSON body of ``POST /v1/messages``:
system messages become the top-level ``system`` string; assistant tool calls become
``tool_use`` blocks (``input`` is an object); the results of one assistant turn become
``tool_result`` blocks at the head of the NEXT user message (consecutive tool messages merged,
calls without a result answered with an error result, results without a call turned into
text); consecutive same-role messages are merged; earlier ``thinking`` blocks are replayed with
their signatures. A request without tools gets earlier calls and results as text (the API
refuses tool blocks when no tools are defined). Images a tool returned (``Message.images``,
chosen by ``history.fit_images``) go inside its ``tool_result`` content as ``image`` blocks
(base64 source), after its text; a result sent as text is followed by its image blocks. ``max_tokens`` is required by the API: the request's cap, else
``DEFAULT_MAX_TOKENS`` (4096).

Incoming: ``parse_response`` reads a whole message; ``StreamState`` folds the SSE events
(``message_start``, ``content_block_start/delta/stop``, ``message_delta``, ``message_stop``,
``ping``, ``error``) into the same ``Turn``, emitting ``Delta`` values as it goes. Stop reasons
are mapped to the house vocabulary (``stop``, ``tool_calls``, ``length``, ``content_filter``,
``context_length``); ``thinking`` text is reasoning, never part of the answer. The provider then
runs the finishing step every provider shares (``turns.finish_turn``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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
from ..base import ModelRequest
from ..history import call_text, stray_text, take_results
from ..turns import reported_usage, sum_counts, token_count

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with every request."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when neither the request nor ``llm.maxOutputTokens`` sets one (it is required)."""

THINKING_META = "anthropic_thinking"
"""Key of ``Turn.meta``/``Message.meta`` holding the turn's thinking blocks, replayed as they came."""

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
    "model_context_window_exceeded": "context_length",
    "pause_turn": "pause_turn",
}

# --------------------------------------------------------------------------------------------
# outgoing


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[JSONObject]:
    """Tool specs as Anthropic ``tools`` entries (``input_schema`` is always an object schema)."""
    out: list[JSONObject] = []
    for spec in tools:
        schema = spec.schema_for("anthropic")
        schema.pop("$schema", None)
        if schema.get("type") != "object":
            schema = {**schema, "type": "object"}
        entry: JSONObject = {"name": spec.name, "input_schema": schema}
        if spec.description:
            entry["description"] = spec.description
        out.append(entry)
    return out


def _assistant_blocks(message: Message) -> list[JSONObject]:
    blocks: list[JSONObject] = []
    for block in message.meta.get(THINKING_META) or ():
        if isinstance(block, Mapping) and block.get("type") in ("thinking", "redacted_thinking"):
            blocks.append(dict(block))
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)})
    return blocks


def _image_block(image: Image) -> JSONObject:
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}}


def _result_block(tool_use_id: str, result: Message) -> JSONObject:
    block: JSONObject = {"type": "tool_result", "tool_use_id": tool_use_id}
    if result.images:
        text = [{"type": "text", "text": result.content}] if result.content else []
        block["content"] = text + [_image_block(image) for image in result.images]
    elif result.content:
        block["content"] = result.content
    if result.is_error:
        block["is_error"] = True
    return block


def to_anthropic_messages(
    messages: Sequence[Message], *, tools_offered: bool = True
) -> tuple[str | None, list[JSONObject]]:
    """Convert a conversation to Anthropic's ``(system, messages)``.

    Every ``tool_use`` of an assistant message is answered by a ``tool_result`` block in the
    next user message, in call order: the following ``tool`` messages are merged into that user
    message, a call left without a result gets an error result ("not executed"), and a result
    whose call is not in the previous assistant message becomes a text block (Anthropic rejects
    unknown ``tool_use_id`` values). Messages with nothing to send are skipped, and messages of
    the same role that end up next to each other are merged into one.

    Anthropic refuses ``tool_use``/``tool_result`` blocks in a request that defines no tools
    (the loop's last, tool-less call for a best-effort answer is such a request), so with
    ``tools_offered=False`` earlier calls and results are written as text instead.

    Returns:
        The system prompt (None when there is none) and the ``messages`` array.
    """
    system_parts: list[str] = []
    out: list[JSONObject] = []

    def append(role: str, blocks: list[JSONObject]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.role == "system":
            if message.content:
                system_parts.append(message.content)
        elif message.role == "user":
            append("user", [{"type": "text", "text": message.content}] if message.content else [])
        elif message.role == "assistant" and not tools_offered:
            blocks = _assistant_blocks(replace(message, tool_calls=()))
            blocks += [{"type": "text", "text": call_text(c)} for c in message.tool_calls]
            append("assistant", blocks)
        elif message.role == "assistant":
            append("assistant", _assistant_blocks(message))
            if not message.tool_calls:
                continue
            # the results of this turn: every following tool message, then one block per call
            answered, stray, i = take_results(messages, i, message.tool_calls)
            blocks = [_result_block(call.id, result) for call, result in answered]
            for message in stray:
                blocks += _stray_blocks(message)
            # results open the next user message; a user text that follows is merged in after them
            append("user", blocks)
        else:  # a tool message with no assistant call before it
            append("user", _stray_blocks(message))
    system = "\n\n".join(system_parts) if system_parts else None
    return system, out


def _stray_blocks(message: Message) -> list[JSONObject]:
    """A tool result sent as text (and its images)."""
    return [{"type": "text", "text": stray_text(message)}, *map(_image_block, message.images)]


def build_request(
    request: ModelRequest,
    *,
    model: str,
    stream: bool,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
    thinking_budget: int | None = None,
) -> JSONObject:
    """The JSON body of one ``POST /v1/messages``.

    Args:
        request: the conversation and tools.
        model: the model name.
        stream: ask for server-sent events.
        default_max_tokens: ``max_tokens`` when the request sets none (the API requires one).
        thinking_budget: when set, extended thinking is enabled with this many tokens; the
            temperature is then left out (the API requires its default) and ``max_tokens`` is
            raised above the budget when needed.
    """
    system, messages = to_anthropic_messages(request.messages, tools_offered=bool(request.tools))
    max_tokens = request.max_output_tokens or default_max_tokens
    body: JSONObject = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system is not None:
        body["system"] = system
    if request.tools:
        body["tools"] = to_anthropic_tools(request.tools)
        if request.tool_choice == "none" or (request.tool_choice == "required" and not thinking_budget):
            body["tool_choice"] = {"type": "none" if request.tool_choice == "none" else "any"}
    if thinking_budget:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
        if max_tokens <= thinking_budget:
            body["max_tokens"] = thinking_budget + default_max_tokens
    elif request.temperature is not None:
        body["temperature"] = request.temperature
    if stream:
        body["stream"] = True
    return body


# --------------------------------------------------------------------------------------------
# incoming


def map_stop_reason(reason: str | None) -> str | None:
    """Anthropic's ``stop_reason`` in the house vocabulary (unknown values pass through)."""
    if reason is None:
        return None
    return _STOP_REASONS.get(reason, reason)


def parse_usage(usage: Mapping[str, Any] | None) -> Usage:
    """Anthropic ``usage`` as Usage; cache reads and writes count as prompt tokens."""
    if not usage:
        return Usage()
    prompt = sum_counts(
        token_count(usage.get("input_tokens")),
        token_count(usage.get("cache_creation_input_tokens")),
        token_count(usage.get("cache_read_input_tokens")),
    )
    return reported_usage(prompt, token_count(usage.get("output_tokens")))


def _tool_call(block: Mapping[str, Any], raw: str | None = None, max_chars: int = 0) -> ToolCall:
    source: Any = raw if raw else (block.get("input") or {})
    arguments, error = parse_arguments(source, max_chars=max_chars)
    return ToolCall(
        id=str(block.get("id") or ""),
        name=str(block.get("name") or ""),
        arguments=arguments,
        error=error,
        raw_arguments=raw if error is not None else None,
    )


@dataclass
class _Assembly:
    """The pieces of one message as they are collected, from a response or a stream."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    thinking: list[JSONObject] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)

    def turn(self, stop_reason: str | None, usage: Usage, request_id: str | None) -> Turn:
        meta: JSONObject = {THINKING_META: self.thinking} if self.thinking else {}
        calls = tuple(c for c in self.calls if c.name)
        return Turn(
            content="".join(self.text),
            reasoning="\n\n".join(r for r in self.reasoning if r),
            tool_calls=calls,
            finish_reason=map_stop_reason(stop_reason),
            usage=usage,
            request_id=request_id,
            meta=meta,
        )

    def add_thinking(self, block: Mapping[str, Any]) -> None:
        kind = block.get("type")
        if kind == "thinking":
            self.reasoning.append(str(block.get("thinking") or ""))
            self.thinking.append(
                {
                    "type": "thinking",
                    "thinking": block.get("thinking") or "",
                    "signature": block.get("signature") or "",
                }
            )
        elif kind == "redacted_thinking":
            self.thinking.append({"type": "redacted_thinking", "data": block.get("data") or ""})


def parse_response(data: Mapping[str, Any], *, request_id: str | None = None) -> Turn:
    """A non-streamed Messages response as a Turn.

    Args:
        data: the response JSON.
        request_id: the ``request-id`` header; the message id is used when it is missing.
    """
    parts = _Assembly()
    for block in data.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.text.append(str(block.get("text") or ""))
        elif kind in ("thinking", "redacted_thinking"):
            parts.add_thinking(block)
        elif kind == "tool_use":
            parts.calls.append(_tool_call(block))
    return parts.turn(data.get("stop_reason"), parse_usage(data.get("usage")), request_id or data.get("id"))


@dataclass
class _Block:
    kind: str
    start: Mapping[str, Any]
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    slot: int = -1


class StreamState:
    """Folds Anthropic stream events into one Turn.

    Feed each event with ``feed(event_name, data)``; it returns the deltas to report. After
    ``message_stop`` (``done`` is True) call ``turn()``. An ``error`` event is kept in ``error``
    (the caller raises). Unknown events and block types are ignored. Streamed argument text longer
    than ``max_argument_chars`` is not parsed.
    """

    def __init__(self, *, max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS) -> None:
        self.max_argument_chars = max_argument_chars
        self.done = False
        self.error: Mapping[str, Any] | None = None
        self.message_id: str | None = None
        self._blocks: dict[int, _Block] = {}
        self._order: list[int] = []
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._slots = 0

    def feed(self, event: str | None, data: Mapping[str, Any]) -> list[Delta]:
        """Apply one event; ``event`` is the SSE event name (the data's ``type`` is used if None).

        A field of the wrong type is ignored, as an unknown one is: nothing here raises.
        """
        kind = event or data.get("type")
        if kind == "message_start":
            message = _mapping(data.get("message"))
            self.message_id = _text(message.get("id"))
            self._usage.update(_mapping(message.get("usage")))
        elif kind == "content_block_start":
            return self._start(data)
        elif kind == "content_block_delta":
            return self._delta(data)
        elif kind == "message_delta":
            stop_reason = _text(_mapping(data.get("delta")).get("stop_reason"))
            if stop_reason:
                self._stop_reason = stop_reason
            self._usage.update({k: v for k, v in _mapping(data.get("usage")).items() if v is not None})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.error = data
        return []

    def _start(self, data: Mapping[str, Any]) -> list[Delta]:
        index = data.get("index")
        block = data.get("content_block") or {}
        if not isinstance(index, int) or not isinstance(block, Mapping):
            return []
        entry = _Block(kind=str(block.get("type")), start=block)
        if index not in self._blocks:
            self._order.append(index)
        self._blocks[index] = entry
        if entry.kind == "text" and (text := _text(block.get("text"))):
            entry.text.append(text)
            return [Delta("text", text)]
        if entry.kind == "thinking" and (text := _text(block.get("thinking"))):
            entry.text.append(text)
            return [Delta("reasoning", text)]
        if entry.kind == "tool_use":
            entry.slot = self._slots
            self._slots += 1
            return [Delta("tool_call", index=entry.slot, name=_text(block.get("name")))]
        return []

    def _delta(self, data: Mapping[str, Any]) -> list[Delta]:
        entry = self._blocks.get(data.get("index"))  # type: ignore[arg-type]
        delta = data.get("delta") or {}
        if entry is None or not isinstance(delta, Mapping):
            return []
        kind = delta.get("type")
        if kind == "text_delta" and entry.kind == "text":
            text = str(delta.get("text") or "")
            entry.text.append(text)
            return [Delta("text", text)] if text else []
        if kind == "thinking_delta" and entry.kind == "thinking":
            text = str(delta.get("thinking") or "")
            entry.text.append(text)
            return [Delta("reasoning", text)] if text else []
        if kind == "signature_delta" and entry.kind == "thinking":
            entry.signature.append(str(delta.get("signature") or ""))
        elif kind == "input_json_delta" and entry.kind == "tool_use":
            fragment = str(delta.get("partial_json") or "")
            entry.text.append(fragment)
            if fragment:
                return [Delta("tool_call", fragment, index=entry.slot, name=_text(entry.start.get("name")))]
        return []

    def turn(self, request_id: str | None = None) -> Turn:
        """The Turn assembled so far (call after ``message_stop``)."""
        parts = _Assembly()
        for index in self._order:
            entry = self._blocks[index]
            if entry.kind == "text":
                parts.text.append("".join(entry.text))
            elif entry.kind == "thinking":
                signature = "".join(entry.signature) or _text(entry.start.get("signature")) or ""
                parts.add_thinking(
                    {"type": "thinking", "thinking": "".join(entry.text), "signature": signature}
                )
            elif entry.kind == "redacted_thinking":
                parts.add_thinking(entry.start)
            elif entry.kind == "tool_use":
                raw = "".join(entry.text)
                parts.calls.append(
                    _tool_call(entry.start, raw if raw.strip() else None, self.max_argument_chars)
                )
        return parts.turn(self._stop_reason, parse_usage(self._usage), request_id or self.message_id)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def decode_event_data(data: str) -> Mapping[str, Any] | None:
    """The JSON of one SSE ``data`` payload, or None when it is not a JSON object."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None
