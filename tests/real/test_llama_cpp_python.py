"""llama-cpp-python's server, with ``--chat_format chatml-function-calling`` and with the GGUF's own
template: a server that cannot stream tool calls, that sends the legacy ``function_call`` beside
``tool_calls``, that never reports usage when streaming, and (own template) that drops ``tools``.

The function-calling runs are shared by several checks (``fc_runs``): two questions on one Agent,
streamed, four rounds each, through a proxy that hides which server answers (``anonymous``), so the
agent must learn from its first empty stream that tool calls cannot be streamed; with
``tool_choice: "auto"`` sent (``llm.capabilities.toolChoice``: a server of unknown kind is not sent
``tool_choice``, and without it this server does not call tools at all). Where the server can be
identified (``fc_known``), the agent knows it from the start and wastes no request. A 135M model calls tools only now and then, so the recording proxy
names the tool in ``tool_choice`` on every request that is not streamed (llama-cpp-python then
constrains the call with a grammar; it would refuse ``"required"``); streamed requests go as the
agent sent them (``tool_choice`` unset means "auto", which that server cannot stream).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_agent.loop.agent import Agent
from mcp_agent.messages import Message

from ._run import Outcome, cli, offered, run_agent
from .conftest import ENDINGS_OF_A_WORKING_LOOP, agent_config
from .proxy import Exchange, RecordingProxy, empty_stream, name_the_tool_when_plain, recording_proxy
from .servers import Build, RealServer, llama_cpp_python

ROUNDS = 4


@dataclass
class FcRuns:
    outcomes: list[Outcome]
    chats: list[Exchange]


@pytest.fixture(scope="module")
async def fc_runs(fc_server: RealServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FcRuns]:
    with recording_proxy(fc_server.url, name_the_tool_when_plain, anonymous=True) as proxy:
        config = agent_config(
            tmp_path_factory.mktemp("fc"),
            proxy.base_url,
            fc_server.model_id,
            llm={"stream": True, "capabilities": {"toolChoice": True}},
            limits={"maxRounds": ROUNDS, "loopThreshold": 0},
        )
        outcomes = await run_agent(config, "Echo the word pineapple.", "Echo the word banana.")
        yield FcRuns(outcomes, proxy.chats)


async def test_streamed_tools_come_back_empty_and_the_plain_request_works(
    fc_runs: FcRuns, samples: Callable[[str, Exchange, str], Path]
) -> None:
    first, retry = fc_runs.chats[0], fc_runs.chats[1]
    assert first.sent_json["stream"] is True and offered(first.sent_json) == {"echo__echo"}
    assert first.status == 200 and first.streamed and empty_stream(first), first.body[:300]
    assert retry.sent_json["stream"] is False and retry.sent_json["messages"] == first.sent_json["messages"]
    assert retry.status == 200 and retry.json()["choices"][0]["message"]["tool_calls"]
    for outcome in fc_runs.outcomes:  # every round's calls ran: the whole path, four times over
        result = outcome.result
        assert result.termination_reason.value == "max_rounds" and result.rounds == ROUNDS, result.detail
        assert {c.round for c in outcome.tool_calls if c.verdict == "run" and c.ok} == set(
            range(1, ROUNDS + 1)
        )
    samples("lcp-fc-tools-stream-empty", first, "chatml-function-calling, tools + stream: 200, empty body")
    samples(
        "lcp-fc-named-call-plain",
        retry,
        "chatml-function-calling, a named tool_choice: tool_calls + function_call",
    )


async def test_the_server_sends_function_call_beside_tool_calls(fc_runs: FcRuns) -> None:
    """The wire fact behind item 1 (if a new pin stops doing it, the phantom check means less)."""
    messages = [
        e.json()["choices"][0]["message"] for e in fc_runs.chats if e.status == 200 and not e.streamed
    ]
    assert any(m.get("tool_calls") and m.get("function_call") for m in messages), messages


async def test_no_phantom_calls_from_function_call(fc_runs: FcRuns) -> None:
    """Each round runs exactly the server's ``tool_calls``: the legacy field adds none."""
    answered = [e for e in fc_runs.chats if e.status == 200 and not e.streamed]
    wanted = [len(e.json()["choices"][0]["message"].get("tool_calls") or []) for e in answered]
    got = [
        len([c for c in outcome.tool_calls if c.round == number])
        for outcome in fc_runs.outcomes
        for number in range(1, outcome.result.rounds + 1)
    ]
    assert got == wanted
    assert not [c for o in fc_runs.outcomes for c in o.tool_calls if c.verdict == "unknown_tool"]


