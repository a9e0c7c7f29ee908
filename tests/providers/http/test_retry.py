"""Error classification, retry hints, backoff and the retry loop (no real waits)."""

from __future__ import annotations

import email.utils
import json
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
)
from mcp_agent.providers.http.errors import (
    ErrorInfo,
    RetryPolicy,
    backoff_delay,
    classify_error,
    error_info,
    is_context_length,
    map_transport_errors,
    parse_retry_after,
    request_id_from,
    transport_error,
)

# --------------------------------------------------------------------------------------------
# error bodies


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (  # OpenAI / Groq / Ollama /v1
            {"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": "x"}},
            ("bad", "invalid_request_error", "x", None),
        ),
        (  # llama.cpp: integer code
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            ("Loading model", "unavailable_error", "503", 503),
        ),
        (  # vLLM >= 0.10.1
            {"error": {"message": "m", "type": "BadRequestError", "param": None, "code": 400}},
            ("m", "BadRequestError", "400", 400),
        ),
        (  # vLLM < 0.10.1, flat
            {"object": "error", "message": "old", "type": "BadRequestError", "param": None, "code": 400},
            ("old", "BadRequestError", "400", 400),
        ),
        ({"error": "model 'x' not found"}, ("model 'x' not found", None, None, None)),  # Ollama native
        (  # Anthropic
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
                "request_id": "r",
            },
            ("Overloaded", "overloaded_error", None, None),
        ),
        (  # Gemini, wrapped in a list as in streams
            [{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}],
            ("quota", "RESOURCE_EXHAUSTED", "429", 429),
        ),
        (  # Groq, in-stream
            {
                "error": {
                    "message": "Failed",
                    "type": "invalid_request_error",
                    "code": "tool_use_failed",
                    "status_code": 400,
                }
            },
            ("Failed", "invalid_request_error", "tool_use_failed", 400),
        ),
        ({"detail": "Not Found"}, ("Not Found", None, None, None)),  # FastAPI-style proxies
        (b'{"error": {"message": "as bytes"}}', ("as bytes", None, None, None)),
    ],
)
def test_error_info_shapes(body: Any, expected: tuple[Any, ...]) -> None:
    info = error_info(body)
    assert info is not None
    assert (info.message, info.type, info.code, info.status) == expected


@pytest.mark.parametrize(
    "body",
    [
        None,
        "",
        "plain text",
        b"<html>",
        {"id": "chatcmpl-1", "choices": []},
        {"error": None},
        [],
        [1],
        {"error": {}},
    ],
)
def test_error_info_none_for_non_errors(body: Any) -> None:
    assert error_info(body) is None


# --------------------------------------------------------------------------------------------
# context length, every server of llm-wire §9.2


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens.",
                    "code": "context_length_exceeded",
                }
            },
        ),
        (
            400,
            {
                "error": {
                    "message": "whatever",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
        ),
        (  # vLLM (new shape)
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
                    "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages or "
                    "completion.",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            },
        ),
        (  # vLLM (old flat shape)
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 2048 tokens. However, you requested "
                "3000 tokens",
                "type": "BadRequestError",
                "code": 400,
            },
        ),
        (  # llama.cpp: type decides, whatever the wording
            400,
            {
                "error": {
                    "code": 400,
                    "message": "something new",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 13392,
                    "n_ctx": 8192,
                }
            },
        ),
        (
            400,
            {
                "error": {
                    "code": 400,
                    "type": "invalid_request_error",
                    "message": "request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it",
                }
            },
        ),
        (
            400,
            {
                "error": {
                    "message": "Trying to keep the first 5000 tokens when context the overflows. However, the model "
                    "is loaded with context length of only 4096 tokens, which is not enough."
                }
            },
        ),  # LM Studio
        (
            400,
            {
                "error": "The number of tokens to keep from the initial prompt is greater than the context length "
                "(n_keep: 10247 >= n_ctx: 4096)"
            },
        ),  # LM Studio
        (200, {"error": "Context size has been exceeded."}),  # LM Studio's HTTP 200 with an error body
        (None, {"error": {"message": "Context size has been exceeded."}}),  # the same, mid-stream
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            },
        ),  # Anthropic
        (
            400,
            {
                "error": {
                    "code": 400,
                    "status": "INVALID_ARGUMENT",
                    "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                }
            },
        ),
        (400, {"error": "the input length exceeds the context length"}),  # Ollama, truncate: false
        (400, "This model's maximum context length is 128000 tokens."),  # not JSON at all
        (  # llama-cpp-python, a prompt just under n_ctx: an overflow in disguise
            500,
            {
                "error": {
                    "message": "could not broadcast input array from shape (49152,) into shape (0,)",
                    "type": "internal_server_error",
                    "param": None,
                    "code": None,
                }
            },
        ),
    ],
)
def test_context_length_errors(status: int | None, body: Any) -> None:
    error = classify_error(status, json.dumps(body) if not isinstance(body, str) else body)
    assert isinstance(error, ContextLengthError)
    assert not error.retryable and not error.terminal
    assert error.message


