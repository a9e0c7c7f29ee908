"""Security on the wire: bearer auth, Host/Origin checks, CORS, body and query caps, bind refusal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.exceptions import ConfigError
from mcp_agent.gateway.serve import bind_socket, serve

from .conftest import Running, answer_of, make_config, running_gateway
from .test_mcp import connect

TOKEN = "t0ken-" + "x" * 20


@pytest.fixture(scope="module")
async def token_gateway() -> AsyncIterator[Running]:
    async with running_gateway(make_config(auth_token=TOKEN)) as gateway:
        yield gateway


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("GET", "/api/v1/tools", {}),
        ("GET", "/api/v1/approvals", {}),
        ("GET", "/api/v1/sessions", {}),
        ("GET", "/api/v1/events", {}),
        ("GET", "/metrics", {}),
        ("POST", "/api/v1/query", {"json": {"query": "hi"}}),
        ("POST", "/api/v1/approvals/abc", {"json": {"approved": True}}),
        ("DELETE", "/api/v1/sessions/abc", {}),
        ("GET", "/sse", {}),
        ("GET", "/mcp/sse", {}),
        ("POST", "/messages/?session_id=00", {"json": {}}),
        ("POST", "/mcp", {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}),
        ("GET", "/mcp", {}),
    ],
)
async def test_every_route_but_health_needs_the_token(
    token_gateway: Running, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    gateway = token_gateway
    calls = gateway.model.calls
    async with gateway.client() as http:
        missing = await http.request(method, path, **kwargs)
        wrong = await http.request(method, path, headers={"Authorization": "Bearer nope"}, **kwargs)
    for response in (missing, wrong):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["error"]["type"] == "unauthorized"
    assert gateway.model.calls == calls


async def test_health_and_page_are_exempt_and_the_right_token_works(token_gateway: Running) -> None:
    gateway = token_gateway
    if True:
        async with gateway.client() as http:
            assert (await http.get("/api/v1/health")).status_code == 200
            assert (await http.get("/")).status_code == 200
            good = {"Authorization": f"Bearer {TOKEN}"}
            assert (await http.get("/api/v1/tools", headers=good)).status_code == 200
            answer = await http.post("/api/v1/query", json={"query": "hi"}, headers=good)
            assert answer.json()["answer"] == "answer: hi"
        for transport, era in [("sse", "legacy"), ("http", "modern")]:
            async with connect(gateway.url, transport, era, headers=good) as client:
                result = await client.call_tool("agent_query", {"query": "with token"})
                assert answer_of(result) == "answer: with token"


@pytest.mark.parametrize("path", ["/api/v1/health", "/api/v1/tools", "/metrics", "/", "/sse", "/mcp"])
async def test_bad_host_is_421(shared_gateway: Running, path: str) -> None:
    async with shared_gateway.client() as http:
        response = await http.get(path, headers={"Host": "evil.example.com"})
    assert response.status_code == 421
    assert response.json()["error"]["type"] == "misdirected_request"


HOST_CASES = [
    ("localhost:1", True),
    ("LOCALHOST:1", True),
    ("127.0.0.1:9", True),
    ("[::1]:9", True),
    ("evil.localhost", False),
    ("EVIL.LOCALHOST:80", False),
    ("127.0.0.2", False),
    ("127.0.0.2:8765", False),
    ("localhost:abc", False),
    ("localhost:8765/x", False),
]
HOST_ROUTES = [
    ("GET", "/api/v1/health"),
    ("GET", "/api/v1/tools"),
    ("GET", "/metrics"),
    ("GET", "/"),
    ("GET", "/sse"),
    ("GET", "/mcp/sse"),
    ("POST", "/mcp"),
    ("POST", "/messages/?session_id=00"),
    ("POST", "/api/v1/query"),
]


@pytest.mark.parametrize(("host", "accepted"), HOST_CASES)
async def test_one_host_rule_for_every_route(shared_gateway: Running, host: str, accepted: bool) -> None:
    """REST once accepted evil.localhost, 127.0.0.2 and LOCALHOST:1 while /mcp refused them."""
    statuses = {}
    async with shared_gateway.client() as http:
        for method, path in HOST_ROUTES:
            body = (
                {"jsonrpc": "2.0", "id": 1, "method": "ping"} if "mcp" in path or "messages" in path else {}
            )
            async with http.stream(method, path, headers={"Host": host}, json=body) as response:
                statuses[path] = response.status_code
    if accepted:
        assert all(status != 421 for status in statuses.values()), statuses
    else:
        assert set(statuses.values()) == {421}, statuses


async def test_health_says_only_status_and_version_without_a_token(token_gateway: Running) -> None:
    async with token_gateway.client() as http:
        open_answer = (await http.get("/api/v1/health")).json()
        wrong = (await http.get("/api/v1/health", headers={"Authorization": "Bearer nope"})).json()
        detailed = (await http.get("/api/v1/health", headers={"Authorization": f"Bearer {TOKEN}"})).json()
    assert set(open_answer) == {"status", "version"} and open_answer["status"] == "ok"
    assert wrong == open_answer
    assert {"model", "endpoint", "servers", "tool_count", "model_server"} <= set(detailed)


async def test_credentials_in_urls_and_errors_are_never_shown() -> None:
    config = make_config(auth_token=TOKEN)
    endpoint = "http://alice:pa55word@127.0.0.1:9/v1?key=k3y-secret&api-version=2024"
    config = config.model_copy(update={"llm": config.llm.model_copy(update={"endpoint": endpoint})})
    async with running_gateway(config) as gateway, gateway.client() as http:
        service = gateway.app.service
        service.model_server = {
            "reachable": False,
            "model_present": None,
            "error": f"cannot reach {endpoint}: refused (Authorization: Bearer sk-abcdefghijklmnopqrstuv)",
        }
        gateway.hub.status = lambda: [  # type: ignore[method-assign]
            {"name": "files", "status": "failed", "error": "exited: stderr: API_KEY=hunter2-secret bad"}
        ]
        text = (await http.get("/api/v1/health", headers={"Authorization": f"Bearer {TOKEN}"})).text
    for secret in ("pa55word", "k3y-secret", "sk-abcdefghijklmnopqrstuv", "hunter2-secret"):
        assert secret not in text
    assert "http://***@127.0.0.1:9/v1?key=***&api-version=2024" in text


@pytest.mark.parametrize("path", ["/api/v1/health", "/api/v1/query", "/sse", "/mcp", "/messages/"])
async def test_foreign_origin_is_403(shared_gateway: Running, path: str) -> None:
    calls = shared_gateway.model.calls
    async with shared_gateway.client() as http:
        response = await http.post(path, json={"query": "hi"}, headers={"Origin": "https://evil.example.com"})
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers
    assert shared_gateway.model.calls == calls


async def test_allowed_hosts_and_origins() -> None:
    config = make_config(allowed_hosts=["agent.lan"], allowed_origins=["https://ui.example.com"])
    async with running_gateway(config) as gateway, gateway.client() as http:
        ok = await http.get(
            "/api/v1/health", headers={"Host": "agent.lan:8765", "Origin": "https://ui.example.com"}
        )
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == "https://ui.example.com"
        assert "Origin" in ok.headers["vary"]
        preflight = await http.options(
            "/api/v1/query",
            headers={"Origin": "https://ui.example.com", "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "https://ui.example.com"
        plain = await http.get("/api/v1/health")  # no Origin: no CORS headers at all
        assert "access-control-allow-origin" not in plain.headers
        refused = await http.options(
            "/api/v1/query",
            headers={"Origin": "https://other.example.com", "Access-Control-Request-Method": "POST"},
        )
        assert refused.status_code == 403


async def test_body_cap_is_413() -> None:
    async with running_gateway(make_config(max_request_bytes=2000)) as gateway:
        async with gateway.client() as http:
            big = await http.post("/api/v1/query", json={"query": "x" * 3000})
            assert big.status_code == 413 and big.json()["error"]["type"] == "payload_too_large"

            async def chunks() -> Any:  # no Content-Length: counted while read
                for _ in range(5):
                    yield b"x" * 1000

            streamed = await http.post(
                "/api/v1/query", content=chunks(), headers={"content-type": "application/json"}
            )
            assert streamed.status_code == 413
            mcp = await http.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "agent_query", "arguments": {"query": "x" * 3000}},
                },
                headers={"Accept": "application/json, text/event-stream"},
            )
            assert mcp.status_code == 413
        assert gateway.model.calls == 0


async def test_query_length_cap_on_rest() -> None:
    async with running_gateway(make_config(max_query_chars=10)) as gateway:
        async with gateway.client() as http:
            response = await http.post("/api/v1/query", json={"query": "x" * 11})
        assert response.status_code == 400
        assert "gateway.maxQueryChars" in response.json()["error"]["message"]


async def test_non_loopback_bind_without_token_is_refused() -> None:
    with pytest.raises(ConfigError, match="authToken"):
        await serve(make_config(), host="0.0.0.0", port=0, handle_signals=False)


async def test_port_in_use_is_a_clear_error() -> None:
    taken = bind_socket("127.0.0.1", 0)
    taken.listen()
    try:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve(make_config(), host="127.0.0.1", port=port, handle_signals=False)
    finally:
        taken.close()


async def test_serve_runs_until_stop() -> None:
    stop, ready = anyio.Event(), anyio.Event()
    ports: list[int] = []

    def on_ready(host: str, port: int) -> None:
        ports.append(port)
        ready.set()

    from .conftest import HubLike, RuleModel, Tools, agent_factory

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: serve(
                make_config(),
                host="127.0.0.1",
                port=0,
                factory=agent_factory(RuleModel(), HubLike(Tools().source)),
                stop=stop,
                handle_signals=False,
                on_ready=on_ready,
            )
        )
        with anyio.fail_after(10):
            await ready.wait()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[0]}") as http:
            with anyio.fail_after(10):
                while (await http.get("/api/v1/health")).status_code != 200:
                    await anyio.sleep(0.05)
            assert (await http.post("/api/v1/query", json={"query": "up"})).json()["answer"] == "answer: up"
        stop.set()
