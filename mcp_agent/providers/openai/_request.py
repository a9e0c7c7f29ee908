"""Pure Chat Completions request code: messages and tools to the body of ``POST /chat/completions``.

History valid for the strictest server (``llm-wire.md`` §1.3, §3.1, §10.10): every tool call
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
Calls found as text in a reply are replayed natively in the other styles. Answers are read by
``_response.py``.

Images from tools (``Message.images``, already chosen by ``_images.fit_images``): Chat Completions
takes images in ``user`` messages only (a ``tool`` message with an ``image_url`` part is a 400:
"Image URLs are only allowed for messages with role 'user'"), and every result of a turn must
follow its assistant message with nothing in between. So the results stay text, and ONE ``user``
message after the last result of the turn carries their images as ``image_url`` data URLs, each
tool's introduced by a text part. In text style they join the ``<tool_response>`` user message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Literal

from ...messages import Image, JSONObject, Message, ToolCall, ToolSpec
from .._images import data_url, image_label
from ..base import ModelRequest
from ..endpoints import Capabilities

__all__ = [
    "NOT_EXECUTED",
    "ToolCallStyle",
    "build_chat_body",
    "repair_transcript",
    "text_tool_prompt",
    "to_openai_messages",
    "to_openai_tools",
]

logger = logging.getLogger(__name__)

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
