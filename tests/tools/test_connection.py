"""ServerConnection, our stdio transport and the response repair, against real fixture servers."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_agent.config import StdioServerConfig
from mcp_agent.exceptions import ToolServerStartError
from mcp_agent.tools.presentation import tool_allowed
from mcp_agent.tools.server.connection import RestartPolicy, ServerConnection
from mcp_agent.tools.server.session import ResponseRepairer, _leaves, repair_call_result, repair_tools_result
from mcp_agent.tools.stdio.transport import open_stdio_transport

from .conftest import FAST_RESTARTS, alive, children_of_us, server

OBJ = {"type": "object", "properties": {}}


@asynccontextmanager
async def running(
    config: StdioServerConfig, *, name: str = "srv", policy: RestartPolicy = FAST_RESTARTS
) -> AsyncIterator[tuple[ServerConnection, list[int]]]:
    """A started ServerConnection and a list that grows by one item per change it reports."""
    changes: list[int] = []
    connection = ServerConnection(name, config, on_change=lambda: changes.append(1), policy=policy)
    async with anyio.create_task_group() as tg:
        await tg.start(connection.run)
        try:
            yield connection, changes
        finally:
            connection.stop()


async def until(condition: Any, seconds: float = 20) -> None:
    """Wait until ``condition()`` is true; a generous does-not-hang bound, not a timing claim."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.02)


# ---------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("tool", "kept", "note"),
    [
        ({"name": "ok", "inputSchema": {"type": "object", "properties": {"a": {}}}}, True, None),
        ({"name": "empty", "inputSchema": {}}, True, "inputSchema {} replaced"),
        ({"name": "missing"}, True, "inputSchema missing replaced"),
        ({"name": "scalar", "inputSchema": {"type": "string"}}, True, "with type 'string' replaced"),
        ({"name": "listy", "inputSchema": [1, 2]}, True, "of type list replaced"),
        ({"name": "out", "inputSchema": OBJ, "outputSchema": {"type": "object"}}, True, None),
        ({"inputSchema": OBJ}, False, "not a tool with a name"),
        ("just a string", False, "not a tool with a name"),
        ({"name": "bad_desc", "inputSchema": OBJ, "description": 5}, False, "dropped, invalid tool"),
    ],
)
def test_repair_tools_result_mends_or_drops_each_tool(tool: Any, kept: bool, note: str | None) -> None:
    good = {"name": "good", "inputSchema": OBJ}
    repaired = repair_tools_result({"tools": [tool, good]})
    names = [t["name"] for t in repaired.result["tools"]]
    assert names == ([tool["name"], "good"] if kept else ["good"])
    assert all(
        t["inputSchema"]["type"] == "object" and "outputSchema" not in t for t in repaired.result["tools"]
    )
    if note is None:
        assert repaired.notes == ()
    else:
        assert len(repaired.notes) == 1 and note in repaired.notes[0]
    if kept:  # the wire dict as sent is kept for our own schema compiler
        assert repaired.raw_tools[tool["name"]] is tool


