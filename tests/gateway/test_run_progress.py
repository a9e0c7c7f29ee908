"""Progress for a run: a step per event, and a heartbeat saying what the run waits for."""

from __future__ import annotations

import anyio
import pytest

from mcp_agent.events import (
    ApprovalRequested,
    ApprovalResolved,
    ModelCallEnded,
    ModelCallStarted,
    ModelDelta,
    RoundStarted,
    ToolCallEnded,
    ToolCallStarted,
)
from mcp_agent.gateway.run_progress import Waiting, progress_sink, send_progress

from .conftest import RuleModel, answer_of, eventually, make_config, running_gateway
from .test_mcp import connect


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_waiting_says_what_the_run_waits_for_and_how_long() -> None:
    clock = Clock()
    waiting = Waiting(clock)
    assert waiting.describe() == "working (0 s)"
    waiting.update(RoundStarted(run_id="r", round=2, max_rounds=10))
    waiting.update(ModelCallStarted(run_id="r", round=2))
    clock.now += 15
    assert waiting.describe() == "round 2/10: waiting for the model (15 s)"
    waiting.update(ModelCallEnded(run_id="r", round=2))
    waiting.update(ToolCallStarted(run_id="r", round=2, call_id="a", name="ports__check"))
    clock.now += 1
    waiting.update(ToolCallStarted(run_id="r", round=2, call_id="b", name="web__fetch"))
    clock.now += 7
    assert waiting.describe() == "round 2/10: waiting for ports__check and 1 more (8 s)"
    waiting.update(ApprovalRequested(run_id="r", approval_id="x", call_id="c", name="fs__write"))
    clock.now += 30
    assert waiting.describe() == "round 2/10: waiting for approval of fs__write (30 s)"  # a human first
    waiting.update(
        ApprovalResolved(run_id="r", approval_id="x", call_id="c", name="fs__write", approved=True)
    )
    waiting.update(ToolCallEnded(run_id="r", round=2, call_id="a", name="ports__check"))
    assert waiting.describe() == "round 2/10: waiting for web__fetch (37 s)"


async def test_heartbeats_fill_the_silence_and_steps_go_out_as_they_happen() -> None:
    sink = progress_sink()
    sent: list[tuple[float, str]] = []

    async def send(count: float, message: str) -> None:
        sent.append((count, message))

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: send_progress(sink, send, interval=0.05))
        sink.emit(RoundStarted(run_id="r", round=1, max_rounds=3))
        sink.emit(ModelCallStarted(run_id="r", round=1))
        for _ in range(50):
            sink.emit(ModelDelta(run_id="r", round=1, kind="text", text="x"))  # not queued at all
        await eventually(lambda: sum("waiting for the model" in m for _, m in sent) >= 3)
        sink.close()
    assert sent[0] == (1, "round 1/3: asking the model")
    assert [count for count, _ in sent] == list(range(1, len(sent) + 1))  # progress only grows
    assert sink.dropped == 0


async def test_a_failing_sender_ends_quietly() -> None:
    sink = progress_sink()

    async def send(count: float, message: str) -> None:
        raise RuntimeError("the client went away")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: send_progress(sink, send, interval=0.01))
            sink.emit(RoundStarted(run_id="r", round=1, max_rounds=3))
    sink.emit(RoundStarted(run_id="r", round=2, max_rounds=3))  # the run goes on: never blocks, never raises
    sink.close()


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "modern"), ("http", "legacy")])
async def test_a_long_wait_on_the_model_keeps_sending_progress(transport: str, era: str) -> None:
    """Nothing was sent while a model call took long, and the TypeScript SDK's 60 s timeout fired."""
    config = make_config(progress_interval_seconds=0.2)
    async with running_gateway(config, model=RuleModel(delay=1.5)) as gateway:
        seen: list[str | None] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(message)

        async with connect(gateway.url, transport, era) as client:
            result = await client.call_tool("agent_query", {"query": "hi"}, progress_callback=progress)
        assert answer_of(result) == "answer: hi"
        beats = [m for m in seen if m and "waiting for the model" in m]
        assert len(beats) >= 3, seen
        assert seen[0] == "round 1/4: asking the model"