def test_tpm_request_too_large_is_not_context_length_but_terminal() -> None:
    body = {
        "error": {
            "message": "Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Requested 31538. The input or output tokens must be reduced in order to run "
            "successfully.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
    error = classify_error(429, body)
    assert type(error) is ProviderHTTPError
    assert error.terminal and not error.retryable


@pytest.mark.parametrize(
    "text",
    ["Rate limit reached for requests", "Invalid 'tools[0].function.name'", "Loading model", ""],
)
def test_not_context_length(text: str) -> None:
    assert not is_context_length(ErrorInfo(message=text))


# --------------------------------------------------------------------------------------------
# retryable or terminal


def _err(message: str = "m", **extra: Any) -> dict[str, Any]:
    return {"error": {"message": message, **extra}}


@pytest.mark.parametrize(
    ("status", "body", "headers", "cls", "retryable"),
    [
        (408, _err(), {}, ProviderHTTPError, True),
        (409, _err(), {}, ProviderHTTPError, True),
        (
            429,
            _err("Rate limit reached", type="requests", code="rate_limit_exceeded"),
            {},
            ProviderHTTPError,
            True,
        ),
        (500, _err(), {}, ProviderHTTPError, True),
        (502, "<html>Bad gateway</html>", {}, ProviderHTTPError, True),
        (
            503,
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            {},
            ProviderHTTPError,
            True,
        ),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            {},
            ProviderHTTPError,
            True,
        ),
        (400, _err(), {}, ProviderHTTPError, False),
        (401, _err("Incorrect API key", code="invalid_api_key"), {}, ProviderHTTPError, False),
        (403, _err(), {}, ProviderHTTPError, False),
        (
            404,
            {"error": {"message": 'model "x" not found', "type": "not_found_error"}},
            {},
            ProviderHTTPError,
            False,
        ),
        (413, _err(), {}, ProviderHTTPError, False),
        (422, {"detail": "Unprocessable"}, {}, ProviderHTTPError, False),
        # quotas and spend limits: 429 but never retried
        (
            429,
            _err("You exceeded your current quota", type="insufficient_quota", code="insufficient_quota"),
            {},
            ProviderHTTPError,
            False,
        ),
        (
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "spend limit",
                    "details": {"error_code": "enforced_spend_limit_reached"},
                },
            },
            {},
            ProviderHTTPError,
            False,
        ),
        (
            429,
            [
                {
                    "error": {
                        "code": 429,
                        "message": "Quota exceeded",
                        "status": "RESOURCE_EXHAUSTED",
                        "details": [
                            {
                                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                                "violations": [
                                    {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}
                                ],
                            }
                        ],
                    }
                }
            ],
            {},
            ProviderHTTPError,
            False,
        ),
        (
            429,
            [
                {
                    "error": {
                        "code": 429,
                        "message": "Quota exceeded",
                        "status": "RESOURCE_EXHAUSTED",
                        "details": [
                            {"violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}]}
                        ],
                    }
                }
            ],
            {},
            ProviderHTTPError,
            True,
        ),
        # x-should-retry overrides the status either way
        (400, _err(), {"x-should-retry": "true"}, ProviderHTTPError, True),
        (500, _err(), {"X-Should-Retry": "false"}, ProviderHTTPError, False),
        # errors inside a stream or a 200 body: the body's status, else its type
        (
            None,
            {
                "error": {
                    "message": "Failed to call a function",
                    "code": "tool_use_failed",
                    "status_code": 400,
                }
            },
            {},
            ProviderResponseError,
            False,
        ),
        (None, {"error": {"message": "boom", "type": "server_error"}}, {}, ProviderResponseError, True),
        (
            None,
            {"error": {"message": "bad", "type": "invalid_request_error"}},
            {},
            ProviderResponseError,
            False,
        ),
        (None, {"error": {"message": "who knows"}}, {}, ProviderResponseError, True),
        (200, {"error": "unknown failure"}, {}, ProviderResponseError, True),
        # llama-cpp-python: its request validation answers 500 internal_server_error
        (
            500,
            _err(
                "1 validation error:\n  {'type': 'float_parsing', 'loc': ('body', 'temperature'), "
                "'msg': 'Input should be a valid number', 'input': 'abc'}\n",
                type="internal_server_error",
            ),
            {},
            ProviderHTTPError,
            False,
        ),
        (
            500,
            _err("1 validation error in a tool of ours", type="internal_server_error"),
            {},
            ProviderHTTPError,
            True,
        ),
        (500, "Internal Server Error", {}, ProviderHTTPError, True),
    ],
)
def test_classification(
    status: int | None, body: Any, headers: dict[str, str], cls: type, retryable: bool
) -> None:
    error = classify_error(status, body, headers)
    assert type(error) is cls
    assert error.retryable is retryable
    assert error.terminal is (not retryable)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        assert error.message == body["error"]["message"]


