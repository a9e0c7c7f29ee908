"""A 2026-07-28 server's ``input_required`` through exposeTools (``tools/relay.py``
``through_rounds``, ``gateway/mcp/relay.py``): untouched to a 2026 client and its retry back to
the server untouched, asked of a 2025 client over its back channel, ``-32021`` for a capability
the client did not declare, and the client's log level in the server's request ``_meta``.

The real Agent and ToolHub over the conformance fixture ``tests/servers/conformance.py`` (stdio,
spoken to in 2026-07-28), and the SDK's ``Client`` over the gateway's Streamable HTTP.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError

from mcp_agent.assembly import open_agent
from mcp_agent.config import parse_config
from mcp_agent.gateway.mcp.held_calls import HELD_PREFIX
from mcp_agent.loop._dispatch import safety_bound
from mcp_agent.tools.relay import MAX_INPUT_ROUNDS, Resume, through_rounds

from ..conftest import Running, running_gateway
from .test_relay import client

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = str(ROOT / "tests" / "servers" / "conformance.py")
# the clients here use sampling and roots, which the SDK calls deprecated (2026-07-28)
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
PREFIX = "fx__"


def fixture_config(tool_timeout: float = 30, **gateway: Any) -> Any:
    data = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "limits": {"toolTimeoutSeconds": tool_timeout},
        "mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE]}},
        "gateway": {"description": "Input required.", "exposeTools": True, **gateway},
    }
    return parse_config(data, environ={})


@pytest.fixture
async def gateway() -> AsyncIterator[Running]:
    async with running_gateway(fixture_config(), factory=open_agent) as running:
        yield running


@pytest.fixture
async def stateless() -> AsyncIterator[Running]:
    async with running_gateway(fixture_config(), factory=open_agent, stateless=True) as running:
        yield running


class Answers:
    """A client's callbacks: names it gives, what its model says, its roots; what it was asked."""

    def __init__(self, *names: str, refuse: bool = False) -> None:
        self.names = list(names)
        self.refuse = refuse
        self.asked: list[str] = []

    async def elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params.message)
        if self.refuse:
            return types.ErrorData(code=types.INVALID_REQUEST, message="the user walked away")
        key = (
            next(iter(params.requested_schema["properties"]))
            if isinstance(params, types.ElicitRequestFormParams)
            else "name"
        )
        return types.ElicitResult(action="accept", content={key: self.names.pop(0) if self.names else True})

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="Paris"), model="m")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project")])

    def callbacks(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.roots,
        }


def text_of(result: types.CallToolResult) -> str:
    part = result.content[0]
    assert isinstance(part, types.TextContent)
    return part.text


# ------------------------------------------------------------------------------ 2026 clients


