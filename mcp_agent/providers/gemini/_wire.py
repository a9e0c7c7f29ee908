"""Pure conversion between mcp_agent values and Gemini ``generateContent`` (no I/O).

Outgoing: ``build_request`` turns a ``ModelRequest`` into the body of ``generateContent`` /
``streamGenerateContent``: system messages become ``systemInstruction``; roles are ``user``
and ``model``; assistant tool calls become ``functionCall {name, args}`` parts; the results of
one model turn become ``functionResponse {name, response}`` parts in ONE user turn, in call
order, named by the exposed name of the call they answer (Gemini matches results by name, and
by ``id`` only when it sent one). A model turn that came from Gemini is replayed from the parts
it came with (``Message.meta["gemini_parts"]``), so every ``thoughtSignature`` goes back
exactly as it came on the part it came on; when the message no longer matches those parts it
is rebuilt, with each call's signature taken from ``ToolCall.meta["thoughtSignature"]``. A
request without tools gets earlier calls and results as text.

Images a tool returned (``Message.images``, chosen by ``history.fit_images``) follow the
``functionResponse`` parts in the same user turn, as ``inlineData`` parts, each tool's introduced
by a text part. (Gemini 3 also takes media nested in ``functionResponse.parts``, but earlier
models refuse that; sibling parts work for every model.)

Tool schemas go through ``parametersJsonSchema`` (real JSON Schema: ``spec.schema_for("openai")``
minus ``$schema``) by default; ``json_schema=False`` sends the sanitised OpenAPI subset
``spec.schema_for("gemini")`` as ``parameters`` instead (the provider switches to it by itself
when a server rejects ``parametersJsonSchema``).

Incoming: ``ResponseState`` folds one response or the chunks of a stream into a ``Turn``:
``thought: true`` parts are reasoning, never answer; Gemini gives calls no ids (or ids that are
not guaranteed unique), so each call gets a fresh id from ``new_call_id``; usage is
``promptTokenCount`` and ``candidatesTokenCount + thoughtsTokenCount``. The provider then runs the
finishing step every provider shares (``turns.finish_turn``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...messages import (
    DEFAULT_MAX_ARGUMENT_CHARS,
    KEPT_ARGUMENT_CHARS,
    Delta,
    JSONObject,
    Message,
    ToolCall,
    ToolSpec,
    Turn,
    Usage,
    arguments_too_long,
    json_chars,
    parse_arguments,
)
from ..base import ModelRequest
from ..history import call_text, image_label, stray_text, take_results
from ..turns import new_call_id, reported_usage, sum_counts, token_count

PARTS_META = "gemini_parts"
"""Key of ``Turn.meta``/``Message.meta`` holding the model parts as they came, for replay."""

SIGNATURE = "thoughtSignature"
"""Key of ``ToolCall.meta`` holding the signature that came on the call's part."""

NATIVE_ID = "geminiCallId"
"""Key of ``ToolCall.meta`` holding the id Gemini gave the call, if it gave one."""

_FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "LANGUAGE": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}


# --------------------------------------------------------------------------------------------
# outgoing


def to_gemini_tools(tools: Sequence[ToolSpec], *, json_schema: bool = True) -> list[JSONObject]:
    """Tool specs as Gemini ``tools`` (one entry of ``functionDeclarations``; [] when none).

    Args:
        tools: the offered tools.
        json_schema: send ``parametersJsonSchema`` (full JSON Schema); otherwise ``parameters``
            (the OpenAPI subset compiled for the ``gemini`` dialect).
    """
    if not tools:
        return []
    declarations: list[JSONObject] = []
    for spec in tools:
        entry: JSONObject = {"name": spec.name}
        if spec.description:
            entry["description"] = spec.description
        if json_schema:
            schema = spec.schema_for("openai")
            schema.pop("$schema", None)
            entry["parametersJsonSchema"] = schema
        else:
            schema = spec.schema_for("gemini")
            schema.pop("$schema", None)
            if schema.get("properties") or schema.get("type") != "object":
                entry["parameters"] = schema
        declarations.append(entry)
    return [{"functionDeclarations": declarations}]


def _text_of(parts: Sequence[Any]) -> str:
    return "".join(
        str(p.get("text") or "")
        for p in parts
        if isinstance(p, Mapping) and "text" in p and not p.get("thought")
    )


def _calls_of(parts: Sequence[Any]) -> list[str]:
    return [
        str(p["functionCall"].get("name"))
        for p in parts
        if isinstance(p, Mapping) and isinstance(p.get("functionCall"), Mapping)
    ]


def _model_parts(message: Message) -> list[JSONObject]:
    raw = message.meta.get(PARTS_META)
    if (
        isinstance(raw, Sequence)
        and raw
        and _calls_of(raw) == [c.name for c in message.tool_calls]
        and _text_of(raw) == message.content
    ):
        return [dict(p) for p in raw if isinstance(p, Mapping)]
    parts: list[JSONObject] = []
    if message.content:
        parts.append({"text": message.content})
    for call in message.tool_calls:
        function: JSONObject = {"name": call.name, "args": dict(call.arguments)}
        if call.meta.get(NATIVE_ID):
            function["id"] = call.meta[NATIVE_ID]
        part: JSONObject = {"functionCall": function}
        if call.meta.get(SIGNATURE):
            part[SIGNATURE] = call.meta[SIGNATURE]
        parts.append(part)
    return parts


