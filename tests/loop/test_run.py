"""run(): the worked example, the system prompt, and every termination reason with its guard."""

from __future__ import annotations

import anyio
import pytest

from mcp_agent.config import Limits
from mcp_agent.events import ModelCallEnded, ModelDelta, RecordingSink, RunEnded
from mcp_agent.exceptions import ContextLengthError, ProviderError
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, ToolCall, Turn, Usage
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

from ._helpers import (
    LoopingProvider,
    StreamingProvider,
    assert_valid_transcript,
    call,
    echo_tools,
    go,
    tool_texts,
    usage,
)

# --------------------------------------------------------------------------------------------
# the course's worked example (seeds/course-ag03-agent-loop.txt §3)


async def test_worked_example_by_hand() -> None:
    tools = MemoryToolSource()
    tools.add(
        "get_weather",
        lambda city: "sunny, 21 C",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    call_1 = ToolCall("call_1", "get_weather", {"city": "Paris"})
    provider = StreamingProvider(
        [
            (tool_turn(call_1, usage=usage(10, 5)), []),
            (text_turn("It is sunny.", usage=usage(20, 4)), ["It ", "is ", "sunny."]),
        ]
    )
    result, sink = await go(provider, tools, "What is the weather in Paris?")

    assert result.termination_reason is R.SUCCESS and result.ok
    assert result.answer == "It is sunny."
    assert result.rounds == 2 and len(provider.requests) == 2
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (30, 9)
    user = Message.user("What is the weather in Paris?")
    assistant = Message.assistant("", [call_1])
    assert list(result.transcript) == [
        user,
        assistant,
        Message.tool(call_1, "sunny, 21 C"),
        Message.assistant("It is sunny."),
    ]
    assert len(result.transcript) == 4
    # what the second model call saw: the three messages above
    assert list(provider.requests[1].messages) == list(result.transcript[:3])
    # the events, in order
    assert sink.types() == [
        "run_started",
        "round_started",
        "model_call_started",
        "model_call_ended",
        "tool_call_started",
        "tool_call_ended",
        "round_ended",
        "round_started",
        "model_call_started",
        "model_delta",
        "model_delta",
        "model_delta",
        "model_call_ended",
        "round_ended",
        "run_ended",
    ]
    model_ends = sink.of(ModelCallEnded)
    assert [e.usage["prompt_tokens"] for e in model_ends] == [10, 20]
    assert model_ends[0].tool_calls == ["get_weather"]
    assert model_ends[0].ttft_ms is None and model_ends[1].ttft_ms is not None
    assert [e.text for e in sink.of(ModelDelta)] == ["It ", "is ", "sunny."]
    assert sink.of(RunEnded)[0].usage["total_tokens"] == 39


# --------------------------------------------------------------------------------------------
# the system prompt


async def test_system_prompt_is_added_first() -> None:
    provider = ScriptedProvider([text_turn("hi")])
    result, _ = await go(provider, system_prompt="Be brief.")
    assert provider.requests[0].messages[0] == Message.system("Be brief.")
    assert result.transcript[:2] == (Message.system("Be brief."), Message.user("question"))


async def test_system_prompt_is_not_added_to_a_transcript_that_has_one() -> None:
    history = [Message.system("Old rules."), Message.user("q0"), Message.assistant("a0")]
    provider = ScriptedProvider([text_turn("hi")])
    result, _ = await go(provider, system_prompt="New rules.", history=history)
    sent = provider.requests[0].messages
    assert [m.role for m in sent].count("system") == 1
    assert sent[0] == Message.system("Old rules.")
    assert result.transcript[:3] == tuple(history)


async def test_no_system_prompt_when_none_given() -> None:
    provider = ScriptedProvider([text_turn("hi")])
    result, _ = await go(provider)
    assert [m.role for m in result.transcript] == ["user", "assistant"]


# --------------------------------------------------------------------------------------------
# success and the shape of a turn


async def test_answer_without_tools_is_one_round() -> None:
    result, _sink = await go(ScriptedProvider([text_turn("  42  ")]))
    assert (result.termination_reason, result.answer, result.rounds) == (R.SUCCESS, "42", 1)
    assert result.detail == "" and result.tool_calls == ()


async def test_text_next_to_tool_calls_is_kept() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", "c1", text="x"), content="Let me check."), text_turn("x")]
    )
    result, _ = await go(provider)
    assert result.transcript[1].content == "Let me check."


async def test_control_flow_follows_the_calls_not_the_finish_reason() -> None:
    turn = Turn(tool_calls=(call("echo", "c1", text="hi"),), finish_reason="stop")
    result, _ = await go(ScriptedProvider([turn, text_turn("done")]))
    assert result.rounds == 2 and tool_texts(result) == ["hi"]


