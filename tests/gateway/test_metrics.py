"""``GET /metrics``: prometheus_client under the hood, scraped over real HTTP and parsed with
``prometheus_client.parser``; the label sets stay bounded whatever the model or the callers send."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_agent.config import load_config
from mcp_agent.events import ApprovalResolved, ModelCallEnded, RunEnded, ToolCallEnded
from mcp_agent.gateway.metrics import Metrics, approval_outcome
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.result import TerminationReason
from mcp_agent.messages import ToolSpec, Turn
from mcp_agent.providers.base import DeltaCallback, ModelRequest
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server

from .conftest import RuleModel, Running, eventually, make_config, running_gateway
from .e2e import rule_reply, write_config

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` (KeyError when it is not there at all)."""
    return samples[(name, frozenset(labels.items()))]


async def scrape(gateway: Running, **headers: str) -> Samples:
    async with gateway.client() as http:
        response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


# ------------------------------------------------------------------------------------ the pure parts


def test_every_reason_and_outcome_shows_at_zero() -> None:
    samples = parse(Metrics().render())
    for reason in TerminationReason:
        assert value(samples, "mcp_agent_queries_total", termination_reason=reason.value) == 0
    for reason in ("busy", "starting", "shutting_down", "invalid"):
        assert value(samples, "mcp_agent_queries_rejected_total", reason=reason) == 0
    for outcome in ("approved", "denied", "timed_out", "abandoned"):
        assert value(samples, "mcp_agent_approvals_total", outcome=outcome) == 0
    assert value(samples, "mcp_agent_queries_in_flight") == 0
    assert not [name for name, _ in samples if name.endswith("_created")]


def test_events_are_counted_with_bounded_labels() -> None:
    specs = [ToolSpec("fs__read", server="fs"), ToolSpec("echo", server="mem")]
    metrics = Metrics(models=["qwen3:8b", "gpt-4o-mini"], tools=lambda: specs)
    metrics.emit(RunEnded(run_id="r", session_id="s-1", termination_reason="success", elapsed_ms=300))
    metrics.emit(RunEnded(run_id="r", termination_reason="max_rounds", early_stopped=True, elapsed_ms=70_000))
    metrics.emit(ToolCallEnded(run_id="r", round=1, call_id="c", name="fs__read", ok=True, ms=20))
    metrics.emit(ToolCallEnded(run_id="r", round=1, call_id="c", name="fs__read", ok=False, ms=20))
    metrics.emit(ToolCallEnded(run_id="r", round=1, call_id="c", name="echo", verdict="denied", ok=False))
    metrics.emit(ToolCallEnded(run_id="r", round=1, call_id="c", name='we"ird\nname', verdict="unknown_tool"))
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    metrics.emit(
        ModelCallEnded(run_id="r", round=1, ms=5, model="qwen3:8b", usage=usage, streamed=True, retries=2)
    )
    metrics.emit(ModelCallEnded(run_id="r", round=1, ms=5, model="made-up", usage=usage, streamed=False))
    metrics.emit(ModelCallEnded(run_id="r", round=1, ok=False, ms=5))
    metrics.emit(ApprovalResolved(run_id="r", approval_id="a", call_id="c", name="echo", approved=True))
    metrics.reject("busy")
    metrics.reject("something new")
    metrics.in_flight = 3
    samples = parse(metrics.render())

    assert value(samples, "mcp_agent_queries_total", termination_reason="success") == 1
    assert value(samples, "mcp_agent_queries_early_stopped_total") == 1
    assert (
        value(samples, "mcp_agent_query_duration_seconds_bucket", termination_reason="success", le="0.5") == 1
    )
    assert value(samples, "mcp_agent_query_duration_seconds_count", termination_reason="max_rounds") == 1
    assert value(samples, "mcp_agent_tool_calls_total", server="fs", tool="fs__read", outcome="ok") == 1
    assert value(samples, "mcp_agent_tool_calls_total", server="fs", tool="fs__read", outcome="error") == 1
    assert value(samples, "mcp_agent_tool_errors_total", server="fs", tool="fs__read") == 1
    assert value(samples, "mcp_agent_tool_call_duration_seconds_count", server="fs", tool="fs__read") == 2
    assert value(samples, "mcp_agent_tool_calls_total", server="mem", tool="echo", outcome="denied") == 1
    assert (
        value(samples, "mcp_agent_tool_calls_total", server="other", tool="other", outcome="unknown_tool")
        == 1
    )
    assert value(samples, "mcp_agent_model_calls_total", model="qwen3:8b", outcome="ok") == 1
    assert value(samples, "mcp_agent_model_calls_total", model="other", outcome="ok") == 1
    assert value(samples, "mcp_agent_model_calls_total", model="unknown", outcome="error") == 1
    assert (
        value(samples, "mcp_agent_model_call_duration_seconds_count", model="qwen3:8b", streamed="true") == 1
    )
    assert value(samples, "mcp_agent_model_call_duration_seconds_count", model="other", streamed="false") == 1
    assert (
        value(samples, "mcp_agent_model_call_duration_seconds_count", model="unknown", streamed="unknown")
        == 1
    )
    assert value(samples, "mcp_agent_model_retries_total", model="qwen3:8b") == 2
    assert value(samples, "mcp_agent_tokens_total", model="qwen3:8b", type="prompt") == 10
    assert value(samples, "mcp_agent_tokens_total", model="other", type="completion") == 5
    assert value(samples, "mcp_agent_approvals_total", outcome="approved") == 1
    assert value(samples, "mcp_agent_queries_rejected_total", reason="busy") == 1
    assert value(samples, "mcp_agent_queries_rejected_total", reason="other") == 1
    assert value(samples, "mcp_agent_queries_in_flight") == 3
    # what a test or health reads without parsing
    assert metrics.queries["success"] == 1 and metrics.rejected["busy"] == 1
    assert metrics.tool_calls[("fs__read", "ok")] == 1
    # no session id, run id or free text became a label value
    everything = json.dumps(sorted(str(key) for key in samples))
    assert "s-1" not in everything and "ird" not in everything and "made-up" not in everything


