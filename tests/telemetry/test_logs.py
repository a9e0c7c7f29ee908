"""The CLI's logs: text or one JSON object per line, extra fields kept, secrets masked."""

from __future__ import annotations

import io
import json
import logging
import secrets

import pytest

from mcp_agent._redact import remember_secrets
from mcp_agent.telemetry.logs import JsonFormatter, MaskedStream, TextFormatter, log_format


def _record(
    message: str, *args: object, exc: BaseException | None = None, **extra: object
) -> logging.LogRecord:
    record = logging.getLogger("mcp_agent.test").makeRecord(
        "mcp_agent.test",
        logging.WARNING,
        __file__,
        1,
        message,
        args,
        (type(exc), exc, exc.__traceback__) if exc else None,
        extra=extra or None,
    )
    return record


def _failure(text: str) -> BaseException:
    try:
        raise RuntimeError(text)
    except RuntimeError as exc:
        return exc


def test_json_is_one_object_per_line_with_the_fields_a_shipper_wants() -> None:
    line = JsonFormatter().format(
        _record(
            "run %s failed:\nline two \u2028 sep", "r1", exc=_failure("boom"), run_id="r1", session_id="s1"
        )
    )
    assert "\n" not in line and "\u2028" not in line
    entry = json.loads(line)
    assert entry["level"] == "WARNING" and entry["logger"] == "mcp_agent.test"
    assert entry["message"] == "run r1 failed:\nline two \u2028 sep"
    assert entry["run_id"] == "r1" and entry["session_id"] == "s1"
    assert entry["exception"].startswith("Traceback") and "RuntimeError: boom" in entry["exception"]
    assert entry["time"].endswith("Z") and entry["time"][10] == "T" and len(entry["time"]) == 24


def test_json_keeps_odd_extra_values_readable() -> None:
    entry = json.loads(JsonFormatter().format(_record("x", data={"n": 1, "t": (1, 2)}, obj=object())))
    assert entry["data"] == {"n": 1, "t": [1, 2]}
    assert entry["obj"].startswith("<object object")


def test_text_is_the_old_format_with_extras_after_the_message() -> None:
    assert TextFormatter().format(_record("hello %s", "you")) == "WARNING mcp_agent.test: hello you"
    text = TextFormatter().format(_record("hello", exc=_failure("boom"), run_id="r1"))
    first, rest = text.split("\n", 1)
    assert first == "WARNING mcp_agent.test: hello [run_id=r1]"
    assert "RuntimeError: boom" in rest


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_secrets_are_masked_in_message_exception_and_extras(formatter: logging.Formatter) -> None:
    value = "known-" + secrets.token_hex(8)
    remember_secrets([value])
    out = formatter.format(
        _record(
            "key %s and Bearer abcdefghijkl0123",
            value,
            exc=_failure(f"echo {value}"),
            header=f"Bearer {value}",
        )
    )
    assert value not in out and "abcdefghijkl0123" not in out
    assert "***" in out


def test_the_format_comes_from_the_option_then_the_variable() -> None:
    assert log_format(None, {}) == "text"
    assert log_format(None, {"MCP_AGENT_LOG_FORMAT": "JSON "}) == "json"
    assert log_format("text", {"MCP_AGENT_LOG_FORMAT": "json"}) == "text"
    with pytest.raises(ValueError, match="MCP_AGENT_LOG_FORMAT='xml': use one of text, json"):
        log_format(None, {"MCP_AGENT_LOG_FORMAT": "xml"})


def test_masked_stream_masks_what_is_printed() -> None:
    value = "printed-" + secrets.token_hex(8)
    remember_secrets([value])
    out = io.StringIO()
    stream = MaskedStream(out)
    print(f"the answer is {value}", file=stream)  # type: ignore[arg-type]
    assert out.getvalue() == "the answer is ***\n"


def test_masked_stream_turns_printed_lines_into_json_objects() -> None:
    value = "printed-" + secrets.token_hex(8)
    remember_secrets([value])
    out = io.StringIO()
    stream = MaskedStream(out, json_lines=True)
    stream.write("round 1/10: calling ")
    stream.write(f"x with {value}\nsecond line\n")
    stream.write("Allow? [y/N] ")
    assert len(out.getvalue().splitlines()) == 2  # the question waits for its end, or a flush
    stream.flush()
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["message"] for e in entries] == [
        "round 1/10: calling x with ***",
        "second line",
        "Allow? [y/N] ",
    ]
    assert {e["logger"] for e in entries} == {"mcp_agent.cli.main"} and {e["level"] for e in entries} == {
        "INFO"
    }


async def test_log_fields_and_the_run_id_reach_every_record_of_the_run() -> None:
    import anyio

    from mcp_agent.events import RunStarted
    from mcp_agent.telemetry.logs import ContextFields, RunLogFields, log_fields

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFields())
    logger = logging.getLogger("mcp_agent.test.fields")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with log_fields(session_id="s1", caller="alice", nothing=None):
            RunLogFields().emit(RunStarted(run_id="r1", query="q"))
            logger.warning("in the run")

            async def tool_call() -> None:
                logger.warning("in a task", extra={"caller": "given"})

            async with anyio.create_task_group() as tg:  # a tool call's task
                tg.start_soon(tool_call)
        logger.warning("after the run")
    finally:
        logger.removeHandler(handler)
    inside, task, after = (json.loads(line) for line in out.getvalue().splitlines())
    assert (inside["run_id"], inside["session_id"], inside["caller"]) == ("r1", "s1", "alice")
    assert "nothing" not in inside
    assert (task["run_id"], task["caller"]) == ("r1", "given")  # an extra= wins
    assert not {"run_id", "session_id", "caller"} & set(after)
