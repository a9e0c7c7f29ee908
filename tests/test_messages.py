"""The core values round-trip through dicts and JSON, and Usage adds up."""

from __future__ import annotations

import json

import pytest

from mcp_agent.events import RecordingSink, RunEnded, ToolCallEnded
from mcp_agent.messages import (
    Image,
    Message,
    ToolCall,
    ToolSpec,
    Turn,
    Usage,
    canonical_json,
    parse_arguments,
)

CALL = ToolCall("call_1", "ports__check_port", {"port": 8000})


@pytest.mark.parametrize(
    "message",
    [
        Message.system("be brief"),
        Message.user("is 8000 free?"),
        Message.assistant("", [CALL], reasoning="thinking"),
        Message.tool(CALL, "free", is_error=False),
        Message.tool(CALL, "boom", is_error=True),
        Message.tool(
            CALL, "[image: image/png, 3 B]", images=[Image("image/png", "AAAA"), Image("image/gif", "R0lG")]
        ),
        Message(role="assistant", content="x", meta={"thoughtSignature": "abc"}),
        Message.assistant("", [ToolCall("c", "t", {}, error="bad json", raw_arguments="{", meta={"k": 1})]),
    ],
)
def test_message_round_trip(message):
    data = json.loads(json.dumps(message.to_dict()))
    assert Message.from_dict(data) == message


def test_tool_message_answers_its_call():
    message = Message.tool(CALL, "ok")
    assert message.tool_call_id == "call_1" and message.name == "ports__check_port"


def test_turn_round_trip_and_to_message():
    turn = Turn(
        content="hi", reasoning="r", tool_calls=(CALL,), finish_reason="stop", usage=Usage(1, 2, 3), model="m"
    )
    assert Turn.from_dict(json.loads(json.dumps(turn.to_dict()))) == turn
    assert Turn.from_dict({}).model is None
    message = turn.to_message()
    assert message.role == "assistant" and message.tool_calls == (CALL,) and message.reasoning == "r"


def test_image_size_is_its_decoded_size():
    assert [Image("image/png", data).size for data in ("", "AAAA", "AAA=", "AA==")] == [0, 3, 2, 1]


def test_usage_adds_and_keeps_estimated():
    total = Usage(10, 5, 15) + Usage(20, 4, 24, estimated=True)
    assert total == Usage(30, 9, 39, estimated=True)
    assert Usage.from_dict(total.to_dict()) == total


def test_tool_spec_schema_for_falls_back_to_parameters():
    spec = ToolSpec(
        "t", parameters={"type": "object", "properties": {}}, variants={"gemini": {"type": "object"}}
    )
    assert spec.schema_for("gemini") == {"type": "object"}
    assert spec.schema_for("openai") == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("raw", "arguments", "has_error"),
    [
        (None, {}, False),
        ("", {}, False),
        ("   ", {}, False),
        ("null", {}, False),
        ('{"port": 8000}', {"port": 8000}, False),
        ({"port": 8000}, {"port": 8000}, False),
        ('{"port": 8000', {"port": 8000}, False),  # repaired
        ("{'port': 8000}", {"port": 8000}, False),  # single quotes repaired
        ('"{\\"port\\": 8000}"', {"port": 8000}, False),  # double-encoded
        ("[1, 2]", {}, True),
        ("42", {}, True),
        ("not json at all", {}, True),
    ],
)
def test_parse_arguments(raw, arguments, has_error):
    parsed, error = parse_arguments(raw)
    assert parsed == arguments
    assert (error is not None) == has_error


def test_canonical_json_is_order_and_space_independent():
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == canonical_json(
        json.loads('{ "a" : [1, {"c":3, "d":2}], "b":1 }')
    )
    assert canonical_json({"s": "é"}) == '{"s":"é"}'


def test_events_serialise_with_their_type():
    sink = RecordingSink()
    sink.emit(ToolCallEnded(run_id="r", round=1, call_id="c", name="n", ok=False, error="x"))
    sink.emit(RunEnded(run_id="r", termination_reason="success"))
    assert sink.types() == ["tool_call_ended", "run_ended"]
    data = json.loads(json.dumps(sink.events[0].to_dict()))
    assert data["type"] == "tool_call_ended" and data["ok"] is False
    assert sink.of(RunEnded)[0].termination_reason == "success"


def test_describe_gives_progress_lines():
    from mcp_agent.events import RoundStarted, ToolCallStarted, describe

    assert describe(ToolCallStarted(run_id="r", round=2, call_id="c", name="ports__check_port"), 10) == (
        "round 2/10: calling ports__check_port"
    )
    assert describe(RoundStarted(run_id="r", round=1, max_rounds=0)) == "round 1: asking the model"
    assert describe(
        ToolCallEnded(run_id="r", round=1, call_id="c", name="t", verdict="denied", error="no")
    ) == ("round 1: t not run (denied): no")


def test_changes_for_keeps_normalisation_and_one_dialect():
    spec = ToolSpec(
        "t",
        changes=(
            "removed $schema",
            "gemini: dropped default at properties.n",
            "openai_strict: made x nullable",
        ),
    )
    assert spec.changes_for("openai") == ("removed $schema",)
    assert spec.changes_for("gemini") == ("removed $schema", "gemini: dropped default at properties.n")
    assert spec.changes_for("openai_strict") == ("removed $schema", "openai_strict: made x nullable")


def test_parse_arguments_does_not_stall_on_deep_garbage():
    import time

    start = time.perf_counter()
    arguments, error = parse_arguments("{" * 8000)
    assert arguments == {} and error is not None
    assert time.perf_counter() - start < 5  # generous: json_repair alone takes seconds here
