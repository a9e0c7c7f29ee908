"""Approvals: the gate, the queue, and how run() waits on them; the tainted flag."""

from __future__ import annotations

import anyio
import pytest

from mcp_agent.config import Limits
from mcp_agent.events import ApprovalRequested, ApprovalResolved, RecordingSink
from mcp_agent.loop.approvals import ApprovalQueue, GlobGate, Verdict, denied_text, is_destructive
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, ToolCall
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

from ._helpers import OBJ, LoopingProvider, call, check_run, echo_tools, go, tool_texts

# --------------------------------------------------------------------------------------------
# the gate and the queue on their own


@pytest.mark.parametrize(
    ("patterns", "name", "needs"),
    [
        (["*__write_*"], "fs__write_file", True),
        (["*__write_*"], "fs__read_file", False),
        (["*__write_*"], "FS__WRITE_FILE", False),  # case-sensitive
        (["shell__*", "fs__delete"], "fs__delete", True),
        (["fs__delete"], "fs__delete_all", False),
        ([], "anything", False),
        (["*"], "anything", True),
        (["fs__[rw]*"], "fs__write", True),
    ],
)
async def test_glob_gate(patterns: list[str], name: str, needs: bool) -> None:
    verdict = await GlobGate(patterns).check(ToolCall("c", name, {}), tainted=False)
    assert verdict == (Verdict.need_approval() if needs else Verdict.allow())


@pytest.mark.parametrize(
    ("annotations", "destructive"),
    [
        ({"destructiveHint": True}, True),
        ({"destructiveHint": True, "readOnlyHint": False}, True),
        ({"destructiveHint": True, "readOnlyHint": True}, False),  # read-only wins
        ({"destructiveHint": False}, False),
        ({}, False),  # only an explicit hint counts, not the spec's default
        ({"readOnlyHint": False}, False),
        ({"destructiveHint": "true"}, False),  # not a boolean: not trusted
        ({"destructiveHint": 1}, False),
    ],
)
def test_is_destructive(annotations: dict[str, object], destructive: bool) -> None:
    assert is_destructive(annotations) is destructive


def _annotated_tools() -> MemoryToolSource:
    tools = MemoryToolSource()
    tools.add("fs__delete", lambda: "gone", parameters=OBJ, annotations={"destructiveHint": True})
    tools.add("fs__read", lambda: "data", parameters=OBJ, annotations={"readOnlyHint": True})
    tools.add(
        "fs__wipe_ro",
        lambda: "?",
        parameters=OBJ,
        annotations={"destructiveHint": True, "readOnlyHint": True},
    )
    tools.add("fs__plain", lambda: "ok", parameters=OBJ)
    return tools


@pytest.mark.parametrize(
    ("require", "destructive", "name", "needs"),
    [
        ([], True, "fs__delete", True),
        ([], True, "fs__read", False),
        ([], True, "fs__wipe_ro", False),
        ([], True, "fs__plain", False),
        ([], True, "fs__unknown", False),  # not a tool: the dispatcher answers it, not the gate
        ([], False, "fs__delete", False),  # off unless asked for
        (["fs__plain"], True, "fs__plain", True),  # globs still apply
    ],
)
async def test_glob_gate_with_destructive_tools(
    require: list[str], destructive: bool, name: str, needs: bool
) -> None:
    gate = GlobGate(require, require_destructive=destructive, tools=_annotated_tools())
    verdict = await gate.check(ToolCall("c", name, {}), tainted=False)
    assert verdict == (Verdict.need_approval() if needs else Verdict.allow())


async def test_glob_gate_sees_tools_that_appear_later() -> None:
    tools = _annotated_tools()
    gate = GlobGate([], require_destructive=True, tools=tools)
    assert await gate.check(ToolCall("c", "fs__new", {}), tainted=False) == Verdict.allow()
    tools.add("fs__new", lambda: "x", parameters=OBJ, annotations={"destructiveHint": True})
    assert await gate.check(ToolCall("c", "fs__new", {}), tainted=False) == Verdict.need_approval()


async def test_queue_resolve_approves_once() -> None:
    queue = ApprovalQueue(timeout_seconds=10)
    pending = await queue.submit(ToolCall("c1", "fs__write", {"path": "x"}), run_id="r1", session_id="s1")
    assert await queue.pending() == [pending]
    assert (pending.run_id, pending.session_id, pending.call_id, pending.name) == (
        "r1",
        "s1",
        "c1",
        "fs__write",
    )
    assert pending.to_dict()["arguments"] == {"path": "x"}
    assert await queue.resolve(pending.id, True)
    assert not await queue.resolve(pending.id, False)  # exactly one resolver wins
    assert await queue.pending() == []
    decision = await queue.wait(pending.id)
    assert decision.approved and decision.reason == "approved by operator"
    assert await queue.resolve(pending.id, False, by="ops") is False  # decided for good


