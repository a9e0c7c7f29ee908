"""Cancellation and the run's deadline (guards 2 and 8): checked at every commit point, and
in-flight model and tool calls are cut off."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from mcp_agent.config import Limits
from mcp_agent.events import ModelCallEnded, RecordingSink, RunEnded, ToolCallEnded, describe
from mcp_agent.loop.cancel import Cancel, CancelSwitch
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.loop.run import run
from mcp_agent.messages import Turn
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

from ._helpers import call, check_run, echo_tools, go, tool_texts

Switch = Callable[[], CancelSwitch]


@pytest.fixture(params=[anyio.Event, Cancel], ids=["event", "cancel"])
def switch(request: pytest.FixtureRequest) -> Switch:
    """Each kind of stop switch a run takes: a plain event (a task of the run's waits for it) and
    a ``Cancel`` (which cuts the run's scope off itself)."""
    return request.param  # type: ignore[no-any-return]


def _tools_that_notice_cancellation() -> tuple[MemoryToolSource, dict[str, int]]:
    seen = {"started": 0, "cancelled": 0}
    tools = echo_tools()

    async def slow(i: int = 0) -> str:
        seen["started"] += 1
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            seen["cancelled"] += 1
            raise
        return "late"

    tools.add("slow", slow, parameters={"type": "object", "properties": {"i": {"type": "integer"}}})
    return tools, seen


async def test_cancel_inside_the_model_call_just_before_it_returns_starts_no_tool(switch: Switch) -> None:
    cancel = switch()
    tools = echo_tools()

    def cancel_then_call(request: ModelRequest) -> Turn:
        cancel.set()  # the caller cancels while the model is answering...
        return tool_turn(
            call("echo", "c1", text="x"), call("echo", "c2", text="y")
        )  # ...and it asks for tools

    result, _ = await go(ScriptedProvider([cancel_then_call]), tools, cancel=cancel)
    assert result.termination_reason is R.CANCELLED
    assert tools.calls == []
    assert tool_texts(result) == ["not executed: cancelled"] * 2
    assert result.detail == "cancelled by the caller (round 1)"


async def test_cancel_before_the_run_makes_no_model_call(switch: Switch) -> None:
    cancel = switch()
    cancel.set()
    provider = ScriptedProvider([text_turn("never")])
    result, _ = await go(provider, cancel=cancel)
    assert result.termination_reason is R.CANCELLED and provider.requests == []


async def test_cancel_during_a_slow_model_call(switch: Switch) -> None:
    cancel = switch()
    provider = ScriptedProvider([text_turn("too late")], delay=60)
    sink = RecordingSink()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_soon, cancel)
            result = await run("q", provider=provider, tools=echo_tools(), events=sink, cancel=cancel)
    check_run(result, sink)
    assert result.termination_reason is R.CANCELLED
    assert sink.of(ModelCallEnded)[0].ok is False


async def test_cancel_during_tool_calls_cancels_them_and_answers_every_call(switch: Switch) -> None:
    cancel = switch()
    tools, seen = _tools_that_notice_cancellation()
    provider = ScriptedProvider(
        [
            tool_turn(call("slow", "c1", i=1), call("slow", "c2", i=2), call("slow", "c3", i=3)),
            text_turn("never"),
        ]
    )
    sink = RecordingSink()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_soon, cancel)
            result = await run(
                "q",
                provider=provider,
                tools=tools,
                events=sink,
                cancel=cancel,
                limits=Limits(max_parallel_tools=2),
            )
    check_run(result, sink)
    assert result.termination_reason is R.CANCELLED
    assert seen == {"started": 2, "cancelled": 2}  # the in-flight calls saw the cancellation
    assert tool_texts(result) == [
        "not completed: cancelled",
        "not completed: cancelled",
        "not executed: cancelled",
    ]
    assert [r.verdict for r in result.tool_calls] == ["run", "run", "skipped"]
    assert len(provider.requests) == 1


async def _set_soon(event: CancelSwitch) -> None:
    await anyio.sleep(0.05)
    event.set()


# --------------------------------------------------------------------------------------------
# the deadline


async def test_timeout_during_a_model_call() -> None:
    provider = ScriptedProvider([text_turn("too late")], delay=60)
    with anyio.fail_after(10):
        result, sink = await go(provider, limits=Limits(timeout_seconds=0.1))
    assert result.termination_reason is R.TIMEOUT
    assert result.detail == "timed out after 0.1 s (round 1)"
    [cut] = sink.of(ModelCallEnded)  # the progress line says what happened: not "interrupted"
    assert cut.error == "timed out: the run's limit of 0.1 s (limits.timeoutSeconds) passed"
    assert describe(cut) == f"round 1: model call failed: {cut.error}"


async def test_a_model_call_cut_off_by_the_caller_says_cancelled(switch: Switch) -> None:
    cancel = switch()
    provider = ScriptedProvider([text_turn("too late")], delay=60)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_soon, cancel)
            result, sink = await go(provider, cancel=cancel)
    assert result.termination_reason is R.CANCELLED
    assert [e.error for e in sink.of(ModelCallEnded)] == ["cancelled"]