async def test_missing_and_reused_call_ids_are_replaced() -> None:
    provider = ScriptedProvider(
        [
            tool_turn(
                call("echo", "", text="a"), call("echo", "dup", text="b"), call("echo", "dup", text="c")
            ),
            tool_turn(call("echo", "dup", text="d")),  # reused from an earlier round
            text_turn("done"),
        ]
    )
    result, _ = await go(provider)
    ids = [c.id for m in result.transcript for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 4 and all(ids)
    assert "dup" in ids
    assert tool_texts(result) == ["a", "b", "c", "d"]


# --------------------------------------------------------------------------------------------
# max_rounds (guard 1: the cap before a model call; the N-th turn's calls ARE executed)


async def test_max_rounds_stops_before_call_n_plus_one() -> None:
    tools = echo_tools()
    provider = LoopingProvider("echo", {"text": "again"})
    limits = Limits(max_rounds=3, loop_threshold=0)
    result, _ = await go(provider, tools, limits=limits)
    assert result.termination_reason is R.MAX_ROUNDS
    assert len(provider.requests) == 3 and result.rounds == 3
    assert len(tools.calls) == 3  # the third turn's call ran
    assert result.detail == "reached max rounds (3)"
    assert not result.ok and result.answer == ""
    assert result.transcript[-1].role == "tool"


async def test_an_answer_on_the_last_allowed_round_is_a_success() -> None:
    provider = ScriptedProvider([tool_turn(call("echo", "c1", text="x")), text_turn("done")])
    result, _ = await go(provider, limits=Limits(max_rounds=2))
    assert result.termination_reason is R.SUCCESS


async def test_max_rounds_zero_is_off() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", f"c{i}", text=str(i))) for i in range(12)] + [text_turn("ok")]
    )
    result, _ = await go(provider, limits=Limits(max_rounds=0))
    assert result.termination_reason is R.SUCCESS and result.rounds == 13


# --------------------------------------------------------------------------------------------
# token_budget (after each model call, before dispatch; and before the next call)


async def test_token_budget_stops_before_dispatch() -> None:
    tools = echo_tools()
    provider = LoopingProvider("echo", {"text": "x"}, per_turn=2, tokens=110)
    result, _ = await go(provider, tools, limits=Limits(max_tokens=100))
    assert result.termination_reason is R.TOKEN_BUDGET
    assert tools.calls == []  # 110 tokens against 100: no dispatch
    assert len(provider.requests) == 1
    assert tool_texts(result) == ["not executed: token budget exhausted"] * 2
    assert "110 tokens used (limit 100" in result.detail


async def test_token_budget_crossed_by_a_later_call_stops_before_its_dispatch() -> None:
    tools = echo_tools()
    provider = LoopingProvider("echo", {"text": "x"}, tokens=60)
    result, _ = await go(provider, tools, limits=Limits(max_tokens=100, loop_threshold=0))
    assert result.termination_reason is R.TOKEN_BUDGET
    assert len(provider.requests) == 2 and len(tools.calls) == 1


async def test_token_budget_usage_is_summed_not_overwritten() -> None:
    provider = LoopingProvider("echo", {"text": "x"}, tokens=40)
    result, _ = await go(provider, limits=Limits(max_tokens=100, loop_threshold=0))
    assert len(provider.requests) == 3  # 40, 80 (< 100), 120: stop
    assert result.usage.total_tokens == 120


async def test_an_answer_that_crosses_the_token_budget_is_still_a_success() -> None:
    provider = ScriptedProvider([text_turn("the answer", usage=usage(150, 10))])
    result, _ = await go(provider, limits=Limits(max_tokens=100))
    assert result.termination_reason is R.SUCCESS and result.answer == "the answer"


# --------------------------------------------------------------------------------------------
# tool_budget (before dispatching a turn: a turn runs whole or not at all)


async def test_three_calls_against_two_remaining_run_none() -> None:
    tools = echo_tools()
    provider = ScriptedProvider([tool_turn(*(call("echo", f"c{i}", text=str(i)) for i in range(3)))])
    result, _ = await go(provider, tools, limits=Limits(max_tool_calls=2))
    assert result.termination_reason is R.TOOL_BUDGET
    assert tools.calls == []
    assert tool_texts(result) == ["not executed: tool-call budget exhausted"] * 3
    assert [r.verdict for r in result.tool_calls] == ["skipped"] * 3


