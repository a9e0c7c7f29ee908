"""Upstream llama.cpp ``llama-server --jinja``: the whole path for real, call -> tool -> result -> answer.

A 135M model calls tools only now and then; with ``tool_choice: "required"`` llama-server
constrains its output with a grammar built from the chat template (``chatml-tools.jinja``). This
llama.cpp lets the model write text before the call, so the recording proxy also appends the
prefill ``{`` (an assistant message to continue, which the grammar reads as the start of a call):
the first round then always yields a well-formed call, and the loop runs the rest for real. The
agent sends ``tool_choice: "required"`` on the first round itself (``llm.toolChoice``, as a user
would set it); the proxy adds only the prefill (``prefill_when_required``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._run import assistant_calls, cap_of, cli, offered, query_json, run_agent, serving, tool_messages
from .conftest import ENDINGS_OF_A_WORKING_LOOP, agent_config, echo_server, system_server
from .proxy import Exchange, RecordingProxy, prefill_when_required, recording_proxy
from .servers import N_CTX, Build, RealServer, llama_server

QUESTION = "Use the echo tool to echo the word pineapple."


def _both_servers() -> dict[str, object]:
    return {"echo": echo_server(), "system": system_server()}


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
async def test_call_tool_result_answer(
    jinja_server: RealServer,
    proxy_to: Callable[..., RecordingProxy],
    tmp_path: Path,
    samples: Callable[[str, Exchange, str], Path],
    stream: bool,
) -> None:
    proxy = proxy_to(jinja_server, prefill_when_required)
    config = agent_config(
        tmp_path,
        proxy.base_url,
        jinja_server.model_id,
        servers=_both_servers(),
        llm={"stream": stream, "toolChoice": "required"},
    )
    [run] = await run_agent(config, QUESTION)
    chats = proxy.chats
    assert len(chats) >= 2, [e.status for e in chats]
    first, second = chats[0], chats[1]

    # the request we sent: tools of both servers, temperature 0, the cap, streaming as configured
    body = first.sent_json
    assert offered(body) == {"echo__echo", "system__memory_usage"}
    assert body["tool_choice"] == "required" and body["temperature"] == 0 and cap_of(body) == 64
    assert body["stream"] is stream and first.status == 200 and first.streamed is stream

    # parsing: the grammar made a well-formed call of an offered tool, and it ran
    first_round = [c for c in run.tool_calls if c.round == 1]
    assert first_round and all(c.name in offered(body) for c in first_round)
    assert all(c.verdict == "run" and c.ok for c in first_round), first_round

    # the result went back, answering the call by its id, without the first round's tool_choice
    again = second.sent_json
    calls, results = assistant_calls(again), tool_messages(again)
    assert calls and [c["id"] for c in calls] == [r["tool_call_id"] for r in results]
    assert [c["function"]["name"] for c in calls] == [c.name for c in first_round]
    assert again.get("tool_choice") != "required"

    # the ending is one the loop may reach with a model that answers or keeps calling
    result = run.result
    assert result.termination_reason.value in ENDINGS_OF_A_WORKING_LOOP, (
        result.termination_reason,
        result.detail,
    )
    assert result.rounds == len(chats) == len(run.model_calls)
    kind = "stream" if stream else "plain"
    samples(
        f"llama-server-required-call-{kind}",
        first,
        "llama-server --jinja, tool_choice required: a grammar-made call",
    )
    samples(f"llama-server-after-tool-{kind}", second, "llama-server --jinja: the round after a tool result")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
async def test_usage_and_timings_are_the_servers(
    jinja_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path, stream: bool
) -> None:
    """llama-server reports usage (when asked, streamed) and its own timings: the run's usage is
    the sum of what it reported, not an estimate; the run's times cover the server's."""
    proxy = proxy_to(jinja_server, prefill_when_required)
    config = agent_config(
        tmp_path, proxy.base_url, jinja_server.model_id, llm={"stream": stream, "toolChoice": "required"}
    )
    [run] = await run_agent(config, QUESTION)
    chats = proxy.chats
    reported = [e.reported_usage() for e in chats]
    result = run.result
    if all(reported):
        assert not result.usage.estimated
        assert result.usage.prompt_tokens == sum(u["prompt_tokens"] for u in reported if u)
        assert result.usage.completion_tokens == sum(u["completion_tokens"] for u in reported if u)
    else:  # the server said nothing: the counts are an estimate, and say so
        assert result.usage.estimated and run.structured["usage"].get("estimated") is True
    assert all(e.timings() for e in chats), "llama-server sends its own timings"
    for event, exchange in zip(run.model_calls, chats, strict=True):
        assert event.ok and event.ms >= exchange.server_ms * 0.95
    assert result.elapsed_ms >= sum(e.server_ms for e in chats)


async def test_tool_choice_setting(
    jinja_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path
) -> None:
    """``llm.toolChoice: "required"`` applies to the first round; later rounds may answer."""
    proxy = proxy_to(jinja_server, prefill_when_required)
    config = agent_config(tmp_path, proxy.base_url, jinja_server.model_id, llm={"toolChoice": "required"})
    [run] = await run_agent(config, QUESTION)
    first, second, *_ = proxy.chats
    assert first.sent_json["tool_choice"] == "required"
    assert second.sent_json.get("tool_choice") != "required"
    assert run.tool_calls and run.tool_calls[0].ok and tool_messages(second.sent_json)


async def test_an_output_cap_is_always_sent(
    jinja_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path
) -> None:
    """No ``maxOutputTokens`` configured: a cap from the context window is sent all the same (the
    server's default is to generate until the context is full). The run is bounded by 20 s here
    so that, until the fix, it cannot hold the tier for the minutes a runaway takes."""
    proxy = proxy_to(jinja_server)
    config = agent_config(
        tmp_path,
        proxy.base_url,
        jinja_server.model_id,
        llm={"maxOutputTokens": None},
        limits={"timeoutSeconds": 20, "maxRounds": 2},
        mcpServers={},
    )
    await run_agent(config, "Write a long story about a lighthouse keeper.")
    caps = [cap_of(e.sent_json) for e in proxy.chats]
    assert caps and all(cap and 0 < cap < N_CTX for cap in caps), caps


def test_doctor_passes(jinja_server: RealServer, tmp_path: Path) -> None:
    config = agent_config(tmp_path, jinja_server.base_url, jinja_server.model_id, servers=_both_servers())
    done = cli("doctor", config=config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "model server reachable" in done.stdout
        and f"model {jinja_server.model_id!r} is available" in done.stdout
    )
    assert "server echo (stdio): up" in done.stdout and "server system (stdio): up" in done.stdout


def test_doctor_knows_the_server_and_its_context_window(jinja_server: RealServer, tmp_path: Path) -> None:
    """Identified from ``/props`` on a port that says nothing (not 8080), with its ``n_ctx``."""
    config = agent_config(tmp_path, jinja_server.base_url, jinja_server.model_id)
    done = cli("doctor", config=config)
    text = done.stdout.lower()
    assert "llama.cpp" in text or "llama-server" in text, done.stdout
    assert any(form in done.stdout for form in (str(N_CTX), f"{N_CTX:,}")), done.stdout


def test_query_json_from_the_command_line(
    jinja_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path
) -> None:
    """``mcp-agent query --json`` as a user runs it: the structured result, and its exit code."""
    proxy = proxy_to(jinja_server, prefill_when_required)
    config = agent_config(
        tmp_path,
        proxy.base_url,
        jinja_server.model_id,
        servers=_both_servers(),
        llm={"toolChoice": "required"},
    )
    code, data, stderr = query_json(QUESTION, config)
    assert data["termination_reason"] in ENDINGS_OF_A_WORKING_LOOP, (data, stderr)
    assert code == (0 if data["termination_reason"] == "success" or data["early_stopped"] else 1)
    assert data["rounds"] == len(proxy.chats) >= 2
    assert data["tool_calls"] and data["tool_calls"][0]["ok"] is True
    assert data["usage"]["prompt_tokens"] > 0 and data["elapsed_ms"] > 0
    assert data["model"] == jinja_server.model_id


# ------------------------------------------------------------------------------ endings (item 8)


@pytest.fixture
def own_server(build: Build, logs: Path):  # type: ignore[no-untyped-def]
    """A llama-server of this test's own (it gets killed or kept busy)."""
    with llama_server(build, logs) as server:
        yield server


def kill_when_busy(server: RealServer, timeout: float = 60) -> None:
    """SIGKILL ``server`` as soon as its slot is working on a request (llama-server ``/slots``)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2, trust_env=False) as client:
        while time.monotonic() < deadline and server.alive():
            try:
                slots = client.get(f"{server.url}/slots").json()
            except (httpx.HTTPError, ValueError):
                slots = []
            if any(isinstance(slot, dict) and slot.get("is_processing") for slot in slots):
                server.kill()
                return
            time.sleep(0.01)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
async def test_a_server_killed_mid_run_ends_llm_error(
    own_server: RealServer, tmp_path: Path, stream: bool
) -> None:
    config = agent_config(
        tmp_path,
        own_server.base_url,
        own_server.model_id,
        llm={"stream": stream, "maxOutputTokens": 3000},
        mcpServers={},
    )
    killer = threading.Thread(target=kill_when_busy, args=(own_server,), daemon=True)
    killer.start()
    [run] = await run_agent(config, "Write a very long story about a lighthouse keeper and the sea.")
    killer.join(10)
    assert not own_server.alive(), "the server was not killed while it worked"
    assert run.result.termination_reason.value == "llm_error", (
        run.result.termination_reason,
        run.result.detail,
    )


def test_health_stops_saying_reachable_after_the_server_died(own_server: RealServer, tmp_path: Path) -> None:
    """``mcp-agent serve`` as a user runs it: health follows the model server, not the start-up probe."""
    config = agent_config(tmp_path, own_server.base_url, own_server.model_id, mcpServers={})
    with serving(config) as url, httpx.Client(base_url=url, timeout=60, trust_env=False) as http:

        def health_until(check: Callable[[dict[str, Any]], bool], seconds: float) -> dict[str, Any]:
            deadline = time.monotonic() + seconds
            body: dict[str, Any] = http.get("/api/v1/health").json()
            while not check(body) and time.monotonic() < deadline:
                time.sleep(0.2)
                body = http.get("/api/v1/health").json()
            return body

        body = health_until(
            lambda b: b.get("model_server", {}).get("reachable") is True, 30
        )  # the start-up probe
        assert body["model_server"]["reachable"] is True, body
        own_server.kill()
        http.post("/api/v1/query", json={"query": "hello"})
        body = health_until(lambda b: b["model_server"].get("reachable") is False, 30)
        assert body["model_server"].get("reachable") is False and body["status"] == "degraded", body


async def test_a_read_timeout_names_the_limit_and_is_not_piled_on(
    own_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path
) -> None:
    """A one-slot local server still working on the first request: no retries on top of it."""
    proxy = proxy_to(own_server)
    config = agent_config(
        tmp_path,
        proxy.base_url,
        own_server.model_id,
        llm={"stream": False, "maxOutputTokens": 3000, "requestTimeoutSeconds": 2, "maxRetries": 2},
        mcpServers={},
    )
    [run] = await run_agent(config, "Write a very long story about a lighthouse keeper and the sea.")
    result = run.result
    assert "requestTimeoutSeconds" in result.detail and "2" in result.detail, result.detail
    assert len(proxy.chats) == 1, [e.server_ms for e in proxy.chats]


# ------------------------------------------------------------------------------ cut-off answers (item 5)


@pytest.fixture(scope="module")
async def cut_off(jinja_server: RealServer, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A run whose answer hits the configured cap (8 tokens)."""
    with recording_proxy(jinja_server.url) as proxy:
        config = agent_config(
            tmp_path_factory.mktemp("cut"),
            proxy.base_url,
            jinja_server.model_id,
            llm={"stream": False, "maxOutputTokens": 8},
            mcpServers={},
        )
        [run] = await run_agent(config, "Write a long story about a lighthouse keeper.")
        yield run, proxy.chats


async def test_the_server_says_length_when_the_cap_cuts(cut_off) -> None:  # type: ignore[no-untyped-def]
    _, chats = cut_off
    assert chats[0].json()["choices"][0]["finish_reason"] == "length"


async def test_a_cut_off_answer_is_flagged(cut_off) -> None:  # type: ignore[no-untyped-def]
    run, _ = cut_off
    assert run.structured.get("truncated") is True and "cut off at the output cap" in run.result.detail


# ------------------------------------------------------------------------------ early stops (item 8)


async def test_an_early_stop_says_so(
    jinja_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path
) -> None:
    """``maxRounds: 1`` with a call in round 1: the run ends ``max_rounds``; with ``earlyStop`` one
    more call without tools writes the answer, and the loop's own instruction is not that answer."""
    proxy = proxy_to(jinja_server, prefill_when_required)
    config = agent_config(
        tmp_path,
        proxy.base_url,
        jinja_server.model_id,
        llm={"toolChoice": "required"},
        limits={"maxRounds": 1, "earlyStop": True},
    )
    [run] = await run_agent(config, QUESTION)
    result = run.result
    first, synthesis = proxy.chats
    assert first.sent_json.get("tools") and not synthesis.sent_json.get("tools")
    assert result.termination_reason.value == "max_rounds" and result.early_stopped
    assert "round" in result.detail.lower()
    assert "[SYSTEM" not in result.answer
