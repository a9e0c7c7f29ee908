"""Gemini generateContent: the pure wire module, then the HTTP provider against the fake model server."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from mcp_agent.messages import Delta, Message, ToolCall, ToolSpec, Usage
from mcp_agent.providers import _gemini_wire as wire
from mcp_agent.providers.base import ModelRequest

SIG = "Cq4BAVSoXO7+/=="  # signatures are opaque base64: replayed byte for byte


def _ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"call_{next(counter)}"


def _spec(name: str = "ports__check", **variants: Any) -> ToolSpec:
    return ToolSpec(
        name=name,
        description="Check a port.",
        parameters={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"port": {"type": "integer"}},
            "required": ["port"],
            "additionalProperties": False,
        },
        variants=variants,
    )


# --------------------------------------------------------------------------------------------
# outgoing


def test_tools_default_to_parameters_json_schema_minus_dollar_schema() -> None:
    (tools,) = wire.to_gemini_tools([_spec()])
    (decl,) = tools["functionDeclarations"]
    assert decl["name"] == "ports__check" and decl["description"] == "Check a port."
    assert decl["parametersJsonSchema"] == {
        "type": "object",
        "properties": {"port": {"type": "integer"}},
        "required": ["port"],
        "additionalProperties": False,
    }
    assert "parameters" not in decl


def test_tools_json_schema_prefers_openai_variant() -> None:
    (tools,) = wire.to_gemini_tools([_spec(openai={"type": "object", "properties": {"q": {"type": "string"}}})])
    assert tools["functionDeclarations"][0]["parametersJsonSchema"]["properties"] == {"q": {"type": "string"}}


def test_tools_parameters_subset_uses_gemini_variant() -> None:
    subset = {"type": "object", "properties": {"port": {"type": "integer", "nullable": True}}}
    (tools,) = wire.to_gemini_tools([_spec(gemini=subset), _spec("t__empty", gemini={"type": "object", "properties": {}})],
                                    json_schema=False)
    first, empty = tools["functionDeclarations"]
    assert first["parameters"] == subset and "parametersJsonSchema" not in first
    assert "parameters" not in empty  # Gemini rejects an OBJECT with no properties


def test_no_tools_means_no_tools_key() -> None:
    assert wire.to_gemini_tools([]) == []
    assert "tools" not in wire.build_request(ModelRequest([Message.user("q")]))


def test_system_instruction_and_roles() -> None:
    system, contents = wire.to_gemini_contents(
        [Message.system("be brief"), Message.user("hi"), Message.assistant("hello"), Message.user("again")]
    )
    assert system == {"parts": [{"text": "be brief"}]}
    assert contents == [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"text": "hello"}]},
        {"role": "user", "parts": [{"text": "again"}]},
    ]


def test_function_responses_by_name_in_call_order_in_one_user_turn() -> None:
    a = ToolCall("call_x1", "ports__check", {"port": 1})
    b = ToolCall("call_x2", "time__now", {})
    history = [
        Message.user("q"),
        Message.assistant("", [a, b]),
        Message.tool(b, "noon"),
        Message(role="tool", content="refused", tool_call_id="call_x1", is_error=True),  # no name: taken from the call
        Message.user("thanks"),
    ]
    _, contents = wire.to_gemini_contents(history)
    assert contents[1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "ports__check", "args": {"port": 1}}},
                  {"functionCall": {"name": "time__now", "args": {}}}],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "ports__check", "response": {"error": "refused"}}},
            {"functionResponse": {"name": "time__now", "response": {"output": "noon"}}},
            {"text": "thanks"},
        ],
    }
    assert len(contents) == 3


def test_missing_result_is_answered_and_stray_result_becomes_text() -> None:
    a = ToolCall("call_1", "a__b", {})
    stray = Message(role="tool", content="zzz", tool_call_id="call_other", name="x__y")
    _, contents = wire.to_gemini_contents([Message.user("q"), Message.assistant("", [a]), stray])
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "a__b", "response": {"error": "not executed: no result was recorded"}}},
        {"text": "[result of x__y]\nzzz"},
    ]


def test_native_call_id_is_echoed() -> None:
    a = ToolCall("call_1", "a__b", {}, meta={wire.NATIVE_ID: "g-7"})
    _, contents = wire.to_gemini_contents([Message.user("q"), Message.assistant("", [a]), Message.tool(a, "r")])
    assert contents[1]["parts"][0]["functionCall"]["id"] == "g-7"
    assert contents[2]["parts"][0]["functionResponse"]["id"] == "g-7"


def test_signature_replayed_from_raw_parts_exactly() -> None:
    raw = [
        {"text": "Let me check.", "thoughtSignature": "TEXTSIG"},
        {"functionCall": {"name": "a__b", "args": {"x": 1}}, "thoughtSignature": SIG},
        {"functionCall": {"name": "c__d", "args": {}}},
    ]
    a, b = ToolCall("call_1", "a__b", {"x": 1}), ToolCall("call_2", "c__d", {})
    message = Message(role="assistant", content="Let me check.", tool_calls=(a, b), meta={wire.PARTS_META: raw})
    _, contents = wire.to_gemini_contents([Message.user("q"), message, Message.tool(a, "1"), Message.tool(b, "2")])
    assert contents[1]["parts"] == raw


def test_rebuilt_when_message_no_longer_matches_raw_parts() -> None:
    raw = [{"functionCall": {"name": "a__b", "args": {}}, "thoughtSignature": SIG}]
    a = ToolCall("call_1", "a__b", {}, meta={wire.SIGNATURE: SIG})
    extra = ToolCall("call_2", "c__d", {"k": "v"})
    message = Message(role="assistant", content="hm", tool_calls=(a, extra), meta={wire.PARTS_META: raw})
    _, contents = wire.to_gemini_contents([Message.user("q"), message, Message.tool(a, "1"), Message.tool(extra, "2")])
    assert contents[1]["parts"] == [
        {"text": "hm"},
        {"functionCall": {"name": "a__b", "args": {}}, "thoughtSignature": SIG},
        {"functionCall": {"name": "c__d", "args": {"k": "v"}}},
    ]


def test_build_request_generation_config() -> None:
    body = wire.build_request(
        ModelRequest([Message.user("q")], tools=[_spec()], temperature=0.3, max_output_tokens=50), include_thoughts=True
    )
    assert body["generationConfig"] == {"temperature": 0.3, "maxOutputTokens": 50, "thinkingConfig": {"includeThoughts": True}}
    assert "systemInstruction" not in body and body["tools"][0]["functionDeclarations"][0]["name"] == "ports__check"
    assert "generationConfig" not in wire.build_request(ModelRequest([Message.user("q")]))


# --------------------------------------------------------------------------------------------
# incoming


@pytest.mark.parametrize(
    ("reason", "has_calls", "expected"),
    [
        ("STOP", False, "stop"),
        ("STOP", True, "tool_calls"),
        (None, True, "tool_calls"),
        (None, False, None),
        ("MAX_TOKENS", False, "length"),
        ("MAX_TOKENS", True, "length"),
        ("SAFETY", False, "content_filter"),
        ("RECITATION", False, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, "malformed_function_call"),
        ("UNEXPECTED_TOOL_CALL", False, "unexpected_tool_call"),
    ],
)
def test_map_finish_reason(reason: str | None, has_calls: bool, expected: str | None) -> None:
    assert wire.map_finish_reason(reason, has_calls=has_calls) == expected


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (None, Usage()),
        ({"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}, Usage(10, 5, 15)),
        ({"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 7, "totalTokenCount": 22}, Usage(10, 12, 22)),
        ({"promptTokenCount": 4, "thoughtsTokenCount": 2}, Usage(4, 2, 6)),
    ],
)
def test_parse_usage(meta: dict[str, Any] | None, expected: Usage) -> None:
    assert wire.parse_usage(meta) == expected


def _response(parts: list[dict[str, Any]], finish: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **extra}


def test_parse_response_parallel_calls_get_unique_ids_and_keep_signatures() -> None:
    ids = _ids()
    body = _response(
        [
            {"text": "thinking out loud", "thought": True},
            {"functionCall": {"name": "a__b", "args": {"x": 1}}, "thoughtSignature": SIG},
            {"functionCall": {"name": "a__b", "args": {"x": 2}}},
        ],
        usageMetadata={"promptTokenCount": 9, "candidatesTokenCount": 3, "thoughtsTokenCount": 4},
        responseId="resp-1",
    )
    turn = wire.parse_response(body, new_id=ids)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("call_1", "a__b", {"x": 1}), ("call_2", "a__b", {"x": 2})]
    assert turn.tool_calls[0].meta == {wire.SIGNATURE: SIG} and turn.tool_calls[1].meta == {}
    assert turn.content == "" and turn.reasoning == "thinking out loud"
    assert turn.finish_reason == "tool_calls" and turn.usage == Usage(9, 7, 16) and turn.request_id == "resp-1"
    assert turn.meta[wire.PARTS_META] == body["candidates"][0]["content"]["parts"][1:]  # thought dropped
    # a second round gets fresh ids, never repeating the first round's
    again = wire.parse_response(body, new_id=ids)
    assert [c.id for c in again.tool_calls] == ["call_3", "call_4"]


def test_default_ids_are_unique() -> None:
    body = _response([{"functionCall": {"name": "a__b", "args": {}}}] * 3)
    ids = [c.id for _ in range(5) for c in wire.parse_response(body).tool_calls]
    assert len(set(ids)) == 15 and all(i.startswith("call_") for i in ids)


def test_native_function_call_id_kept_in_meta() -> None:
    turn = wire.parse_response(_response([{"functionCall": {"id": "g1", "name": "a__b"}}]), new_id=_ids())
    assert turn.tool_calls[0].meta == {wire.NATIVE_ID: "g1"} and turn.tool_calls[0].arguments == {}


def test_thought_text_never_in_answer() -> None:
    turn = wire.parse_response(_response([{"text": "secret plan", "thought": True}, {"text": "The answer."}]))
    assert turn.content == "The answer." and turn.reasoning == "secret plan"


def test_parse_response_round_trips_through_history() -> None:
    body = _response([{"text": "ok "}, {"functionCall": {"name": "a__b", "args": {"q": "é"}}, "thoughtSignature": SIG}])
    turn = wire.parse_response(body, new_id=_ids())
    history = [Message.user("q"), turn.to_message(), Message.tool(turn.tool_calls[0], "r")]
    _, contents = wire.to_gemini_contents(history)
    assert contents[1]["parts"] == body["candidates"][0]["content"]["parts"]


def test_stream_chunks_join_text_and_keep_late_signature() -> None:
    state = wire.ResponseState(_ids())
    deltas: list[Delta] = []
    for chunk in [
        _response([{"text": "pla", "thought": True}], finish=None),
        _response([{"text": "n", "thought": True}], finish=None),
        _response([{"text": "Hel"}], finish=None),
        [_response([{"text": "lo"}], finish=None)],  # an array wrapper is accepted too
        _response([{"text": "", "thoughtSignature": SIG}], usageMetadata={"promptTokenCount": 2, "candidatesTokenCount": 1}),
    ]:
        deltas += state.feed(chunk)
    turn = state.turn()
    assert turn.content == "Hello" and turn.reasoning == "plan" and turn.finish_reason == "stop"
    assert turn.meta[wire.PARTS_META] == [{"text": "Hello", "thoughtSignature": SIG}]
    assert [d.kind for d in deltas] == ["reasoning", "reasoning", "text", "text"]
    assert turn.usage == Usage(2, 1, 3)


def test_stream_text_after_signature_starts_a_new_part() -> None:
    state = wire.ResponseState(_ids())
    state.feed(_response([{"text": "a", "thoughtSignature": "S1"}], finish=None))
    state.feed(_response([{"text": "b"}], finish=None))
    state.feed(_response([{"thoughtSignature": "S2"}]))
    assert state.turn().meta[wire.PARTS_META] == [{"text": "a", "thoughtSignature": "S1"}, {"text": "b"},
                                                   {"thoughtSignature": "S2"}]


def test_stream_call_delta() -> None:
    state = wire.ResponseState(_ids())
    deltas = state.feed(_response([{"functionCall": {"name": "a__b", "args": {"x": 1}}}]))
    assert deltas == [Delta("tool_call", '{"x": 1}', index=0, name="a__b")]


@pytest.mark.parametrize(
    "chunk",
    [
        {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}},
        [{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}],
    ],
)
def test_error_chunks(chunk: Any) -> None:
    state = wire.ResponseState()
    assert state.feed(chunk) == []
    assert state.error is not None and state.error["code"] == 429
    assert wire.find_error(chunk) == state.error


def test_find_error_none() -> None:
    assert wire.find_error({"candidates": []}) is None and wire.find_error("x") is None


def test_blocked_prompt_is_noted() -> None:
    state = wire.ResponseState()
    state.feed({"promptFeedback": {"blockReason": "SAFETY"}})
    assert state.block_reason == "SAFETY" and state.turn().content == ""


def test_malformed_chunks_are_ignored() -> None:
    state = wire.ResponseState()
    for chunk in ["x", {"candidates": "no"}, {"candidates": [1]}, {"candidates": [{"content": {"parts": [3]}}]}]:
        assert state.feed(chunk) == []
    assert state.turn().meta == {}