async def test_tool_budget_counts_calls_already_made() -> None:
    tools = echo_tools()
    provider = ScriptedProvider(
        [
            tool_turn(call("echo", "a", text="1"), call("echo", "b", text="2")),
            tool_turn(call("echo", "c", text="3"), call("echo", "d", text="4"), call("echo", "e", text="5")),
        ]
    )
    result, _ = await go(provider, tools, limits=Limits(max_tool_calls=4))
    assert result.termination_reason is R.TOOL_BUDGET
    assert len(tools.calls) == 2
    assert "3 calls asked for, 2 of 4 left" in result.detail


async def test_tool_budget_exactly_used_then_an_answer_is_success() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", "a", text="1"), call("echo", "b", text="2")), text_turn("ok")]
    )
    result, _ = await go(provider, limits=Limits(max_tool_calls=2))
    assert result.termination_reason is R.SUCCESS


# --------------------------------------------------------------------------------------------
# loop_detected (guard 6)


async def test_a_model_stuck_repeating_one_call() -> None:
    tools = echo_tools()
    provider = LoopingProvider("echo", {"text": "same"})
    result, _ = await go(provider, tools, limits=Limits(loop_threshold=3))
    assert result.termination_reason is R.LOOP_DETECTED
    assert len(provider.requests) == 3
    assert len(tools.calls) == 2  # the third occurrence does not run
    texts = tool_texts(result)
    assert texts[0] == "same"
    assert texts[1] == "same\n\n[NOTE: identical to a call in round 1]"
    assert texts[2].startswith("not executed: loop detected: echo called 3 times")
    assert "echo called 3 times with identical arguments (round 3)" in result.detail


async def test_loop_detection_is_not_only_for_consecutive_calls() -> None:
    a, b = {"text": "A"}, {"text": "B"}
    provider = ScriptedProvider(
        [tool_turn(call("echo", f"c{i}", **(a if i % 2 == 0 else b))) for i in range(5)]
    )
    result, _ = await go(provider, limits=Limits(loop_threshold=3))
    assert result.termination_reason is R.LOOP_DETECTED  # A, B, A, B, A trips on the fifth
    assert result.rounds == 5


async def test_loop_detection_uses_canonical_arguments() -> None:
    calls = [ToolCall(f"c{i}", "add", {"a": 1, "b": 2} if i % 2 else {"b": 2, "a": 1}) for i in range(3)]
    result, _ = await go(ScriptedProvider([tool_turn(c) for c in calls]), limits=Limits(loop_threshold=3))
    assert result.termination_reason is R.LOOP_DETECTED


async def test_loop_threshold_zero_is_off() -> None:
    provider = LoopingProvider("echo", {"text": "same"})
    result, _ = await go(provider, limits=Limits(loop_threshold=0, max_rounds=6))
    assert result.termination_reason is R.MAX_ROUNDS


# --------------------------------------------------------------------------------------------
# empty_response, llm_error, terminal_error


@pytest.mark.parametrize("turn", [text_turn(""), text_turn("  \n "), text_turn("", reasoning="thinking...")])
async def test_empty_response(turn: Turn) -> None:
    result, _ = await go(ScriptedProvider([turn]))
    assert result.termination_reason is R.EMPTY_RESPONSE
    assert "empty response" in result.detail and "finish_reason=stop" in result.detail
    assert result.transcript[-1] == Message.user("question")  # no empty assistant message stored


async def test_llm_error_after_a_tool_round_leaves_a_valid_transcript() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", "c1", text="x")), ProviderError("bad gateway", status=502)]
    )
    result, sink = await go(provider)
    assert result.termination_reason is R.LLM_ERROR
    assert "bad gateway" in result.detail and "round 2" in result.detail
    assert sink.of(ModelCallEnded)[-1].ok is False
    assert "bad gateway" in sink.of(ModelCallEnded)[-1].error


async def test_terminal_error() -> None:
    provider = ScriptedProvider([ProviderError("invalid api key", status=401, terminal=True)])
    result, _ = await go(provider)
    assert result.termination_reason is R.TERMINAL_ERROR
    assert "invalid api key" in result.detail


# --------------------------------------------------------------------------------------------
# context-length errors (guard 10): trim hard and retry once


def _long_run_provider(*then: object) -> ScriptedProvider:
    calls = [tool_turn(call("echo", f"c{i}", text=f"{i}" + "z" * 3000)) for i in range(3)]
    return ScriptedProvider([*calls, *then])  # type: ignore[list-item]