def test_repair_tools_result_drops_a_duplicate_and_keeps_other_keys() -> None:
    first = {"name": "t", "inputSchema": OBJ, "annotations": {"readOnlyHint": True}}
    repaired = repair_tools_result({"tools": [first, {"name": "t", "inputSchema": OBJ}], "nextCursor": "c2"})
    assert repaired.result == {"tools": [first], "nextCursor": "c2"}
    assert repaired.notes == ("t: dropped, duplicate name",)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"content": [{"type": "text", "text": "hi"}]}, None),
        ({"content": [], "structuredContent": {"a": 1}}, None),
        ({"content": "oops"}, None),  # left for the SDK to reject
        ({"content": [], "structuredContent": 42}, {"content": [{"type": "text", "text": "42"}]}),
        (
            {"content": [{"type": "text", "text": "x"}], "structuredContent": [1]},
            {"content": [{"type": "text", "text": "x"}]},
        ),
        ({"structuredContent": "s"}, {}),
    ],
)
def test_repair_call_result_moves_a_scalar_structured_content_to_text(
    result: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    repaired = repair_call_result(result)
    if expected is None:
        assert repaired.result is result and repaired.notes == ()
    else:
        assert repaired.result == expected
        assert repaired.notes and "moved to text" in repaired.notes[0]


def test_repairer_learns_the_version_and_passes_other_results() -> None:
    repairer = ResponseRepairer("s")
    init = {"protocolVersion": "2025-03-26", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}
    assert repairer.repair(init) is init
    assert repairer.version == "2025-03-26"
    assert repairer.repair({}) == {}
    repairer.repair({"tools": [{"name": "a", "inputSchema": {}}]})
    assert repairer.raw_tools == {"a": {"name": "a", "inputSchema": {}}}


@pytest.mark.parametrize(
    ("name", "allow", "deny", "expected"),
    [
        ("read_file", None, [], True),
        ("read_file", ["read_*"], [], True),
        ("write_file", ["read_*"], [], False),
        ("read_file", None, ["read_file"], False),
        ("read_file", ["*"], ["*_file"], False),
        ("Read_file", ["read_*"], [], False),
        ("x", [], [], False),
    ],
)
def test_tool_allowed(name: str, allow: list[str] | None, deny: list[str], expected: bool) -> None:
    assert tool_allowed(name, allow, deny) is expected


@pytest.mark.parametrize(
    ("restart", "delay"), [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0), (20, 30.0)]
)
def test_restart_backoff_doubles_up_to_the_cap(restart: int, delay: float) -> None:
    assert RestartPolicy().delay(restart) == delay


def test_leaves_unwraps_nested_groups() -> None:
    inner = ValueError("x")
    group = ExceptionGroup("outer", [ExceptionGroup("inner", [inner]), KeyError("k")])
    assert [type(e) for e in _leaves(group)] == [ValueError, KeyError]


# ----------------------------------------------------------------------- stdio transport


async def test_stdio_transport_keeps_the_last_100_stderr_lines_and_the_exit_code() -> None:
    script = "import sys\nfor i in range(150): print(f'line {i}', file=sys.stderr)\nsys.exit(4)"
    config = StdioServerConfig(command=sys.executable, args=["-c", script])
    with anyio.fail_after(20):
        async with open_stdio_transport(config, name="noisy") as child:
            await child.exited.wait()
            async for _ in child.read_stream:  # the session's read stream ends with the process
                pass
    assert child.returncode == 4
    assert len(child.stderr_tail(1000)) == 100
    assert child.stderr_tail(2) == ("line 148", "line 149")


async def test_stdio_transport_child_env_is_the_safe_default_plus_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SECRET_OF_THE_PARENT", "x")
    script = "import os, sys\nprint(sorted(os.environ), file=sys.stderr)"
    config = StdioServerConfig(command=sys.executable, args=["-c", script], env={"EXTRA": "1"})
    with anyio.fail_after(20):
        async with open_stdio_transport(config, name="env") as child:
            await child.exited.wait()
    names = child.stderr_tail(1)[0]
    assert "'EXTRA'" in names and "'PATH'" in names
    assert "SECRET_OF_THE_PARENT" not in names


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (StdioServerConfig(command="no-such-command-mcp-agent"), "'no-such-command-mcp-agent' not found"),
        (StdioServerConfig(command=sys.executable, cwd="/no/such/folder"), "'/no/such/folder' not found"),
        (StdioServerConfig(command="/etc/hostname"), "cannot start '/etc/hostname'"),
    ],
)
async def test_stdio_transport_reports_a_command_that_cannot_start(
    config: StdioServerConfig, message: str
) -> None:
    with pytest.raises(ToolServerStartError, match=message):
        async with open_stdio_transport(config, name="x"):
            pass


# ------------------------------------------------------------------------------ start-up


async def test_start_reports_exit_code_and_stderr_tail() -> None:
    async with running(server("exits_at_once.py")) as (connection, _):
        assert connection.state == "failed"
        assert connection.error is not None
        assert "exited during start-up (exit code 3)" in connection.error
        assert "fatal: no configuration file" in connection.error
        assert connection.tools == ()