async def test_a_failed_tool_stream_is_not_asked_again(fc_runs: FcRuns) -> None:
    """Eight rounds on one provider: at most one wasted streamed request (the target is <= 1)."""
    wasted = [i for i, e in enumerate(fc_runs.chats) if empty_stream(e)]
    assert len(wasted) <= 1, f"{len(wasted)} empty tool streams in {len(fc_runs.chats)} requests"


@pytest.fixture(scope="module")
async def fc_known(fc_server: RealServer, tmp_path_factory: pytest.TempPathFactory) -> FcRuns:
    """One streamed question, two rounds, to the server as it is (it identifies as llama-cpp-python)."""
    with recording_proxy(fc_server.url, name_the_tool_when_plain) as proxy:
        config = agent_config(
            tmp_path_factory.mktemp("fc-known"),
            proxy.base_url,
            fc_server.model_id,
            llm={"stream": True},
            limits={"maxRounds": 2, "loopThreshold": 0},
        )
        outcomes = await run_agent(config, "Echo the word cherry.")
        return FcRuns(outcomes, proxy.chats)


async def test_an_identified_server_is_never_sent_a_tool_stream(fc_known: FcRuns) -> None:
    """llama-cpp-python is known from what it answers: requests with tools go plain from the first,
    with ``tool_choice`` (it needs it to call tools), and the tools are called."""
    assert fc_known.chats and all(
        e.sent_json.get("stream") is not True for e in fc_known.chats if offered(e.sent_json)
    )
    assert not [e for e in fc_known.chats if empty_stream(e)]
    [outcome] = fc_known.outcomes
    assert outcome.result.termination_reason.value == "max_rounds", outcome.result.detail
    assert [c for c in outcome.tool_calls if c.verdict == "run" and c.ok]


# ------------------------------------------------------------------------------ usage (item 6)


@pytest.fixture(scope="module")
async def fc_plain_stream(
    fc_server: RealServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FcRuns]:
    """A streamed run without tools (it streams): the server sends no usage."""
    with recording_proxy(fc_server.url) as proxy:
        config = agent_config(
            tmp_path_factory.mktemp("fc-plain"), proxy.base_url, fc_server.model_id, mcpServers={}
        )
        outcomes = await run_agent(config, "Say hello in five words.")
        yield FcRuns(outcomes, proxy.chats)


async def test_a_streamed_answer_carries_no_usage(
    fc_plain_stream: FcRuns, samples: Callable[[str, Exchange, str], Path]
) -> None:
    [chat] = fc_plain_stream.chats
    assert chat.streamed and chat.sse_data() and chat.reported_usage() is None
    assert fc_plain_stream.outcomes[0].result.usage.estimated
    samples("lcp-fc-plain-stream-no-usage", chat, "a streamed answer: no usage chunk, no timings")


async def test_estimated_usage_is_marked_in_the_result(fc_plain_stream: FcRuns) -> None:
    assert fc_plain_stream.outcomes[0].structured["usage"].get("estimated") is True


async def real_prompt_tokens(server: RealServer, body: dict[str, Any]) -> int:
    """What the server counts for ``body``'s prompt: the same request, not streamed, one token."""
    again = {**body, "stream": False, "max_tokens": 1}
    again.pop("stream_options", None)
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
        response = await client.post(f"{server.base_url}/chat/completions", json=again)
    response.raise_for_status()
    return int(response.json()["usage"]["prompt_tokens"])


async def test_the_estimate_is_within_15_percent(fc_plain_stream: FcRuns, fc_server: RealServer) -> None:
    [chat] = fc_plain_stream.chats
    real = await real_prompt_tokens(fc_server, chat.sent_json)
    estimate = fc_plain_stream.outcomes[0].result.usage.prompt_tokens
    assert abs(estimate - real) <= 0.15 * real, (estimate, real)


# ------------------------------------------------------------------------------ doctor