@pytest.mark.parametrize(
    ("approved", "reason", "outcome"),
    [
        (True, "approved by operator", "approved"),
        (False, "operator did not approve this call", "denied"),
        (False, "no way", "denied"),
        (False, "approval timed out after 60 s", "timed_out"),
        (False, "the run ended while waiting for approval", "abandoned"),
        (False, "this tool needs approval and no approver is configured", "abandoned"),
    ],
)
def test_approval_outcomes(approved: bool, reason: str, outcome: str) -> None:
    event = ApprovalResolved(
        run_id="r", approval_id="a", call_id="c", name="t", approved=approved, reason=reason
    )
    assert approval_outcome(event) == outcome


def test_watched_metrics_are_read_at_each_scrape() -> None:
    metrics = Metrics()
    state = {"n": 1}
    metrics.watch("mcp_agent_things", "Things.", lambda: state["n"])
    metrics.watch("mcp_agent_lost", "Lost.", lambda: 7, kind="counter")
    metrics.watch("mcp_agent_by_server", "By server.", lambda: {("a",): 1.0, ("b",): 0.0}, labels=("server",))
    assert value(parse(metrics.render()), "mcp_agent_things") == 1
    state["n"] = 5
    samples = parse(metrics.render())
    assert value(samples, "mcp_agent_things") == 5
    assert value(samples, "mcp_agent_lost_total") == 7
    assert value(samples, "mcp_agent_by_server", server="b") == 0


def test_two_apps_in_one_process_do_not_share_metrics() -> None:
    first, second = Metrics(), Metrics()
    first.reject("busy")
    assert first.rejected["busy"] == 1 and second.rejected["busy"] == 0


# ------------------------------------------------------------------------------------ over HTTP


class NamedRuleModel(RuleModel):
    """The rule model, saying which model answered as a real provider does."""

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        return replace(await super().complete(request, on_delta), model="rule-model")