async def test_context_length_error_trims_hard_and_retries_once() -> None:
    provider = _long_run_provider(ContextLengthError("too long"), text_turn("fits now"))
    result, _ = await go(provider, limits=Limits(max_result_chars=0))
    assert result.termination_reason is R.SUCCESS and result.answer == "fits now"
    failed, retried = provider.requests[3], provider.requests[4]
    size = lambda req: sum(len(m.content) for m in req.messages)  # noqa: E731
    assert size(retried) <= size(failed) // 2 + 100
    assert_valid_transcript(retried.messages)
    # the stored transcript is complete; only the request was trimmed
    assert all("[result elided" not in m.content for m in result.transcript)


async def test_a_second_context_length_error_is_terminal() -> None:
    provider = _long_run_provider(ContextLengthError("too long"), ContextLengthError("still too long"))
    result, _ = await go(provider, limits=Limits(max_result_chars=0))
    assert result.termination_reason is R.TERMINAL_ERROR
    assert "does not fit" in result.detail and len(provider.requests) == 5


async def test_context_length_error_with_nothing_to_trim_does_not_retry() -> None:
    provider = ScriptedProvider([ContextLengthError("too long"), text_turn("never")])
    result, _ = await go(provider, query="q" * 1000)
    assert result.termination_reason is R.TERMINAL_ERROR and len(provider.requests) == 1


async def test_history_is_trimmed_before_each_model_call() -> None:
    history = [Message.user("old " * 500), Message.assistant("old answer " * 500)]
    provider = ScriptedProvider([text_turn("ok")])
    result, _ = await go(provider, history=history, limits=Limits(max_history_chars=1000))
    assert list(provider.requests[0].messages) == [Message.user("question")]
    assert result.transcript[:2] == tuple(history)  # the transcript keeps everything


# --------------------------------------------------------------------------------------------
# early stop (guard 9)


def _early_stop_case(reason: R) -> tuple[object, Limits]:
    same = {"text": "same"}
    if reason is R.MAX_ROUNDS:
        return LoopingProvider("echo", same), Limits(max_rounds=2, loop_threshold=0, early_stop=True)
    if reason is R.TOKEN_BUDGET:
        return LoopingProvider("echo", same, tokens=200), Limits(max_tokens=100, early_stop=True)
    if reason is R.TOOL_BUDGET:
        return LoopingProvider("echo", same, per_turn=3, distinct=True), Limits(
            max_tool_calls=2, early_stop=True
        )
    return LoopingProvider("echo", same), Limits(loop_threshold=2, early_stop=True)


class _ThenAnswer:
    """Wraps a looping provider: once it is asked without tools, it answers."""

    def __init__(self, inner: LoopingProvider, answer: str | BaseException = "best effort") -> None:
        self.inner, self.answer, self.synthesis = inner, answer, None

    async def complete(self, request, on_delta=None):  # type: ignore[no-untyped-def]
        if request.tools:
            return await self.inner.complete(request, on_delta)
        self.synthesis = request
        if isinstance(self.answer, BaseException):
            raise self.answer
        return text_turn(self.answer, usage=usage(5, 5))


@pytest.mark.parametrize("reason", [R.MAX_ROUNDS, R.TOKEN_BUDGET, R.TOOL_BUDGET, R.LOOP_DETECTED])
async def test_early_stop_synthesises_an_answer(reason: R) -> None:
    inner, limits = _early_stop_case(reason)
    provider = _ThenAnswer(inner)  # type: ignore[arg-type]
    result, _ = await go(provider, limits=limits)
    assert result.termination_reason is reason
    assert result.early_stopped and result.ok
    assert result.answer == "best effort"
    request = provider.synthesis
    assert request is not None and list(request.tools) == []
    assert request.messages[-1].role == "user" and "Do NOT call any tools" in request.messages[-1].content
    assert_valid_transcript(request.messages)  # every call answered before the synthesis
    assert result.transcript[-1] == Message.assistant("best effort")
    assert result.rounds == len(inner.requests)  # the synthesis is not a round
    # the detail says the run was stopped early, and by what
    assert result.detail.startswith("stopped early (") and not result.truncated
    assert {
        "max_rounds": "max rounds",
        "token_budget": "token budget",
        "tool_budget": "tool-call budget",
        "loop_detected": "loop detected",
    }[reason.value] in result.detail


async def test_early_stop_off_by_default() -> None:
    provider = _ThenAnswer(LoopingProvider("echo", {"text": "s"}))
    result, _ = await go(provider, limits=Limits(max_rounds=1))
    assert result.termination_reason is R.MAX_ROUNDS and not result.early_stopped
    assert provider.synthesis is None


