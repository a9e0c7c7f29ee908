"""An endpoint that answers with a web page (or other non-JSON) says so, is not retried, and never
shows the page: every API, streamed or not, status 200 and 404, the models list and a whole run."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.exceptions import ProviderError
from mcp_agent.loop.result import TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.providers.anthropic import AnthropicProvider
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import create_provider
from mcp_agent.providers.gemini import GeminiProvider
from mcp_agent.providers.http.errors import RetryPolicy, foreign_answer
from mcp_agent.providers.servers.identify import list_models
from mcp_agent.tools.memory import MemoryToolSource
from tests.fakes.model_server import FakeModelServer, Reply
from tests.providers.conftest import SleepRecorder

MARK = "ROUTER-LOGIN-PAGE"
PAGE = (
    "<!DOCTYPE html>\n<html><head><title>Router</title></head><body>"
    + f"<p>{MARK}</p>" * 500
    + "</body></html>"
).encode()
REQUEST = ModelRequest(messages=[])


def page(status: int, *, streamed: bool = False, content_type: str = "text/html; charset=utf-8") -> Reply:
    headers = {"content-type": content_type}
    if streamed:  # chunked, as a dev server streams its page
        return Reply(status=status, headers=headers, events=[PAGE[:2000], PAGE[2000:]], done=False)
    return Reply(status=status, headers=headers, body=PAGE)


# --------------------------------------------------------------------------------------------
# what counts


@pytest.mark.parametrize(
    ("status", "content_type", "body", "expected"),
    [
        (200, "text/html", b"<p>hi</p>", "text/html"),
        (200, "", b"  <!doctype html><html>", "text/html"),  # no type: the body shows it
        (200, "text/plain", b"Hello world", "text/plain"),
        (200, "", b"Hello world", "a body that is not JSON"),
        (404, "text/html", PAGE, "text/html"),
        (405, "text/plain", b"<html><body>Method Not Allowed</body></html>", "text/html"),
        (502, "text/html", b"<html>502 Bad Gateway</html>", "retryable"),  # a proxy, its server down
        # API answers, or errors classify_error reads
        (200, "application/json", b"{}", None),
        (200, "application/json", b'{"cut', None),  # JSON cut short: the caller retries it
        (200, "text/event-stream", b"data: {}\n\n", None),
        (200, "application/x-ndjson", b"{}\n", None),
        (200, "text/plain", b'{"choices": []}', None),  # JSON with a careless type
        (404, "text/plain", b"404 page not found", None),  # Ollama's router: short, no page
        (500, "application/json", b'{"error": {"message": "boom"}}', None),
    ],
)
def test_foreign_answer(status: int, content_type: str, body: bytes, expected: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    error = foreign_answer(
        status, headers, body, url="http://user:pw@host:8080/v1/chat/completions", api="openai"
    )
    if expected is None:
        assert error is None
        return
    assert error is not None
    assert (error.terminal, error.retryable) == (expected != "retryable", expected == "retryable")
    assert "http://***@host:8080/v1/chat/completions" in error.message and "pw" not in error.message
    assert "Hello" not in str(error) and "Bad Gateway" not in str(error) and "Method" not in str(error)
    if expected != "retryable":
        assert f"this is not an OpenAI-compatible API (got {expected} from http://***@host" in error.message
        assert error.message.endswith("check llm.endpoint")


# --------------------------------------------------------------------------------------------
# every API, streamed or not


def _openai(server: FakeModelServer, client: httpx.AsyncClient, stream: bool) -> Any:
    provider = create_provider(LLMConfig(endpoint=server.base_url, model="m", stream=stream), client)
    return provider


def _anthropic(server: FakeModelServer, client: httpx.AsyncClient, stream: bool) -> Any:
    llm = LLMConfig(provider="anthropic", endpoint=server.base_url, model="claude-sonnet-4", stream=stream)
    return AnthropicProvider(llm, client=client)


def _gemini(server: FakeModelServer, client: httpx.AsyncClient, stream: bool) -> Any:
    llm = LLMConfig(
        provider="gemini", endpoint=server.url + "/v1beta", model="gemini-2.5-flash", stream=stream
    )
    return GeminiProvider(llm, client=client)


APIS = {
    "openai": (_openai, "an OpenAI-compatible API", "/v1/chat/completions"),
    "anthropic": (_anthropic, "the Anthropic Messages API", "/v1/messages"),
    "gemini": (_gemini, "the Gemini API", "/v1beta/models/gemini-2.5-flash:"),
}


@pytest.mark.parametrize("api", sorted(APIS))
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("status", [200, 404])
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
async def test_a_web_page_is_named_not_retried_and_not_shown(
    model_server: FakeModelServer,
    http_client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    api: str,
    stream: bool,
    status: int,
    chunked: bool,
) -> None:
    build, name, path = APIS[api]
    model_server.enqueue(*[page(status, streamed=chunked)] * 3)
    provider = build(model_server, http_client, stream)
    provider.retry = RetryPolicy(max_retries=2, sleep=SleepRecorder())
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    error = caught.value
    assert f"this is not {name} (got text/html from {model_server.url}{path}" in error.message
    assert error.message.endswith("check llm.endpoint")
    assert error.terminal and not error.retryable
    assert len(model_server.requests) == 1  # not retried
    assert MARK not in str(error) and MARK not in caplog.text


async def test_a_text_answer_is_named_too(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(Reply(body=b"Welcome to my blog", headers={"content-type": "text/plain"}))
    with (
        anyio.fail_after(20),
        pytest.raises(ProviderError, match=r"not an OpenAI-compatible API \(got text/plain"),
    ):
        await _openai(model_server, http_client, False).complete(REQUEST)
    assert len(model_server.requests) == 1


async def test_a_proxy_page_for_a_server_that_is_down_is_retried_without_the_page(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    model_server.enqueue(page(502), page(503), Reply.json({"choices": [{"message": {"content": "ok"}}]}))
    provider = _openai(model_server, http_client, False)
    provider.retry = RetryPolicy(max_retries=2, sleep=SleepRecorder())
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(20):
        turn = await provider.complete(REQUEST)
    assert turn.content == "ok" and len(model_server.requests) == 3
    assert "answered with a web page" in caplog.text and MARK not in caplog.text


@pytest.mark.parametrize("status", [200, 404])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_the_models_list_names_a_web_page(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, status: int, provider: str
) -> None:
    model_server.enqueue(page(status))
    endpoint = model_server.base_url if provider != "gemini" else model_server.url + "/v1beta"
    llm = LLMConfig(endpoint=endpoint, provider=provider)  # type: ignore[arg-type]
    with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
        await list_models(llm, http_client)
    assert f"(got text/html from {model_server.url}" in str(caught.value)
    assert "/models): check llm.endpoint" in str(caught.value) and MARK not in str(caught.value)


async def test_a_run_ends_terminal_error_with_one_request(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.handler = lambda request: page(200)
    provider = _openai(model_server, http_client, True)
    result = await run("hi", provider=provider, tools=MemoryToolSource())
    assert result.termination_reason is TerminationReason.TERMINAL_ERROR
    assert "this is not an OpenAI-compatible API (got text/html from" in result.detail
    assert MARK not in result.detail and len(model_server.requests) == 1