def _response_part(call: ToolCall | None, result: Message) -> JSONObject:
    name = call.name if call is not None else (result.name or "")
    key = "error" if result.is_error else "output"
    function: JSONObject = {"name": name, "response": {key: result.content}}
    if call is not None and call.meta.get(NATIVE_ID):
        function["id"] = call.meta[NATIVE_ID]
    return {"functionResponse": function}


def _image_parts(message: Message) -> list[JSONObject]:
    if not message.images:
        return []
    inline = [{"inlineData": {"mimeType": i.mime_type, "data": i.data}} for i in message.images]
    return [{"text": image_label(message)}, *inline]


def to_gemini_contents(
    messages: Sequence[Message], *, tools_offered: bool = True
) -> tuple[JSONObject | None, list[JSONObject]]:
    """Convert a conversation to Gemini's ``(systemInstruction, contents)``.

    The ``tool`` messages after a model turn become one user turn of ``functionResponse``
    parts in call order; a call left without a result gets an ``error`` response ("not
    executed"), and a result whose call is not in that model turn is sent as text. Consecutive
    user turns are merged; model turns are never merged or reordered.

    With ``tools_offered=False`` (a tool-less call, such as the loop's last call for a
    best-effort answer) earlier calls and results are written as text, so no ``functionCall``
    part needs declared tools or a signature.
    """
    system_parts: list[str] = []
    contents: list[JSONObject] = []

    def add_user(parts: list[JSONObject]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == "user":
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": "user", "parts": parts})

    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.role == "system":
            if message.content:
                system_parts.append(message.content)
        elif message.role == "user":
            add_user([{"text": message.content}] if message.content else [])
        elif message.role == "assistant" and not tools_offered:
            text = "\n".join(p for p in (message.content, *map(call_text, message.tool_calls)) if p)
            if text:
                contents.append({"role": "model", "parts": [{"text": text}]})
        elif message.role == "assistant":
            parts = _model_parts(message)
            if parts:
                contents.append({"role": "model", "parts": parts})
            if not message.tool_calls:
                continue
            answered, stray, i = take_results(messages, i, message.tool_calls)
            answers = [_response_part(call, result) for call, result in answered]
            answers += [_stray_text(m) for m in stray]
            for result in [result for _, result in answered] + stray:
                answers += _image_parts(result)
            add_user(answers)
        else:
            add_user([_stray_text(message), *_image_parts(message)])
    system = {"parts": [{"text": "\n\n".join(system_parts)}]} if system_parts else None
    return system, contents


def _stray_text(message: Message) -> JSONObject:
    return {"text": stray_text(message)}


def build_request(
    request: ModelRequest,
    *,
    json_schema: bool = True,
    include_thoughts: bool = False,
) -> JSONObject:
    """The JSON body of one ``generateContent`` / ``streamGenerateContent`` call.

    Args:
        request: the conversation and tools.
        json_schema: send tool schemas as ``parametersJsonSchema`` (else as ``parameters``).
        include_thoughts: ask for thought summaries (they come back as reasoning).
    """
    system, contents = to_gemini_contents(request.messages, tools_offered=bool(request.tools))
    body: JSONObject = {"contents": contents}
    if system is not None:
        body["systemInstruction"] = system
    tools = to_gemini_tools(request.tools, json_schema=json_schema)
    if tools:
        body["tools"] = tools
        if request.tool_choice != "auto":
            mode = "ANY" if request.tool_choice == "required" else "NONE"
            body["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    config: JSONObject = {}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.max_output_tokens:
        config["maxOutputTokens"] = request.max_output_tokens
    if include_thoughts:
        config["thinkingConfig"] = {"includeThoughts": True}
    if config:
        body["generationConfig"] = config
    return body


# --------------------------------------------------------------------------------------------
# incoming


def map_finish_reason(reason: str | None, *, has_calls: bool) -> str | None:
    """Gemini's ``finishReason`` in the house vocabulary.

    Gemini says ``STOP`` even when it calls functions, so a turn with calls is ``tool_calls``.
    Unknown values are passed through in lower case (``malformed_function_call``...).
    """
    if has_calls and reason in (None, "STOP"):
        return "tool_calls"
    if reason is None:
        return None
    return _FINISH_REASONS.get(reason, reason.lower())


def parse_usage(meta: Mapping[str, Any] | None) -> Usage:
    """``usageMetadata`` as Usage: thinking tokens count as completion tokens."""
    if not meta:
        return Usage()
    prompt = token_count(meta.get("promptTokenCount"))
    completion = sum_counts(
        token_count(meta.get("candidatesTokenCount")), token_count(meta.get("thoughtsTokenCount"))
    )
    return reported_usage(prompt, completion, token_count(meta.get("totalTokenCount")))


class ResponseState:
    """Folds a Gemini response, or the chunks of a stream, into one Turn.

    ``feed(chunk)`` takes one ``GenerateContentResponse`` (an array of them is accepted too)
    and returns the deltas to report; ``turn()`` gives the result. An ``error`` object is kept
    in ``error`` (the caller raises); a blocked prompt in ``block_reason``.

    Streamed text arrives cut into pieces: consecutive text parts of the same kind are joined
    into one part, and a ``thoughtSignature`` that arrives on a piece (often an empty last
    piece) stays on the joined part. Parts are never reordered.
    """

    def __init__(
        self, new_id: Callable[[], str] = new_call_id, *, max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS
    ) -> None:
        self.max_argument_chars = max_argument_chars
        self.error: Mapping[str, Any] | None = None
        self.block_reason: str | None = None
        self.response_id: str | None = None
        self._new_id = new_id
        self._parts: list[JSONObject] = []
        self._calls: list[ToolCall] = []
        self._finish: str | None = None
        self._usage: Mapping[str, Any] | None = None

    def feed(self, chunk: Any) -> list[Delta]:
        """Apply one response chunk; returns the deltas it carries."""
        if isinstance(chunk, list):
            return [d for item in chunk for d in self.feed(item)]
        if not isinstance(chunk, Mapping):
            return []
        if isinstance(chunk.get("error"), Mapping):
            self.error = chunk["error"]
            return []
        self.response_id = chunk.get("responseId") or self.response_id
        if isinstance(chunk.get("usageMetadata"), Mapping):
            self._usage = chunk["usageMetadata"]
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self.block_reason = str(feedback["blockReason"])
        candidates = chunk.get("candidates")
        if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], Mapping):
            return []
        candidate = candidates[0]
        if candidate.get("finishReason"):
            self._finish = str(candidate["finishReason"])
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        deltas: list[Delta] = []
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping):
                deltas += self._part(part)
        return deltas

    def _part(self, part: Mapping[str, Any]) -> list[Delta]:
        if isinstance(part.get("functionCall"), Mapping):
            function = part["functionCall"]
            raw = function.get("args")
            size = len(raw) if isinstance(raw, str) else json_chars(raw) if isinstance(raw, Mapping) else 0
            args: JSONObject
            error: str | None
            if self.max_argument_chars and size > self.max_argument_chars:
                # not kept for the replay either: the next request must not carry them back
                args, error = {}, arguments_too_long(size, self.max_argument_chars)
                text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
                raw = text[:KEPT_ARGUMENT_CHARS]
                part = {**part, "functionCall": {**function, "args": {}}}
            else:
                args, error = parse_arguments(raw if isinstance(raw, Mapping | str) else None)
            self._parts.append(dict(part))
            meta: JSONObject = {}
            if part.get(SIGNATURE):
                meta[SIGNATURE] = part[SIGNATURE]
            if function.get("id"):
                meta[NATIVE_ID] = function["id"]
            call = ToolCall(
                id=self._new_id(),
                name=str(function.get("name") or ""),
                arguments=args,
                error=error,
                raw_arguments=raw if error is not None and isinstance(raw, str) else None,
                meta=meta,
            )
            self._calls.append(call)
            index = len(self._calls) - 1
            return [Delta("tool_call", json.dumps(args, ensure_ascii=False), index=index, name=call.name)]
        if "text" not in part:
            if part.get(SIGNATURE):  # a bare signature: keep it where it came
                self._parts.append(dict(part))
            return []
        text = str(part.get("text") or "")
        thought = bool(part.get("thought"))
        last = self._parts[-1] if self._parts else None
        if (
            last is not None
            and "text" in last
            and bool(last.get("thought")) == thought
            and SIGNATURE not in last
            and set(part) <= {"text", "thought", SIGNATURE}
        ):
            last["text"] = str(last.get("text") or "") + text
            if part.get(SIGNATURE):
                last[SIGNATURE] = part[SIGNATURE]
        else:
            self._parts.append(dict(part))
        if not text:
            return []
        return [Delta("reasoning" if thought else "text", text)]

    def turn(self) -> Turn:
        """The Turn assembled so far."""
        calls = tuple(c for c in self._calls if c.name)
        reasoning = "".join(str(p.get("text") or "") for p in self._parts if "text" in p and p.get("thought"))
        replay = [p for p in self._parts if not p.get("thought") or p.get(SIGNATURE)]
        return Turn(
            content=_text_of(self._parts),
            reasoning=reasoning,
            tool_calls=calls,
            finish_reason=map_finish_reason(self._finish, has_calls=bool(calls)),
            usage=parse_usage(self._usage),
            request_id=self.response_id,
            meta={PARTS_META: replay} if replay else {},
        )

    @property
    def finish_reason(self) -> str | None:
        """The raw ``finishReason`` seen last (``STOP``, ``MALFORMED_FUNCTION_CALL``...)."""
        return self._finish


def parse_response(data: Any, *, new_id: Callable[[], str] = new_call_id) -> Turn:
    """A non-streamed ``generateContent`` response as a Turn (errors are not checked here)."""
    state = ResponseState(new_id)
    state.feed(data)
    return state.turn()