async def test_a_hanging_handshake_is_cut_by_the_timeout_and_its_process_reaped() -> None:
    before = children_of_us()
    with anyio.fail_after(20):
        async with running(server("hangs.py", startup_timeout_seconds=0.5)) as (connection, _):
            assert connection.state == "failed"
            assert connection.error == "did not start within 0.5 s; stderr: hangs: waiting forever"
    assert children_of_us() <= before


async def test_junk_on_stdout_is_counted_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    async with running(server("junk.py")) as (connection, _):
        assert connection.state == "up"
        assert connection.junk_lines == 2  # before the handshake; the blank line is not junk
        warnings = [
            r for r in caplog.records if r.name.endswith("stdio.transport") and r.levelname == "WARNING"
        ]
        assert len(warnings) == 1  # rate-limited
        assert "Starting junk server v1.0..." in warnings[0].getMessage()
        result = await connection.call("noisy", {})
        assert (result.text, result.is_error) == ("quiet now", False)
        assert connection.junk_lines == 4


async def test_sloppy_schemas_do_not_hide_the_good_tools() -> None:
    async with running(server("bad_schemas.py")) as (connection, _):
        tools = {tool.mcp_name: tool for tool in connection.tools}
        assert sorted(tools) == ["empty_schema", "good", "no_schema", "string_schema", "wrong_output"]
        assert tools["good"].annotations == {"readOnlyHint": True, "title": "Good tool"}
        assert tools["good"].schema.parameters["required"] == ["q"]
        assert all(t.schema.parameters["type"] == "object" for t in tools.values())
        assert tools["empty_schema"].schema.changes  # the compiler saw the schema as sent
        assert (await connection.call("good", {"q": "x"})).text == "good: x"
        assert (await connection.call("empty_schema", {})).text == "empty schema works"
        # G2: structuredContent that violates the tool's outputSchema is still a result
        result = await connection.call("wrong_output", {})
        assert (result.is_error, result.structured) == (False, {"y": 1})


async def test_paged_tool_lists_are_read_to_the_end() -> None:
    async with running(server("paged.py")) as (connection, _):
        assert [t.mcp_name for t in connection.tools] == [f"tool{i}" for i in range(5)]
        assert (await connection.call("tool4", {})).text == "tool 4 ran"


async def test_a_cursor_that_repeats_ends_the_listing() -> None:
    async with running(server("paged.py", env={"PAGED_LOOP": "1"})) as (connection, _):
        assert connection.state == "up"
        assert [t.mcp_name for t in connection.tools] == ["tool0", "tool1", "tool2", "tool3"]


# --------------------------------------------------------------------------------- calls


async def test_failures_of_a_call_are_error_results() -> None:
    async with running(server("fails.py")) as (connection, _):
        fail = await connection.call("fail", {}, display_name="fails__fail")
        assert (fail.is_error, fail.text) == (True, "disk is on fire")
        rpc = await connection.call("rpc_error", {}, display_name="fails__rpc_error")
        assert (
            rpc.is_error
            and rpc.text == "tool fails__rpc_error failed: bad things happened (MCP error -32602)"
        )
        bad = await connection.call("bad_result", {}, display_name="fails__bad_result")
        assert bad.is_error
        assert bad.text.startswith(
            "tool fails__bad_result failed: the server returned an invalid result (content"
        )
        scalar = await connection.call("scalar", {})
        assert (scalar.is_error, scalar.text) == (False, "42")


async def test_a_call_result_carries_content_structured_and_elapsed() -> None:
    async with running(server("huge.py")) as (connection, _):
        result = await connection.call("big", {"chars": 3_000_000})
        assert len(result.text) == 3_000_000 and result.text.startswith("0123456789")
        assert result.content == ({"type": "text", "text": result.text},)
        assert result.elapsed_ms > 0


# ------------------------------------------------------------------------- big messages


