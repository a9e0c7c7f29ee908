"""The pure Chat Completions wire: request bodies and history, chunk folding with every quirk."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from mcp_agent.exceptions import ContextLengthError, ProviderResponseError
from mcp_agent.messages import Delta, Message, ToolCall, ToolSpec, Turn, Usage
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.openai._wire import (
    NOT_EXECUTED,
    ChunkAccumulator,
    build_chat_body,
    finish_turn,
    parse_usage,
    repair_transcript,
    text_tool_prompt,
    to_openai_messages,
    to_openai_tools,
)
from mcp_agent.providers.servers.endpoints import Capabilities, capabilities_for
from mcp_agent.providers.turns import estimate_usage, new_call_id
from tests.fakes.openai_shapes import (
    Call,
    completion,
    groq_stream,
    llamacpp_completion,
    llamacpp_stream,
    lmstudio_completion,
    lmstudio_stream,
    ollama_completion,
    ollama_stream,
    openai_stream,
    vllm_stream,
)

GENERATED = re.compile(r"^call_[0-9a-f]{24}$")

WEATHER = ToolSpec(
    name="weather__get",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolSpec(name="time__now", description="The time.", parameters={"type": "object", "properties": {}})
TOOLS = (WEATHER, TIME)
REQUEST = ModelRequest(messages=[Message.system("sys"), Message.user("weather in Paris?")], tools=TOOLS)


def fold(
    chunks: Sequence[Any], *, style: str = "auto", request: ModelRequest = REQUEST
) -> tuple[Turn, list[Delta]]:
    acc = ChunkAccumulator()
    deltas: list[Delta] = []
    for chunk in chunks:
        deltas.extend(acc.feed(chunk))
    return finish_turn(acc, request, style=style), deltas  # type: ignore[arg-type]


def whole(body: dict[str, Any], *, style: str = "auto") -> Turn:
    acc = ChunkAccumulator()
    acc.feed_completion(body)
    return finish_turn(acc, REQUEST, style=style)  # type: ignore[arg-type]


def chunk(
    *tool_calls: dict[str, Any], content: Any = None, finish: str | None = None, **delta: Any
) -> dict[str, Any]:
    d: dict[str, Any] = dict(delta)
    if tool_calls:
        d["tool_calls"] = list(tool_calls)
    if content is not None:
        d["content"] = content
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def tc(
    index: int | None = None,
    id: str | None = None,
    name: str | None = None,
    args: Any = None,
    type: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if index is not None:
        out["index"] = index
    if id is not None:
        out["id"] = id
    if type is not None:
        out["type"] = type
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    out["function"] = fn
    return out


def summary(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in turn.tool_calls]


# --------------------------------------------------------------------------------------------
# outgoing: tools


def test_tools_shape_and_description_cap() -> None:
    long = ToolSpec(
        name="a__b",
        description="x" * 2000,
        parameters={"type": "object"},
        variants={"openai": {"type": "object", "properties": {}}},
    )
    openai = to_openai_tools([long], capabilities_for("openai"))[0]
    assert openai["type"] == "function"
    assert openai["function"]["name"] == "a__b"
    assert len(openai["function"]["description"]) == 1024 and openai["function"]["description"].endswith("…")
    assert openai["function"]["parameters"] == {"type": "object", "properties": {}}  # the openai variant
    assert len(to_openai_tools([long], capabilities_for("ollama"))[0]["function"]["description"]) == 2000
    bare = to_openai_tools([ToolSpec(name="t")], Capabilities())[0]["function"]
    assert "description" not in bare and bare["parameters"] == {"type": "object", "properties": {}}


# --------------------------------------------------------------------------------------------
# outgoing: history

CALL = ToolCall("call_abc", "weather__get", {"city": "Paris"})
EMPTY = ToolCall("7", "time__now", {})
BROKEN = ToolCall(
    "call_bad", "weather__get", {}, error="arguments are not valid JSON", raw_arguments='{"city": '
)


def _history(*extra: Message) -> list[Message]:
    return [
        Message.system("sys"),
        Message.user("q"),
        Message.assistant("", [CALL, EMPTY, BROKEN], reasoning="I should look."),
        Message.tool(CALL, "sunny"),
        Message.tool(EMPTY, "12:00"),
        Message.tool(BROKEN, "error: bad arguments", is_error=True),
        *extra,
    ]


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("openai", None),
        ("groq", None),
        ("vllm", None),
        ("ollama", ""),
        ("llamacpp", ""),
        ("lmstudio", ""),
        ("unknown", ""),
    ],
)
def test_assistant_calls_content_null_or_empty_per_server(kind: str, content: str | None) -> None:
    out = to_openai_messages(_history(), capabilities_for(kind))  # type: ignore[arg-type]
    assert out[2]["content"] == content


def test_history_arguments_ids_names_and_results() -> None:
    out = to_openai_messages(_history(), capabilities_for("ollama"))
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "tool", "tool"]
    calls = out[2]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_abc", "7", "call_bad"]  # exactly as they came
    assert [c["function"]["name"] for c in calls] == ["weather__get", "time__now", "weather__get"]
    assert [c["function"]["arguments"] for c in calls] == [
        '{"city": "Paris"}',
        "{}",
        "{}",
    ]  # strings, never raw text
    assert all(c["type"] == "function" for c in calls)
    for c in calls:
        assert isinstance(json.loads(c["function"]["arguments"]), dict)
    assert out[3] == {"role": "tool", "tool_call_id": "call_abc", "content": "sunny", "name": "weather__get"}
    assert "reasoning_content" not in out[2] and "reasoning" not in out[2]
    openai = to_openai_messages(_history(), capabilities_for("openai"))
    assert "name" not in openai[3]


def test_reasoning_sent_back_only_when_asked() -> None:
    caps = Capabilities(send_reasoning=True)
    out = to_openai_messages(_history(Message.assistant("done", reasoning="thought")), caps)
    assert out[2]["reasoning_content"] == "I should look."
    assert out[-1] == {"role": "assistant", "content": "done", "reasoning_content": "thought"}


def test_assistant_text_beside_calls_is_kept_and_whitespace_dropped() -> None:
    caps = capabilities_for("openai")
    assert (
        to_openai_messages([Message.assistant("Let me check.", [CALL]), Message.tool(CALL, "x")], caps)[0][
            "content"
        ]
        == "Let me check."
    )
    assert (
        to_openai_messages([Message.assistant("\n\n", [CALL]), Message.tool(CALL, "x")], caps)[0]["content"]
        is None
    )


def test_repair_synthesises_missing_results_in_call_order() -> None:
    messages = [Message.user("q"), Message.assistant("", [CALL, EMPTY]), Message.tool(EMPTY, "12:00")]
    fixed = repair_transcript(messages)
    assert [(m.role, m.tool_call_id, m.content) for m in fixed[2:]] == [
        ("tool", "call_abc", NOT_EXECUTED),
        ("tool", "7", "12:00"),
    ]
    assert fixed[2].is_error


def test_repair_drops_orphans_and_duplicates_and_moves_results_up() -> None:
    messages = [
        Message.tool(CALL, "orphan before any call"),
        Message.user("q"),
        Message.assistant("", [CALL]),
        Message.user("interjection"),
        Message.tool(CALL, "first"),
        Message.tool(CALL, "duplicate"),
        Message.tool(EMPTY, "answers nothing here"),
    ]
    fixed = repair_transcript(messages)
    assert [(m.role, m.content) for m in fixed] == [
        ("user", "q"),
        ("assistant", ""),
        ("tool", "first"),
        ("user", "interjection"),
    ]


def test_repair_keeps_ids_reused_across_turns_apart() -> None:
    first, second = ToolCall("call_0", "time__now"), ToolCall("call_0", "time__now")
    messages = [
        Message.user("q"),
        Message.assistant("", [first]),
        Message.tool(first, "one"),
        Message.assistant("", [second]),
        Message.tool(second, "two"),
        Message.assistant("done"),
    ]
    assert [m.content for m in repair_transcript(messages)] == ["q", "", "one", "", "two", "done"]


def test_a_valid_transcript_is_unchanged() -> None:
    assert repair_transcript(_history()) == _history()


# --------------------------------------------------------------------------------------------
# outgoing: the body


@pytest.mark.parametrize(
    ("kind", "tool_choice", "parallel", "max_field", "stream_options"),
    [
        ("ollama", False, False, "max_tokens", True),
        ("lmstudio", True, False, "max_tokens", True),
        ("llamacpp", True, True, "max_tokens", True),
        ("vllm", False, False, "max_tokens", True),
        ("lemonade", False, False, "max_tokens", False),
        ("openai", True, False, "max_completion_tokens", True),
        ("groq", True, False, "max_tokens", True),
        ("unknown", False, False, "max_tokens", False),
    ],
)
def test_body_per_server(
    kind: str, tool_choice: bool, parallel: bool, max_field: str, stream_options: bool
) -> None:
    body = build_chat_body(
        REQUEST,
        model="m",
        caps=capabilities_for(kind),
        stream=True,  # type: ignore[arg-type]
        max_output_tokens=256,
    )
    assert ("tool_choice" in body) is tool_choice
    if tool_choice:
        assert body["tool_choice"] == "auto"
    assert body.get("parallel_tool_calls") is (True if parallel else None)
    assert body[max_field] == 256
    assert not ({"max_tokens", "max_completion_tokens"} - {max_field}) & set(body)
    assert ("stream_options" in body) is stream_options
    assert body["stream"] is True and body["model"] == "m"
    assert [t["function"]["name"] for t in body["tools"]] == ["weather__get", "time__now"]


def test_body_temperature_and_caps_only_when_set() -> None:
    caps = capabilities_for("openai")
    plain = build_chat_body(ModelRequest(messages=[Message.user("hi")]), model="m", caps=caps, stream=False)
    assert plain == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    configured = build_chat_body(
        ModelRequest(messages=[Message.user("hi")]),
        model="m",
        caps=caps,
        stream=False,
        temperature=0.2,
        max_output_tokens=100,
    )
    assert (configured["temperature"], configured["max_completion_tokens"]) == (0.2, 100)
    request = ModelRequest(messages=[Message.user("hi")], temperature=0.0, max_output_tokens=5)
    overridden = build_chat_body(
        request, model="m", caps=caps, stream=False, temperature=0.7, max_output_tokens=100
    )
    assert (overridden["temperature"], overridden["max_completion_tokens"]) == (0.0, 5)


def test_text_style_on_the_wire() -> None:
    request = ModelRequest(messages=_history(Message.user("and now?")), tools=TOOLS)
    body = build_chat_body(request, model="m", caps=capabilities_for("ollama"), stream=False, text_tools=True)
    assert "tools" not in body and "tool_choice" not in body
    messages = body["messages"]
    assert messages[0]["content"].startswith("sys\n\n# Tools")
    assert '"name": "weather__get"' in messages[0]["content"] and "<tool_call>" in messages[0]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "user"]
    assert "tool_calls" not in messages[2]
    assert messages[2]["content"].count("<tool_call>") == 3
    assert '{"name": "weather__get", "arguments": {"city": "Paris"}}' in messages[2]["content"]
    assert messages[3]["content"].count("<tool_response>") == 3  # the three results, merged
    assert '"content": "sunny"' in messages[3]["content"]
    assert messages[4] == {"role": "user", "content": "and now?"}
    no_system = build_chat_body(
        ModelRequest(messages=[Message.user("q")], tools=TOOLS),
        model="m",
        caps=Capabilities(),
        stream=False,
        text_tools=True,
    )
    assert no_system["messages"][0] == {"role": "system", "content": text_tool_prompt(TOOLS)}


def test_text_style_prompt_is_read_back_by_the_text_parser() -> None:
    """What the prompt asks for is what the fallback parses."""
    turn, _ = fold(
        [
            chunk(
                content='<tool_call>\n{"name": "weather__get", "arguments": {"city": "Oslo"}}\n</tool_call>',
                finish="stop",
            )
        ],
        style="text",
    )
    assert summary(turn) == [("weather__get", {"city": "Oslo"})]


# --------------------------------------------------------------------------------------------
# incoming: every quirk of llm-wire §4.5 and §10.2


def test_reference_stream_single_call_and_text() -> None:
    turn, deltas = fold(
        openai_stream(
            content="Checking.", calls=[Call("weather__get", {"city": "Paris"}, "call_1")], usage=(50, 10)
        )
    )
    assert summary(turn) == [("weather__get", {"city": "Paris"})]
    assert turn.tool_calls[0].id == "call_1" and turn.tool_calls[0].raw_arguments is None
    assert turn.content == "Checking." and turn.finish_reason == "tool_calls"
    assert turn.usage == Usage(50, 10, 60) and turn.request_id == "chatcmpl-abc123"
    assert "".join(d.text for d in deltas if d.kind == "text") == "Checking."
    call_deltas = [d for d in deltas if d.kind == "tool_call"]
    assert call_deltas[0] == Delta("tool_call", "", index=0, name="weather__get")
    assert "".join(d.text for d in call_deltas) == '{"city": "Paris"}'


def test_parallel_calls_interleaved_by_index() -> None:
    calls = [
        Call("weather__get", {"city": "Paris"}),
        Call("weather__get", {"city": "Oslo"}),
        Call("time__now", {}),
    ]
    turn, deltas = fold(openai_stream(calls=calls, interleave=True, size=3))
    assert summary(turn) == [
        ("weather__get", {"city": "Paris"}),
        ("weather__get", {"city": "Oslo"}),
        ("time__now", {}),
    ]
    assert len({c.id for c in turn.tool_calls}) == 3
    assert {d.index for d in deltas if d.kind == "tool_call"} == {0, 1, 2}


def test_arguments_as_an_object_replace_not_concatenate() -> None:
    turn, _ = fold(
        [
            chunk(tc(0, "a", "weather__get", {"city": "Par"})),
            chunk(tc(0, None, None, {"city": "Paris"}), finish="tool_calls"),
        ]
    )
    assert summary(turn) == [("weather__get", {"city": "Paris"})]
    assert turn.tool_calls[0].raw_arguments is None


def test_empty_arguments_are_an_empty_object() -> None:
    turn, _ = fold([chunk(tc(0, "a", "time__now", "")), chunk(finish="tool_calls")])
    assert summary(turn) == [("time__now", {})] and turn.tool_calls[0].error is None
    turn, _ = fold([chunk(tc(0, "a", "time__now")), chunk(finish="tool_calls")])  # no arguments key at all
    assert summary(turn) == [("time__now", {})]


@pytest.mark.parametrize("missing", [None, ""])
def test_missing_or_empty_ids_are_generated(missing: str | None) -> None:
    turn, _ = fold(
        [
            chunk(tc(0, missing, "time__now", "{}"), tc(1, missing, "weather__get", '{"city":"X"}')),
            chunk(finish="tool_calls"),
        ]
    )
    assert [bool(GENERATED.match(c.id)) for c in turn.tool_calls] == [True, True]
    assert turn.tool_calls[0].id != turn.tool_calls[1].id


def test_duplicate_ids_in_one_turn_are_replaced() -> None:
    turn, _ = fold(
        [
            chunk(tc(0, "call_0", "time__now", "{}")),
            chunk(tc(1, "call_0", "weather__get", '{"city":"X"}')),
            chunk(finish="tool_calls"),
        ]
    )
    assert turn.tool_calls[0].id == "call_0" and GENERATED.match(turn.tool_calls[1].id)


def test_id_repeated_on_every_chunk_is_one_call() -> None:
    turn, _ = fold(
        [
            chunk(tc(0, "call_x", "weather__get", '{"ci')),
            chunk(tc(0, "call_x", None, 'ty": "Paris"}')),
            chunk(finish="tool_calls"),
        ]
    )
    assert summary(turn) == [("weather__get", {"city": "Paris"})] and turn.tool_calls[0].id == "call_x"


def test_id_repeated_with_index_missing_is_one_call() -> None:
    turn, _ = fold(
        [chunk(tc(None, "call_x", "weather__get", '{"ci')), chunk(tc(None, "call_x", "", 'ty": "Rome"}'))]
    )
    assert summary(turn) == [("weather__get", {"city": "Rome"})]


def test_index_missing_continuations_go_to_the_last_call() -> None:
    turn, _ = fold(
        [
            chunk(tc(None, "call_1", "weather__get", '{"city"')),
            chunk(tc(None, None, None, ': "Oslo"}')),
            chunk(tc(None, "call_2", "time__now", "")),
            chunk(tc(None, None, None, "{}")),
        ]
    )
    assert summary(turn) == [("weather__get", {"city": "Oslo"}), ("time__now", {})]


def test_index_missing_whole_calls_in_one_chunk() -> None:
    turn, _ = fold(
        ollama_stream(
            calls=[Call("weather__get", {"city": "A"}), Call("weather__get", {"city": "B"})], index="missing"
        )
    )
    assert summary(turn) == [("weather__get", {"city": "A"}), ("weather__get", {"city": "B"})]


def test_index_missing_and_no_ids_whole_calls_in_one_chunk() -> None:
    turn, _ = fold(
        [chunk(tc(None, None, "weather__get", '{"city": "A"}'), tc(None, None, "time__now", "{}"))]
    )
    assert summary(turn) == [("weather__get", {"city": "A"}), ("time__now", {})]


def test_index_always_zero_with_different_ids_are_separate_calls() -> None:
    turn, _ = fold(
        ollama_stream(
            calls=[
                Call("weather__get", {"city": "A"}),
                Call("weather__get", {"city": "B"}),
                Call("time__now", {}),
            ],
            index="zero",
        )
    )
    assert summary(turn) == [
        ("weather__get", {"city": "A"}),
        ("weather__get", {"city": "B"}),
        ("time__now", {}),
    ]
    assert len({c.id for c in turn.tool_calls}) == 3


def test_index_always_zero_without_ids_whole_calls_in_separate_chunks() -> None:
    turn, _ = fold(
        [
            chunk(tc(0, None, "weather__get", '{"city": "A"}')),
            chunk(tc(0, None, "weather__get", '{"city": "B"}')),
            chunk(finish="tool_calls"),
        ]
    )
    assert summary(turn) == [("weather__get", {"city": "A"}), ("weather__get", {"city": "B"})]


def test_a_repeated_name_while_arguments_are_incomplete_is_the_same_call() -> None:
    turn, _ = fold(
        [
            chunk(tc(0, None, "weather__get", '{"city": ')),
            chunk(tc(0, None, "weather__get", '"A"}')),
            chunk(tc(0, None, "weather__get", "")),
        ]
    )
    assert summary(turn) == [("weather__get", {"city": "A"})]


def test_empty_name_on_continuation_deltas_keeps_the_name() -> None:
    turn, deltas = fold(lmstudio_stream(calls=[Call("weather__get", {"city": "Paris"})]))
    assert summary(turn) == [("weather__get", {"city": "Paris"})]
    assert turn.tool_calls[0].id.isdigit() and len(turn.tool_calls[0].id) == 9
    assert all(d.name == "weather__get" for d in deltas if d.kind == "tool_call")


def test_lmstudio_call_without_function_is_dropped() -> None:
    turn, _ = fold([chunk({"index": 0, "id": "", "type": "function"}), chunk(finish="stop")])
    assert turn.tool_calls == ()


def test_finish_reason_stop_with_calls_still_calls() -> None:
    turn, _ = fold(ollama_stream(calls=[Call("time__now", {})], finish="stop"))
    assert summary(turn) == [("time__now", {})] and turn.finish_reason == "stop"


def test_finish_reason_tool_calls_without_calls_is_text() -> None:
    turn, _ = fold([chunk(content="Nothing to call."), chunk(finish="tool_calls")])
    assert turn.tool_calls == () and turn.content == "Nothing to call." and turn.finish_reason == "tool_calls"


@pytest.mark.parametrize("content", [None, "", "\n\n", "  "])
def test_content_null_empty_or_whitespace_beside_calls(content: str | None) -> None:
    body = completion(content=content, calls=[Call("time__now", {})])
    turn = whole(body)
    assert turn.content == "" and summary(turn) == [("time__now", {})]
    turn, _ = fold([chunk(tc(0, "a", "time__now", "{}"), content=content), chunk(finish="tool_calls")])
    assert turn.content == ""


def test_empty_tool_calls_list_is_no_calls() -> None:
    turn = whole(lmstudio_completion(content="Hello."))
    assert turn.tool_calls == () and turn.content == "Hello."
    turn, _ = fold([chunk(content="Hi", tool_calls=[]), chunk(finish="stop")])
    assert turn.tool_calls == () and turn.content == "Hi"


def test_calls_in_the_final_chunk_with_finish_reason() -> None:
    turn, _ = fold([chunk(content="ok "), chunk(tc(0, "c", "time__now", "{}"), finish="tool_calls")])
    assert summary(turn) == [("time__now", {})] and turn.content == "ok"


def test_foreign_call_types_are_ignored() -> None:
    custom = {
        "index": 0,
        "id": "c1",
        "type": "custom",
        "custom": {"name": "x", "input": "y"},
        "function": {"name": "x"},
    }
    turn, _ = fold(
        [chunk(custom), chunk(tc(1, "c2", "time__now", "{}", type="function")), chunk(finish="tool_calls")]
    )
    assert summary(turn) == [("time__now", {})]


def test_vllm_first_delta_without_arguments_key() -> None:
    turn, _ = fold(
        vllm_stream(calls=[Call("weather__get", {"city": "Paris"}), Call("time__now", {})], interleave=True)
    )
    assert summary(turn) == [("weather__get", {"city": "Paris"}), ("time__now", {})]
    assert all(c.id.startswith("chatcmpl-tool-") for c in turn.tool_calls)


def test_llamacpp_object_arguments_and_timings() -> None:
    turn, _ = fold(
        llamacpp_stream(calls=[Call("weather__get", {"city": "Paris"})], object_args=True, timings=(12, 34))
    )
    assert summary(turn) == [("weather__get", {"city": "Paris"})]
    assert turn.usage == Usage(12, 34, 46) and not turn.usage.estimated
    assert len(turn.tool_calls[0].id) == 32


def test_bad_arguments_keep_raw_text_and_error() -> None:
    turn, _ = fold([chunk(tc(0, "a", "weather__get", '{"city": "Par')), chunk(finish="tool_calls")])
    call = turn.tool_calls[0]
    assert call.raw_arguments == '{"city": "Par'
    assert call.arguments == {"city": "Par"} or call.error is not None  # repaired, or reported
    turn, _ = fold([chunk(tc(0, "a", "weather__get", "not json at all")), chunk(finish="tool_calls")])
    assert turn.tool_calls[0].error and turn.tool_calls[0].arguments == {}
    assert turn.tool_calls[0].raw_arguments == "not json at all"


def test_double_encoded_arguments() -> None:
    turn, _ = fold(
        [chunk(tc(0, "a", "weather__get", json.dumps('{"city": "Paris"}'))), chunk(finish="tool_calls")]
    )
    assert summary(turn) == [("weather__get", {"city": "Paris"})]


def test_legacy_function_call() -> None:
    turn, _ = fold(
        [
            chunk(function_call={"name": "time__now", "arguments": ""}),
            chunk(function_call={"arguments": "{}"}, finish="function_call"),
        ]
    )
    assert summary(turn) == [("time__now", {})]
    body = completion(content=None)
    body["choices"][0]["message"]["function_call"] = {"name": "time__now", "arguments": "{}"}
    assert summary(whole(body)) == [("time__now", {})]


@pytest.mark.parametrize("legacy_first", [False, True], ids=["calls-first", "legacy-first"])
def test_legacy_function_call_beside_tool_calls_is_not_a_call(legacy_first: bool) -> None:
    """llama-cpp-python sends ``function_call`` beside ``tool_calls``, with another name."""
    calls = chunk(tc(0, "call_1", "weather__get", '{"city": "Paris"}'))
    legacy = chunk(function_call={"name": "time__now:", "arguments": '{"city": "Paris"}'})
    turn, deltas = fold([legacy, calls] if legacy_first else [calls, legacy])
    assert summary(turn) == [("weather__get", {"city": "Paris"})]
    names = {d.name for d in deltas if d.kind == "tool_call" and d.name}
    assert names == ({"time__now:", "weather__get"} if legacy_first else {"weather__get"})
    body = completion(calls=[Call("weather__get", {"city": "Paris"})])
    body["choices"][0]["message"]["function_call"] = {"name": "time__now:", "arguments": "{}"}
    assert summary(whole(body)) == [("weather__get", {"city": "Paris"})]


def test_other_choices_are_ignored() -> None:
    turn, _ = fold(
        [
            {
                "choices": [
                    {"index": 1, "delta": {"content": "other"}},
                    {"index": 0, "delta": {"content": "mine"}},
                ]
            },
            chunk(finish="stop"),
        ]
    )
    assert turn.content == "mine"


# --------------------------------------------------------------------------------------------
# reasoning


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "thinking"])
def test_reasoning_from_each_field(field: str) -> None:
    turn, deltas = fold(openai_stream(content="Answer.", reasoning="Let me think.", reasoning_field=field))
    assert turn.reasoning == "Let me think." and turn.content == "Answer."
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "Let me think."
    assert whole(completion(content="A.", reasoning="R.", reasoning_field=field)).reasoning == "R."


def test_reasoning_fields_in_order_first_present_wins() -> None:
    turn, _ = fold(
        [
            chunk(reasoning_content="one", reasoning="one"),
            chunk(reasoning="two", thinking="x"),
            chunk(content="a", finish="stop"),
        ]
    )
    assert turn.reasoning == "onetwo"


@pytest.mark.parametrize(
    ("content", "reasoning", "answer"),
    [
        ("<think>\nplan\n</think>\n\nThe answer.", "plan", "The answer."),
        ("<think>\n\n</think>\n\nThe answer.", "", "The answer."),
        (
            "plan without an opening tag\n</think>\n\nThe answer.",
            "plan without an opening tag",
            "The answer.",
        ),
        ("<think>never closed", "never closed", ""),
    ],
)
def test_reasoning_from_think_blocks(content: str, reasoning: str, answer: str) -> None:
    for size in (1, 4, 1000):
        pieces = [content[i : i + size] for i in range(0, len(content), size)]
        turn, _ = fold([*[chunk(content=p) for p in pieces], chunk(finish="stop")])
        assert (turn.reasoning, turn.content) == (reasoning, answer)
    assert (whole(completion(content=content)).reasoning, whole(completion(content=content)).content) == (
        reasoning,
        answer,
    )


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 100])
def test_think_tags_split_across_chunks_stream_as_reasoning_deltas(size: int) -> None:
    content = "<think>inner <b> thought</think>Visible <thin text"
    pieces = [content[i : i + size] for i in range(0, len(content), size)]
    _, deltas = fold([chunk(content=p) for p in pieces])
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "inner <b> thought"
    shown = "".join(d.text for d in deltas if d.kind == "text")
    assert "<think" not in shown and "thought" not in shown and shown.startswith("Visible ")


def test_field_and_think_reasoning_are_joined() -> None:
    turn, _ = fold(
        [chunk(reasoning="from field"), chunk(content="<think>from tags</think>Answer"), chunk(finish="stop")]
    )
    assert turn.reasoning == "from field\n\nfrom tags" and turn.content == "Answer"


# --------------------------------------------------------------------------------------------
# calls written as text


HERMES = 'I will check.\n<tool_call>\n{"name": "weather__get", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_text_fallback_when_no_native_calls() -> None:
    turn, _ = fold([chunk(content=HERMES), chunk(finish="stop")])
    assert summary(turn) == [("weather__get", {"city": "Paris"})]
    assert turn.content == "I will check." and GENERATED.match(turn.tool_calls[0].id)


def test_no_text_fallback_in_native_style() -> None:
    turn, _ = fold([chunk(content=HERMES), chunk(finish="stop")], style="native")
    assert turn.tool_calls == () and "<tool_call>" in turn.content


def test_no_text_fallback_when_native_calls_exist_or_no_tools() -> None:
    turn, _ = fold([chunk(tc(0, "n", "time__now", "{}"), content=HERMES), chunk(finish="tool_calls")])
    assert summary(turn) == [("time__now", {})]
    no_tools = ModelRequest(messages=REQUEST.messages)
    turn, _ = fold([chunk(content=HERMES), chunk(finish="stop")], request=no_tools)
    assert turn.tool_calls == ()


def test_text_calls_only_for_offered_tools_and_not_inside_reasoning() -> None:
    unknown = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    turn, _ = fold([chunk(content=unknown), chunk(finish="stop")])
    assert turn.tool_calls == () and "rm_rf" in turn.content
    inside = "<think>" + HERMES + "</think>The answer is 4."
    turn, _ = fold([chunk(content=inside), chunk(finish="stop")])
    assert turn.tool_calls == () and turn.content == "The answer is 4."


# --------------------------------------------------------------------------------------------
# usage


@pytest.mark.parametrize(
    ("chunk_", "expected"),
    [
        ({"usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}, Usage(5, 2, 7)),
        ({"usage": {"prompt_tokens": 5, "completion_tokens": 2}}, Usage(5, 2, 7)),
        ({"usage": {"input_tokens": 5, "output_tokens": 2}}, Usage(5, 2, 7)),
        (
            {
                "usage": None,
                "x_groq": {
                    "id": "r",
                    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
                },
            },
            Usage(9, 1, 10),
        ),
        ({"timings": {"prompt_n": 10, "predicted_n": 4, "cache_n": 3}}, Usage(13, 4, 17)),
        (
            {
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                "timings": {"prompt_n": 99, "predicted_n": 99},
            },
            Usage(1, 1, 2),
        ),
        ({"usage": None}, None),
        ({"usage": {}}, None),
        ({"timings": {"prompt_ms": 3.0}}, None),
        ({}, None),
    ],
)
def test_parse_usage(chunk_: dict[str, Any], expected: Usage | None) -> None:
    assert parse_usage(chunk_) == expected


def test_usage_from_each_place_in_a_stream() -> None:
    assert fold(groq_stream(content="hi", usage=(20, 10)))[0].usage == Usage(20, 10, 30)
    assert fold(ollama_stream(content="hi", usage=(7, 3)))[0].usage == Usage(7, 3, 10)
    # llama.cpp sends timings; a usage chunk, when there is one, wins over them
    assert fold(llamacpp_stream(content="hi", timings=(5, 5), usage=(6, 6)))[0].usage == Usage(6, 6, 12)
    assert whole(llamacpp_completion(content="hi")).usage == Usage(35, 12, 47)


def test_usage_estimated_when_absent() -> None:
    turn, _ = fold(openai_stream(content="x" * 40))
    assert turn.usage.estimated and turn.usage.completion_tokens == 10
    assert turn.usage.prompt_tokens > 0 and turn.usage.total_tokens == turn.usage.prompt_tokens + 10
    request = ModelRequest(messages=[Message.user("y" * 400)])
    assert estimate_usage(request, 0) == Usage(100, 0, 100, estimated=True)


# --------------------------------------------------------------------------------------------
# whole completions, errors, bookkeeping


def test_completions_of_each_server() -> None:
    calls = [Call("weather__get", {"city": "Paris"}), Call("time__now", {})]
    expected = [("weather__get", {"city": "Paris"}), ("time__now", {})]
    assert summary(whole(completion(calls=calls))) == expected
    assert summary(whole(ollama_completion(calls=calls, index_zero=True))) == expected
    assert summary(whole(llamacpp_completion(calls=calls, object_args=True))) == expected
    assert summary(whole(lmstudio_completion(calls=calls))) == expected
    turn = whole(ollama_completion(content="x", reasoning="why"))
    assert (turn.content, turn.reasoning, turn.finish_reason) == ("x", "why", "stop")


def test_completion_without_choices_is_a_retryable_response_error() -> None:
    with pytest.raises(ProviderResponseError) as info:
        ChunkAccumulator().feed_completion({"id": "x", "choices": []})
    assert info.value.retryable


def test_error_chunk_raises_the_classified_error() -> None:
    acc = ChunkAccumulator()
    acc.feed(chunk(content="partial"))
    with pytest.raises(ContextLengthError):
        acc.feed({"error": {"message": "This model's maximum context length is 10 tokens."}})
    with pytest.raises(ProviderResponseError) as info:
        ChunkAccumulator().feed({"error": {"message": "boom", "type": "server_error"}})
    assert info.value.retryable


def test_finished_and_has_output() -> None:
    acc = ChunkAccumulator()
    assert not acc.finished and not acc.has_output
    acc.feed({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    assert not acc.has_output
    acc.feed(chunk(content="a"))
    assert acc.has_output and not acc.finished
    acc.feed(chunk(finish="length"))
    assert acc.finished and acc.chunks == 3


def test_new_call_id() -> None:
    ids = {new_call_id() for _ in range(100)}
    assert len(ids) == 100 and all(GENERATED.match(i) for i in ids)


def test_text_held_back_as_a_possible_tag_is_flushed_at_the_end() -> None:
    acc = ChunkAccumulator()
    deltas = acc.feed(chunk(content="a < b and x <thi"))
    assert "".join(d.text for d in deltas) == "a < b and x "
    assert acc.flush() == [Delta("text", "<thi")]
    assert acc.flush() == []
    acc = ChunkAccumulator()
    acc.feed(chunk(content="<think>deep </thi"))
    assert acc.flush() == [Delta("reasoning", "</thi")]
