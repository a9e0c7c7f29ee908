"""Builders of Gemini ``generateContent`` responses for the fake model server (tests only).

``response`` gives a whole ``GenerateContentResponse``; ``stream_chunks`` the same answer as
``streamGenerateContent?alt=sse`` sends it (one ``data:`` event per chunk, text cut into pieces,
no ``[DONE]``); ``error_body`` the Google error shape, with ``quota_failure`` and ``retry_info``
for the ``details`` of a 429. Shapes follow ``reference/llm-wire.md`` §7.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Call = tuple[str, dict[str, Any]]
"""A function call to script: ``(name, args)``."""


def _usage(prompt: int, candidates: int, thoughts: int) -> dict[str, Any]:
    meta = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
    }
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    return meta


def parts(
    text: str = "",
    *,
    calls: Sequence[Call] = (),
    thought: str | None = None,
    signature: str | None = None,
) -> list[dict[str, Any]]:
    """Model parts: a thought summary, the text, then calls; ``signature`` on the first call."""
    out: list[dict[str, Any]] = []
    if thought is not None:
        out.append({"text": thought, "thought": True})
    if text:
        out.append({"text": text})
    for i, (name, args) in enumerate(calls):
        part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
        if signature is not None and i == 0:
            part["thoughtSignature"] = signature
        out.append(part)
    return out


def response(
    text: str = "",
    *,
    calls: Sequence[Call] = (),
    thought: str | None = None,
    signature: str | None = None,
    finish: str = "STOP",
    usage: tuple[int, int, int] = (10, 5, 0),
    raw_parts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A non-streamed response (``raw_parts`` replaces the built parts)."""
    built = (
        raw_parts if raw_parts is not None else parts(text, calls=calls, thought=thought, signature=signature)
    )
    return {
        "candidates": [{"content": {"role": "model", "parts": built}, "finishReason": finish, "index": 0}],
        "usageMetadata": _usage(*usage),
        "modelVersion": "gemini-fake",
        "responseId": "resp_fake",
    }


def sse(data: Any) -> str:
    """One SSE event: a single ``data:`` line."""
    return f"data: {json.dumps(data)}\n\n"


def stream_chunks(
    text: str = "",
    *,
    calls: Sequence[Call] = (),
    thought: str | None = None,
    signature: str | None = None,
    text_signature: str | None = None,
    finish: str = "STOP",
    usage: tuple[int, int, int] = (10, 5, 0),
    piece: int = 3,
) -> list[str]:
    """The SSE events of a streamed response; ``text_signature`` arrives on an empty last text part."""
    chunks: list[dict[str, Any]] = []

    def chunk(part_list: list[dict[str, Any]]) -> None:
        chunks.append(
            {
                "candidates": [{"content": {"role": "model", "parts": part_list}, "index": 0}],
                "responseId": "resp_fake",
            }
        )

    if thought is not None:
        for i in range(0, len(thought), piece):
            chunk([{"text": thought[i : i + piece], "thought": True}])
    for i in range(0, len(text), piece):
        chunk([{"text": text[i : i + piece]}])
    if calls:
        chunk(parts(calls=calls, signature=signature))
    if text_signature is not None:
        chunk([{"text": "", "thoughtSignature": text_signature}])
    last: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": finish, "index": 0}],
        "usageMetadata": _usage(*usage),
        "responseId": "resp_fake",
    }
    chunks.append(last)
    return [sse(c) for c in chunks]


def error_body(
    code: int, message: str, status: str, details: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """A Google API error body."""
    return {"error": {"code": code, "message": message, "status": status, "details": list(details)}}


def quota_failure(quota_id: str) -> dict[str, Any]:
    """A ``QuotaFailure`` detail naming ``quota_id`` (``...PerDay...`` is a daily quota)."""
    return {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
            {
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": quota_id,
            }
        ],
    }


def retry_info(delay: str) -> dict[str, Any]:
    """A ``RetryInfo`` detail (``delay`` like ``"37s"``)."""
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