@pytest.mark.parametrize("tool", ["big", "big_id_last"])
async def test_a_message_over_the_limit_fails_its_call_at_once_and_the_server_stays_usable(
    tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(server("huge.py", max_message_bytes=100_000, call_timeout_seconds=60)) as (
        connection,
        _,
    ):
        with anyio.fail_after(20):  # not after the 60 s timeout
            result = await connection.call(tool, {"chars": 300_000}, timeout=60, display_name=f"huge__{tool}")
        assert result.is_error
        envelope = len(b'{"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": ""}]}}')
        assert result.text == (
            f"tool huge__{tool} failed: server srv sent a message of {300_000 + envelope} bytes; "
            "the limit is 100000 (mcpServers.srv.maxMessageBytes) (MCP error -32603)"
        )
        assert "; request " in caplog.text and " fails" in caplog.text
        small = await connection.call(tool, {"chars": 99_000})
        assert (small.is_error, len(small.text)) == (False, 99_000)
        assert (connection.state, connection.restarts, connection.junk_lines) == ("up", 0, 0)


async def test_a_line_over_the_limit_that_answers_nothing_counts_as_junk(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running(server("huge.py", max_message_bytes=100_000)) as (connection, _):
        result = await connection.call("noise", {"chars": 5_000_000})
        assert (result.is_error, result.text) == (False, "after noise")
        assert connection.junk_lines == 1
        assert "server srv sent a message of 5000000 bytes; the limit is 100000" in caplog.text
        assert "answers no request" in caplog.text


async def test_the_default_limit_takes_a_few_megabytes_but_not_tens() -> None:
    async with running(server("huge.py")) as (connection, _):
        ok = await connection.call("big", {"chars": 3_000_000})
        assert (ok.is_error, len(ok.text)) == (False, 3_000_000)
        too_big = await connection.call("big", {"chars": 30_000_000})
        assert too_big.is_error and "the limit is 4194304 (mcpServers.srv.maxMessageBytes)" in too_big.text
        assert connection.state == "up"


async def test_a_result_of_many_parts_is_cut_before_it_is_validated(caplog: pytest.LogCaptureFixture) -> None:
    async with running(server("huge.py")) as (connection, _):
        result = await connection.call("parts", {"bytes": 2_000_000})
        assert not result.is_error
        assert len(result.content) == 1001 and result.content[0] == {"type": "text", "text": "x"}
        parts = (2_000_000 - 100) // len(b'{"type": "text", "text": "x"}, ')  # as huge.py makes them
        assert result.content[-1]["text"] == (
            f"[... {parts - 1000} more content parts not shown: the result had {parts} parts]"
        )
        assert result.text == "\n".join(["x"] * 1000 + [result.content[-1]["text"]])
        assert f"content: {parts - 1000} of {parts} parts dropped" in caplog.text


async def test_a_result_of_too_many_values_is_reduced_to_its_text() -> None:
    async with running(server("huge.py")) as (connection, _):
        result = await connection.call("rows", {"bytes": 2_000_000})
        assert (result.is_error, result.structured) == (False, None)
        assert result.text.startswith("rows attached\n[... only the text of this result is shown")
        assert connection.state == "up"


async def test_progress_notifications_reach_the_callback() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with running(server("progress.py")) as (connection, _):
        result = await connection.call("count", {"steps": 3}, on_progress=on_progress)
        assert result.text == "counted to 3"
        await until(lambda: len(seen) == 3)
        assert seen[-1] == (3.0, 3.0, "step 3/3")


async def test_a_timed_out_call_is_cancelled_on_the_server_which_stays_usable(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    async with running(server("slow.py", env={"SLOW_RECORD": str(record)})) as (connection, _):
        start = time.perf_counter()
        result = await connection.call("sleep", {"seconds": 60}, timeout=0.3, display_name="slow__sleep")
        assert (result.is_error, result.text) == (True, "tool slow__sleep timed out after 0.3 s")
        assert time.perf_counter() - start < 20
        await until(lambda: record.exists() and "cancelled" in record.read_text())
        assert (await connection.call("ping", {})).text == "pong"
        assert connection.state == "up"


async def test_cancelling_the_caller_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    async with running(server("slow.py", env={"SLOW_RECORD": str(record)})) as (connection, _):
        with anyio.move_on_after(0.3) as scope:
            await connection.call("sleep", {"seconds": 60})
        assert scope.cancelled_caught
        await until(lambda: record.exists() and "cancelled" in record.read_text())
        lines = record.read_text().split()
        assert lines == ["started", lines[1], "cancelled", lines[1]]


# ------------------------------------------------------------------------ crash, restart


async def test_a_crash_fails_the_call_at_once_then_the_server_restarts() -> None:
    async with running(server("crashes.py", call_timeout_seconds=60)) as (connection, changes):
        first_pid = (await connection.call("echo", {"text": "a"})).text
        start = time.perf_counter()
        result = await connection.call("crash", {"code": 9}, timeout=60, display_name="crashes__crash")
        assert time.perf_counter() - start < 20  # not after the 60 s timeout
        assert result.is_error
        assert result.text.startswith("tool crashes__crash failed: server srv: exited (exit code 9)")
        assert "crashing on purpose" in result.text
        await until(lambda: connection.state == "up" and connection.restarts == 1)
        again = await connection.call("echo", {"text": "a"})
        assert not again.is_error and again.text != first_pid  # a new process answers
        assert [t.mcp_name for t in connection.tools] == ["crash", "echo"]
        assert len(changes) >= 3  # up, restarting, up


async def test_calls_while_restarting_say_temporarily_unavailable() -> None:
    slow_restarts = RestartPolicy(first_delay=30)
    async with running(server("crashes.py"), policy=slow_restarts) as (connection, _):
        await connection.call("crash", {"code": 2})
        await until(lambda: connection.state == "restarting")
        result = await connection.call("echo", {"text": "x"}, display_name="crashes__echo")
        assert result.is_error
        assert result.text.startswith(
            "tool crashes__echo is temporarily unavailable: server srv is restarting"
        )
        assert "exit code 2" in result.text


async def test_after_the_restart_budget_the_server_stays_failed() -> None:
    budget = RestartPolicy(first_delay=0.01, max_delay=0.01, max_restarts=2)
    async with running(server("crashes.py"), policy=budget) as (connection, _):
        for attempt in range(3):
            await until(lambda: connection.state == "up")
            assert connection.restarts == attempt
            await connection.call("crash", {"code": 1})
            await until(lambda: connection.state != "up")
        await until(lambda: connection.state == "failed")
        assert connection.error is not None and connection.error.startswith("gave up after 2 restarts")
        assert connection.tools == ()
        result = await connection.call("echo", {"text": "x"})
        assert result.is_error and "is failed" in result.text


async def test_an_exit_is_noticed_even_when_a_grandchild_holds_stdout_open() -> None:
    async with running(server("grandchild.py")) as (connection, _):
        pids = json.loads((await connection.call("pids", {})).text)
        with anyio.fail_after(20):
            result = await connection.call("exit", {})
        assert result.is_error and "exit code 5" in result.text
        await until(lambda: connection.state == "up" and connection.restarts == 1)
        await until(lambda: not alive(pids.values()))  # the old group was killed on the way
        new_pids = json.loads((await connection.call("pids", {})).text)
    assert not alive(new_pids.values())


# ----------------------------------------------------------------------- tools/list_changed


async def test_tools_list_changed_relists_and_reports_the_change() -> None:
    async with running(server("list_changed.py")) as (connection, changes):
        before = len(changes)
        assert (await connection.call("add_tool", {"name": "newbie"})).text == "added newbie"
        await until(lambda: len(changes) > before)
        assert [t.mcp_name for t in connection.tools] == ["add_tool", "break_listing", "newbie"]
        assert (await connection.call("newbie", {})).text == "newbie ran"


async def test_a_failed_relisting_keeps_the_tools_it_had(caplog: pytest.LogCaptureFixture) -> None:
    async with running(server("list_changed.py")) as (connection, _):
        before = connection.tools
        await connection.call("break_listing", {})
        await until(lambda: "re-listing tools after tools/list_changed failed" in caplog.text)
        assert connection.tools == before and connection.state == "up"
        assert (await connection.call("add_tool", {"name": "x"})).text == "added x"
        await until(lambda: len(connection.tools) == 3)


def test_streamable_http_clients_share_one_tls_context_per_ca_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Loading a CA bundle takes 30-60 ms; every remote server of every agent opened paid it."""
    from mcp_agent.tools.server import connection

    connection._tls_for.cache_clear()
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first = connection.shared_tls()
    assert connection.shared_tls() is first
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # a changed setting is followed
    assert connection.shared_tls() is not first
    assert connection.shared_tls() is connection.shared_tls()