async def test_queue_unknown_id_and_unguessable_ids() -> None:
    queue = ApprovalQueue()
    assert await queue.resolve("nope", True) is False
    ids = {(await queue.submit(ToolCall("c", "t", {}), run_id="r")).id for _ in range(50)}
    assert len(ids) == 50 and all(len(i) >= 20 for i in ids)


async def test_queue_concurrent_resolvers_one_wins() -> None:
    queue = ApprovalQueue()
    pending = await queue.submit(ToolCall("c", "t", {}), run_id="r")
    outcomes: list[bool] = []

    async def resolver(approved: bool) -> None:
        await anyio.sleep(0)
        outcomes.append(await queue.resolve(pending.id, approved, "by resolver"))

    async with anyio.create_task_group() as tg:
        for approved in (True, False, True):
            tg.start_soon(resolver, approved)
        decision = await queue.wait(pending.id)
    assert sorted(outcomes) == [False, False, True]
    assert decision.reason == "by resolver"


async def test_queue_timeout_denies_and_clears() -> None:
    queue = ApprovalQueue(timeout_seconds=0.05)
    pending = await queue.submit(ToolCall("c", "t", {}), run_id="r")
    with anyio.fail_after(10):
        decision = await queue.wait(pending.id)
    assert not decision.approved and decision.reason == "approval timed out after 0.05 s"
    assert await queue.pending() == [] and await queue.resolve(pending.id, True) is False


async def test_queue_cancelled_wait_withdraws_the_request() -> None:
    queue = ApprovalQueue(timeout_seconds=0)
    pending = await queue.submit(ToolCall("c", "t", {}), run_id="r")
    with anyio.move_on_after(0.05):
        await queue.wait(pending.id)
    assert await queue.pending() == [] and await queue.resolve(pending.id, True) is False
    stored = await queue.store.get(pending.id)  # on record: withdrawn by its run
    assert stored is not None and stored.decision is not None and stored.decision.by == "run"


async def test_queue_caps_waiting_approvals_in_all_and_per_caller() -> None:
    from mcp_agent.loop.approvals import ApprovalsFull

    queue = ApprovalQueue(max_pending=4, max_per_caller=3)
    for index in range(3):
        await queue.submit(call("w", f"c{index}"), run_id="r", caller="alice")
    with pytest.raises(ApprovalsFull, match="caller 'alice'"):
        await queue.submit(call("w", "c9"), run_id="r", caller="alice")
    bob = await queue.submit(call("w", "b1"), run_id="r", caller="bob")
    with pytest.raises(ApprovalsFull, match=r"too many approvals are waiting \(4"):
        await queue.submit(call("w", "b2"), run_id="r", caller="bob")
    assert [item.caller for item in await queue.pending()] == ["alice", "alice", "alice", "bob"]
    assert await queue.resolve(bob.id, False)
    await queue.submit(call("w", "b3"), run_id="r", caller="bob")  # room again


async def test_a_call_beyond_the_cap_is_denied_at_once_in_a_run() -> None:
    tools, queue = _write_tools(), ApprovalQueue(timeout_seconds=10, max_pending=1)
    calls = [call("fs__write", f"w{i}", path=f"/tmp/{i}") for i in range(3)]
    provider = ScriptedProvider([tool_turn(*calls), text_turn("done")])
    result, _ = await _run_with_resolver(provider, tools, queue, approved=True, count=1)
    assert result.termination_reason is R.SUCCESS
    texts = tool_texts(result)
    assert texts[0] == "wrote /tmp/0"
    assert all("too many approvals are waiting" in text for text in texts[1:])


# --------------------------------------------------------------------------------------------
# approvals inside a run


def _write_tools() -> MemoryToolSource:
    tools = echo_tools()
    tools.add(
        "fs__write",
        lambda path: f"wrote {path}",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    return tools


async def _resolve_when_pending(
    queue: ApprovalQueue, approved: bool, reason: str = "", count: int = 1
) -> None:
    with anyio.fail_after(10):
        while len(await queue.pending()) < count:
            await anyio.sleep(0.01)
    for pending in await queue.pending():
        await queue.resolve(pending.id, approved, reason)


async def _run_with_resolver(
    provider: ScriptedProvider,
    tools: MemoryToolSource,
    queue: ApprovalQueue,
    approved: bool,
    reason: str = "",
    count: int = 1,
    **kwargs: object,
):
    sink = RecordingSink()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_resolve_when_pending, queue, approved, reason, count)
        result = await run(
            "q",
            provider=provider,
            tools=tools,
            events=sink,
            gate=GlobGate(["fs__write*"]),
            approvals=queue,
            **kwargs,
        )  # type: ignore[arg-type]
    check_run(result, sink)
    return result, sink