def test_error_carries_status_message_request_id_and_retry_after() -> None:
    error = classify_error(
        429,
        b'{"error": {"message": "slow down"}}',
        httpx.Headers({"x-request-id": "req_1", "retry-after": "3"}),
    )
    assert (error.status, error.message, error.request_id, error.retry_after) == (
        429,
        "slow down",
        "req_1",
        3.0,
    )
    assert str(error) == "HTTP 429: slow down (request id req_1)"


def test_request_id_sources() -> None:
    assert request_id_from({"Request-Id": "a"}) == "a"
    assert request_id_from(httpx.Headers({"request-id": "b"})) == "b"
    assert request_id_from({}, {"request_id": "req_c"}) == "req_c"
    assert request_id_from(None) is None
    assert (
        classify_error(500, {"type": "error", "error": {"message": "x"}, "request_id": "req_d"}).request_id
        == "req_d"
    )


def test_message_when_body_is_empty_or_not_json() -> None:
    assert classify_error(503, b"").message == "Service Unavailable"
    assert classify_error(500, "oops" * 500).message == ("oops" * 500)[:500]
    assert classify_error(500, [1, 2]).message == "[1, 2]"


def test_gemini_retry_delay_in_body() -> None:
    body = {
        "error": {
            "code": 429,
            "message": "slow",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34s"}],
        }
    }
    assert classify_error(429, body).retry_after == 34.0
    body["error"]["details"][0]["retryDelay"] = "120s"
    assert classify_error(429, body).retry_after is None


