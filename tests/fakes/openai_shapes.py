"""Shape builders: what each OpenAI-compatible server sends, written from ``llm-wire.md`` §1-4, §9.

Streams are lists of chunk dicts (plus raw SSE text for error events) for ``Reply.sse``;
completions and errors are dicts for ``Reply.json``. Each builder reproduces its server's quirks:

- ``openai_stream``: the reference shape (role chunk, id only on a call's first delta, finish
  chunk with ``delta: {}``, usage chunk with ``choices: []``); ``interleave`` mixes the argument
  fragments of parallel calls.
- ``ollama_stream``: whole calls in one chunk, ``content: ""`` beside them, reasoning in
  ``reasoning``, ``call_`` + 8 ids; ``version="pre"`` (≤ 0.32.5: role and ``content: ""`` on every
  chunk) or ``"post"``; ``index`` normal, always 0, or missing.
- ``llamacpp_stream``: 32-character ids, arguments starting in the first delta (or an object),
  ``reasoning_content``, ``timings`` on the final chunk.
- ``vllm_stream``: ``chatcmpl-tool-`` ids, no ``arguments`` key on the first delta, ``reasoning``.
- ``lmstudio_stream``: 9-digit ids, continuation deltas with ``type`` and ``name: ""``.
- ``groq_stream``: usage under ``x_groq.usage``; ``groq_error_event`` is ``event: error``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .model_server import sse_event

CREATED = 1_700_000_000


@dataclass(frozen=True)
class Call:
    """A tool call to put in a reply. ``arguments`` is a dict, or the exact text to send."""

    name: str
    arguments: Any = field(default_factory=dict)
    id: str | None = None

    @property
    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _fragments(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


def _usage(usage: tuple[int, int] | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1]}


class _Chunks:
    """Builds chunk dicts that share an id and model."""

    def __init__(self, cid: str, model: str) -> None:
        self.cid, self.model, self.items = cid, model, list[dict[str, Any]]()

    def add(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        chunk = {
            "id": self.cid,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }
        self.items.append(chunk)
        return chunk

    def usage_chunk(self, usage: tuple[int, int] | None) -> None:
        if usage is not None:
            self.items.append(
                {
                    "id": self.cid,
                    "object": "chat.completion.chunk",
                    "created": CREATED,
                    "model": self.model,
                    "choices": [],
                    "usage": _usage(usage),
                }
            )


def _finish(calls: Sequence[Call], finish: str | None) -> str:
    return finish or ("tool_calls" if calls else "stop")


# --------------------------------------------------------------------------------------------
# streams


def openai_stream(
    *,
    content: str = "",
    calls: Sequence[Call] = (),
    reasoning: str = "",
    reasoning_field: str = "reasoning_content",
    finish: str | None = None,
    usage: tuple[int, int] | None = None,
    interleave: bool = False,
    size: int = 7,
    cid: str = "chatcmpl-abc123",
    model: str = "gpt-4o",
) -> list[dict[str, Any]]:
    """The reference OpenAI stream; ``interleave`` mixes parallel calls' fragments by index."""
    out = _Chunks(cid, model)
    out.add({"role": "assistant", "content": "", "refusal": None})
    for piece in _fragments(reasoning, size):
        out.add({reasoning_field: piece})
    for piece in _fragments(content, size):
        out.add({"content": piece})
    starts, rests = [], []
    for i, call in enumerate(calls):
        call_id = call.id if call.id is not None else "call_" + _digest(cid, i)[:24]
        starts.append(
            {"index": i, "id": call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        )
        rests.append(
            [{"index": i, "function": {"arguments": piece}} for piece in _fragments(call.text, size)]
        )
    if interleave:
        for start in starts:
            out.add({"tool_calls": [start]})
        for j in range(max((len(r) for r in rests), default=0)):
            for rest in rests:
                if j < len(rest):
                    out.add({"tool_calls": [rest[j]]})
    else:
        for start, rest in zip(starts, rests, strict=True):
            out.add({"tool_calls": [start]})
            for piece in rest:
                out.add({"tool_calls": [piece]})
    out.add({}, _finish(calls, finish))
    out.usage_chunk(usage)
    return out.items


def ollama_stream(
    *,
    content: str = "",
    calls: Sequence[Call] = (),
    reasoning: str = "",
    version: str = "post",
    index: str = "normal",
    finish: str | None = None,
    usage: tuple[int, int] | None = None,
    size: int = 5,
    cid: str = "chatcmpl-7",
    model: str = "qwen3:8b",
) -> list[dict[str, Any]]:
    """Ollama ``/v1``: reasoning chunks, content chunks, then every call whole in ONE chunk."""
    out = _Chunks(cid, model)
    pre = version == "pre"
    first = True

    def delta(**fields: Any) -> dict[str, Any]:
        nonlocal first
        base: dict[str, Any] = {"role": "assistant", "content": ""} if pre or first else {}
        first = False
        return {**base, **fields}

    for piece in _fragments(reasoning, size):
        out.add(delta(reasoning=piece))
    for piece in _fragments(content, size):
        out.add(delta(content=piece))
    if calls:
        entries = []
        for i, call in enumerate(calls):
            entry: dict[str, Any] = {
                "id": call.id if call.id is not None else "call_" + _digest(cid, i)[:8],
                "type": "function",
                "function": {"name": call.name, "arguments": call.text},
            }
            if index == "normal":
                entry["index"] = i
            elif index == "zero":
                entry["index"] = 0
            entries.append(entry)
        out.add(delta(content="", tool_calls=entries))
    if first:  # nothing streamed yet: Ollama still sends the role chunk
        out.add(delta())
    out.add({"role": "assistant", "content": ""} if pre else {}, _finish(calls, finish))
    out.usage_chunk(usage)
    return out.items


def llamacpp_stream(
    *,
    content: str = "",
    calls: Sequence[Call] = (),
    reasoning: str = "",
    object_args: bool = False,
    timings: tuple[int, int] | None = (12, 34),
    usage: tuple[int, int] | None = None,
    size: int = 6,
    cid: str = "chatcmpl-" + "x" * 32,
    model: str = "qwen3-8b-q4_k_m.gguf",
) -> list[dict[str, Any]]:
    """llama-server: arguments start in the first delta; ``object_args`` sends them as an object."""
    out = _Chunks(cid, model)
    out.add({"role": "assistant", "content": None})
    for piece in _fragments(reasoning, size):
        out.add({"reasoning_content": piece})
    for piece in _fragments(content, size):
        out.add({"content": piece})
    for i, call in enumerate(calls):
        call_id = call.id if call.id is not None else _digest(cid, i)[:32]
        if object_args:
            out.add(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                    ]
                }
            )
            continue
        pieces = _fragments(call.text, size) or [""]
        out.add(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": pieces[0]},
                    }
                ]
            }
        )
        for piece in pieces[1:]:
            out.add({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    extra: dict[str, Any] = {}
    if timings is not None:
        extra["timings"] = {
            "cache_n": 0,
            "prompt_n": timings[0],
            "prompt_ms": 10.5,
            "predicted_n": timings[1],
            "predicted_ms": 99.0,
        }
    if usage is not None:
        extra["usage"] = _usage(usage)
    out.add({}, _finish(calls, finish=None), **extra)
    return out.items


def vllm_stream(
    *,
    content: str = "",
    calls: Sequence[Call] = (),
    reasoning: str = "",
    reasoning_field: str = "reasoning",
    usage: tuple[int, int] | None = None,
    interleave: bool = False,
    size: int = 4,
    cid: str = "chatcmpl-0123456789abcdef",
    model: str = "Qwen/Qwen3-8B",
) -> list[dict[str, Any]]:
    """vLLM: the first tool delta has id, type and name but no ``arguments`` key."""
    items = openai_stream(
        content=content,
        calls=calls,
        reasoning=reasoning,
        reasoning_field=reasoning_field,
        usage=usage,
        interleave=interleave,
        size=size,
        cid=cid,
        model=model,
    )
    for i, chunk in enumerate(items):
        for choice in chunk.get("choices", []):
            for tc in choice["delta"].get("tool_calls", []):
                if "id" in tc:
                    if calls[tc["index"]].id is None:
                        tc["id"] = "chatcmpl-tool-" + _digest(cid, i)[:32]
                    del tc["function"]["arguments"]
    return items


def lmstudio_stream(
    *,
    content: str = "",
    calls: Sequence[Call] = (),
    usage: tuple[int, int] | None = None,
    size: int = 5,
    cid: str = "chatcmpl-k2j3h4g5f6",
    model: str = "qwen/qwen3-8b",
) -> list[dict[str, Any]]:
    """LM Studio: numeric ids; continuation deltas repeat ``type`` and send ``name: ""``."""
    out = _Chunks(cid, model)
    out.add({"role": "assistant", "content": ""})
    for piece in _fragments(content, size):
        out.add({"content": piece})
    for i, call in enumerate(calls):
        call_id = (
            call.id if call.id is not None else str(int(_digest(cid, i)[:8], 16) % 900_000_000 + 100_000_000)
        )
        out.add(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in _fragments(call.text, size):
            out.add(
                {
                    "tool_calls": [
                        {"index": i, "type": "function", "function": {"name": "", "arguments": piece}}
                    ]
                }
            )
    out.add({}, _finish(calls, None))
    out.usage_chunk(usage)
    return out.items


def groq_stream(
    *,
    content: str = "",
    calls: Sequence[Call] = (),
    usage: tuple[int, int] | None = (20, 10),
    size: int = 8,
) -> list[dict[str, Any]]:
    """Groq (legacy usage): the final chunk carries ``x_groq.usage``."""
    items = openai_stream(
        content=content, calls=calls, size=size, cid="chatcmpl-groq", model="llama-3.3-70b-versatile"
    )
    if usage is not None:
        items[-1]["x_groq"] = {
            "id": "req_01abc",
            "usage": {**_usage(usage), "queue_time": 0.01, "prompt_time": 0.002},
        }
    return items


def groq_error_event(
    message: str = "Failed to call a function. Please adjust your prompt.",
    code: str = "tool_use_failed",
    failed_generation: str | None = None,
    status: int = 400,
) -> str:
    """Groq's in-stream error: ``event: error`` and the error object."""
    error: dict[str, Any] = {
        "message": message,
        "type": "invalid_request_error",
        "code": code,
        "status_code": status,
    }
    if failed_generation is not None:
        error["failed_generation"] = failed_generation
    return sse_event({"error": error}, event="error")


# --------------------------------------------------------------------------------------------
# whole completions


def completion(
    *,
    content: str | None = "",
    calls: Sequence[Call] = (),
    reasoning: str = "",
    reasoning_field: str = "reasoning_content",
    finish: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    object_args: bool = False,
    empty_tool_calls: bool = False,
    cid: str = "chatcmpl-abc123",
    model: str = "gpt-4o",
    **extra: Any,
) -> dict[str, Any]:
    """A non-streamed answer. ``empty_tool_calls`` adds ``tool_calls: []`` (LM Studio)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message[reasoning_field] = reasoning
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id if call.id is not None else "call_" + _digest(cid, i)[:24],
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments if object_args else call.text},
            }
            for i, call in enumerate(calls)
        ]
    elif empty_tool_calls:
        message["tool_calls"] = []
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(calls, finish)}
        ],
        **extra,
    }
    if usage is not None:
        body["usage"] = _usage(usage)
    return body


def ollama_completion(
    *, content: str = "", calls: Sequence[Call] = (), reasoning: str = "", index_zero: bool = False
) -> dict[str, Any]:
    """Ollama ``/v1`` non-streamed: ``reasoning`` field, short ids, ``index`` (always 0 if asked)."""
    body = completion(
        content=content,
        calls=[Call(c.name, c.arguments, c.id or f"call_{i:08d}") for i, c in enumerate(calls)],
        reasoning=reasoning,
        reasoning_field="reasoning",
        cid="chatcmpl-42",
        model="qwen3:8b",
    )
    for i, tc in enumerate(body["choices"][0]["message"].get("tool_calls", [])):
        tc["index"] = 0 if index_zero else i
    return body


def llamacpp_completion(
    *,
    content: str | None = None,
    calls: Sequence[Call] = (),
    reasoning: str = "",
    object_args: bool = False,
    timings: bool = True,
) -> dict[str, Any]:
    """llama-server non-streamed: ``reasoning_content``, maybe object arguments, ``timings``."""
    extra = {"timings": {"prompt_n": 30, "predicted_n": 12, "cache_n": 5}} if timings else {}
    return completion(
        content=content,
        calls=calls,
        reasoning=reasoning,
        object_args=object_args,
        usage=None,
        model="model.gguf",
        **extra,
    )


def lmstudio_completion(*, content: str = "", calls: Sequence[Call] = ()) -> dict[str, Any]:
    """LM Studio non-streamed: ``tool_calls: []`` even without calls."""
    return completion(
        content=content,
        calls=calls,
        empty_tool_calls=True,
        model="qwen/qwen3-8b",
        system_fingerprint="qwen/qwen3-8b",
    )


# --------------------------------------------------------------------------------------------
# errors


def openai_error(
    message: str, type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def vllm_error(message: str, *, old: bool = False, code: int = 400) -> dict[str, Any]:
    if old:
        return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": code}
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": code}}


def llamacpp_error(message: str, type: str = "server_error", code: int = 500, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "type": type, **extra}}


def groq_tool_use_failed(failed_generation: str) -> dict[str, Any]:
    return {
        "error": {
            "message": "Failed to call a function. Please adjust your prompt. See 'failed_generation' for "
            "more details.",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": failed_generation,
        }
    }


def lmstudio_200_error(message: str = "Context size has been exceeded.") -> dict[str, Any]:
    """LM Studio's HTTP 200 whose body is an error."""
    return {"error": message}