async def test_a_2026_client_gets_the_servers_round_untouched_and_its_retry_reaches_the_server(
    gateway: Running,
) -> None:
    answers = Answers()
    async with client(gateway, "auto", **answers.callbacks()) as connected:
        session = connected.session
        name = PREFIX + "test_input_required_result_request_state"
        first = await session.call_tool(name, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        state = first.request_state  # the server's own (sealed by its SDK), not a held call's token
        assert state is not None and state.startswith("v1.") and not state.startswith(HELD_PREFIX)
        [(key, question)] = (first.input_requests or {}).items()
        assert key == "confirm" and isinstance(question, types.ElicitRequest)
        assert question.params.message == "Please confirm"
        answer = types.ElicitResult(action="accept", content={"ok": True})
        done = await session.call_tool(
            name,
            {},
            input_responses={key: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert text_of(done) == "state-ok: confirmation received"
    assert answers.asked == []  # the client answered the round itself, by hand
    assert len(gateway.app.tool.held) == 0


async def test_a_2026_client_answers_several_rounds_through_its_callbacks(gateway: Running) -> None:
    answers = Answers("Ada", "blue")
    async with client(gateway, "auto", **answers.callbacks()) as connected:
        result = await connected.call_tool(PREFIX + "test_input_required_result_multi_round", {})
        several = await connected.call_tool(PREFIX + "test_input_required_result_multiple_inputs", {})
    assert text_of(result) == "Ada likes blue."
    assert text_of(several) == "All inputs received."


async def test_a_tampered_state_is_the_servers_error_for_the_client(gateway: Running) -> None:
    async with client(gateway, "auto", **Answers().callbacks()) as connected:
        session = connected.session
        name = PREFIX + "test_input_required_result_tampered_state"
        first = await session.call_tool(name, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        answer = types.ElicitResult(action="accept", content={"ok": True})
        with pytest.raises(MCPError) as raised:
            await session.call_tool(
                name,
                {},
                input_responses={"confirm": answer},
                request_state=first.request_state + "x",
                allow_input_required=True,
            )
        ok = await session.call_tool(
            name,
            {},
            input_responses={"confirm": answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert raised.value.code == types.INVALID_PARAMS  # as the server said it, not an isError result
    assert isinstance(ok, types.CallToolResult) and text_of(ok).startswith("state-ok: ")


@pytest.mark.parametrize("declares", [{}, {"elicitation_callback": Answers().elicit}])
async def test_a_2026_client_without_the_capability_the_server_asks_for_gets_minus_32021(
    gateway: Running, declares: dict[str, Any]
) -> None:
    """The server is told the client's capabilities (``caller_capabilities.py``) and refuses
    it: the client gets the server's error as it is."""
    async with client(gateway, "auto", **declares) as connected:
        with pytest.raises(MCPError) as raised:
            await connected.session.call_tool(
                PREFIX + "test_missing_capability", {}, allow_input_required=True
            )
    assert raised.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.error.data == {"requiredCapabilities": {"sampling": {}}}


async def test_a_2026_client_gets_a_prompts_round_untouched(gateway: Running) -> None:
    async with client(gateway, "auto", **Answers().callbacks()) as connected:
        session = connected.session
        name = PREFIX + "test_input_required_result_prompt"
        first = await session.get_prompt(name, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        [key] = first.input_requests or {}
        answer = types.ElicitResult(action="accept", content={"context": "tests"})
        done = await session.get_prompt(
            name, input_responses={key: answer}, request_state=first.request_state, allow_input_required=True
        )
    assert isinstance(done, types.GetPromptResult)
    content = done.messages[0].content
    assert isinstance(content, types.TextContent) and content.text == "Use the following context: tests"


async def test_a_2026_clients_log_level_goes_to_the_server_with_its_request(gateway: Running) -> None:
    """The fixture logs only when the request's ``_meta`` asks for a level (2026-07-28)."""
    logs: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with client(gateway, "auto", logging_callback=on_log, log_level="info") as connected:
        result = await connected.call_tool(PREFIX + "test_logging_tool", {})
    assert text_of(result) == "logged"
    assert logs == ["logging tool ran"]


# ------------------------------------------------------------------------------ 2025 clients


async def test_a_2025_client_is_asked_each_round_over_its_back_channel(gateway: Running) -> None:
    answers = Answers("Ada", "blue", "Bo")
    async with client(gateway, "legacy", **answers.callbacks()) as connected:
        rounds = await connected.call_tool(PREFIX + "test_input_required_result_multi_round", {})
        several = await connected.call_tool(PREFIX + "test_input_required_result_multiple_inputs", {})
        prompt = await connected.get_prompt(PREFIX + "test_input_required_result_prompt")
    assert text_of(rounds) == "Ada likes blue."
    assert text_of(several) == "All inputs received."
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent) and content.text == "Use the following context: True"
    assert answers.asked[:2] == ["Step 1: What is your name?", "Step 2: What is your favorite color?"]
    assert sorted(answers.asked[2:5]) == ["What is your name?", "roots", "sampling"]


async def test_a_2025_client_that_cannot_answer_gets_an_error_result(gateway: Running) -> None:
    async with client(gateway, "legacy", **Answers(refuse=True).callbacks()) as connected:
        refused = await connected.call_tool(PREFIX + "test_input_required_result_elicitation", {})
    async with client(gateway, "legacy") as connected:  # declares nothing
        undeclared = await connected.call_tool(PREFIX + "test_input_required_result_sampling", {})
    assert refused.is_error and "the user walked away" in text_of(refused)
    assert undeclared.is_error and "did not declare the sampling capability" in text_of(undeclared)


async def test_a_2025_client_without_a_back_channel_gets_an_error_result(stateless: Running) -> None:
    async with client(stateless, "legacy", **Answers("Ada").callbacks()) as connected:
        result = await connected.call_tool(PREFIX + "test_input_required_result_elicitation", {})
    assert result.is_error and "MCP error" in text_of(result)


# ------------------------------------------------------------------------------ a person's time


class SlowAnswers(Answers):
    """A person at a 2025 client: answers an elicitation after ``seconds``, or, with ``never``,
    only once ``released`` (after the test has its result)."""

    def __init__(self, *names: str, seconds: float = 0, never: bool = False) -> None:
        super().__init__(*names)
        self.seconds = seconds
        self.never = never
        self.released = anyio.Event()

    async def elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if self.never:
            await self.released.wait()
        await anyio.sleep(self.seconds)
        return await super().elicit(context, params)


TOOL_TIMEOUT = 1.0
"""The tool timeout of the slow-answer test: the loop cuts a call off at ``safety_bound`` of it."""


async def test_a_slow_answer_does_not_count_against_the_tools_timeout() -> None:
    """The person takes longer than the call may run (the loop's bound on it, a tenth more than
    ``toolTimeoutSeconds``, at least a second more); the call still completes with the answer."""
    answers = SlowAnswers("Ada", seconds=safety_bound(TOOL_TIMEOUT) + 1.0)
    config = fixture_config(TOOL_TIMEOUT, inputTimeoutSeconds=60)
    async with (
        running_gateway(config, factory=open_agent) as gateway,
        client(gateway, "legacy", **answers.callbacks()) as connected,
    ):
        result = await connected.call_tool(PREFIX + "test_input_required_result_elicitation", {})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Hello, Ada!"
    assert answers.asked == ["What is your name?"]


async def test_an_answer_that_never_comes_ends_the_call_at_input_timeout_seconds() -> None:
    answers = SlowAnswers("Ada", never=True)
    config = fixture_config(30, inputTimeoutSeconds=0.5)
    async with (
        running_gateway(config, factory=open_agent) as gateway,
        client(gateway, "legacy", **answers.callbacks()) as connected,
    ):
        try:
            result = await connected.call_tool(PREFIX + "test_input_required_result_elicitation", {})
        finally:
            answers.released.set()
    assert result.is_error
    assert "did not answer elicitation/create within 0.5 s (gateway.inputTimeoutSeconds)" in text_of(result)


# ------------------------------------------------------------------------------ the agent's own calls


async def test_a_call_the_agents_loop_makes_is_a_clear_error(gateway: Running) -> None:
    """No relay channel (the calls ``agent_query`` makes): today's error result."""
    hub = gateway.app.service.hub
    assert hub is not None
    result = await hub.call_tool(PREFIX + "test_input_required_result_elicitation", {})
    assert result.is_error
    assert result.text == (
        f"tool {PREFIX}test_input_required_result_elicitation needs elicitation/create from the client, "
        "which a tool called by the agent cannot ask for; the call did not complete"
    )


# ------------------------------------------------------------------------------ the rounds' bound


class Asking:
    """A channel whose client answers every round (a 2025 client over its back channel)."""

    caller = "c"
    client: object = None
    resume: Resume | None = None

    def __init__(self) -> None:
        self.rounds = 0

    async def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    async def log(self, params: types.LoggingMessageNotificationParams) -> None: ...

    async def ask(self, request: Any) -> Any:
        raise AssertionError("through_rounds asks through input_required")

    def log_level(self) -> None:
        return None

    async def input_required(self, result: types.InputRequiredResult) -> types.InputResponses:
        self.rounds += 1
        return {"q": types.ElicitResult(action="accept", content={"round": self.rounds})}

    def refused(self, error: types.ErrorData) -> None: ...


async def test_a_server_that_never_stops_asking_is_given_up_after_max_rounds() -> None:
    channel = Asking()
    sent: list[Resume | None] = []

    async def send(resume: Resume | None) -> types.InputRequiredResult:
        sent.append(resume)
        state = json.dumps({"n": len(sent)})
        return types.InputRequiredResult(input_requests={"q": types.ListRootsRequest()}, request_state=state)

    result = await through_rounds(channel, send)
    assert isinstance(result, types.ErrorData)
    assert result.message == f"the server still asked for input after {MAX_INPUT_ROUNDS} rounds"
    assert len(sent) == MAX_INPUT_ROUNDS + 1 and channel.rounds == MAX_INPUT_ROUNDS
    assert sent[0] is None and sent[1] is not None and sent[1].request_state == json.dumps({"n": 1})