async def test_approved_call_runs() -> None:
    tools, queue = _write_tools(), ApprovalQueue(timeout_seconds=10)
    provider = ScriptedProvider([tool_turn(call("fs__write", "c1", path="a.txt")), text_turn("done")])
    result, sink = await _run_with_resolver(provider, tools, queue, True)
    assert tools.calls == [("fs__write", {"path": "a.txt"})]
    assert tool_texts(result) == ["wrote a.txt"]
    assert [t for t in sink.types() if t.startswith(("tool_call", "approval"))] == [
        "tool_call_started",
        "approval_requested",
        "approval_resolved",
        "tool_call_ended",
    ]
    requested, resolved = sink.of(ApprovalRequested)[0], sink.of(ApprovalResolved)[0]
    assert requested.approval_id == resolved.approval_id and requested.arguments == {"path": "a.txt"}
    assert resolved.approved and requested.run_id == result.run_id


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("", denied_text("operator did not approve this call")),
        ("not on Fridays", "[DENIED: not on Fridays] Do NOT retry this tool"),
    ],
)
async def test_denied_call_does_not_run_and_the_loop_goes_on(reason: str, text: str) -> None:
    tools, queue = _write_tools(), ApprovalQueue(timeout_seconds=10)
    provider = ScriptedProvider(
        [tool_turn(call("fs__write", "c1", path="a.txt")), text_turn("could not write")]
    )
    result, sink = await _run_with_resolver(provider, tools, queue, False, reason)
    assert tools.calls == []
    assert tool_texts(result) == [text]
    assert result.termination_reason is R.SUCCESS and result.answer == "could not write"
    assert result.tool_calls[0].verdict == "denied"
    assert sink.of(ApprovalResolved)[0].approved is False


async def test_unanswered_approval_times_out_as_a_denial() -> None:
    tools = _write_tools()
    provider = ScriptedProvider([tool_turn(call("fs__write", "c1", path="a")), text_turn("ok")])
    with anyio.fail_after(10):
        result, _ = await go(
            provider, tools, gate=GlobGate(["fs__write"]), approvals=ApprovalQueue(timeout_seconds=0.05)
        )
    assert tools.calls == []
    assert tool_texts(result) == ["[DENIED: approval timed out after 0.05 s] Do NOT retry this tool"]


async def test_approval_needed_without_a_queue_is_denied() -> None:
    tools = _write_tools()
    provider = ScriptedProvider([tool_turn(call("fs__write", "c1", path="a")), text_turn("ok")])
    result, _ = await go(provider, tools, gate=GlobGate(["fs__write"]))
    assert tools.calls == []
    assert tool_texts(result)[0].startswith(
        "[DENIED: this tool needs approval and no approver is configured]"
    )


async def test_approvals_are_asked_together_and_do_not_hold_a_parallel_slot() -> None:
    tools, queue = _write_tools(), ApprovalQueue(timeout_seconds=10)
    provider = ScriptedProvider(
        [
            tool_turn(
                call("fs__write", "c1", path="a"),
                call("fs__write", "c2", path="b"),
                call("echo", "c3", text="e"),
            ),
            text_turn("ok"),
        ]
    )

    async def resolver() -> None:
        with anyio.fail_after(10):
            while len(await queue.pending()) < 2 or ("echo", {"text": "e"}) not in tools.calls:
                await anyio.sleep(0.01)  # both pending at once, while echo has already run
        for pending in await queue.pending():
            await queue.resolve(pending.id, True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(resolver)
        result = await run(
            "q",
            provider=provider,
            tools=tools,
            gate=GlobGate(["fs__write"]),
            approvals=queue,
            limits=Limits(max_parallel_tools=1),
        )
    assert tool_texts(result) == ["wrote a", "wrote b", "e"]


async def test_cancel_while_waiting_for_approval() -> None:
    tools, queue, cancel = _write_tools(), ApprovalQueue(timeout_seconds=0), anyio.Event()

    async def cancel_when_pending() -> None:
        while not await queue.pending():
            await anyio.sleep(0.01)
        cancel.set()

    sink = RecordingSink()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_pending)
            result = await run(
                "q",
                provider=ScriptedProvider([tool_turn(call("fs__write", "c1", path="a"))]),
                tools=tools,
                events=sink,
                gate=GlobGate(["fs__write"]),
                approvals=queue,
                cancel=cancel,
            )
    check_run(result, sink)
    assert result.termination_reason is R.CANCELLED
    assert await queue.pending() == [] and tools.calls == []
    assert tool_texts(result) == ["not executed: cancelled"]
    assert sink.of(ApprovalResolved)[0].approved is False


