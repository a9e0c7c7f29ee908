"""Builders of Anthropic Messages API responses for the fake model server (tests only).

``message`` gives a whole response body, ``stream_events`` the same message as the SSE text a
streaming server sends (one string per event, text and tool input cut into small pieces), and
``error_body`` the error shape ``{"type":"error","error":{...}}``. Shapes follow
``reference/llm-wire.md`` §6.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Call = tuple[str, str, dict[str, Any]]
"""A tool call to script: ``(id, name, input)``."""


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


def message(
    text: str = "",
    *,
    calls: Sequence[Call] = (),
    thinking: str | None = None,
    signature: str = "sig-1",
    stop_reason: str | None = None,
    usage: tuple[int, int] = (10, 5),
    message_id: str = "msg_fake",
) -> dict[str, Any]:
    """A non-streamed response: thinking first, then text, then ``tool_use`` blocks."""
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": signature})
    if text:
        content.append({"type": "text", "text": text})
    for call_id, name, arguments in calls:
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "usage": _usage(*usage),
    }


def sse(event: str, data: dict[str, Any]) -> str:
    """One SSE event as Anthropic writes it: an ``event:`` line and a ``data:`` line."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_events(
    text: str = "",
    *,
    calls: Sequence[Call] = (),
    thinking: str | None = None,
    signature: str = "sig-1",
    stop_reason: str | None = None,
    usage: tuple[int, int] = (10, 5),
    message_id: str = "msg_fake",
    piece: int = 3,
    stop: bool = True,
) -> list[str]:
    """The SSE events of a streamed response (``stop=False`` leaves out ``message_stop``)."""
    events = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-fake",
                    "content": [],
                    "stop_reason": None,
                    "usage": _usage(usage[0], 1),
                },
            },
        ),
        sse("ping", {"type": "ping"}),
    ]
    index = 0
    if thinking is not None:
        events.append(
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": ""},
                },
            )
        )
        for part in _pieces(thinking, piece):
            events.append(
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": part},
                    },
                )
            )
        events.append(
            sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": signature},
                },
            )
        )
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if text:
        events.append(
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for part in _pieces(text, piece):
            events.append(
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": part},
                    },
                )
            )
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call_id, name, arguments in calls:
        events.append(
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                },
            )
        )
        for part in ["", *_pieces(json.dumps(arguments), piece)]:
            events.append(
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    },
                )
            )
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    if stop:
        events.append(sse("message_stop", {"type": "message_stop"}))
    return events


def error_body(kind: str, text: str, **details: Any) -> dict[str, Any]:
    """An Anthropic error body; ``details`` go into ``error.details`` when given."""
    error: dict[str, Any] = {"type": kind, "message": text}
    if details:
        error["details"] = details
    return {"type": "error", "error": error, "request_id": "req_err"}


def error_event(kind: str, text: str) -> str:
    """A mid-stream ``event: error``."""
    return sse("error", {"type": "error", "error": {"type": kind, "message": text}})
