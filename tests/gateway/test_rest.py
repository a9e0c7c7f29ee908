"""The REST API against the real app under uvicorn: queries, streams, approvals, sessions, errors."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import pytest

from .conftest import Running, eventually, sse_events


async def test_health_and_tools(gateway: Running) -> None:
    async with gateway.client() as http:
        health = (await http.get("/api/v1/health")).json()
        tools = (await http.get("/api/v1/tools")).json()
    assert health["status"] == "ok"
    assert health["model"] == "rule-model"
    assert health["tool_count"] == 3 and health["servers_up"] == 1 and health["servers_down"] == 0
    assert health["version"]
    assert [tool["name"] for tool in tools["tools"]] == ["echo", "sleep", "write_file"]
    assert tools["tools"][0]["parameters"]["required"] == ["text"]
    assert tools["servers"][0]["name"] == "mem"


async def test_query_returns_the_structured_result(gateway: Running) -> None:
    async with gateway.client() as http:
        response = await http.post("/api/v1/query", json={"query": "echo rest"})
        assert response.status_code == 200
        body = response.json()
        assert body["answer"] == "echo said: rest" and body["ok"] is True and body["error"] is None
        assert body["termination_reason"] == "success" and body["session_id"]
        again = await http.post("/api/v1/query", json={"query": "history", "session_id": body["session_id"]})
        assert again.json()["answer"] == "seen: echo rest | history"
        unknown = await http.post("/api/v1/query", json={"query": "history", "session_id": "r1"})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "unknown_session"


async def test_query_failure_carries_the_error_text(gateway: Running) -> None:
    async with gateway.client() as http:
        body = (await http.post("/api/v1/query", json={"query": "empty"})).json()
    assert body["ok"] is False
    assert body["error"].startswith("Agent terminated (empty_response):")


async def test_query_stream_sends_events_then_the_result(gateway: Running) -> None:
    seen: list[tuple[str, Any]] = []
    async with (
        gateway.client() as http,
        http.stream(
            "POST", "/api/v1/query", json={"query": "echo s"}, headers={"Accept": "text/event-stream"}
        ) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in sse_events(response):
            seen.append(event)
    kinds = [kind for kind, _ in seen]
    assert kinds[0] == "run_started" and kinds[-2] == "run_ended" and kinds[-1] == "result"
    assert "tool_call_started" in kinds and "tool_call_ended" in kinds
    run_id = seen[0][1]["run_id"]
    assert all(data["run_id"] == run_id for kind, data in seen[:-1])
    assert seen[-1][1]["answer"] == "echo said: s"


async def test_stream_client_disconnect_cancels_the_run(gateway: Running) -> None:
    async with (
        gateway.client() as http,
        http.stream(
            "POST", "/api/v1/query", json={"query": "sleep 30"}, headers={"Accept": "text/event-stream"}
        ) as response,
    ):
        async for kind, _ in sse_events(response):
            if kind == "tool_call_started":
                break
    metrics = gateway.app.service.metrics
    await eventually(lambda: metrics.queries["cancelled"] == 1)
    await eventually(lambda: gateway.tools.cancelled == [30.0])
    assert metrics.in_flight == 0


async def test_plain_query_client_disconnect_cancels_the_run(gateway: Running) -> None:
    async with gateway.client() as http, anyio.create_task_group() as tg:
        tg.start_soon(partial(http.post, "/api/v1/query", json={"query": "sleep 30"}))
        with anyio.fail_after(10):
            await gateway.tools.sleeping.wait()
        tg.cancel_scope.cancel()  # the client goes away
    await eventually(lambda: gateway.app.service.metrics.queries["cancelled"] == 1)


async def test_events_stream_with_session_filter(gateway: Running) -> None:
    got: list[tuple[str, Any]] = []
    async with gateway.client() as http:
        watched = (await http.post("/api/v1/query", json={"query": "start"})).json()["session_id"]
        other_id = (await http.post("/api/v1/query", json={"query": "start"})).json()["session_id"]
        async with http.stream("GET", "/api/v1/events", params={"session_id": watched}) as response:
            assert response.status_code == 200
            async with anyio.create_task_group() as tg:

                async def queries() -> None:
                    async with gateway.client() as other:
                        await eventually(lambda: gateway.app.service.bus.listeners == 1)
                        await other.post(
                            "/api/v1/query", json={"query": "not watched", "session_id": other_id}
                        )
                        await other.post("/api/v1/query", json={"query": "echo w", "session_id": watched})

                tg.start_soon(queries)
                with anyio.fail_after(10):
                    async for kind, data in sse_events(response):
                        got.append((kind, data))
                        if kind == "run_ended":
                            break
    assert {data["session_id"] for _, data in got} == {watched}
    assert got[0][0] == "run_started" and got[0][1]["query"] == "echo w"


async def test_approval_resolved_over_rest_while_a_query_waits(gateway: Running) -> None:
    async with gateway.client() as http, anyio.create_task_group() as tg:
        answers: list[dict[str, Any]] = []

        async def ask() -> None:
            answers.append((await http.post("/api/v1/query", json={"query": "write hello"})).json())

        tg.start_soon(ask)
        pending: list[dict[str, Any]] = []

        async def has_pending() -> bool:
            pending[:] = (await http.get("/api/v1/approvals")).json()["pending"]
            return bool(pending)

        await eventually(has_pending)
        [item] = pending
        assert item["name"] == "write_file" and item["arguments"] == {"text": "hello"}
        health = await http.get("/api/v1/health")  # the waiting query blocks nothing else
        assert health.status_code == 200
        first = await http.post(f"/api/v1/approvals/{item['id']}", json={"approved": True})
        second = await http.post(f"/api/v1/approvals/{item['id']}", json={"approved": False})
        assert first.status_code == 200 and first.json()["status"] == "resolved"
        assert second.status_code == 404  # exactly one resolver wins
    assert answers[0]["answer"] == "write_file said: written"
    assert gateway.tools.written == ["hello"]


async def test_denied_over_rest(gateway: Running) -> None:
    async with gateway.client() as http, anyio.create_task_group() as tg:
        answers: list[dict[str, Any]] = []

        async def ask() -> None:
            answers.append((await http.post("/api/v1/query", json={"query": "write nope"})).json())

        tg.start_soon(ask)
        approvals = gateway.app.service.agent.approvals  # type: ignore[union-attr]

        async def has_pending() -> bool:
            return bool(await approvals.pending())

        await eventually(has_pending)
        [item] = await approvals.pending()
        response = await http.post(
            f"/api/v1/approvals/{item.id}", json={"approved": False, "reason": "no way"}
        )
        assert response.status_code == 200
    assert "[DENIED: no way]" in answers[0]["answer"]
    assert gateway.tools.written == []


async def test_sessions_list_and_delete(gateway: Running) -> None:
    async with gateway.client() as http:
        keep = (await http.post("/api/v1/query", json={"query": "one"})).json()["session_id"]
        drop = (await http.post("/api/v1/query", json={"query": "two"})).json()["session_id"]
        listed = (await http.get("/api/v1/sessions")).json()
        assert {item["id"] for item in listed["sessions"]} == {keep, drop}
        assert (await http.delete(f"/api/v1/sessions/{drop}")).status_code == 200
        assert (await http.delete(f"/api/v1/sessions/{drop}")).status_code == 404
        listed = (await http.get("/api/v1/sessions")).json()
        assert [item["id"] for item in listed["sessions"]] == [keep]
        gone = await http.post("/api/v1/query", json={"query": "history", "session_id": drop})
        assert gone.status_code == 404


async def test_dashboard_page(gateway: Running) -> None:
    async with gateway.client() as http:
        response = await http.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "href",
    ):
        assert sink not in response.text  # server data is only ever shown as text, never parsed as HTML
    assert "textContent" in response.text
    assert "http://" not in response.text and "https://" not in response.text  # no CDN, nothing external


JSON = {"headers": {"content-type": "application/json"}}
JSON_SSE = {"headers": {"content-type": "application/json", "accept": "text/event-stream"}}


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "kind"),
    [
        (
            "POST",
            "/api/v1/query",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            400,
            "invalid_json",
        ),
        ("POST", "/api/v1/query", {"json": ["a list"]}, 400, "invalid_request"),
        ("POST", "/api/v1/query", {"json": {"query": 5}}, 400, "invalid_request"),
        ("POST", "/api/v1/query", {"json": {"query": "q", "limits": {"nope": 1}}}, 400, "invalid_request"),
        (
            "POST",
            "/api/v1/query",
            {"content": b'{"query": "q"}', "headers": {"content-type": "text/plain"}},
            415,
            "unsupported_media_type",
        ),
        ("POST", "/api/v1/query", {"data": {"query": "q"}}, 415, "unsupported_media_type"),
        ("GET", "/api/v1/query", {}, 405, "method_not_allowed"),
        ("GET", "/api/v1/nope", {}, 404, "not_found"),
        ("GET", "/nope", {}, 404, "not_found"),
        ("DELETE", "/api/v1/health", {}, 405, "method_not_allowed"),
        ("POST", "/api/v1/approvals/unknown", {"json": {"approved": True}}, 404, "not_found"),
        ("POST", "/api/v1/approvals/x", {"json": {"approved": "yes"}}, 400, "invalid_request"),
        ("POST", "/api/v1/approvals/x", {"json": {}}, 400, "invalid_request"),
        ("POST", "/api/v1/approvals/x", {"json": {"approved": True, "extra": 1}}, 400, "invalid_request"),
        ("POST", "/api/v1/approvals/x", {"json": {"approved": True, "reason": 3}}, 400, "invalid_request"),
        (
            "POST",
            "/api/v1/approvals/x",
            {"content": b"approved=1", "headers": {"content-type": "application/x-www-form-urlencoded"}},
            415,
            "unsupported_media_type",
        ),
        ("DELETE", "/api/v1/sessions/none", {}, 404, "not_found"),
        # once 500s: a lone surrogate (the stream stopped without run_ended), 100k-deep JSON
        ("POST", "/api/v1/query", {"content": b'{"query": "a \\ud800 b"}', **JSON}, 400, "invalid_request"),
        ("POST", "/api/v1/query", {"content": b'{"query": "\\udfff"}', **JSON_SSE}, 400, "invalid_request"),
        ("POST", "/api/v1/query", {"content": b"[" * 100_000 + b"]" * 100_000, **JSON}, 400, "invalid_json"),
        (
            "POST",
            "/api/v1/query",
            {"content": b'{"a":' * 50_000 + b"1" + b"}" * 50_000, **JSON},
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/api/v1/query",
            {"content": b'{"query": ' + b"9" * 5000 + b"}", **JSON},
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/api/v1/query",
            {"content": b'{"query": "q", "limits": {"maxRounds": NaN}}', **JSON},
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/api/v1/query",
            {"content": b'{"query": "q", "session_id": "abc\\n"}', **JSON},
            400,
            "invalid_request",
        ),
        ("POST", "/api/v1/query", {"content": b"\xff\xfe{}", **JSON}, 400, "invalid_json"),
        (
            "POST",
            "/api/v1/approvals/x",
            {"content": b'{"approved": true, "reason": "\\ud800"}', **JSON},
            400,
            "invalid_request",
        ),
    ],
)
async def test_rest_errors(
    shared_gateway: Running, method: str, path: str, kwargs: dict[str, Any], status: int, kind: str
) -> None:
    calls = shared_gateway.model.calls
    async with shared_gateway.client() as http:
        response = await http.request(method, path, **kwargs)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["type"] == kind and error["message"]
    assert shared_gateway.model.calls == calls


async def test_health_tells_the_truth_about_tool_servers_and_the_model(gateway: Running) -> None:
    """Health once said ``ok`` while the model server was unreachable or a tool server failed."""
    service = gateway.app.service
    async with gateway.client() as http:
        first = await http.get("/api/v1/health")
        assert first.status_code == 200 and first.json()["status"] == "ok" and first.json()["reasons"] == []
        gateway.hub.status = lambda: [  # type: ignore[method-assign]
            {"name": "mem", "status": "up"},
            {"name": "files", "status": "failed", "error": "exited"},
            {"name": "web", "status": "restarting", "error": "crashed"},
        ]
        service.model_server = {"reachable": True, "model_present": False, "error": None}
        degraded = await http.get("/api/v1/health")
    assert degraded.status_code == 200  # the process serves
    assert degraded.json()["status"] == "degraded"
    assert degraded.json()["reasons"] == [
        "model 'rule-model' is not on the model server",
        "tool servers down: files, web",
    ]
