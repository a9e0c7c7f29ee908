"""The lean HTTP/1.1 transport of the model calls (``providers/http/lean.py`` over ``_http/lean.py``).

Every provider test runs over it (``tests/providers/conftest.py``'s ``http_client``). Here: what
it does with its connections, and that each failure is the one httpx's default transport gives
(same exception, same ``ProviderError`` from ``errors.transport_error``), each against the fake
model server on 127.0.0.1, once through a client with the lean transport and once through one
without.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx
import pytest

from mcp_agent._http.lean import NO_ANSWER
from mcp_agent.config import parse_config
from mcp_agent.providers.factory import build_client
from mcp_agent.providers.http.errors import transport_error
from mcp_agent.providers.http.lean import LeanTransport, ModelClient, lean_transport, post_stream
from tests.fakes.model_server import Delay, FakeModelServer, Reply, running_model_server

Kind = Literal["lean", "default"]
KINDS: tuple[Kind, ...] = ("lean", "default")
TIMEOUT = httpx.Timeout(10.0)
HANG_GUARD = 20.0
"""A bound on a test that would otherwise hang (not a timed assert)."""


class Counting(LeanTransport):
    """The lean transport, counting the requests it was handed."""

    handled = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        Counting.handled += 1
        return await super().handle_async_request(request)


@asynccontextmanager
async def client_of(
    kind: Kind, *, timeout: httpx.Timeout = TIMEOUT, keepalive_expiry: float | None = 30.0
) -> AsyncIterator[httpx.AsyncClient]:
    """A client as ``build_client`` makes one: over the lean transport, or httpx's default one."""
    mounts: dict[str, httpx.AsyncBaseTransport] = {}
    if kind == "lean":
        Counting.handled = 0
        mounts["http://"] = Counting(timeout, keepalive_expiry=keepalive_expiry)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False, mounts=mounts) as client:
        yield client
    if kind == "lean":
        assert Counting.handled, "the lean transport was not used"


async def post(client: httpx.AsyncClient, server: FakeModelServer) -> httpx.Response:
    return await client.post(f"{server.base_url}/chat/completions", json={"model": "m"})


async def closed_by_server(server: FakeModelServer, count: int) -> None:
    """Wait until the server has closed ``count`` connections (its side)."""
    with anyio.fail_after(HANG_GUARD):
        while server.closed < count:
            await anyio.sleep(0.005)


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --------------------------------------------------------------------------------------------
# connections


async def test_one_kept_alive_connection_serves_request_after_request(model_server: FakeModelServer) -> None:
    model_server.enqueue(*[Reply.json({"n": n}) for n in range(3)])
    async with client_of("lean") as client:
        answers = [(await post(client, model_server)).json() for _ in range(3)]
    assert answers == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert model_server.connections == 1


async def test_a_connection_the_server_closed_is_replaced_and_the_request_sent_once(
    model_server: FakeModelServer,
) -> None:
    """A server whose idle timeout ran out closed the kept connection: the next request goes on a
    new one (written on the closed one, it would fail: "Server disconnected...")."""
    model_server.enqueue(Reply.json({"n": 1}, close=True), Reply.json({"n": 2}))
    async with client_of("lean") as client:
        assert (await post(client, model_server)).json() == {"n": 1}
        await closed_by_server(model_server, 1)
        assert (await post(client, model_server)).json() == {"n": 2}
    assert model_server.connections == 2 and len(model_server.requests) == 2


async def test_a_connection_idle_past_the_keepalive_expiry_is_not_used(model_server: FakeModelServer) -> None:
    model_server.enqueue(Reply.json({"n": 1}), Reply.json({"n": 2}))
    async with client_of("lean", keepalive_expiry=0.0) as client:
        await post(client, model_server)
        await post(client, model_server)
    assert model_server.connections == 2


async def test_a_request_the_server_dropped_unanswered_is_not_sent_again(
    model_server: FakeModelServer,
) -> None:
    """It may have been processed: the failure is the caller's (whose retry policy decides)."""
    model_server.enqueue(Reply(drop=True))
    async with client_of("lean") as client:
        with pytest.raises(httpx.RemoteProtocolError, match=NO_ANSWER):
            await post(client, model_server)
    assert len(model_server.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [Reply.json({"choices": ["a" * 100_000]}), Reply.sse([{"n": n} for n in range(50)])],
    ids=["content-length", "chunked"],
)
async def test_bodies_read_whole_and_the_same_as_httpx_reads_them(reply: Reply) -> None:
    bodies = {}
    for kind in KINDS:
        with running_model_server() as server:
            server.enqueue(reply, reply)
            async with client_of(kind) as client:
                first = await post(client, server)
                second = await post(client, server)  # the connection was kept after a whole body
            assert server.connections == 1
        assert first.content == second.content
        bodies[kind] = (first.status_code, first.headers.get("content-type"), first.content)
    assert bodies["lean"] == bodies["default"]