def test_doctor_passes(fc_server: RealServer, tmp_path: Path) -> None:
    config = agent_config(tmp_path, fc_server.base_url, fc_server.model_id)
    done = cli("doctor", config=config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "model server reachable" in done.stdout and "is available" in done.stdout


def test_doctor_knows_llama_cpp_python_and_that_it_cannot_stream_tools(
    fc_server: RealServer, tmp_path: Path
) -> None:
    config = agent_config(tmp_path, fc_server.base_url, fc_server.model_id)
    done = cli("doctor", config=config)
    text = done.stdout.lower()
    assert "llama-cpp-python" in text, done.stdout
    assert "stream" in text and "tool" in text and "warn" in text, done.stdout


# ------------------------------------------------------------------------------ the GGUF's own template


async def test_own_template_drops_tools_and_the_run_still_works(
    template_server: RealServer,
    proxy_to: Callable[..., RecordingProxy],
    tmp_path: Path,
    samples: Callable[[str, Exchange, str], Path],
) -> None:
    proxy = proxy_to(template_server, anonymous=True)  # unknown: it is sent a tool stream, as elsewhere
    config = agent_config(tmp_path, proxy.base_url, template_server.model_id, llm={"stream": True})
    [run] = await run_agent(config, "Echo the word pineapple.")
    first = proxy.chats[0]
    assert offered(first.sent_json) == {"echo__echo"} and first.sent_json["stream"] is True
    assert first.status == 200 and first.sse_data(), "the template streams text: tools are not its concern"
    result = run.result
    assert result.termination_reason.value in ENDINGS_OF_A_WORKING_LOOP | {"empty_response"}, result.detail
    assert not [c for c in run.tool_calls if c.verdict == "unknown_tool"]
    samples("lcp-template-tools-stream", first, "the GGUF's own template: tools dropped without a word")


def test_doctor_warns_that_the_template_drops_tools(template_server: RealServer, tmp_path: Path) -> None:
    config = agent_config(tmp_path, template_server.base_url, template_server.model_id)
    done = cli("doctor", config=config)
    text = done.stdout.lower()
    assert "warn" in text and "tools" in text and ("drop" in text or "ignore" in text), done.stdout
    assert "chatml-function-calling" in done.stdout  # the hint that fits this server


# ------------------------------------------------------------------------------ context (item 4)


@pytest.fixture
def small_server(build: Build, logs: Path):  # type: ignore[no-untyped-def]
    """chatml-function-calling with a 512-token context."""
    with llama_cpp_python(build, logs, chat_format="chatml-function-calling", n_ctx=512) as server:
        yield server


def _long_history(turns: int) -> list[Message]:
    words = " ".join(f"fact{i}" for i in range(40))
    history = [Message(role="system", content="You are helpful.")]
    for i in range(turns):
        history += [
            Message(role="user", content=f"Remember {words} ({i})."),
            Message(role="assistant", content="Noted."),
        ]
    return history


async def _run_with_history(config: Path, history: list[Message], question: str) -> Outcome:
    from mcp_agent.events import RecordingSink

    async with Agent.from_config(config) as agent:
        session = await agent.sessions.create()
        async with agent.sessions.hold(session.id) as held:
            await agent.sessions.save(held, history)
        sink = RecordingSink()
        result = await agent.query(question, session_id=session.id, events=sink)
    return Outcome(result, sink)


async def test_a_prompt_over_the_context_is_trimmed_and_asked_again(
    small_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path,
    samples: Callable[[str, Exchange, str], Path],
) -> None:  # fmt: skip
    """400 ``context_length_exceeded``: history trimmed hard, asked once more, not retried as is."""
    proxy = proxy_to(small_server)
    config = agent_config(
        tmp_path, proxy.base_url, small_server.model_id, mcpServers={}, llm={"stream": False}
    )
    run = await _run_with_history(config, _long_history(12), "What is fact3?")
    first, *rest = proxy.chats
    assert first.status == 400 and "context" in first.body.decode().lower()
    assert rest and len(rest[0].sent_json["messages"]) < len(first.sent_json["messages"])
    assert run.result.termination_reason.value != "llm_error", run.result.detail
    samples("lcp-fc-context-exceeded-400", first, "a prompt longer than n_ctx (512)")