async def test_scraped_over_http(tmp_path: Path) -> None:
    config = make_config()
    async with running_gateway(config, model=NamedRuleModel()) as gateway, gateway.client() as http:
        assert (await http.post("/api/v1/query", json={"query": "echo m"})).status_code == 200
        assert (await http.post("/api/v1/query", json={"query": "rounds"})).status_code == 200
        assert (await http.post("/api/v1/query", json={"nope": 1})).status_code == 400
        async with anyio.create_task_group() as tg:

            async def write() -> None:
                await http.post("/api/v1/query", json={"query": "write x"})

            tg.start_soon(write)
            pending: list[dict[str, Any]] = []

            async def has_pending() -> bool:
                pending[:] = (await http.get("/api/v1/approvals")).json()["pending"]
                return bool(pending)

            await eventually(has_pending)
            assert (
                await http.post(f"/api/v1/approvals/{pending[0]['id']}", json={"approved": True})
            ).status_code == 200
        samples = await scrape(gateway)

    assert value(samples, "mcp_agent_queries_total", termination_reason="success") == 2
    assert value(samples, "mcp_agent_queries_total", termination_reason="max_rounds") == 1
    assert value(samples, "mcp_agent_query_duration_seconds_count", termination_reason="success") == 2
    assert value(samples, "mcp_agent_tool_calls_total", server="mem", tool="echo", outcome="ok") == 5
    assert value(samples, "mcp_agent_tool_calls_total", server="mem", tool="write_file", outcome="ok") == 1
    assert value(samples, "mcp_agent_tool_call_duration_seconds_count", server="mem", tool="echo") == 5
    assert value(samples, "mcp_agent_model_calls_total", model="rule-model", outcome="ok") == 8
    assert (
        value(samples, "mcp_agent_model_call_duration_seconds_count", model="rule-model", streamed="unknown")
        == 8
    )
    assert value(samples, "mcp_agent_tokens_total", model="rule-model", type="prompt") == 80
    assert value(samples, "mcp_agent_approvals_total", outcome="approved") == 1
    assert value(samples, "mcp_agent_queries_rejected_total", reason="invalid") == 1
    assert value(samples, "mcp_agent_queries_in_flight") == 0
    assert value(samples, "mcp_agent_server_up", server="mem") == 1
    assert value(samples, "mcp_agent_servers_up") == 1
    assert value(samples, "mcp_agent_tools") == 3
    assert value(samples, "mcp_agent_events_dropped_total") == 0
    assert value(samples, "mcp_agent_http_requests_open") >= 1  # this scrape
    for name in ("mcp_agent_mcp_sessions", "mcp_agent_mcp_connections", "mcp_agent_event_listeners"):
        assert value(samples, name) == 0


async def test_metrics_keep_their_auth() -> None:
    config = make_config(auth_token="s3cret-token-value")
    async with running_gateway(config) as gateway, gateway.client() as http:
        assert (await http.get("/metrics")).status_code == 401
        samples = await scrape(gateway, authorization="Bearer s3cret-token-value")
    assert value(samples, "mcp_agent_queries_in_flight") == 0


# ------------------------------------------------------------------------------------ the real provider


@pytest.fixture
def flaky_model() -> Iterator[FakeModelServer]:
    """The rule model over the OpenAI wire, answering each query's first chat request 429."""
    seen: set[str] = set()

    def reply(request: RecordedRequest) -> Reply:
        if request.path.endswith("/chat/completions"):
            key = json.dumps(request.json["messages"])
            if key not in seen:
                seen.add(key)
                return Reply.json(
                    {"error": {"message": "slow down"}}, status=429, headers={"retry-after-ms": "1"}
                )
        return rule_reply(request)

    with running_model_server() as server:
        server.handler = reply
        yield server


@pytest.fixture
async def real_gateway(flaky_model: FakeModelServer, tmp_path: Path) -> AsyncIterator[Running]:
    path = write_config(tmp_path, flaky_model.base_url, tmp_path / "slow.log")
    data = json.loads(path.read_text())
    data["llm"]["maxRetries"] = 2
    path.write_text(json.dumps(data))
    async with running_gateway(load_config(path), factory=Agent.from_config) as gateway:
        yield gateway


async def test_retries_streams_and_servers_from_the_real_stack(real_gateway: Running) -> None:
    async with real_gateway.client() as http:
        answer = (await http.post("/api/v1/query", json={"query": "echo hello"})).json()
    assert answer["answer"] == "echo__echo said: hello"
    samples = await scrape(real_gateway)
    assert value(samples, "mcp_agent_model_retries_total", model="rule-model") == 2
    assert (
        value(samples, "mcp_agent_model_call_duration_seconds_count", model="rule-model", streamed="false")
        == 2
    )
    assert value(samples, "mcp_agent_tool_calls_total", server="echo", tool="echo__echo", outcome="ok") == 1
    assert value(samples, "mcp_agent_server_up", server="echo") == 1
    assert value(samples, "mcp_agent_server_up", server="slow") == 1
    assert value(samples, "mcp_agent_servers_up") == 2