async def test_a_streamed_body_arrives_as_sent_and_closing_it_early_closes_the_connection(
    model_server: FakeModelServer,
) -> None:
    """An endless SSE body: read event by event (held whole, it would never end), then closed
    before its end; that connection is not kept (its next bytes are the old body's)."""
    model_server.enqueue(Reply.endless({"delta": "x"}), Reply.json({"n": 2}))
    async with client_of("lean") as client:
        with anyio.fail_after(HANG_GUARD):
            async with client.stream(
                "POST", f"{model_server.base_url}/chat/completions", json={}
            ) as response:
                events = 0
                async for line in response.aiter_lines():
                    events += line.startswith("data: ")
                    if events == 3:
                        break
        await closed_by_server(model_server, 1)  # the client hung up: the server's endless body stopped
        assert (await post(client, model_server)).json() == {"n": 2}
    assert model_server.connections == 2


# --------------------------------------------------------------------------------------------
# failures: the default transport's, and the same ProviderError


async def outcome(
    kind: Kind, server: FakeModelServer | None, reply: Reply | None, **kw: Any
) -> tuple[Any, ...]:
    """What a POST ends in: the exception's type and words, and the ProviderError made of it."""
    url = f"http://127.0.0.1:{free_port()}/v1" if server is None else server.base_url
    if server is not None and reply is not None:
        server.enqueue(reply)
    async with client_of(kind, **kw) as client:
        with anyio.fail_after(HANG_GUARD), pytest.raises(httpx.TransportError) as info:
            async with client.stream("POST", f"{url}/chat/completions", json={}) as response:
                await response.aread()
    error = transport_error(info.value, refused_message="start the server", local=True)
    words = "" if isinstance(info.value, httpx.TimeoutException) else str(info.value)
    return type(info.value), words, type(error), error.message, error.retryable, error.terminal


async def test_connect_refused_is_httpx_connect_error_with_the_refusal_as_its_cause() -> None:
    lean, default = [await outcome(kind, None, None) for kind in KINDS]
    assert lean == default
    assert lean[0] is httpx.ConnectError and lean[3] == "start the server"


@pytest.mark.parametrize(
    "reply",
    [
        Reply(drop=True),
        Reply.sse([{"n": 1}, {"n": 2}], abort_after=1),
        Reply.sse([], abort_after=0),
    ],
    ids=["dropped-unanswered", "reset-mid-chunked-body", "reset-after-head"],
)
async def test_a_broken_connection_fails_as_with_httpx(reply: Reply) -> None:
    outcomes = []
    for kind in KINDS:
        with running_model_server() as server:
            outcomes.append(await outcome(kind, server, reply))
    assert outcomes[0] == outcomes[1]
    assert issubclass(outcomes[0][0], httpx.RemoteProtocolError | httpx.ReadError)


@pytest.mark.parametrize(
    "reply",
    [Reply.json({"n": 1}, delay=5.0), Reply.sse([{"n": 1}, Delay(5.0), {"n": 2}])],
    ids=["before-the-head", "mid-body"],
)
async def test_a_read_timeout_is_httpx_read_timeout_naming_the_limit(reply: Reply) -> None:
    timeout = httpx.Timeout(10.0, read=0.2)
    outcomes = []
    for kind in KINDS:
        with running_model_server() as server:
            outcomes.append(await outcome(kind, server, reply, timeout=timeout))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] is httpx.ReadTimeout and "nothing for 0.2 s" in outcomes[0][3]


