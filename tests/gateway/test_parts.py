"""Pure parts of the gateway: input parsing, the event bus, descriptions, result mapping."""

from __future__ import annotations

from typing import Any

import anyio
import jsonschema
import pytest

from mcp_agent.config import Limits
from mcp_agent.events import RunEnded
from mcp_agent.gateway.eventbus import BufferedSink, EventBus, FanOut
from mcp_agent.gateway.mcp_server import (
    agent_query_description,
    agent_query_input_schema,
    run_result_to_mcp,
    summarize_tools,
)
from mcp_agent.gateway.query_input import QueryInput, QueryInputError, limits_schema, parse_query_input
from mcp_agent.loop.result import RESULT_SCHEMA, RunResult, TerminationReason
from mcp_agent.messages import ToolSpec


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "'query' is required"),
        ([], "must be an object"),
        ({"query": 3}, "'query' must be a string, not int"),
        ({"query": "   "}, "must not be empty"),
        ({"query": "x" * 11}, "11 characters long; the limit is 10"),
        ({"query": "q", "extra": 1}, "unknown argument(s): extra"),
        ({"query": "q", "session_id": 5}, "'session_id' must be a string"),
        ({"query": "q", "session_id": "a b"}, "'session_id' must be 1-128 characters"),
        ({"query": "q", "session_id": "x" * 129}, "'session_id' must be 1-128"),
        ({"query": "q", "limits": []}, "'limits' must be an object"),
        ({"query": "q", "limits": {"maxRoundz": 2}}, "limits.maxRoundz: unknown key"),
        ({"query": "q", "limits": {"maxRounds": "2"}}, "limits.maxRounds: Input should be a valid integer"),
        ({"query": "q", "limits": {"maxRounds": True}}, "limits.maxRounds: Input should be a valid integer"),
        (
            {"query": "q", "limits": {"maxRounds": -1}},
            "limits.maxRounds: Input should be greater than or equal to 0",
        ),
        ({"query": "q", "limits": {"earlyStop": "yes"}}, "limits.earlyStop: Input should be a valid boolean"),
    ],
)
def test_bad_query_input(data: Any, message: str) -> None:
    with pytest.raises(QueryInputError) as caught:
        parse_query_input(data, max_query_chars=10)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("limits", "fields"),
    [
        ({"maxRounds": 2}, {"max_rounds": 2}),
        ({"max_rounds": 2, "timeoutSeconds": 1.5}, {"max_rounds": 2, "timeout_seconds": 1.5}),
        ({"timeoutSeconds": 3}, {"timeout_seconds": 3}),
        ({"earlyStop": True}, {"early_stop": True}),
    ],
)
def test_good_query_input(limits: dict[str, Any], fields: dict[str, Any]) -> None:
    parsed = parse_query_input({"query": "hi", "session_id": "s-1:x", "limits": limits}, max_query_chars=10)
    assert parsed.query == "hi" and parsed.session_id == "s-1:x"
    assert parsed.limits is not None
    assert {name: getattr(parsed.limits, name) for name in fields} == fields


def test_client_limits_only_tighten() -> None:
    server = Limits(max_rounds=5, max_tokens=0)
    parsed = parse_query_input({"query": "q", "limits": {"maxRounds": 50, "maxTokens": 10}})
    tightened = server.tighten(parsed.limits)
    assert tightened.max_rounds == 5  # looser ignored
    assert tightened.max_tokens == 10  # off (0) on the server: the client's cap applies


def test_input_schema_matches_the_parser() -> None:
    schema = agent_query_input_schema(100)
    assert schema["properties"]["query"]["maxLength"] == 100
    assert schema["required"] == ["query"]
    jsonschema.validate({"query": "q", "limits": {"maxRounds": 2, "earlyStop": True}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "q", "limits": {"nope": 1}}, schema)
    assert set(limits_schema()["properties"]) == {
        info.alias or name for name, info in Limits.model_fields.items()
    }
    assert "maxLength" not in agent_query_input_schema(0)["properties"]["query"]


def test_summary_names_servers_tools_and_down_servers() -> None:
    specs = [
        ToolSpec("ports__check", server="ports", mcp_name="check"),
        ToolSpec("time__now", server="time", mcp_name="now"),
    ]
    statuses = [{"name": "web", "status": "failed"}]

    class Status:
        def __init__(self, name: str, status: str) -> None:
            self.name, self.status = name, status

    text = summarize_tools(specs, [Status("web", "failed"), Status("time", "up")])
    assert "2 tools from 2 servers" in text and "ports (check)" in text and "time (now)" in text
    assert "Unavailable now: web" in text
    assert "no tools" in summarize_tools([], statuses)
    many = [ToolSpec(f"s__t{i}", server="s", mcp_name=f"t{i}") for i in range(12)]
    assert "and 4 more" in summarize_tools(many)
    assert agent_query_description("Does things.", specs).startswith("Does things.\n\n")


