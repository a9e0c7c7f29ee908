"""Reading recordings (``loop/_record_format.py``) as the untrusted input they are.

A table of malformed recordings through the real CLI (each exits 2 with one line naming the file
and the line, never a traceback), what a recording may not make replay do (read a file, hang on
a FIFO, read /dev/zero), the byte and line bounds, and a hypothesis fuzz of mutated recordings
(each replays or is refused with a ``RecordingError``; nothing else escapes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_agent.config import AgentConfig
from mcp_agent.loop._record_format import MAX_DEPTH, read_recording
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.recording import RecordingError, replay
from mcp_agent.messages import ToolCall
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn

from ._helpers import echo_tools

ROOT = Path(__file__).resolve().parents[2]
Lines = list[dict[str, Any]]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_agent", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,  # a replay that hangs (a FIFO) fails here instead of holding the suite
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def record_run(path: Path, echo_text: str = "hi") -> None:
    """A recorded run with history (a second query of a session), three tool calls (one fails)
    and an answer: a recording of every kind of line."""
    provider = ScriptedProvider(
        [
            text_turn("first answer"),
            tool_turn(
                ToolCall("c1", "echo", {"text": echo_text}),
                ToolCall("c2", "add", {"a": 2, "b": 3}),
                ToolCall("c3", "fail", {}),
            ),
            text_turn("done: 5"),
        ]
    )
    config = AgentConfig.model_validate({"systemPrompt": "You are careful.", "limits": {"maxRounds": 4}})
    agent = Agent(provider, echo_tools(), config, record=path)
    await agent.query("hello", session_id="s1")
    result = await agent.query("say hi and add", session_id="s1")
    assert result.answer == "done: 5"


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Lines:
    path = tmp_path_factory.mktemp("seed") / "run.jsonl"
    anyio.run(record_run, path)
    assert anyio.run(replay, path).identical
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path: Path, lines: Lines) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def first(lines: Lines, kind: str, test: Callable[[dict[str, Any]], bool] = lambda _: True) -> dict[str, Any]:
    return next(line for line in lines if line["kind"] == kind and test(line))


def edit(change: Callable[[Lines], Any]) -> Callable[[Lines], Lines]:
    def edited(lines: Lines) -> Lines:
        copy: Lines = json.loads(json.dumps(lines))
        change(copy)
        return copy

    return edited


def calls_tools(line: dict[str, Any]) -> bool:
    return bool(line.get("turn", {}).get("tool_calls"))


# (the recording from the seed's lines, or its bytes; the line at fault, -1 for the last, None
# to be found by reading; what the message says)
MALFORMED: dict[str, tuple[Callable[[Lines], Lines | bytes], int | None, str]] = {
    "truncated JSON": (  # line -1: the last one
        lambda lines: "".join(json.dumps(line) + "\n" for line in lines)[:-40].encode(),
        -1,
        "not JSON",
    ),
    "missing header": (lambda lines: lines[1:], 1, "the first line is not a recording header"),
    "a newer format": (edit(lambda lines: lines[0].update(format=99)), 1, "upgrade mcp_agent"),
    "format 0": (edit(lambda lines: lines[0].update(format=0)), 1, "format 0 is not a recording format"),
    "format as text": (edit(lambda lines: lines[0].update(format="1")), 1, "header.format: Input should be"),
    "format true": (edit(lambda lines: lines[0].update(format=True)), 1, "header.format: Input should be"),
    "tools not a list": (
        edit(lambda lines: lines[0].update(tools={"a": 1})),
        1,
        "header.tools: Input should be",
    ),
    "a tool without name": (edit(lambda lines: lines[0]["tools"][0].pop("name")), 1, "header.tools[0].name"),
    "history of numbers": (edit(lambda lines: lines[0].update(history=[5])), 1, "header.history[0]"),
    "a bad history role": (
        edit(lambda lines: lines[0]["history"][1].update(role="root")),
        1,
        "header.history[1].role",
    ),
    "server as a list": (edit(lambda lines: lines[0].update(server=[1])), 1, "header.server"),
    "limits as a number": (
        edit(lambda lines: lines[0]["settings"].update(limits=5)),
        1,
        "settings.limits: Input should be",
    ),
    "systemPromptFile": (
        edit(lambda lines: lines[0]["settings"].update(systemPromptFile="/etc/passwd")),
        1,
        "settings.systemPromptFile: a recording holds the system prompt's text",
    ),
    "servers in the settings": (
        edit(lambda lines: lines[0]["settings"].update(mcpServers={"x": {"command": "sh"}})),
        1,
        "settings.mcpServers: not a recorded setting",
    ),
    "an llm endpoint in the settings": (
        edit(lambda lines: lines[0]["settings"]["llm"].update(endpoint="http://127.0.0.1:9/v1")),
        1,
        "settings.llm.endpoint: not a recorded setting",
    ),
    "turn content a number": (
        edit(lambda lines: first(lines, "model", calls_tools)["turn"].update(content=5)),
        None,
        "model.turn.content: Input should be a valid string",
    ),
    "a tool call without id": (
        edit(lambda lines: first(lines, "model", calls_tools)["turn"]["tool_calls"][0].pop("id")),
        None,
        "model.turn.tool_calls[0].id: Field required",
    ),
    "request messages not objects": (
        edit(lambda lines: first(lines, "model")["request"].update(messages=["hi"])),
        None,
        "model.request.messages[0]",
    ),
    "a model line without turn or error": (
        edit(lambda lines: first(lines, "model").pop("turn")),
        None,
        "a model line without turn or error",
    ),
    "an error of the wrong shape": (
        edit(lambda lines: first(lines, "model").update(turn=None, error={"status": "500"})),
        None,
        "model.error.status",
    ),
    "after_model as text": (
        edit(lambda lines: first(lines, "tool").update(after_model="1")),
        None,
        "tool.after_model: Input should be a valid integer",
    ),
    "a tool line without result": (
        edit(lambda lines: first(lines, "tool").pop("result")),
        None,
        "tool.result",
    ),
    "an event without type": (
        edit(lambda lines: first(lines, "event")["event"].pop("type")),
        None,
        "event.event.type",
    ),
    "an end without reason": (
        edit(lambda lines: first(lines, "end").pop("termination_reason")),
        None,
        "end.termination_reason",
    ),
    "a second header": (lambda lines: [*lines, lines[0]], None, "a second header"),
    "not an object": (lambda lines: b"[1, 2]\n", 1, 'a JSON object with a "kind"'),
    "binary": (lambda lines: b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)) * 4, 1, "not UTF-8 text"),
    "a huge integer": (lambda lines: b'{"kind": "header", "format": ' + b"9" * 5000 + b"}\n", 1, "not JSON"),
    "deep nesting": (
        lambda lines: (
            json.dumps(lines[0])
            + "\n"
            + '{"kind": "x", "v": '
            + "[" * (MAX_DEPTH + 5)
            + "]" * (MAX_DEPTH + 5)
            + "}\n"
        ).encode(),
        2,
        f"JSON nested deeper than {MAX_DEPTH} levels",
    ),
    "very deep nesting": (
        lambda lines: ('{"kind": "header", "v": ' + "[" * 100_000 + "]" * 100_000 + "}\n").encode(),
        1,
        "JSON nested deeper",
    ),
    "empty": (lambda lines: b"", None, "empty: not a recording"),
    "blank lines only": (lambda lines: b"\n \n\n", None, "empty: not a recording"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_recording_exits_2_with_one_line_naming_the_file_and_line(
    case: str, seed: Lines, tmp_path: Path
) -> None:
    make, line, says = MALFORMED[case]
    made = make(seed)
    path = tmp_path / "bad.jsonl"
    if isinstance(made, bytes):
        path.write_bytes(made)
    else:
        write(path, made)
    if line == -1:
        line = len(seed)
    if line is None and case not in ("empty", "blank lines only"):
        with pytest.raises(RecordingError) as caught:
            read_recording(path)
        line = caught.value.line

    done = cli("replay", str(path))

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert done.stderr.startswith(f"mcp-agent: replay: {where}"), done.stderr
    assert says in done.stderr, done.stderr


def test_a_recording_never_makes_replay_read_a_file(seed: Lines, tmp_path: Path) -> None:
    """``systemPromptFile`` in a recording's settings once printed that file in the diff."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE-4b1d")
    lines = edit(lambda lines: lines[0]["settings"].update(systemPromptFile=str(secret)))(seed)
    lines[0]["settings"].pop("systemPrompt")

    done = cli("replay", str(write(tmp_path / "leak.jsonl", lines)))

    assert done.returncode == 2
    assert "TOP-SECRET" not in done.stdout + done.stderr
    assert "settings.systemPromptFile" in done.stderr


