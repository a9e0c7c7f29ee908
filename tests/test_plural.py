"""Counts in words (``_plural.counted``), and the messages that show counts through it."""

from __future__ import annotations

from mcp_agent._plural import counted
from mcp_agent.events import ModelCallEnded, RunEnded, describe


def test_counted_says_one_in_the_singular_and_every_other_count_in_the_plural() -> None:
    assert [counted(n, "tool") for n in (0, 1, 2)] == ["0 tools", "1 tool", "2 tools"]
    assert counted(1, "tool call") == "1 tool call" and counted(3, "tool call") == "3 tool calls"
    assert counted(1, "property", "properties") == "1 property"
    assert counted(2, "property", "properties") == "2 properties"


def test_a_run_of_one_round_and_one_call_is_described_in_the_singular() -> None:
    ended = RunEnded(
        run_id="r", termination_reason="success", rounds=1, tool_calls=1, usage={"total_tokens": 1}
    )
    assert describe(ended) == "done: success after 1 round, 1 tool call, 1 token, 0 ms"
    ended = RunEnded(
        run_id="r", termination_reason="success", rounds=2, tool_calls=0, usage={"total_tokens": 30}
    )
    assert describe(ended) == "done: success after 2 rounds, 0 tool calls, 30 tokens, 0 ms"
    answered = ModelCallEnded(run_id="r", round=1, usage={}, ms=5)  # no usage reported: 0, not None
    assert describe(answered) == "round 1: model answered in 5 ms (0 tokens)"