@pytest.mark.parametrize(
    ("answer", "words"),
    [(ProviderError("overloaded", status=503), "synthesis failed"), ("", "synthesis gave no answer")],
)
async def test_failed_early_stop_keeps_the_trigger(answer: object, words: str) -> None:
    provider = _ThenAnswer(LoopingProvider("echo", {"text": "s"}), answer)  # type: ignore[arg-type]
    result, _ = await go(provider, limits=Limits(max_rounds=1, early_stop=True))
    assert result.termination_reason is R.MAX_ROUNDS and not result.early_stopped
    assert words in result.detail and result.answer == ""
    assert result.transcript[-1].role == "tool"


PARROTED = (  # what SmolLM2-135M answered to the early-stop instruction (A-earlystop-stream-no-usage.txt)
    "You are correct. My answer is: \n#[System: The run was stopped (loop detected: "
    "system__top_processes called 3 times with identical arguments)]"
)


@pytest.mark.parametrize(
    "answer",
    [
        PARROTED,
        "[SYSTEM: The run was stopped (reached max rounds (1)). Based on the work done so far, give "
        "your best final answer to the user now. Do NOT call any tools.]",
        "Based on the work done so far, give your best final answer to the user now.",
        "Stopped: reached max rounds (1), sorry.",
    ],
    ids=["parroted", "verbatim", "a-sentence-of-it", "its-detail"],
)
async def test_an_early_stop_answer_that_repeats_the_instruction_is_dropped(answer: str) -> None:
    provider = _ThenAnswer(LoopingProvider("echo", {"text": "s"}), answer)
    result, _ = await go(provider, limits=Limits(max_rounds=1, early_stop=True))
    assert result.termination_reason is R.MAX_ROUNDS and not result.early_stopped and result.answer == ""
    assert result.detail == "reached max rounds (1); early-stop synthesis repeated its instruction"
    assert all("SYSTEM" not in m.content.upper() for m in result.transcript if m.role == "assistant")


async def test_an_early_stop_answer_naming_the_stop_in_its_own_words_is_kept() -> None:
    answer = "The run was stopped before I could check more; echo said s."
    provider = _ThenAnswer(LoopingProvider("echo", {"text": "s"}), answer)
    result, _ = await go(provider, limits=Limits(max_rounds=1, early_stop=True))
    assert result.early_stopped and result.answer == answer


async def test_no_early_stop_for_model_errors() -> None:
    provider = _ThenAnswer(LoopingProvider("echo", {"text": "s"}))
    provider.inner = ScriptedProvider([ProviderError("boom")])  # type: ignore[assignment]
    result, _ = await go(provider, limits=Limits(early_stop=True))
    assert result.termination_reason is R.LLM_ERROR and provider.synthesis is None


# --------------------------------------------------------------------------------------------
# bugs propagate, and still end the run visibly; sinks cannot break a run


async def test_a_programming_error_propagates_after_run_ended() -> None:
    sink = RecordingSink()
    provider = ScriptedProvider([RuntimeError("bug in provider")])
    with pytest.raises(RuntimeError, match="bug in provider"):
        await run("q", provider=provider, tools=echo_tools(), events=sink)
    ended = sink.of(RunEnded)
    assert len(ended) == 1 and ended[0].termination_reason == "terminal_error"
    assert "internal error: RuntimeError: bug in provider" in ended[0].detail
    assert sink.types().count("model_call_started") == sink.types().count("model_call_ended")


async def test_a_programming_error_propagates_unwrapped_from_the_task_groups() -> None:
    sink = RecordingSink()
    provider = ScriptedProvider([RuntimeError("bug in provider")])
    with pytest.raises(RuntimeError, match="bug in provider"):  # not an ExceptionGroup
        await run("q", provider=provider, tools=echo_tools(), events=sink, cancel=anyio.Event())
    assert sink.of(RunEnded)[0].termination_reason == "terminal_error"


async def test_a_failing_sink_does_not_break_the_run(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def emit(self, event: object) -> None:
            raise ValueError("sink bug")

    good = RecordingSink()
    provider = ScriptedProvider([tool_turn(call("echo", "c", text="x")), text_turn("ok")])
    result = await run("q", provider=provider, tools=echo_tools(), events=[Broken(), good])
    assert result.termination_reason is R.SUCCESS
    assert good.types()[-1] == "run_ended"
    assert "sink bug" in caplog.text


async def test_result_carries_ids_and_structured_shape() -> None:
    result, sink = await go(ScriptedProvider([text_turn("ok")]), run_id="r-1", session_id="s-1")
    assert (result.run_id, result.session_id) == ("r-1", "s-1")
    assert all(e.session_id == "s-1" for e in sink.events)
    structured = result.to_structured()
    assert structured["termination_reason"] == "success" and structured["session_id"] == "s-1"
    assert result.elapsed_ms >= 0 and Usage() == result.usage
