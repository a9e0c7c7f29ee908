"""A failed model call: what it means (retryable, terminal, too long), and trying it again.

Every failure becomes a ``ProviderError`` once, where it is met: an error answer (a status, an
error body) in ``classify_error``; no answer at all (refused, timed out, cut off) in
``transport_error``; an answer that is no model API's (a web page) in ``foreign_answer``. The
error says whether trying again can help (``retryable``) and when (``retry_after``), and
``RetryPolicy`` acts on it.

Nothing here is specific to one API. Error answers are classified as the official OpenAI and
Anthropic SDKs do (``llm-wire.md`` §9):

- **Retryable:** connection errors and timeouts, 408, 409, 429, every 5xx (Anthropic's 529 and
  llama.cpp's 503 "Loading model" included), and a stream cut off before anything was handed
  out. ``x-should-retry: true|false`` overrides the status.
- **Terminal** (retrying cannot help, the run ends at once): other 4xx (400, 401, 403, 404, 413,
  422), OpenAI ``insufficient_quota``, Anthropic ``enforced_spend_limit_reached``, Gemini quotas
  whose id contains ``PerDay``, OpenAI's tokens-per-minute "Request too large" 429, and a request
  the server's own validation rejected, whatever the status: llama-cpp-python answers pydantic's
  "N validation error(s): {... 'loc': ('body', ...)}" as a 500 ``internal_server_error``; the
  same request would fail the same way (chosen by the body: a bare 500 stays retryable).
- **Context length** (``ContextLengthError``, neither: the caller trims history and tries once
  more): the messages of every server in §9.2, whatever the status, so LM Studio's HTTP 200 with an
  error body counts too; and llama-cpp-python's overflow in disguise, a 500 "could not broadcast
  input array from shape (N,) into shape (0,)" (a prompt just under ``n_ctx``: no room is left).

The server's retry hint is read here too and put on the error (``retry_after``):
``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date), else a Gemini
``RetryInfo.retryDelay``; any of these only when between 0 and 60 seconds. How often to try and
how long to wait without a hint is ``RetryPolicy``'s business (below).
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
import httpx

from ..._redact import redact_url
from ...exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
)
from ...telemetry.base import NO_NOTES, ModelNotes

if TYPE_CHECKING:  # a type name only: servers/ reads through http/, never the other way
    from ..servers.endpoints import ProviderName

__all__ = [
    "API_NAMES",
    "BAD_URL",
    "MAX_RETRY_AFTER",
    "ErrorInfo",
    "RetryPolicy",
    "backoff_delay",
    "classify_error",
    "content_type",
    "error_info",
    "foreign_answer",
    "is_context_length",
    "looks_like_html",
    "map_transport_errors",
    "parse_retry_after",
    "read_limit",
    "request_id_from",
    "transport_error",
]

MAX_RETRY_AFTER = 60.0
"""A server's retry hint is followed only up to this many seconds (as the official SDKs do)."""

_RETRYABLE_STATUS = frozenset({408, 409, 429})

_TERMINAL_CODES = frozenset(
    {
        "insufficient_quota",
        "enforced_spend_limit_reached",
        "billing_hard_limit_reached",
        "billing_not_active",
        "account_deactivated",
        "invalid_api_key",
    }
)
_RETRYABLE_TYPES = frozenset(
    {
        "server_error",
        "api_error",
        "overloaded_error",
        "rate_limit_error",
        "unavailable_error",
        "internal_error",
        "timeout_error",
        "service_unavailable",
        "unavailable",
        "internal",
        "deadline_exceeded",
        "resource_exhausted",
    }
)
_TERMINAL_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "billing_error",
        "request_too_large",
        "not_supported_error",
        "badrequesterror",
        "invalid_argument",
        "permission_denied",
        "unauthenticated",
        "not_found",
        "failed_precondition",
    }
)

