"""Tool dispatch inside run(): arguments, the failure ledger, fingerprints, parallelism, cutting."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from mcp_agent.config import Limits
from mcp_agent.events import ToolCallEnded, ToolCallStarted
from mcp_agent.loop._dispatch import safety_bound
from mcp_agent.loop.guards import FAILURE_HINT
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.messages import ToolCall, ToolResult, ToolSpec
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

from ._helpers import OBJ, call, echo_tools, go, tool_texts

# --------------------------------------------------------------------------------------------
# arguments (guard 4): the tool is not called unless they are right


async def test_unparseable_arguments_are_answered_with_the_problem() -> None:
    tools = echo_tools()
    bad = ToolCall(
        "c1",
        "echo",
        {},
        error="arguments are not valid JSON (Expecting value at position 9)",
        raw_arguments='{"text": ',
    )
    result, _sink = await go(ScriptedProvider([tool_turn(bad), text_turn("sorry")]), tools)
    assert tools.calls == []
    text = tool_texts(result)[0]
    assert text.startswith("error: the arguments of echo could not be read: arguments are not valid JSON")
    assert "'{\"text\": '" in text  # what was received is quoted
    assert result.tool_calls[0].verdict == "invalid_arguments" and not result.tool_calls[0].ok
    assert result.transcript[1].tool_calls[0].arguments == {}  # replays as valid JSON


async def test_unknown_tool_gets_the_available_names() -> None:
    tools = echo_tools()
    result, _ = await go(ScriptedProvider([tool_turn(call("ech0", "c1", text="x")), text_turn("ok")]), tools)
    assert tools.calls == []
    assert tool_texts(result)[0] == "error: unknown tool 'ech0'. Available tools: add, echo, fail"
    assert result.tool_calls[0].verdict == "unknown_tool"


async def test_schema_violations_are_answered_with_the_validator_text() -> None:
    tools = echo_tools()
    result, sink = await go(ScriptedProvider([tool_turn(call("add", "c1", a="x")), text_turn("ok")]), tools)
    assert tools.calls == []
    text = tool_texts(result)[0]
    assert text.startswith("Invalid arguments for add")
    assert "/a" in text and "/b" in text
    assert sink.of(ToolCallEnded)[0].verdict == "invalid_arguments"


async def test_the_tool_receives_coerced_arguments_and_the_transcript_keeps_them() -> None:
    tools = echo_tools()
    result, sink = await go(
        ScriptedProvider([tool_turn(call("add", "c1", a="2", b="3")), text_turn("5")]), tools
    )
    assert tools.calls == [("add", {"a": 2, "b": 3})]
    assert tool_texts(result) == ["5"]
    assert result.transcript[1].tool_calls[0].arguments == {"a": 2, "b": 3}
    assert sink.of(ToolCallStarted)[0].arguments == {"a": 2, "b": 3}


# --------------------------------------------------------------------------------------------
# the failure ledger (guard 5)


def _always_failing() -> MemoryToolSource:
    tools = echo_tools()

    def flaky(n: int) -> str:
        raise RuntimeError(f"backend down ({n})")

    tools.add("flaky", flaky, parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    return tools


async def test_a_tool_that_always_fails_gets_the_hint_then_is_withdrawn() -> None:
    tools = _always_failing()
    provider = ScriptedProvider(
        [
            tool_turn(call("flaky", "c1", n=1)),
            tool_turn(call("flaky", "c2", n=2)),
            tool_turn(call("flaky", "c3", n=3)),
            tool_turn(call("flaky", "c4", n=4)),  # the model tries once more
            text_turn("I could not reach the backend; from what I know..."),
        ]
    )
    result, _ = await go(provider, tools, limits=Limits(failure_hint_after=2, disable_tool_after=3))
    assert result.termination_reason is R.SUCCESS and result.answer.startswith("I could not")
    texts = tool_texts(result)
    assert not texts[0].endswith(FAILURE_HINT)
    assert texts[1].endswith("\n\n" + FAILURE_HINT)  # after 2 consecutive failures
    assert texts[2].endswith(FAILURE_HINT)
    assert texts[3] == "disabled for this run after 3 failures: Error executing tool flaky: backend down (3)"
    assert len(tools.calls) == 3  # the fourth call never reached the tool
    offered = [[spec.name for spec in request.tools] for request in provider.requests]
    assert all("flaky" in names for names in offered[:3])
    assert all("flaky" not in names for names in offered[3:])  # withdrawn for the rest of the run
    assert [r.verdict for r in result.tool_calls] == ["run", "run", "run", "disabled"]


async def test_a_success_resets_the_failure_count() -> None:
    tools = _always_failing()
    provider = ScriptedProvider(
        [
            tool_turn(call("flaky", "c1", n=1)),
            tool_turn(call("flaky", "c2", n=2)),
            tool_turn(call("flaky", "c3", n=3)),
            text_turn("done"),
        ]
    )
    # the hint after 2 failures, reset by a success in between: fail, ok, fail never hints
    runs = iter([RuntimeError("x"), "fine", RuntimeError("y")])

    def sometimes(n: int) -> str:
        outcome = next(runs)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    tools.add("flaky", sometimes, parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    result, _ = await go(provider, tools, limits=Limits(failure_hint_after=2))
    assert not any(t.endswith(FAILURE_HINT) for t in tool_texts(result))


@pytest.mark.parametrize("text", ["No results found.", "", "error: nothing there", '{"error": "nope"}'])
async def test_failure_by_text_counts(text: str) -> None:
    tools = echo_tools()
    tools.add(
        "search", lambda q: text, parameters={"type": "object", "properties": {"q": {"type": "string"}}}
    )
    provider = ScriptedProvider(
        [tool_turn(call("search", f"c{i}", q=str(i))) for i in range(2)] + [text_turn("ok")]
    )
    result, _ = await go(provider, tools, limits=Limits(failure_hint_after=2))
    assert tool_texts(result)[1].endswith(FAILURE_HINT)
    assert [r.ok for r in result.tool_calls] == [False, False]


async def test_ledger_is_fresh_for_each_run() -> None:
    tools = _always_failing()
    limits = Limits(failure_hint_after=2, disable_tool_after=3)
    for _ in range(2):
        provider = ScriptedProvider([tool_turn(call("flaky", "c1", n=1)), text_turn("ok")])
        result, _ = await go(provider, tools, limits=limits)
        assert not tool_texts(result)[0].endswith(FAILURE_HINT)


# --------------------------------------------------------------------------------------------
# fingerprints (guard 6)


async def test_identical_calls_in_one_turn_run_once_and_share_the_result() -> None:
    tools = echo_tools()
    provider = ScriptedProvider(
        [
            tool_turn(
                call("echo", "c1", text="a"), call("echo", "c2", text="a"), call("echo", "c3", text="b")
            ),
            text_turn("ok"),
        ]
    )
    result, sink = await go(provider, tools, limits=Limits(loop_threshold=2))
    assert tools.calls == [("echo", {"text": "a"}), ("echo", {"text": "b"})]
    assert tool_texts(result) == ["a", "a", "b"]
    assert [r.verdict for r in result.tool_calls] == ["run", "shared", "run"]
    assert [e.verdict for e in sink.of(ToolCallEnded) if e.call_id == "c2"] == ["shared"]
    assert result.termination_reason is R.SUCCESS  # a turn counts once toward the loop threshold


async def test_a_repeat_across_turns_runs_with_a_note() -> None:
    tools = echo_tools()
    provider = ScriptedProvider(
        [
            tool_turn(call("echo", "c1", text="a")),
            tool_turn(call("echo", "c2", text="b")),
            tool_turn(call("echo", "c3", text="a")),
            text_turn("ok"),
        ]
    )
    result, _ = await go(provider, tools, limits=Limits(loop_threshold=0))
    assert len(tools.calls) == 3
    assert tool_texts(result)[2] == "a\n\n[NOTE: identical to a call in round 1]"


# --------------------------------------------------------------------------------------------
# parallel dispatch (guard 8)


def _pairwise_tools(n: int) -> tuple[MemoryToolSource, dict[str, list[int]]]:
    """Call i (even) waits until call i+1 has finished: within a pair, the later one ends first."""
    seen: dict[str, list[int]] = {"started": [], "finished": [], "peak": [0], "now": [0]}
    done = [anyio.Event() for _ in range(n)]

    async def step(i: int) -> str:
        seen["now"][0] += 1
        seen["peak"][0] = max(seen["peak"][0], seen["now"][0])
        seen["started"].append(i)
        if i + 1 < n and i % 2 == 0:
            await done[i + 1].wait()
        await anyio.sleep(0)
        seen["now"][0] -= 1
        seen["finished"].append(i)
        done[i].set()
        return f"result {i}"

    tools = MemoryToolSource()
    tools.add("step", step, parameters={"type": "object", "properties": {"i": {"type": "integer"}}})
    return tools, seen


async def test_six_calls_bound_two_never_more_than_two_in_flight_results_in_order() -> None:
    tools, seen = _pairwise_tools(6)
    provider = ScriptedProvider([tool_turn(*(call("step", f"c{i}", i=i) for i in range(6))), text_turn("ok")])
    with anyio.fail_after(20):
        result, _ = await go(provider, tools, limits=Limits(max_parallel_tools=2))
    assert seen["peak"] == [2]
    assert seen["finished"] == [1, 0, 3, 2, 5, 4]  # finished out of order
    assert tool_texts(result) == [f"result {i}" for i in range(6)]  # returned in call order
    assert [m.tool_call_id for m in result.transcript if m.role == "tool"] == [f"c{i}" for i in range(6)]


async def test_unbounded_when_max_parallel_tools_is_zero() -> None:
    n = 6
    done = [anyio.Event() for _ in range(n)]
    finished: list[int] = []

    async def step(i: int) -> str:  # each waits for the next: only possible if all run at once
        if i + 1 < n:
            await done[i + 1].wait()
        finished.append(i)
        done[i].set()
        return str(i)

    tools = MemoryToolSource()
    tools.add("step", step, parameters=OBJ)
    provider = ScriptedProvider([tool_turn(*(call("step", f"c{i}", i=i) for i in range(n))), text_turn("ok")])
    with anyio.fail_after(20):
        result, _ = await go(provider, tools, limits=Limits(max_parallel_tools=0))
    assert finished == [5, 4, 3, 2, 1, 0]  # finished in reverse
    assert tool_texts(result) == ["0", "1", "2", "3", "4", "5"]


# --------------------------------------------------------------------------------------------
# timeouts and misbehaving sources


class _Recording:
    """A ToolSource that records the timeout it was given and can hang, ignoring it."""

    def __init__(self, hang: bool = False, raises: bool = False) -> None:
        self.timeouts: list[float | None] = []
        self.hang, self.raises = hang, raises

    def list_tools(self) -> Sequence[ToolSpec]:
        return [ToolSpec("t", parameters=dict(OBJ))]

    async def call_tool(self, name: str, arguments: dict, *, timeout: float | None = None) -> ToolResult:
        self.timeouts.append(timeout)
        if self.raises:
            raise KeyError("source bug")
        if self.hang:
            await anyio.sleep_forever()
        return ToolResult("ok")


@pytest.mark.parametrize(("setting", "passed"), [(12.5, 12.5), (0, None)])
async def test_the_tool_timeout_is_passed_to_the_source(setting: float, passed: float | None) -> None:
    source = _Recording()
    await go(
        ScriptedProvider([tool_turn(call("t", "c1")), text_turn("ok")]),
        source,
        limits=Limits(tool_timeout_seconds=setting),
    )
    assert source.timeouts == [passed]


async def test_a_slow_tool_times_out_and_the_run_goes_on() -> None:
    tools = echo_tools()

    async def slow() -> str:
        await anyio.sleep(60)
        return "late"

    tools.add("slow", slow, parameters=OBJ)
    provider = ScriptedProvider([tool_turn(call("slow", "c1")), text_turn("it was slow")])
    with anyio.fail_after(20):
        result, _ = await go(provider, tools, limits=Limits(tool_timeout_seconds=0.1))
    assert result.termination_reason is R.SUCCESS
    assert "timed out" in tool_texts(result)[0]
    assert result.tool_calls[0].ok is False


async def test_a_source_that_ignores_its_timeout_is_cut_off_by_the_loop() -> None:
    source = _Recording(hang=True)
    provider = ScriptedProvider([tool_turn(call("t", "c1")), text_turn("ok")])
    with anyio.fail_after(20):
        result, _ = await go(provider, source, limits=Limits(tool_timeout_seconds=0.1))
    assert tool_texts(result)[0] == f"error: tool t did not answer within {safety_bound(0.1):g} s"
    assert result.termination_reason is R.SUCCESS


async def test_a_source_that_raises_becomes_an_error_result() -> None:
    source = _Recording(raises=True)
    result, _ = await go(ScriptedProvider([tool_turn(call("t", "c1")), text_turn("ok")]), source)
    assert tool_texts(result)[0].startswith("error: calling t failed: KeyError")
    assert result.termination_reason is R.SUCCESS


# --------------------------------------------------------------------------------------------
# results are cut (guard 7)


async def test_long_results_are_cut_with_a_note_when_paging_is_off() -> None:
    tools = echo_tools()
    text = "é" * 30 + "😀" * 30
    result, sink = await go(
        ScriptedProvider([tool_turn(call("echo", "c1", text=text)), text_turn("ok")]),
        tools,
        limits=Limits(max_result_chars=45, page_results=False),
    )
    cut = tool_texts(result)[0]
    assert cut.startswith("é" * 30 + "😀" * 15 + "\n[... truncated: 15 of 60 characters cut]")
    assert sink.of(ToolCallEnded)[0].truncated is True


async def test_results_under_the_limit_are_untouched() -> None:
    result, sink = await go(
        ScriptedProvider([tool_turn(call("echo", "c1", text="short")), text_turn("ok")]),
        limits=Limits(max_result_chars=45),
    )
    assert tool_texts(result) == ["short"] and sink.of(ToolCallEnded)[0].truncated is False


async def test_a_tools_own_timeout_wins_over_the_runs():
    """A server's callTimeoutSeconds (ToolSpec.timeout_seconds) is passed on and bounds the call,
    even when it is longer than limits.toolTimeoutSeconds."""
    from mcp_agent.config import Limits
    from mcp_agent.events import NullSink
    from mcp_agent.loop._dispatch import Dispatcher, Emitter
    from mcp_agent.messages import ToolCall, ToolResult, ToolSpec

    seen: list[float | None] = []

    class Slow:
        def list_tools(self):
            return [ToolSpec("slow", timeout_seconds=5.0), ToolSpec("quick")]

        async def call_tool(self, name, arguments, *, timeout=None):
            seen.append(timeout)
            if name == "slow":
                await anyio.sleep(1.5)  # longer than the run's 1 s, within the tool's own 5 s
            return ToolResult("done")

    dispatcher = Dispatcher(Slow(), Limits(tool_timeout_seconds=1), Emitter([NullSink()], "r", None))
    calls = [ToolCall("a", "slow", {}), ToolCall("b", "quick", {})]
    plan = await dispatcher.prepare(calls, round=1, tainted=False, offered=dispatcher.offered())
    await dispatcher.execute(plan)
    results = dispatcher.finish(plan, "")
    assert seen == [5.0, 1.0]
    assert [m.content for m in results] == ["done", "done"]