async def test_after_a_read_timeout_the_next_request_gets_its_own_answer(
    model_server: FakeModelServer,
) -> None:
    """The timed-out connection is closed: the late answer never reaches the next request."""
    model_server.enqueue(Reply.json({"n": 1}, delay=1.0), Reply.json({"n": 2}))
    async with client_of("lean", timeout=httpx.Timeout(10.0, read=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await post(client, model_server)
        assert (await post(client, model_server)).json() == {"n": 2}


# --------------------------------------------------------------------------------------------
# where it is used


def test_mounted_only_for_plain_http_with_no_proxy_in_the_way(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    limits = httpx.Limits()
    assert isinstance(
        lean_transport("http://10.0.0.5:8000/v1", trust_env=True, timeout=TIMEOUT, limits=limits),
        LeanTransport,
    )
    assert (
        lean_transport("https://api.example.com/v1", trust_env=True, timeout=TIMEOUT, limits=limits) is None
    )
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    assert lean_transport("http://10.0.0.5:8000/v1", trust_env=True, timeout=TIMEOUT, limits=limits) is None
    assert lean_transport("http://127.0.0.1:8000/v1", trust_env=False, timeout=TIMEOUT, limits=limits)


async def test_the_factorys_client_sends_model_calls_over_it(
    model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = LeanTransport.handle_async_request
    handled: list[httpx.URL] = []

    async def counted(self: LeanTransport, request: httpx.Request) -> httpx.Response:
        handled.append(request.url)
        return await original(self, request)

    monkeypatch.setattr(LeanTransport, "handle_async_request", counted)
    model_server.enqueue(Reply.json({"n": 1}))
    llm = parse_config({"llm": {"endpoint": model_server.base_url, "model": "m"}}).llm
    async with build_client(llm) as client:
        assert (await post(client, model_server)).json() == {"n": 1}
    assert len(handled) == 1


# --------------------------------------------------------------------------------------------
# post_stream: the client's layers skipped, what they do kept


@asynccontextmanager
async def model_client(**options: Any) -> AsyncIterator[ModelClient]:
    """A ``ModelClient`` over a counting lean transport, as ``build_client`` makes one."""
    Counting.handled = 0
    async with ModelClient(timeout=TIMEOUT, trust_env=False, lean=Counting(TIMEOUT), **options) as client:
        yield client


async def posted(client: httpx.AsyncClient, server: FakeModelServer) -> tuple[int, dict[str, str], bytes]:
    async with post_stream(
        client, f"{server.base_url}/chat/completions", json={"model": "m"}, headers={"x-a": "1"}
    ) as response:
        return response.status_code, dict(response.headers), await response.aread()


async def test_post_stream_sends_the_clients_request_to_the_lean_transport_directly(
    model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the client's own send was used")

    monkeypatch.setattr(ModelClient, "send", refuse)
    model_server.enqueue(Reply.json({"n": 1}), Reply.json({"n": 1}))
    async with model_client(headers={"User-Agent": "ua/1"}) as lean, client_of("default") as default:
        answers = [await posted(client, model_server) for client in (lean, default)]
        assert Counting.handled == 1
    assert answers[0][0] == answers[1][0] == 200 and answers[0][2] == answers[1][2] == b'{"n": 1}'
    sent = model_server.requests[0]
    assert sent.headers["user-agent"] == "ua/1" and sent.headers["x-a"] == "1"
    assert sent.json == {"model": "m"} and sent.headers["content-type"] == "application/json"


async def test_post_stream_keeps_the_cookies_a_server_sets(model_server: FakeModelServer) -> None:
    """A sticky load balancer's cookie goes back on the next call, as through the client's layers."""
    model_server.enqueue(
        Reply.json({"n": 1}, headers={"set-cookie": "lb=node-2; Path=/"}), Reply.json({"n": 2})
    )
    async with model_client() as client:
        await posted(client, model_server)
        await posted(client, model_server)
        assert client.cookies.get("lb") == "node-2"
    assert "cookie" not in model_server.requests[0].headers
    assert model_server.requests[1].headers["cookie"] == "lb=node-2"


async def test_post_stream_runs_the_hooks_and_follows_no_redirect(model_server: FakeModelServer) -> None:
    seen: list[str] = []

    async def on_request(request: httpx.Request) -> None:
        seen.append(f"request {request.method}")

    async def on_response(response: httpx.Response) -> None:
        seen.append(f"response {response.status_code}")

    model_server.enqueue(Reply.json({}, status=307, headers={"location": "/elsewhere"}))
    hooks = {"request": [on_request], "response": [on_response]}
    url = f"{model_server.base_url}/chat/completions"
    async with (
        model_client(event_hooks=hooks) as client,
        post_stream(client, url, json={}, headers={}) as answer,
    ):
        assert answer.status_code == 307 and answer.next_request is not None
        assert answer.next_request.url == f"{model_server.base_url.split('/v1')[0]}/elsewhere"
    assert seen == ["request POST", "response 307"] and len(model_server.requests) == 1


async def test_post_stream_on_a_closed_client_refuses_as_the_client_does(
    model_server: FakeModelServer,
) -> None:
    async with model_client() as lean, client_of("default") as default:
        pass
    for client in (lean, default):
        with pytest.raises(RuntimeError, match="client has been closed"):
            await posted(client, model_server)
    assert model_server.requests == []


async def test_post_stream_on_any_other_client_is_its_stream(model_server: FakeModelServer) -> None:
    """A plain ``httpx.AsyncClient`` (tests, library users) and an ``https://`` URL take the client's way."""
    model_server.enqueue(Reply.json({"n": 1}))
    async with client_of("lean") as client:  # the transport mounted, but not a ModelClient
        assert (await posted(client, model_server))[2] == b'{"n": 1}'
    async with model_client() as client:
        with pytest.raises(httpx.ConnectError):
            await posted_to(client, "https://127.0.0.1:9/v1/chat/completions")
        assert Counting.handled == 0


async def posted_to(client: httpx.AsyncClient, url: str) -> None:
    async with post_stream(client, url, json={}, headers={}) as response:
        await response.aread()


async def test_post_stream_sends_credentials_in_the_url_as_the_client_does(
    model_server: FakeModelServer,
) -> None:
    """``http://user:secret@host/v1`` (an endpoint behind HTTP Basic): the client's auth pass
    turns the URL's credentials into an ``Authorization`` header, over the same lean transport."""
    model_server.enqueue(Reply.json({"n": 1}), Reply.json({"n": 1}))
    url = model_server.base_url.replace("http://", "http://agent:s3cret@") + "/chat/completions"
    async with model_client() as lean, client_of("default") as default:
        for client in (lean, default):
            async with post_stream(client, url, json={}, headers={"authorization": "Bearer k"}) as answer:
                assert answer.status_code == 200
        assert Counting.handled == 1
    basic = "Basic " + base64.b64encode(b"agent:s3cret").decode()
    assert [request.headers["authorization"] for request in model_server.requests] == [basic, basic]