_CONTEXT_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "model_context_window_exceeded"}
)
_CONTEXT_PATTERNS = re.compile(
    "|".join(
        [
            r"maximum context length is \d+ tokens",  # OpenAI, vLLM, Groq
            r"exceeds the available context size",  # llama.cpp
            r"context the overflows",  # LM Studio (sic)
            r"n_keep: ?\d+ ?>= ?n_ctx",  # LM Studio / llama.cpp
            r"context size has been exceeded",  # LM Studio
            r"greater than the context length",  # LM Studio
            r"prompt is too long: \d+ tokens? > \d+",  # Anthropic
            r"input token count.{0,20}exceeds the maximum",  # Gemini
            r"input length exceeds the context length",  # Ollama (truncate: false)
            r"context[_ ]length[_ ]exceeded",
            r"context window (?:is )?exceeded",
            r"model_context_window_exceeded",
            r"could not broadcast input array from shape \([\d, ]*\) into shape \(0,?\)",  # llama-cpp-python
        ]
    ),
    re.IGNORECASE,
)
_REQUEST_INVALID = re.compile(
    r"^\s*\d+ validation errors?:\s*\{.*'loc': \('body'",  # pydantic, as llama-cpp-python sends it
    re.DOTALL,
)
_TPM_TOO_LARGE = re.compile(r"request too large for .*(?:tokens per min|\bTPM\b)", re.IGNORECASE | re.DOTALL)


# --------------------------------------------------------------------------------------------
# reading error bodies


@dataclass(frozen=True)
class ErrorInfo:
    """What an error body says, whatever its shape.

    Attributes:
        message: the server's message.
        type: ``error.type`` (or Gemini's ``error.status``), if any.
        code: ``error.code`` as text, if any.
        status: an HTTP status stated inside the body (Groq ``status_code``, Gemini ``code``).
        raw: the error object itself, for provider-specific fields (``failed_generation``).
    """

    message: str
    type: str | None = None
    code: str | None = None
    status: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


def _load(body: Any) -> Any:
    if isinstance(body, bytes | bytearray):
        body = bytes(body).decode("utf-8", errors="replace")
    if isinstance(body, str):
        text = body.strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return body