def test_a_line_over_the_line_bound_is_refused_before_it_is_parsed(seed: Lines, tmp_path: Path) -> None:
    """The real bound (32 MiB), through the CLI: the line is read no further than that."""
    path = tmp_path / "huge.jsonl"
    with path.open("w") as file:
        file.write(json.dumps(seed[0]) + "\n")
        file.write('{"kind": "x", "pad": "' + "x" * (33 * 1024 * 1024) + '"}\n')
    done = cli("replay", str(path))
    assert done.returncode == 2
    assert done.stderr == f"mcp-agent: replay: {path}:2: a line longer than 32 MiB: not a recording line\n"


def test_the_byte_bounds_hold_for_any_file(seed: Lines, tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", seed)
    size = path.stat().st_size
    assert len(read_recording(path, max_bytes=size).models) == 2
    with pytest.raises(RecordingError, match=r"run.jsonl: \d+ bytes is more than a recording may be"):
        read_recording(path, max_bytes=size - 1)
    longest = max(len(json.dumps(line)) for line in seed)
    with pytest.raises(RecordingError, match=r"run.jsonl:\d: a line longer than \d+ bytes"):
        read_recording(path, max_line_bytes=longest - 1)


def test_a_file_that_grows_while_it_is_read_is_still_bounded(tmp_path: Path) -> None:
    """``/proc`` files say size 0 and hold more: the bound is on what is read, not on st_size."""
    environ = Path("/proc/self/environ")
    if not environ.is_file():
        pytest.skip("needs Linux's /proc")
    with pytest.raises(RecordingError, match=r"more than a recording may be|a line longer than"):
        read_recording(environ, max_bytes=8, max_line_bytes=8)


def test_lines_end_at_newlines_only(tmp_path: Path) -> None:
    """A tool result holding U+2028 (which the recorder writes as is) once split its line in two:
    the recording could not be replayed."""
    path = tmp_path / "run.jsonl"
    anyio.run(record_run, path, "one\u2028two\x85three")
    assert "\u2028" in path.read_text()
    report = anyio.run(replay, path)
    assert report.identical, report.describe()


# ------------------------------------------------------------------------------------- fuzz

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield from paths(inner, (*path, key))


def put(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value[path[0]] = put(value[path[0]], path[1:], new)
    return value


@FUZZ
@given(st.data())
def test_a_mutated_recording_replays_or_is_refused_never_crashes(
    seed: Lines, tmp_path: Path, data: st.DataObject
) -> None:
    """Each mutation replaces a value anywhere (any type), removes a key, or splices bytes into
    the text: replay either reports or raises RecordingError, nothing else."""
    lines: Lines = json.loads(json.dumps(seed))
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(lines) - 1))
        path = data.draw(st.sampled_from(list(paths(lines[index]))))
        if path and isinstance(path[-1], str) and data.draw(st.booleans()):
            parent = lines[index]
            for key in path[:-1]:
                parent = parent[key]
            del parent[path[-1]]
        else:
            lines[index] = put(lines[index], path, data.draw(JSON_VALUES))
    text = "".join(json.dumps(line, ensure_ascii=data.draw(st.booleans())) + "\n" for line in lines).encode()
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + data.draw(st.binary(max_size=6)) + text[at + data.draw(st.integers(0, 3)) :]
    recording = tmp_path / "fuzz.jsonl"
    recording.write_bytes(text)
    try:
        anyio.run(replay, recording)
    except RecordingError as exc:
        assert "\n" not in str(exc)
