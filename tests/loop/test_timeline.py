"""The run's timeline (``loop/_records.py``): spans from events, bounded, kept in the run record
on SQLite (and read back) with what the dashboard's waterfall needs."""

from __future__ import annotations

from pathlib import Path

from mcp_agent.events import (
    PREVIEW_CHARS,
    ApprovalRequested,
    ApprovalResolved,
    ModelCallEnded,
    ModelCallStarted,
    ToolCallEnded,
    ToolCallStarted,
)
from mcp_agent.loop._records import MAX_ARGUMENT_CHARS, MAX_SPANS, TimelineSink
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import Usage
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.state.records import RunRecord

from ._helpers import call, echo_tools


def test_spans_from_events_with_offsets_durations_tokens_arguments_and_approval() -> None:
    sink = TimelineSink(started=100.0)
    ids = {"run_id": "r"}
    sink.emit(ModelCallStarted(**ids, round=1, ts=100.010))
    sink.emit(
        ModelCallEnded(**ids, round=1, ts=100.500, ms=490.0, usage={"total_tokens": 7}, tool_calls=["echo"])
    )
    sink.emit(
        ToolCallStarted(**ids, round=1, call_id="c1", name="echo", arguments={"text": "x" * 5000}, ts=100.5)
    )
    sink.emit(ApprovalRequested(**ids, approval_id="a", call_id="c1", name="echo", ts=100.5))
    sink.emit(ApprovalResolved(**ids, approval_id="a", call_id="c1", name="echo", approved=True, ts=102.5))
    sink.emit(ToolCallEnded(**ids, round=1, call_id="c1", name="echo", ms=20.0, preview="done", ts=102.52))
    sink.emit(
        ToolCallEnded(**ids, round=1, call_id="c2", name="nope", verdict="unknown_tool", ok=False, ts=102.53)
    )
    model, tool, refused = sink.spans()
    assert model["kind"] == "model" and model["start_ms"] == 10.0 and model["ms"] == 490.0
    assert model["usage"] == {"total_tokens": 7} and model["tool_calls"] == ["echo"]
    assert tool["start_ms"] == 500.0 and tool["ms"] == 2020.0 and tool["tool_ms"] == 20.0
    assert tool["approval"] == {"wait_ms": 2000.0, "approved": True} and tool["preview"] == "done"
    assert len(tool["arguments"]) == MAX_ARGUMENT_CHARS and tool["arguments"].endswith("…")
    assert refused["verdict"] == "unknown_tool" and refused["ms"] == 0.0 and refused["arguments"] == ""


def test_spans_are_bounded() -> None:
    sink = TimelineSink(started=0.0)
    for n in range(MAX_SPANS + 10):
        sink.emit(ModelCallStarted(run_id="r", round=n, ts=1.0))
        sink.emit(ModelCallEnded(run_id="r", round=n, ts=2.0))
    assert len(sink.spans()) == MAX_SPANS and sink.dropped == 10


async def test_the_record_keeps_the_timeline_on_sqlite(tmp_path: Path) -> None:
    from mcp_agent.state import open_state

    state = await open_state(f"sqlite:///{tmp_path}/state.db")
    provider = ScriptedProvider(
        [tool_turn(call("echo", "c1", text="y" * 2000), usage=Usage(5, 3, 8)), text_turn("said it")]
    )
    agent = Agent(provider, echo_tools(), state=state)
    result = await agent.query("echo something")
    await state.aclose()
    state = await open_state(f"sqlite:///{tmp_path}/state.db")
    record = await state.runs.get(result.run_id)
    await state.aclose()
    assert record is not None and [span["kind"] for span in record.timeline] == ["model", "tool", "model"]
    model, tool, _ = record.timeline
    assert model["usage"]["total_tokens"] == 8 and model["ms"] is not None
    assert tool["name"] == "echo" and '"text": "yyy' in tool["arguments"] and tool["ok"] is True
    assert tool["preview"] == "y" * PREVIEW_CHARS
    assert record.ended is not None
    assert 0 <= model["start_ms"] <= tool["start_ms"] <= (record.ended - record.started) * 1000
    assert RunRecord.from_dict(record.to_dict()) == record
    assert RunRecord.from_dict({"id": "old"}).timeline == ()  # a record from before timelines


async def test_the_record_says_which_calls_were_skipped(tmp_path: Path) -> None:
    """The dashboard's run list counts the calls that were made: a call cut off before it ran
    (the tool-call budget ends the run first) is on record with ``verdict: skipped``."""
    from mcp_agent.config import AgentConfig, Limits
    from mcp_agent.state import open_state

    state = await open_state(f"sqlite:///{tmp_path}/state.db")
    provider = ScriptedProvider(
        [
            tool_turn(call("echo", "a", text="1")),
            tool_turn(call("echo", "b", text="2"), call("echo", "c", text="3")),
        ]
    )
    agent = Agent(provider, echo_tools(), AgentConfig(limits=Limits(max_tool_calls=2)), state=state)
    result = await agent.query("echo three times")
    assert result.termination_reason.value == "tool_budget"
    await state.aclose()
    state = await open_state(f"sqlite:///{tmp_path}/state.db")
    record = await state.runs.get(result.run_id)
    await state.aclose()
    assert record is not None
    assert [(c["name"], c["ok"], c.get("verdict")) for c in record.tool_calls] == [
        ("echo", True, None),
        ("echo", False, "skipped"),
        ("echo", False, "skipped"),
    ]