def _as_status(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    if isinstance(value, str) and value.isdigit() and 100 <= int(value) <= 599:
        return int(value)
    return None


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def error_info(body: Any) -> ErrorInfo | None:
    """Read an error out of a body (bytes, text or parsed JSON); None when it is not an error.

    Knows OpenAI/Groq/llama.cpp/vLLM/Ollama ``{"error": {...}}``, Ollama native
    ``{"error": "..."}``, vLLM's old flat ``{"object": "error", ...}``, Anthropic
    ``{"type": "error", "error": {...}}``, Gemini's (also wrapped in a list) and FastAPI's
    ``{"detail": "..."}``.
    """
    data = _load(body)
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        data = data[0]
    if not isinstance(data, Mapping):
        return None
    err = data.get("error")
    if isinstance(err, Mapping) and err:
        code = err.get("code")
        message = _text(err.get("message")) or _text(err.get("msg")) or json.dumps(err, ensure_ascii=False)
        return ErrorInfo(
            message=message,
            type=_text(err.get("type")) or _text(err.get("status")),
            code=None if code is None else str(code),
            status=_as_status(err.get("status_code")) or _as_status(code),
            raw=err,
        )
    if isinstance(err, str) and err:
        return ErrorInfo(message=err, raw=data)
    if data.get("object") == "error":
        code = data.get("code")
        return ErrorInfo(
            message=_text(data.get("message")) or "error",
            type=_text(data.get("type")),
            code=None if code is None else str(code),
            status=_as_status(code),
            raw=data,
        )
    detail = data.get("detail")
    if isinstance(detail, str) and detail and "choices" not in data:
        return ErrorInfo(message=detail, raw=data)
    return None


def is_context_length(info: ErrorInfo | None, text: str = "") -> bool:
    """True when an error says the request does not fit the model's context window."""
    if info is not None:
        if (info.code or "").lower() in _CONTEXT_CODES or (info.type or "").lower() in _CONTEXT_CODES:
            return True
        text = f"{info.message} {text}"
    return bool(text) and _CONTEXT_PATTERNS.search(text) is not None


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is None and not isinstance(headers, httpx.Headers):
        for key, item in headers.items():
            if key.lower() == name:
                return item
    return value


def request_id_from(headers: Mapping[str, str] | None, body: Any = None) -> str | None:
    """The server's request id: ``x-request-id``, ``request-id``, or Anthropic's body field."""
    for name in ("x-request-id", "request-id"):
        value = _header(headers, name)
        if value:
            return value
    if isinstance(body, Mapping) and isinstance(body.get("request_id"), str):
        return str(body["request_id"])
    return None


# --------------------------------------------------------------------------------------------
# retry hints


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """The server's retry hint in seconds, or None.

    ``retry-after-ms`` wins over ``retry-after``; the latter is seconds or an HTTP date. A hint
    outside 0–60 s is ignored (None), as the official SDKs do.
    """
    value: float | None = None
    ms = _header(headers, "retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = None
    if value is None:
        text = _header(headers, "retry-after")
        if text:
            text = text.strip()
            try:
                value = float(text)
            except ValueError:
                try:
                    parsed = email.utils.parsedate_to_datetime(text)
                except (TypeError, ValueError, IndexError):
                    parsed = None
                if parsed is not None and parsed.tzinfo is not None:
                    value = parsed.timestamp() - (time.time() if now is None else now)
    if value is None or value != value or not 0 <= value <= MAX_RETRY_AFTER:
        return None
    return value


def _body_retry_delay(raw: Mapping[str, Any]) -> float | None:
    """Gemini's ``RetryInfo.retryDelay`` (``"34s"``) from an error's ``details``."""
    details = raw.get("details")
    if not isinstance(details, list):
        return None
    for item in details:
        if isinstance(item, Mapping) and isinstance(item.get("retryDelay"), str):
            match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)s\s*", item["retryDelay"])
            if match and 0 <= float(match.group(1)) <= MAX_RETRY_AFTER:
                return float(match.group(1))
    return None


# --------------------------------------------------------------------------------------------
# classification


def _flag(headers: Mapping[str, str] | None) -> bool | None:
    value = (_header(headers, "x-should-retry") or "").strip().lower()
    return {"true": True, "false": False}.get(value)


def _is_quota_stop(status: int | None, info: ErrorInfo | None) -> bool:
    if info is None:
        return False
    code, type_ = (info.code or "").lower(), (info.type or "").lower()
    if code in _TERMINAL_CODES or type_ in _TERMINAL_CODES:
        return True
    details = info.raw.get("details")
    if isinstance(details, Mapping) and str(details.get("error_code", "")).lower() in _TERMINAL_CODES:
        return True
    if status == 429 or info.status == 429:
        if _TPM_TOO_LARGE.search(info.message):
            return True
        if "PerDay" in json.dumps(info.raw, default=str):
            return True
        if "exceeded your current quota" in info.message.lower() and "per min" not in info.message.lower():
            return True
    return False


def _retryable_status(status: int) -> bool:
    return status in _RETRYABLE_STATUS or status >= 500


def classify_error(
    status: int | None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    *,
    request_id: str | None = None,
) -> ProviderError:
    """The exception for an error answer; the caller raises it.

    Args:
        status: the HTTP status, or None for an error inside a stream or inside an HTTP 200
            body (then a status stated in the body, or the error's type, decides).
        body: the answer's body: bytes, text or parsed JSON.
        headers: the answer's headers (retry hints, ``x-should-retry``, request id).
        request_id: the request id when already known.

    Returns:
        ``ContextLengthError`` for context overflows; ``ProviderHTTPError`` for HTTP error
        statuses; ``ProviderResponseError`` for errors inside a stream or a 200 body. Each has
        ``status``, the server's message, ``request_id``, ``retryable``, ``terminal`` and
        ``retry_after`` set.
    """
    data = _load(body)
    info = error_info(data)
    request_id = request_id or request_id_from(headers, data)
    http_error = status is not None and status >= 400
    effective = status if http_error else (info.status if info is not None else None)
    if info is not None:
        message = info.message
    elif isinstance(data, str) and data:
        message = data[:500]
    elif data is not None:
        message = json.dumps(data, ensure_ascii=False, default=str)[:500]
    else:
        message = _reason(status) if status else "the model server reported an error"
    retry_after = parse_retry_after(headers)
    if retry_after is None and info is not None:
        retry_after = _body_retry_delay(info.raw)

    if is_context_length(info, message if info is None else ""):
        return ContextLengthError(message, status=effective, request_id=request_id, retry_after=retry_after)

    if _is_quota_stop(effective, info) or _REQUEST_INVALID.search(message):
        retryable = False
    elif effective is not None:
        retryable = _retryable_status(effective)
    else:
        type_ = (info.type or "").lower() if info else ""
        code = (info.code or "").lower() if info else ""
        retryable = not (type_ in _TERMINAL_TYPES or code in _TERMINAL_TYPES)
    flag = _flag(headers)
    if flag is not None:
        retryable = flag

    cls = ProviderHTTPError if http_error else ProviderResponseError
    return cls(
        message,
        status=effective,
        request_id=request_id,
        terminal=not retryable,
        retryable=retryable,
        retry_after=retry_after,
    )


def _reason(status: int) -> str:
    try:
        return httpx.codes.get_reason_phrase(status) or f"status {status}"
    except Exception:  # pragma: no cover - any int works
        return f"status {status}"


# --------------------------------------------------------------------------------------------
# transport failures (no answer at all) translated into ``ProviderError``, once, at the boundary
#
# A refused connection carries the endpoint's "how to start it" hint and is not retried for a local
# server (nothing listens there now; the run ends llm_error: retrying once it runs helps) but
# retried for a remote one (it may be restarting); the caller
# says which (a server that answered before and now refuses went away: the provider passes a
# message of its own and asks for retries). Connect errors, timeouts, proxy errors and broken
# connections are retryable; a bad URL is terminal.
#
# A read timeout names the limit that ran out (``llm.requestTimeoutSeconds``). On a server on this
# machine (``local``) it is not retried: such a server (llama.cpp, llama-cpp-python, Ollama with
# one slot) is most likely still working on the request, and a second one would only queue behind
# it, piling work onto a busy server; elsewhere it is retried.
# Error *answers* (a status, an error body) are ``classify_error``'s business (above).

BAD_URL = "bad model server URL"
"""How the error of a URL httpx cannot use begins (a config error, not a connection failure)."""


def _is_refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        current = current.__cause__ or current.__context__
    return "connection refused" in str(exc).lower()


def read_limit(exc: httpx.HTTPError) -> float | None:
    """The read timeout (seconds) of the request that failed with ``exc``, when httpx says."""
    try:
        timeouts = exc.request.extensions.get("timeout")
    except RuntimeError:  # an exception without its request
        return None
    value = timeouts.get("read") if isinstance(timeouts, dict) else None
    return float(value) if isinstance(value, int | float) else None


def timed_out_text(exc: httpx.HTTPError) -> str:
    """ "nothing for 300 s (llm.requestTimeoutSeconds)" for a read timeout, else httpx's words."""
    limit = read_limit(exc) if isinstance(exc, httpx.ReadTimeout) else None
    if limit is not None:
        return f"nothing for {limit:g} s (llm.requestTimeoutSeconds)"
    return str(exc) or type(exc).__name__


def transport_error(
    exc: httpx.HTTPError,
    *,
    refused_message: str | None = None,
    refused_final: bool = True,
    local: bool = False,
) -> ProviderError:
    """Translate an httpx transport failure into a ProviderError.

    Args:
        exc: what httpx raised.
        refused_message: the text to use when the connection was refused (the endpoint's "how
            to start it" hint).
        refused_final: a refusal is not retried within this call: nothing listens there now.
            It is not ``terminal`` either: the run ends ``llm_error``, which says a later
            retry may help (once the server is started, it does). Pass False for a remote
            host, where a refusal may be a restart (retried).
        local: the server is on this machine: a read timeout is not retried (see above).
    """
    if isinstance(exc, httpx.ConnectError) and refused_message and _is_refused(exc):
        return ProviderConnectionError(refused_message, retryable=not refused_final)
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ProviderConnectionError(f"cannot connect to the model server: {exc}", retryable=True)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ProviderConnectionError(f"{BAD_URL}: {exc}", terminal=True)
    if isinstance(exc, httpx.ProxyError):
        return ProviderConnectionError(f"proxy error: {exc}", retryable=True)
    if isinstance(exc, httpx.ReadTimeout):
        message = f"the model server did not answer in time: {timed_out_text(exc)}"
        if not local:
            return ProviderResponseError(message, retryable=True)
        return ProviderResponseError(
            f"{message}; not retried, since a server on this machine is most likely still working on "
            "it and another request would queue behind it: raise llm.requestTimeoutSeconds or lower "
            "llm.maxOutputTokens",
        )
    if isinstance(exc, httpx.TimeoutException):
        kind = type(exc).__name__
        return ProviderResponseError(f"the model server did not answer in time ({kind})", retryable=True)
    if isinstance(exc, httpx.TransportError):
        detail = str(exc) or type(exc).__name__
        return ProviderResponseError(f"the connection to the model server failed: {detail}", retryable=True)
    return ProviderError(f"HTTP client error: {exc}", retryable=True)


@contextmanager
def map_transport_errors(
    *, refused_message: str | None = None, refused_final: bool = True, local: bool = False
) -> Iterator[None]:
    """Translate httpx transport failures raised inside the block (see ``transport_error``)."""
    try:
        yield
    except httpx.TransportError as exc:
        raise transport_error(
            exc, refused_message=refused_message, refused_final=refused_final, local=local
        ) from exc


# --------------------------------------------------------------------------------------------
# answers that did not come from a model API at all: an HTML page, a text body where JSON belongs
#
# Someone points ``llm.endpoint`` at another web server (a web UI, a router page, a dev server)
# and it answers with a page. Such an answer is not an API error: retrying cannot change it, the
# page means nothing to a user reading an error, and it may be large. ``foreign_answer`` says
# ``this is not an OpenAI-compatible API (got text/html from <url>): check llm.endpoint`` (the
# API named for Anthropic and Gemini too), never quotes the body, and makes the error terminal.
#
# One exception: an HTML page with a 5xx status is what a reverse proxy (nginx, a load balancer)
# shows while the model server behind it is down or restarting, so it stays retryable (and, with
# ``llm.fallbacks``, moves on to the next model), still without the page.
#
# What counts as foreign:
#
# - any status: a ``text/html`` type, or a body that starts like markup (``<!doctype``, ``<html``);
# - a success status: a body whose type is not JSON, SSE or NDJSON and that does not parse as JSON
#   either (a JSON body that is cut off is the caller's business: it is retryable).
#
# An error status with a short text or JSON body is left to ``classify_error`` (above).

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


# --------------------------------------------------------------------------------------------
# retrying a model call: ``RetryPolicy`` (how often, how long to wait) and ``backoff_delay``
#
# Only a ``ProviderError`` with ``retryable`` set is retried; whether an error is retryable, and the
# server's retry hint (``retry_after``), are decided where the error is made (``classify_error``
# for error answers, ``transport_error`` for failed connections). The wait is the server's hint
# when there is one, else 0.5 s doubling up to 8 s, times a jitter of ``1 - 0.25 * random()``.
# ``RetryPolicy.sleep`` and ``.rand`` are injectable so that tests never wait.

logger = logging.getLogger(__name__)

T = TypeVar("T")


def backoff_delay(
    retry: int,
    retry_after: float | None = None,
    *,
    rand: Callable[[], float] = random.random,
    initial: float = 0.5,
    maximum: float = 8.0,
    jitter: float = 0.25,
) -> float:
    """Seconds to wait before retry number ``retry`` (0 for the first retry).

    The server's hint when there is one; else ``min(initial * 2**retry, maximum)`` shrunk by up
    to ``jitter`` (a quarter) at random.
    """
    if retry_after is not None:
        return retry_after
    return min(initial * 2.0**retry, maximum) * (1.0 - jitter * rand())


Sleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts of one model call.

    Attributes:
        max_retries: retries after the first attempt (``llm.maxRetries``; 0 = no retry).
        initial_delay: the first backoff delay, doubled each retry.
        max_delay: the cap of the backoff delay.
        jitter: each backoff delay is shrunk by up to this fraction at random.
        sleep: the async sleep (inject a recorder in tests).
        rand: a source of floats in [0, 1) for the jitter (inject a constant in tests).
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    sleep: Sleep = anyio.sleep
    rand: Callable[[], float] = random.random

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds before retry number ``retry`` (0-based), honouring the server's hint."""
        return backoff_delay(
            retry,
            retry_after,
            rand=self.rand,
            initial=self.initial_delay,
            maximum=self.max_delay,
            jitter=self.jitter,
        )

    async def run(
        self,
        attempt: Callable[[int], Awaitable[T]],
        *,
        what: str = "model call",
        notes: ModelNotes = NO_NOTES,
    ) -> T:
        """Call ``attempt(n)`` until it succeeds, fails for good, or retries run out.

        Only ``ProviderError`` with ``retryable`` set is retried. Cancellation is honoured
        between attempts (a checkpoint before each one), as well as during the sleep. Each
        retry is told to ``notes`` (the call's, from ``ModelRequest.notes``) before the wait.

        Raises:
            ProviderError: the last error, when it is not retryable or no retry is left.
        """
        retry = 0
        while True:
            await anyio.lowlevel.checkpoint()
            try:
                return await attempt(retry)
            except ProviderError as exc:
                if not exc.retryable or retry >= self.max_retries:
                    raise
                wait = self.delay(retry, exc.retry_after)
                logger.warning(
                    "%s failed (%s); retry %d/%d in %.2f s", what, exc, retry + 1, self.max_retries, wait
                )
                notes.retried(exc, wait)
            await self.sleep(wait)
            retry += 1