# --------------------------------------------------------------------------------------------
# retry hints and backoff

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "30"}, 0.25),
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "0"}, 0.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after": "61"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after-ms": "90000"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "x", "retry-after": "4"}, 4.0),
        ({"retry-after": email.utils.formatdate(NOW + 12, usegmt=True)}, 12.0),
        ({"retry-after": email.utils.formatdate(NOW + 3600, usegmt=True)}, None),
        ({"retry-after": email.utils.formatdate(NOW - 10, usegmt=True)}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_backoff_doubles_to_eight_seconds_with_jitter() -> None:
    assert [backoff_delay(n, rand=lambda: 0.0) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert [backoff_delay(n, rand=lambda: 1.0) for n in range(3)] == [0.375, 0.75, 1.5]
    assert backoff_delay(3, 0.2, rand=lambda: 1.0) == 0.2


# --------------------------------------------------------------------------------------------
# the retry loop


class Recorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _policy(max_retries: int, sleep: Recorder) -> RetryPolicy:
    return RetryPolicy(max_retries=max_retries, sleep=sleep, rand=lambda: 0.0)


async def test_retries_until_success_with_backoff() -> None:
    sleep, calls = Recorder(), []

    async def attempt(n: int) -> str:
        calls.append(n)
        if n < 2:
            raise ProviderHTTPError("busy", status=503, retryable=True)
        return "ok"

    assert await _policy(3, sleep).run(attempt) == "ok"
    assert calls == [0, 1, 2]
    assert sleep.delays == [0.5, 1.0]


async def test_gives_up_after_max_retries_with_the_last_error() -> None:
    sleep = Recorder()

    async def attempt(n: int) -> str:
        raise ProviderHTTPError(f"busy {n}", status=503, retryable=True)

    with pytest.raises(ProviderHTTPError, match="busy 2"):
        await _policy(2, sleep).run(attempt)
    assert sleep.delays == [0.5, 1.0]


async def test_no_retries_when_max_retries_is_zero() -> None:
    sleep = Recorder()

    async def attempt(n: int) -> str:
        raise ProviderHTTPError("busy", status=503, retryable=True)

    with pytest.raises(ProviderHTTPError):
        await _policy(0, sleep).run(attempt)
    assert sleep.delays == []


async def test_terminal_errors_are_not_retried() -> None:
    sleep, calls = Recorder(), []

    async def attempt(n: int) -> str:
        calls.append(n)
        raise ProviderHTTPError("bad key", status=401, terminal=True)

    with pytest.raises(ProviderHTTPError):
        await _policy(5, sleep).run(attempt)
    assert calls == [0] and sleep.delays == []


async def test_retry_after_is_honoured() -> None:
    sleep = Recorder()
    errors = [
        classify_error(429, _err("slow"), {"retry-after": "3"}),
        classify_error(429, _err("slow"), {"retry-after-ms": "120"}),
        classify_error(429, _err("slow"), {"retry-after": "600"}),  # out of range: backoff instead
    ]

    async def attempt(n: int) -> str:
        if errors:
            raise errors.pop(0)
        return "ok"

    assert await _policy(5, sleep).run(attempt) == "ok"
    assert sleep.delays == [3.0, 0.12, 2.0]


async def test_cancellation_between_attempts() -> None:
    """A cancel that arrives while waiting ends the loop before the next attempt."""
    calls: list[int] = []
    with anyio.CancelScope() as scope:

        async def sleep(seconds: float) -> None:
            scope.cancel()  # the caller is cancelled during the backoff; the sleep itself returns

        async def attempt(n: int) -> str:
            calls.append(n)
            raise ProviderHTTPError("busy", status=503, retryable=True)

        await RetryPolicy(max_retries=5, sleep=sleep).run(attempt)
    assert scope.cancelled_caught
    assert calls == [0]


async def test_cancellation_during_a_real_sleep() -> None:
    calls: list[int] = []

    async def attempt(n: int) -> str:
        calls.append(n)
        raise ProviderHTTPError("busy", status=503, retryable=True)

    with anyio.fail_after(20):
        with anyio.move_on_after(0.05):
            await RetryPolicy(max_retries=3, initial_delay=30).run(attempt)
    assert calls == [0]


# --------------------------------------------------------------------------------------------
# transport errors


def _refused() -> httpx.ConnectError:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed")
        except ConnectionRefusedError as inner:
            raise OSError("All connection attempts failed") from inner
    except OSError as outer:
        error = httpx.ConnectError("All connection attempts failed")
        error.__cause__ = outer
        return error


def test_refused_on_a_remote_host_keeps_the_hint_but_is_retried() -> None:
    error = transport_error(_refused(), refused_message="Cannot reach Ollama at X", refused_final=False)
    assert type(error) is ProviderConnectionError
    assert error.retryable and not error.terminal and error.message == "Cannot reach Ollama at X"


def test_refused_with_a_hint_is_not_retried_nor_terminal_and_says_how_to_start() -> None:
    """Not retried (nothing listens now), but not terminal: the run ends ``llm_error``, retryable,
    since asking again once the server is started succeeds."""
    error = transport_error(
        _refused(), refused_message="Ollama is not running at X: start it with `ollama serve`"
    )
    assert type(error) is ProviderConnectionError
    assert not error.terminal and not error.retryable
    assert "ollama serve" in error.message


@pytest.mark.parametrize(
    ("exc", "cls", "retryable"),
    [
        (_refused(), ProviderConnectionError, True),  # no hint (a remote host): retried
        (httpx.ConnectTimeout("timed out"), ProviderConnectionError, True),
        (httpx.ReadTimeout("timed out"), ProviderResponseError, True),
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            ProviderResponseError,
            True,
        ),
        (httpx.ReadError("reset"), ProviderResponseError, True),
        (
            httpx.UnsupportedProtocol("Request URL is missing an 'http://' or 'https://' protocol."),
            ProviderConnectionError,
            False,
        ),
        (httpx.ProxyError("proxy said no"), ProviderConnectionError, True),
    ],
)
def test_transport_errors(exc: httpx.HTTPError, cls: type, retryable: bool) -> None:
    error = transport_error(exc)
    assert type(error) is cls
    assert error.retryable is retryable


def test_map_transport_errors_context_manager() -> None:
    with pytest.raises(ProviderConnectionError) as info, map_transport_errors(refused_message="start it"):
        raise _refused()
    assert info.value.message == "start it"
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    with map_transport_errors():
        pass
    with pytest.raises(ValueError), map_transport_errors():
        raise ValueError("not ours")


def test_provider_error_is_the_base() -> None:
    assert issubclass(ContextLengthError, ProviderError)