async def test_a_turn_stopped_by_the_loop_guard_asks_nobody() -> None:
    queue = ApprovalQueue(timeout_seconds=0.05)
    provider = LoopingProvider("fs__write", {"path": "a"})
    result, sink = await go(
        provider,
        _write_tools(),
        gate=GlobGate(["fs__write"]),
        approvals=queue,
        limits=Limits(loop_threshold=2),
    )
    assert result.termination_reason is R.LOOP_DETECTED
    assert len(sink.of(ApprovalRequested)) == 1  # round 1 only; round 2 trips the guard first


# --------------------------------------------------------------------------------------------
# the gate's verdicts and the tainted flag


class _RecordingGate:
    def __init__(self, deny: set[str] | None = None) -> None:
        self.seen: list[tuple[str, bool]] = []
        self.deny = deny or set()

    async def check(self, call: ToolCall, *, tainted: bool) -> Verdict:
        self.seen.append((call.name, tainted))
        return Verdict.deny("blocked by policy X") if call.name in self.deny else Verdict.allow()


async def test_gate_denial_is_answered_without_asking_anyone() -> None:
    tools, gate = _write_tools(), _RecordingGate(deny={"fs__write"})
    provider = ScriptedProvider(
        [tool_turn(call("fs__write", "c1", path="a"), call("echo", "c2", text="e")), text_turn("ok")]
    )
    result, sink = await go(provider, tools, gate=gate, approvals=ApprovalQueue())
    assert tools.calls == [("echo", {"text": "e"})]
    assert tool_texts(result) == ["[DENIED: blocked by policy X] Do NOT retry this tool", "e"]
    assert sink.of(ApprovalRequested) == []


async def test_tainted_once_tool_output_is_in_the_context() -> None:
    gate = _RecordingGate()
    provider = ScriptedProvider(
        [
            tool_turn(call("nope", "c0")),  # an unknown tool: no tool output yet
            tool_turn(call("echo", "c1", text="a"), call("echo", "c2", text="b")),
            tool_turn(call("echo", "c3", text="c")),
            text_turn("ok"),
        ]
    )
    await go(provider, gate=gate)
    assert gate.seen == [("echo", False), ("echo", False), ("echo", True)]


async def test_tainted_from_the_start_when_the_history_holds_tool_output() -> None:
    gate = _RecordingGate()
    c = ToolCall("h1", "echo", {"text": "old"})
    history = [
        Message.user("q0"),
        Message.assistant("", [c]),
        Message.tool(c, "old"),
        Message.assistant("a0"),
    ]
    await go(
        ScriptedProvider([tool_turn(call("echo", "c1", text="x")), text_turn("ok")]),
        gate=gate,
        history=history,
    )
    assert gate.seen == [("echo", True)]


async def test_gate_is_asked_once_for_identical_calls_in_a_turn() -> None:
    gate = _RecordingGate()
    tools = MemoryToolSource()
    tools.add("t", lambda: "x", parameters=OBJ)
    await go(ScriptedProvider([tool_turn(call("t", "a"), call("t", "b")), text_turn("ok")]), tools, gate=gate)
    assert gate.seen == [("t", False)]


async def test_a_tool_redefined_while_its_call_waits_for_approval_is_not_called() -> None:
    """The approval was about the definition the call was checked against: when the tool's
    annotations change meanwhile (its server restarted with another list), the call does not go
    out on the old decision; the model reads what changed and may call again."""
    tools, queue = MemoryToolSource(), ApprovalQueue(timeout_seconds=10)
    tools.add(
        "fs__write", lambda path: f"wrote {path}", parameters=OBJ, annotations={"destructiveHint": False}
    )
    provider = ScriptedProvider([tool_turn(call("fs__write", "c1", path="a.txt")), text_turn("ok")])
    sink = RecordingSink()

    async def redefine_then_approve() -> None:
        while not await queue.pending():
            await anyio.sleep(0.01)
        tools.add("fs__write", lambda path: "wiped", parameters=OBJ, annotations={"destructiveHint": True})
        await queue.resolve((await queue.pending())[0].id, True)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(redefine_then_approve)
            result = await run(
                "q", provider=provider, tools=tools, events=sink, gate=GlobGate(["fs__*"]), approvals=queue
            )
    check_run(result, sink)
    assert tools.calls == []
    assert tool_texts(result)[0].startswith("tool fs__write was not called: its annotations changed")
    assert '"destructiveHint":true' in tool_texts(result)[0]
