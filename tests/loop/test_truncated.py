"""An answer cut off at the length limit: flagged ``truncated``, and continued once when the cap
that cut it was ours (``_model.finish_answer``)."""

from __future__ import annotations

import anyio
import jsonschema
import pytest

from mcp_agent.config import Limits
from mcp_agent.exceptions import ProviderError
from mcp_agent.gateway.mcp.server import run_result_to_mcp
from mcp_agent.loop.result import RESULT_SCHEMA
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.loop.run import CONTINUE_PROMPT, join_continuation
from mcp_agent.messages import Message, Turn, Usage
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn

from ._helpers import go


def cut(content: str, *, cap: int | None = 40, used: int = 40, estimated: bool = False) -> Turn:
    """A text answer cut off by the length limit (``used`` completion tokens of ``cap``)."""
    return Turn(
        content=content,
        finish_reason="length",
        usage=Usage(10, used, 10 + used, estimated=estimated),
        max_output_tokens=cap,
    )


async def test_an_answer_cut_off_at_our_cap_is_continued_once() -> None:
    provider = ScriptedProvider(
        [cut("Port 22 is used by sshd, which"), text_turn("listens on all addresses.")]
    )
    result, _ = await go(provider, query="Is port 22 in use?")
    assert result.termination_reason is R.SUCCESS and not result.truncated and result.detail == ""
    assert result.answer == "Port 22 is used by sshd, which listens on all addresses."
    assert result.rounds == 1 and len(provider.requests) == 2
    again = provider.requests[1]
    assert list(again.tools) == []  # a continuation of text: no tools offered
    assert again.messages[-2:] == [
        Message.assistant("Port 22 is used by sshd, which"),
        Message.user(CONTINUE_PROMPT),
    ]
    # the transcript keeps one assistant message with the whole answer, after the question
    assert result.transcript[-2:] == (Message.user("Is port 22 in use?"), Message.assistant(result.answer))


async def test_an_answer_cut_off_twice_is_flagged() -> None:
    provider = ScriptedProvider([cut("One, two,"), cut("three, four,")])
    result, _ = await go(provider)
    assert result.termination_reason is R.SUCCESS and result.ok and result.truncated
    assert result.answer == "One, two, three, four,"
    assert (
        result.detail
        == "the answer was cut off at the output cap (40 tokens), and again after one continuation"
    )
    mcp = run_result_to_mcp(result)
    assert not mcp.is_error and mcp.structured_content is not None
    assert mcp.structured_content["truncated"] is True and mcp.structured_content["detail"] == result.detail
    jsonschema.validate(mcp.structured_content, RESULT_SCHEMA)


async def test_an_answer_cut_off_short_of_our_cap_is_not_continued() -> None:
    """Fewer tokens than the cap: the context window is full, and a continuation cannot fit."""
    provider = ScriptedProvider([cut("A long answer that", used=12)])
    result, _ = await go(provider)
    assert len(provider.requests) == 1 and result.truncated and result.answer == "A long answer that"
    assert "short of the output cap" in result.detail


@pytest.mark.parametrize(
    "turn",
    [cut("Estimated usage", used=3, estimated=True), cut("No cap reported", cap=None)],
    ids=["estimated-usage", "cap-from-the-request"],
)
async def test_when_the_count_is_unknown_the_cap_is_taken_as_ours(turn: Turn) -> None:
    provider = ScriptedProvider([turn, text_turn("and the rest.")])
    result, _ = await go(provider, max_output_tokens=40)
    assert len(provider.requests) == 2 and not result.truncated
    assert provider.requests[0].max_output_tokens == 40


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (ProviderError("overloaded", status=503), "continuing it failed: model call failed (round 1): "),
        (text_turn(""), "continuing it gave nothing usable"),
        (text_turn(f"Sure. {CONTINUE_PROMPT}"), "continuing it gave nothing usable"),
    ],
    ids=["error", "empty", "echo"],
)
async def test_a_failed_continuation_keeps_the_partial_answer(second: object, why: str) -> None:
    provider = ScriptedProvider([cut("The partial answer"), second])  # type: ignore[list-item]
    result, _ = await go(provider)
    assert result.termination_reason is R.SUCCESS and result.truncated
    assert result.answer == "The partial answer" and why in result.detail
    assert result.transcript[-1] == Message.assistant("The partial answer")


async def test_the_deadline_during_the_continuation_keeps_the_partial_answer() -> None:
    async def hang(request: ModelRequest) -> Turn:
        await anyio.sleep(60)
        raise AssertionError("unreachable")

    provider = ScriptedProvider([cut("The partial answer"), hang])
    with anyio.fail_after(10):
        result, _ = await go(provider, limits=Limits(timeout_seconds=0.2))
    assert result.termination_reason is R.TIMEOUT and result.truncated
    assert result.answer == "The partial answer"
    assert result.shown_answer().endswith("\n\nThe partial answer")


async def test_no_continuation_past_the_token_budget() -> None:
    provider = ScriptedProvider([cut("Spent it all", used=40)])
    result, _ = await go(provider, limits=Limits(max_tokens=50))
    assert len(provider.requests) == 1 and result.truncated and result.termination_reason is R.SUCCESS
    assert "not continued: token budget exhausted" in result.detail


async def test_a_whole_answer_is_not_truncated() -> None:
    result, _ = await go(ScriptedProvider([text_turn("Complete.")]))
    assert not result.truncated and result.to_structured()["truncated"] is False


@pytest.mark.parametrize(
    ("partial", "rest", "joined"),
    [
        ("The port is", "in use.", "The port is in use."),
        ("The port is in use", ". Done", "The port is in use. Done"),
        ("a list:", "\n- one", "a list:\n- one"),
        ("well-", "known", "well-known"),
        ("(see", "below)", "(see below)"),
        ("the end", "", "the end"),
        ("", "all of it", "all of it"),
        ("quoted", "” he said", "quoted” he said"),
    ],
)
def test_join_continuation(partial: str, rest: str, joined: str) -> None:
    assert join_continuation(partial, rest) == joined
