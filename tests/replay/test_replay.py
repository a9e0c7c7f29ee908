"""Record (``loop/recording.py``) and replay (``mcp_agent.replay``): real runs through the fake
model server and real fixture tool servers, replayed with no server running."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_agent.loop.recording import Recorder, RecordingError, read_recording
from mcp_agent.replay import replay
from tests.fakes.model_server import FakeModelServer, Reply, running_model_server
from tests.fakes.openai_shapes import Call, openai_stream

ROOT = Path(__file__).resolve().parents[2]
ECHO = str(ROOT / "tests" / "servers" / "echo.py")
ENV_ECHO = str(ROOT / "tests" / "servers" / "env_echo.py")
FAKE_KEY = "sk-test-RecordingMustNeverHoldThis0123456789"
HEADER_SECRET = "hdr-secret-value-7f3a9c2e5b"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_agent", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=90,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def config(folder: Path, model: FakeModelServer | None, name: str = "agent.json", **extra: Any) -> Path:
    data: dict[str, Any] = {
        "llm": {
            "endpoint": model.base_url if model else "http://127.0.0.1:9/v1",
            "model": "m",
            "maxRetries": 0,
            "apiKey": FAKE_KEY,
            "headers": {"X-Team-Token": "${TEAM_TOKEN}"},
        },
        "systemPrompt": "You are a careful agent.",
        "mcpServers": {"echo": {"command": sys.executable, "args": [ECHO]}},
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = folder / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(autouse=True)
def _team_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_TOKEN", HEADER_SECRET)


def two_rounds(model: FakeModelServer) -> None:
    """Round 1 calls echo and add in one turn; round 2 answers."""
    model.enqueue(
        Reply.sse(
            openai_stream(
                calls=[Call("echo__echo", {"text": "hi there"}), Call("echo__add", {"a": 2, "b": 3})],
                usage=(10, 5),
            )
        ),
        Reply.sse(openai_stream(content="The echo said hi there; 2 + 3 = 5.", usage=(20, 4))),
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """One recorded run (``query --record``): the recording and its config; the servers are gone after."""
    folder = tmp_path_factory.mktemp("recorded")
    with running_model_server() as model:
        two_rounds(model)
        path = config(folder, model)
        done = cli(
            "query",
            "say hi and add 2 and 3",
            "--record",
            str(folder / "run.jsonl"),
            "--config",
            str(path),
            env={"TEAM_TOKEN": HEADER_SECRET},
        )
        assert done.returncode == 0, done.stderr
        assert "2 + 3 = 5" in done.stdout
    yield folder / "run.jsonl", path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_recording_holds_header_model_and_tool_lines(recorded):
    path, _ = recorded
    kinds = [line["kind"] for line in lines(path)]
    assert kinds[0] == "header" and kinds[-1] == "end"
    assert kinds.count("model") == 2 and kinds.count("tool") == 2
    header = lines(path)[0]
    assert header["format"] == 1 and header["query"] == "say hi and add 2 and 3"
    assert header["config_digest"].startswith("sha256:")
    assert {tool["name"] for tool in header["tools"]} >= {"echo__echo", "echo__add"}
    model = next(line for line in lines(path) if line["kind"] == "model")
    assert model["request"]["messages"][0] == {
        **model["request"]["messages"][0],
        "content": "You are a careful agent.",
    }
    assert [c["name"] for c in model["turn"]["tool_calls"]] == ["echo__echo", "echo__add"]
    assert model["ms"] >= 0


def test_the_recording_keeps_each_tools_input_schema_as_its_server_sent_it(recorded):
    path, _ = recorded
    header = lines(path)[0]
    sent = next(tool for tool in header["tools"] if tool["name"] == "echo__echo")["input_schema"]
    assert sent["type"] == "object" and sent["properties"]["text"]["type"] == "string"
    spec = next(spec for spec in read_recording(path).tool_specs if spec.name == "echo__echo")
    assert spec.input_schema == sent


def test_secrets_never_reach_the_file(recorded):
    path, _ = recorded
    text = path.read_text()
    assert FAKE_KEY not in text and HEADER_SECRET not in text
    assert "TEAM_TOKEN" not in text and "X-Team-Token" not in text  # no headers, no env
    assert "PATH" not in json.dumps(lines(path)[0])


def test_the_recording_is_the_users_alone(recorded, tmp_path):
    path, _ = recorded
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    older = tmp_path / "new" / "older.jsonl"  # a folder to make, a file an earlier version left readable
    older.parent.mkdir(mode=0o700)
    older.write_text("")
    older.chmod(0o644)
    recorder = Recorder(older)
    recorder.start(query="q", run_id="r", settings={}, tools=[])
    recorder.close()
    assert stat.S_IMODE(older.stat().st_mode) == 0o600
    fresh = Recorder(tmp_path / "made" / "run.jsonl")
    fresh.start(query="q", run_id="r", settings={}, tools=[])
    fresh.close()
    assert stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "made" / "run.jsonl").stat().st_mode) == 0o600


def test_replay_without_servers_is_identical(recorded):
    path, _ = recorded
    done = cli("replay", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical" in done.stdout
    report = json.loads(cli("replay", str(path), "--json").stdout)
    assert report["identical"] is True and report["divergence"] is None
    assert (report["model_calls"], report["tool_calls"]) == (2, 2)
    assert report["termination_reason"] == report["recorded_termination_reason"] == "success"


@pytest.mark.anyio
async def test_library_replay_identical_and_with_the_same_config(recorded):
    path, config_path = recorded
    report = await replay(path)
    assert report.identical, report.describe()
    # the config it was recorded with: same settings, same tools
    report = await replay(path, config=config_path)
    assert report.identical, report.describe()
    assert report.setting_changes == ()


@pytest.mark.anyio
async def test_a_changed_system_prompt_diverges_at_the_first_model_call(recorded, tmp_path):
    path, _ = recorded
    report = await replay(path, config=config(tmp_path, None, systemPrompt="You are a hasty agent."))
    assert not report.identical
    assert report.divergence is not None
    assert report.divergence.at == "model call 1"
    assert report.divergence.what == "the system prompt changed"
    assert "-You are a careful agent." in report.divergence.diff
    assert "+You are a hasty agent." in report.divergence.diff
    assert any(change.startswith("systemPrompt") for change in report.setting_changes)


@pytest.mark.anyio
async def test_a_removed_tool_diverges_at_the_tool_list(recorded, tmp_path):
    path, _ = recorded
    removed = {"echo": {"command": sys.executable, "args": [ECHO], "denyTools": ["add"]}}
    report = await replay(path, config=config(tmp_path, None, mcpServers=removed))
    assert report.divergence is not None
    assert report.divergence.at == "model call 1"
    assert "no longer offered: echo__add" in report.divergence.what


@pytest.mark.anyio
async def test_a_tighter_limit_diverges_where_the_run_now_stops(recorded, tmp_path):
    path, _ = recorded
    report = await replay(path, config=config(tmp_path, None, limits={"maxRounds": 1}))
    assert report.divergence is not None
    assert report.divergence.at == "end"
    assert "termination_reason 'success' -> 'max_rounds'" in report.divergence.what
    assert "1 more model call" in report.divergence.what
    assert "limits.maxRounds: 10 -> 1" in report.setting_changes
    # a tool-call budget below the turn's two calls: the turn is skipped, a different guard decision
    report = await replay(path, config=config(tmp_path, None, limits={"maxToolCalls": 1}))
    assert report.divergence is not None
    assert "guard decision" in report.divergence.what or report.divergence.at == "end", report.describe()


@pytest.mark.anyio
async def test_a_call_now_needing_approval_is_a_different_guard_decision(recorded, tmp_path):
    path, _ = recorded
    report = await replay(path, config=config(tmp_path, None, approvals={"require": ["echo__add"]}))
    assert report.divergence is not None, report.describe()
    assert report.divergence.what == "echo__add now needs approval; the recorded run did not ask"
    assert report.divergence.at.startswith("approval_requested of echo__add (call ")
    assert report.ms < 30_000  # the recorded decision-less approval is denied at once, not timed out


def test_replay_diverged_exit_1_and_json(recorded, tmp_path):
    path, _ = recorded
    other = config(tmp_path, None, systemPrompt="other")
    done = cli("replay", str(path), "--json", "--config", str(other), env={"TEAM_TOKEN": HEADER_SECRET})
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["identical"] is False
    assert report["divergence"]["at"] == "model call 1"


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty: not a recording"),
        ("not json\n", ":1: not JSON"),
        ('{"kind": "model", "request": {}}\n', ":1: the first line is not a recording header"),
        (
            '{"kind": "header", "format": 99, "query": "q", "settings": {}, "tools": []}\n',
            "upgrade mcp_agent",
        ),
        ("[1, 2]\n", 'a JSON object with a "kind"'),
    ],
)
def test_a_bad_file_exits_2_with_a_clear_message(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    done = cli("replay", str(path))
    assert done.returncode == 2
    assert message in done.stderr and "replay:" in done.stderr
    assert done.stdout == ""


def test_a_truncated_recording_line_is_named(recorded, tmp_path):
    path, _ = recorded
    text = path.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*text[:2], text[2][: len(text[2]) // 2], *text[3:]]))
    with pytest.raises(RecordingError, match=r"broken.jsonl:3: not JSON"):
        import anyio

        anyio.run(replay, broken)
    assert cli("replay", str(tmp_path / "missing.jsonl")).returncode == 2


@pytest.mark.anyio
async def test_a_changed_recorded_answer_is_found_at_the_model_call(recorded, tmp_path):
    """Editing the recording (the model now asked other arguments) shows up at the tool call."""
    path, _ = recorded
    edited = []
    for line in lines(path):
        if line["kind"] == "tool" and line["name"] == "echo__add":
            line["arguments"] = {"a": 2, "b": 4}
        edited.append(json.dumps(line))
    changed = tmp_path / "edited.jsonl"
    changed.write_text("\n".join(edited) + "\n")
    report = await replay(changed)
    assert report.divergence is not None
    assert report.divergence.at == "tool call echo__add after model call 1"
    assert "other arguments" in report.divergence.what


@pytest.mark.anyio
async def test_gateway_record_dir_writes_one_file_per_run_over_http(tmp_path):
    import anyio
    import httpx

    from tests.gateway.conftest import eventually, free_port
    from tests.gateway.e2e import rule_reply

    with running_model_server() as model:
        model.handler = rule_reply
        path = config(tmp_path, model, gateway={"recordDir": "runs"})
        data = json.loads(path.read_text())
        data["llm"].update(model="rule-model", provider="openai", stream=False)
        path.write_text(json.dumps(data))
        port = free_port()
        process = await anyio.open_process(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(path), "--port", str(port)],
            cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT), "TEAM_TOKEN": HEADER_SECRET},
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:

                async def ready() -> bool:
                    try:
                        return (await http.get("/api/v1/health")).json().get("status") == "ok"
                    except (httpx.TransportError, ValueError):
                        return False

                await eventually(ready, timeout=60)
                for text in ("echo first", "echo second"):
                    answer = await http.post("/api/v1/query", json={"query": text})
                    assert answer.status_code == 200, answer.text
        finally:
            process.terminate()
            await process.wait()
    files = sorted((tmp_path / "runs").glob("*.jsonl"))
    assert len(files) == 2
    for file in files:
        header = lines(file)[0]
        assert file.stem == header["run_id"]
        assert FAKE_KEY not in file.read_text() and HEADER_SECRET not in file.read_text()
        report = await replay(file)  # the gateway and its servers are gone
        assert report.identical, report.describe()
        assert report.tool_calls == 1