@pytest.mark.parametrize("reason", list(TerminationReason))
def test_result_mapping(reason: TerminationReason) -> None:
    result = RunResult(
        answer="partial" if reason is not TerminationReason.SUCCESS else "done",
        termination_reason=reason,
        detail="why",
    )
    mapped = run_result_to_mcp(result)
    jsonschema.validate(mapped.structured_content, RESULT_SCHEMA)
    text = mapped.content[0].text
    if reason is TerminationReason.SUCCESS:
        assert not mapped.is_error and text == "done"
    else:
        assert mapped.is_error and text.startswith(f"Agent terminated ({reason.value}): why")


@pytest.mark.parametrize(
    ("reason", "retryable"),
    [
        (TerminationReason.LLM_ERROR, True),
        (TerminationReason.TIMEOUT, True),
        (TerminationReason.CANCELLED, True),
        (TerminationReason.EMPTY_RESPONSE, True),
        (TerminationReason.MAX_ROUNDS, False),
        (TerminationReason.LOOP_DETECTED, False),
        (TerminationReason.TERMINAL_ERROR, False),
        (TerminationReason.SUCCESS, False),
    ],
)
def test_a_failed_run_says_why_in_its_answer_and_whether_retrying_helps(
    reason: TerminationReason, retryable: bool
) -> None:
    """Frameworks that show only ``answer`` (PydanticAI 2) once showed nothing for a failed run."""
    result = RunResult(answer="", termination_reason=reason, detail="model call failed", session_id="S1")
    structured = result.to_structured()
    assert structured["retryable"] is retryable
    text = run_result_to_mcp(result).content[0].text
    if reason is TerminationReason.SUCCESS:
        assert (
            structured["answer"] == ""
            and text == "\n\n[session_id: S1 (pass it as session_id to continue this conversation)]"
        )
    else:
        hint = "retrying may help" if retryable else "retrying the same query will not help"
        assert structured["answer"] == f"Agent terminated ({reason.value}): model call failed ({hint})"
        assert text.startswith(structured["answer"])
    # the conversation id is in the text: most frameworks show their model only the text
    assert text.endswith("[session_id: S1 (pass it as session_id to continue this conversation)]")


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "q", "session_id": None, "limits": None},
        {"query": "q", "session_id": "", "limits": {}},
        {
            "query": "q",
            "session_id": None,
            "limits": {"maxRounds": None, "maxTokens": None, "earlyStop": None},
        },
    ],
)
def test_null_and_empty_optional_members_mean_absent(arguments: dict[str, Any]) -> None:
    """Strict-mode clients (OpenAI Agents SDK, smolagents) send every property, null when unused."""
    assert parse_query_input(arguments) == QueryInput(query="q")
    jsonschema.validate(arguments, agent_query_input_schema(100))


def test_query_only_schema() -> None:
    schema = agent_query_input_schema(100, query_only=True)
    assert list(schema["properties"]) == ["query"] and schema["required"] == ["query"]


def test_the_default_run_deadline_is_below_the_usual_client_read_timeout() -> None:
    assert 0 < Limits().timeout_seconds < 300


def test_early_stop_is_not_an_error() -> None:
    result = RunResult(
        answer="best effort", termination_reason=TerminationReason.MAX_ROUNDS, early_stopped=True
    )
    mapped = run_result_to_mcp(result)
    assert not mapped.is_error and mapped.content[0].text == "best effort"


# ------------------------------------------------------------------------------------ event bus


def _ended(session: str | None = None) -> RunEnded:
    return RunEnded(run_id="r", session_id=session, termination_reason="success")


async def test_bus_filters_and_ends() -> None:
    bus = EventBus(queue_size=10)
    got_all: list[Any] = []
    got_a: list[Any] = []
    with bus.listen() as everything, bus.listen(visible=lambda event: event.session_id == "a") as only_a:
        assert bus.listeners == 2
        bus.emit(_ended("a"))
        bus.emit(_ended("b"))
        bus.emit(_ended(None))
        bus.close()
        with anyio.fail_after(5):
            got_all = [event async for event in everything]
            got_a = [event async for event in only_a]
    assert [e.session_id for e in got_all] == ["a", "b", None]
    assert [e.session_id for e in got_a] == ["a"]
    assert bus.listeners == 0
    with bus.listen() as late:  # a closed bus gives ended listeners
        assert [event async for event in late] == []


async def test_slow_listener_drops_instead_of_blocking() -> None:
    bus = EventBus(queue_size=3)
    with bus.listen() as slow:
        for _ in range(10):
            bus.emit(_ended())  # never blocks, never raises
        assert slow.dropped == 7 and bus.dropped == 7
        slow.close()
        assert len([event async for event in slow]) == 3


def test_fanout_isolates_a_raising_sink() -> None:
    class Boom:
        def emit(self, event: Any) -> None:
            raise RuntimeError("boom")

    seen: list[Any] = []

    class Keep:
        def emit(self, event: Any) -> None:
            seen.append(event)

    fan = FanOut([Boom(), None, Keep()])
    fan.emit(_ended())
    fan.emit(_ended())
    assert len(seen) == 2


async def test_buffered_sink_drops_when_full() -> None:
    sink = BufferedSink(2)
    for _ in range(5):
        sink.emit(_ended())
    sink.close()
    assert sink.dropped == 3
    assert len([event async for event in sink]) == 2
    sink.aclose_receiver()
    sink.emit(_ended())  # after the consumer left: dropped quietly