async def test_timeout_during_tool_calls_cancels_them() -> None:
    tools, seen = _tools_that_notice_cancellation()
    provider = ScriptedProvider(
        [tool_turn(call("slow", "c1"), call("echo", "c2", text="quick")), text_turn("never")]
    )
    with anyio.fail_after(10):
        result, _ = await go(provider, tools, limits=Limits(timeout_seconds=0.2, tool_timeout_seconds=0))
    assert result.termination_reason is R.TIMEOUT
    assert seen == {"started": 1, "cancelled": 1}
    assert tool_texts(result) == ["not completed: the run timed out", "quick"]


async def test_a_turn_that_arrives_after_the_deadline_starts_nothing() -> None:
    tools = echo_tools()

    async def slow_and_deaf(request: ModelRequest) -> Turn:
        with anyio.CancelScope(shield=True):  # a provider that does not notice the deadline
            await anyio.sleep(0.3)
        return tool_turn(call("echo", "c1", text="x"))

    with anyio.fail_after(10):
        result, _ = await go(ScriptedProvider([slow_and_deaf]), tools, limits=Limits(timeout_seconds=0.1))
    assert result.termination_reason is R.TIMEOUT
    assert tools.calls == []
    assert tool_texts(result) == ["not executed: the run timed out"]


async def test_timeout_zero_is_off() -> None:
    provider = ScriptedProvider([text_turn("fine")], delay=0.05)
    result, _ = await go(provider, limits=Limits(timeout_seconds=0))
    assert result.termination_reason is R.SUCCESS


async def test_the_deadline_covers_the_early_stop_synthesis() -> None:
    provider = ScriptedProvider([tool_turn(call("echo", "c1", text="x"))])
    provider.add(lambda request: _sleepy())  # the synthesis call hangs

    with anyio.fail_after(10):
        result, _ = await go(provider, limits=Limits(max_rounds=1, early_stop=True, timeout_seconds=0.2))
    assert result.termination_reason is R.TIMEOUT and not result.early_stopped


async def _sleepy() -> Turn:
    await anyio.sleep(60)
    return text_turn("never")


# --------------------------------------------------------------------------------------------
# the caller's own cancellation


@pytest.mark.parametrize("where", ["model", "tool"])
async def test_external_cancellation_still_emits_run_ended(where: str) -> None:
    tools, seen = _tools_that_notice_cancellation()
    if where == "model":
        provider = ScriptedProvider([text_turn("late")], delay=60)
    else:
        provider = ScriptedProvider([tool_turn(call("slow", "c1"))])
    sink = RecordingSink()
    with anyio.fail_after(10):
        with anyio.move_on_after(0.1) as scope:
            await run("q", provider=provider, tools=tools, events=sink)
    assert scope.cancelled_caught  # the cancellation propagated out of run()
    ended = sink.of(RunEnded)
    assert len(ended) == 1 and ended[0].termination_reason == "cancelled"
    types = sink.types()
    assert types.count("model_call_started") == types.count("model_call_ended")
    assert types.count("tool_call_started") == types.count("tool_call_ended")
    assert types.count("round_started") == types.count("round_ended")
    if where == "tool":
        assert seen["cancelled"] == 1
        [cut] = sink.of(ToolCallEnded)
        assert cut.error == "interrupted" and cut.ms > 0  # how long it ran before the cut
        assert ended[0].tool_calls == 1  # the call of the cut-off turn is counted


async def test_cancel_event_unused_does_not_keep_the_run_alive() -> None:
    cancel = anyio.Event()
    with anyio.fail_after(10):
        result, _ = await go(ScriptedProvider([text_turn("ok")]), cancel=cancel)
    assert result.termination_reason is R.SUCCESS


async def test_a_cancel_with_a_reason_says_who_stopped_the_run() -> None:
    """Runs stopped by the gateway's shutdown said "cancelled by the caller"."""
    cancel = Cancel()
    cancel.set("cancelled: the gateway is shutting down")
    cancel.set("a later reason")  # the first one wins
    result, _ = await go(ScriptedProvider([text_turn("never")]), cancel=cancel)
    assert result.termination_reason is R.CANCELLED
    assert result.detail == "cancelled: the gateway is shutting down (round 0)"
    plain = Cancel()
    plain.set()
    assert plain.is_set() and plain.reason == "cancelled by the caller"


async def test_a_cancels_scopes_are_cut_off_when_it_is_set_and_forgotten_when_left() -> None:
    cancel = Cancel()
    with cancel.scope() as first, cancel.scope() as second:
        assert not first.cancel_called
        cancel.set("stop")
        assert first.cancel_called and second.cancel_called
    with cancel.scope() as late:  # already set: cut off at once
        assert late.cancel_called
    other = Cancel()
    with other.scope() as left:
        pass
    other.set()
    assert not left.cancel_called and other.is_set()
