"""Streamed content routed to text or reasoning (``ThinkFilter``): ``<think>`` tags and gpt-oss
harmony messages, at every way a stream may split them. What the live deltas show must agree
with the split of the finished turn (``split_reasoning``), except that a harmony tool-call
message and stray end tokens are never shown as answer text."""

from __future__ import annotations

import httpx
import pytest

from mcp_agent.messages import Delta
from mcp_agent.providers.textcalls import ThinkFilter, split_reasoning
from tests.fakes import openai_shapes as shapes
from tests.fakes.model_server import FakeModelServer, Reply
from tests.providers.conftest import SleepRecorder
from tests.providers.openai.test_provider import REQUEST, make

HARMONY = (
    "<|channel|>analysis<|message|>Simple sum.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>4.<|return|>"
)
CALL = (
    "<|channel|>analysis<|message|>Need the weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city":"Tokyo"}<|call|>'
)


def streamed(text: str, size: int) -> tuple[str, str]:
    """(reasoning, text) as the deltas show them, ``text`` fed ``size`` characters at a time."""
    think, shown = ThinkFilter(), {"text": "", "reasoning": ""}
    pieces = [piece for i in range(0, len(text), size) for piece in think.feed(text[i : i + size])]
    for kind, piece in [*pieces, *think.flush()]:
        shown[kind] += piece
    return shown["reasoning"], shown["text"]


@pytest.mark.parametrize("size", range(1, 10))
@pytest.mark.parametrize(
    "text",
    [
        HARMONY,
        "<|channel|>analysis<|message|>cut off",
        "<|channel|>analysis<|message|>a<|end|><|start|>assistant",
        "gpt-oss marks them with <|channel|> and <|message|> tokens.",
        "Write `<|channel|>final<|message|>` first.",
        "<think>plan</think>The answer.",
        "<thinking>hmm</thinking>\nAnswer",
        "plain text with a < and a <| but no token",
    ],
)
def test_the_deltas_agree_with_the_finished_turn(text: str, size: int) -> None:
    reasoning, shown = streamed(text, size)
    assert (reasoning.strip(), shown.strip()) == split_reasoning(text)


@pytest.mark.parametrize("size", range(1, 10))
def test_a_harmony_tool_call_is_not_shown_as_text(size: int) -> None:
    assert streamed(CALL, size) == ("Need the weather.", "")


@pytest.mark.parametrize("size", [1, 3, 100])
def test_end_tokens_are_not_shown(size: int) -> None:
    assert streamed("It is sunny.<|return|>", size) == ("", "It is sunny.")
    assert streamed("<|start|>assistant<|channel|>final<|message|>Hi<|end|>", size) == ("", "Hi")


async def test_a_streamed_harmony_answer_shows_only_the_final_message(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """A server that hands gpt-oss's harmony back in the content: the reasoning never shows as
    answer while it streams, and the turn is split the same way."""
    model_server.enqueue(Reply.sse(shapes.openai_stream(content=HARMONY, size=3)))
    deltas: list[Delta] = []
    turn = await make(model_server, http_client, sleeps).complete(REQUEST, deltas.append)
    assert "".join(d.text for d in deltas if d.kind == "text") == "4."
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "Simple sum."
    assert (turn.content, turn.reasoning) == ("4.", "Simple sum.")
