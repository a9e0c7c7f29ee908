"""Answers that did not come from a model API at all: an HTML page, a text body where JSON belongs (pure).

Someone points ``llm.endpoint`` at another web server (a web UI, a router page, a dev server)
and it answers with a page. Such an answer is not an API error: retrying cannot change it, the
page means nothing to a user reading an error, and it may be large. ``foreign_answer`` says
``this is not an OpenAI-compatible API (got text/html from <url>): check llm.endpoint`` (the
API named for Anthropic and Gemini too), never quotes the body, and makes the error terminal.

One exception: an HTML page with a 5xx status is what a reverse proxy (nginx, a load balancer)
shows while the model server behind it is down or restarting, so it stays retryable (and, with
``llm.fallbacks``, moves on to the next model), still without the page.

What counts as foreign:

- any status: a ``text/html`` type, or a body that starts like markup (``<!doctype``, ``<html``);
- a success status: a body whose type is not JSON, SSE or NDJSON and that does not parse as JSON
  either (a JSON body that is cut off is the caller's business: it is retryable).

An error status with a short text or JSON body is left to ``_classify.classify_error``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .._redact import redact_url
from ..exceptions import ProviderError, ProviderHTTPError, ProviderResponseError
from .endpoints import ProviderName

__all__ = ["API_NAMES", "content_type", "foreign_answer", "looks_like_html"]

API_NAMES: dict[str, str] = {
    "openai": "an OpenAI-compatible API",
    "anthropic": "the Anthropic Messages API",
    "gemini": "the Gemini API",
}

_API_TYPES = ("json", "event-stream", "ndjson")


def content_type(headers: Mapping[str, str]) -> str:
    """The media type of an answer, lower case, without parameters ("" when none)."""
    return (headers.get("content-type") or "").split(";", 1)[0].strip().lower()


def looks_like_html(media_type: str, content: bytes = b"") -> bool:
    """Whether an answer is a web page: its type says so, or its body starts like markup."""
    if "html" in media_type:
        return True
    head = content[:64].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return head.startswith((b"<!doctype", b"<html", b"<head", b"<body"))


def _parses(content: bytes) -> bool:
    try:
        json.loads(content)
    except ValueError:
        return False
    return True


def foreign_answer(
    status: int, headers: Mapping[str, str], content: bytes, *, url: str, api: ProviderName
) -> ProviderError | None:
    """The error for an answer that is not from ``api``, or None when it may well be.

    Args:
        status: the HTTP status.
        headers: the answer's headers.
        content: the body (or its beginning).
        url: the URL that was asked (shown without credentials).
        api: which API was expected.
    """
    media = content_type(headers)
    html = looks_like_html(media, content)
    if status < 400 and not html:
        if any(kind in media for kind in _API_TYPES) or _parses(content):
            return None
    elif not html:
        return None
    got = "text/html" if html else (media or "a body that is not JSON")
    where = redact_url(url)
    if status >= 500:
        return ProviderHTTPError(
            f"the model server answered with a web page, not {API_NAMES[api]} (got {got} from {where}); "
            "a proxy in front of a server that is down?",
            status=status,
            retryable=True,
        )
    cls = ProviderHTTPError if status >= 400 else ProviderResponseError
    return cls(
        f"this is not {API_NAMES[api]} (got {got} from {where}): check llm.endpoint",
        status=status if status >= 400 else None,
        terminal=True,
    )
