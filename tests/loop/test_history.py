"""History trimming: whole turns first, then old results elided; calls never lose their results."""

from __future__ import annotations

import pytest

from mcp_agent.loop.history import IMAGE_CHARS, elided, hard_trim, history_chars, message_chars, trim_history
from mcp_agent.messages import Image, Message, ToolCall

from ._helpers import assert_valid_transcript


def turn(q: str, *results: str, answer: str = "ok") -> list[Message]:
    """A user turn with one round of calls (one per result) and an answer."""
    calls = [ToolCall(f"{q}-{i}", "t", {"i": i}) for i in range(len(results))]
    messages = [Message.user(q)]
    if calls:
        messages.append(Message.assistant("", calls))
        messages += [Message.tool(c, r) for c, r in zip(calls, results, strict=True)]
    if answer:
        messages.append(Message.assistant(answer))
    return messages


def test_message_size_counts_content_and_call_arguments() -> None:
    assert message_chars(Message.user("abcd")) == 4
    call = ToolCall("1", "name", {"a": 1})
    assert message_chars(Message.assistant("x", [call])) == 1 + len("name") + len('{"a":1}')


@pytest.mark.parametrize("limit", [0, 10**6])
def test_no_trim_when_off_or_under(limit: int) -> None:
    messages = [Message.system("s"), *turn("q1", "r" * 100), *turn("q2")]
    assert trim_history(messages, limit) == messages


def test_drops_oldest_whole_turns_first_keeping_system_and_current() -> None:
    system = Message.system("sys")
    old1, old2, current = turn("q1", "a" * 500), turn("q2", "b" * 500), [Message.user("q3")]
    messages = [system, *old1, *old2, *current]
    limit = history_chars([system, *old2, *current])
    trimmed = trim_history(messages, limit)
    assert trimmed == [system, *old2, *current]
    assert_valid_transcript(trimmed)


def test_keeps_dropping_until_only_the_current_turn() -> None:
    system = Message.system("sys")
    messages = [system, *turn("q1", "a" * 500), *turn("q2", "b" * 500), Message.user("q3")]
    assert trim_history(messages, 5) == [system, Message.user("q3")]


def test_elides_old_results_inside_one_long_run_oldest_first() -> None:
    big = "x" * 1000
    calls1 = [ToolCall("c1", "t", {"n": 1})]
    calls2 = [ToolCall("c2", "t", {"n": 2})]
    calls3 = [ToolCall("c3", "t", {"n": 3})]
    messages = [
        Message.system("sys"),
        Message.user("q"),
        Message.assistant("", calls1),
        Message.tool(calls1[0], big),
        Message.assistant("", calls2),
        Message.tool(calls2[0], big),
        Message.assistant("", calls3),
        Message.tool(calls3[0], big),
    ]
    limit = history_chars(messages) - 500  # eliding the oldest result is enough
    trimmed = trim_history(messages, limit)
    assert trimmed[3].content == elided(big) == "[result elided: 1000 chars]"
    assert trimmed[5].content == big and trimmed[7].content == big
    assert_valid_transcript(trimmed)
    # tighter: both older results go, the latest round's result stays
    tight = trim_history(messages, 100)
    assert [m.content for m in tight if m.role == "tool"] == [elided(big), elided(big), big]
    assert tight[:2] == messages[:2]  # system prompt and current user message kept
    assert_valid_transcript(tight)


def test_hard_trim_elides_the_latest_round_too() -> None:
    big = "y" * 4000
    c = ToolCall("c", "t", {})
    messages = [Message.user("q"), Message.assistant("", [c]), Message.tool(c, big)]
    trimmed = hard_trim(messages)
    assert trimmed[2].content == elided(big)
    assert history_chars(trimmed) <= history_chars(messages) // 2
    assert_valid_transcript(trimmed)


def test_what_must_stay_may_exceed_the_limit() -> None:
    messages = [Message.system("s" * 100), Message.user("u" * 100)]
    assert trim_history(messages, 10) == messages


def test_leading_messages_before_any_user_turn_are_dropped_as_a_turn() -> None:
    messages = [Message.system("s"), Message.assistant("hello " * 100), Message.user("q")]
    assert trim_history(messages, 10) == [Message.system("s"), Message.user("q")]


def test_short_results_are_not_replaced_by_a_longer_placeholder() -> None:
    c1, c2 = ToolCall("a", "t", {}), ToolCall("b", "t", {})
    messages = [
        Message.user("q" * 200),
        Message.assistant("", [c1]),
        Message.tool(c1, "tiny"),
        Message.assistant("", [c2]),
        Message.tool(c2, "tiny"),
    ]
    assert trim_history(messages, 10) == messages


def test_images_count_and_leave_with_their_elided_result() -> None:
    call = ToolCall("c1", "cam__shot", {})
    shot = Message.tool(call, "[image: image/png, 3 B]", images=[Image("image/png", "AAAA")])
    assert message_chars(shot) == len(shot.content) + IMAGE_CHARS
    later = ToolCall("c2", "cam__shot", {})
    messages = [
        Message.user("look"),
        Message.assistant(tool_calls=[call]),
        shot,
        Message.assistant(tool_calls=[later]),
        Message.tool(later, "done"),
    ]
    trimmed = trim_history(messages, IMAGE_CHARS)
    assert trimmed[2].images == () and trimmed[2].content.startswith("[result elided:")
    assert trim_history(messages, 0)[2].images == shot.images
