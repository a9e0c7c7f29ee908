"""ToolHub: concurrent start beside broken servers, naming and routing, timeouts, shutdown, remote."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_agent.config import AgentConfig, RemoteServerConfig, StdioServerConfig
from mcp_agent.tools.base import ToolSource
from mcp_agent.tools.hub import ServerStatus, ToolHub, open_tool_hub
from mcp_agent.tools.schema import compile_tool_schema
from mcp_agent.tools.server.connection import RestartPolicy

from .conftest import FAST_RESTARTS, SERVERS, Remote, alive, children_of_us, server


async def until(condition: Any, seconds: float = 20) -> None:
    """Wait until ``condition()`` is true; a generous does-not-hang bound, not a timing claim."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.02)


def by_name(hub: ToolHub) -> dict[str, ServerStatus]:
    return {status.name: status for status in hub.status()}


async def test_good_servers_serve_beside_broken_ones_and_each_failure_says_why(caplog: Any) -> None:
    servers: dict[str, StdioServerConfig | RemoteServerConfig] = {
        "echo": server("echo.py"),
        "bad_schemas": server("bad_schemas.py"),
        "junk": server("junk.py"),
        "no_command": StdioServerConfig(command="no-such-command-mcp-agent"),
        "exits": server("exits_at_once.py"),
        "hangs": server("hangs.py", startup_timeout_seconds=1),
    }
    before = children_of_us()
    with anyio.fail_after(30):
        async with open_tool_hub(servers) as hub:
            status = by_name(hub)
            assert {name: s.status for name, s in status.items()} == {
                "echo": "up",
                "bad_schemas": "up",
                "junk": "up",
                "no_command": "failed",
                "exits": "failed",
                "hangs": "failed",
            }
            assert (
                status["no_command"].error
                == "cannot start 'no-such-command-mcp-agent': 'no-such-command-mcp-agent' not found"
            )
            assert status["exits"].error == (
                "exited during start-up (exit code 3); stderr: exits_at_once: fatal: no configuration file"
            )
            assert status["hangs"].error == "did not start within 1 s; stderr: hangs: waiting forever"
            assert status["junk"].junk_lines == 2
            assert status["echo"].tool_count == 2 and status["echo"].startup_ms is not None
            assert status["bad_schemas"].tool_count == 5

            names = [spec.name for spec in hub.list_tools()]
            assert names == [
                "echo__echo",
                "echo__add",
                "bad_schemas__empty_schema",
                "bad_schemas__no_schema",
                "bad_schemas__string_schema",
                "bad_schemas__wrong_output",
                "bad_schemas__good",
                "junk__noisy",
            ]
            good = next(spec for spec in hub.list_tools() if spec.name == "bad_schemas__good")
            compiled = compile_tool_schema(
                {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
            )
            assert (good.parameters, good.variants, good.changes) == (
                compiled.parameters,
                compiled.variants,
                compiled.changes,
            )
            assert good.annotations == {"readOnlyHint": True, "title": "Good tool"}
            echo = hub.list_tools()[0]
            assert (echo.server, echo.mcp_name, echo.annotations) == ("echo", "echo", {"readOnlyHint": True})
            assert echo.parameters["properties"]["text"]["type"] == "string"
            add = await hub.call_tool("echo__add", {"a": 2, "b": 3})
            assert (add.text, add.structured, add.is_error) == ("5", {"result": 5}, False)
            assert (await hub.call_tool("bad_schemas__empty_schema", {})).text == "empty schema works"
            assert (await hub.call_tool("junk__noisy", {})).text == "quiet now"
    assert children_of_us() <= before  # the hung one too
    assert "did not start within 1 s" in caplog.text


async def test_allow_and_deny_globs_that_match_nothing_are_reported(caplog: Any) -> None:
    servers: dict[str, StdioServerConfig | RemoteServerConfig] = {
        "paged": server("paged.py", allow_tools=["tool[0-3]", "tol4"], deny_tools=["tool1", "Tool2"]),
        "fine": server("paged.py", allow_tools=["tool*"], deny_tools=["tool4"]),
    }
    with caplog.at_level("WARNING"):
        async with open_tool_hub(servers) as hub:
            status = by_name(hub)
            assert status["paged"].glob_warnings == (
                "mcpServers.paged.allowTools: 'tol4' matches no tool; nearest: tool4, tool3, tool2",
                "mcpServers.paged.denyTools: 'Tool2' matches no tool; nearest: tool2, tool4, tool3",
            )
            assert status["fine"].glob_warnings == ()
            # the filters still apply as written
            paged = [spec.mcp_name for spec in hub.list_tools() if spec.server == "paged"]
            assert paged == ["tool0", "tool2", "tool3"]
    logged = [record.getMessage() for record in caplog.records if "matches no tool" in record.getMessage()]
    assert logged == list(status["paged"].glob_warnings)


async def test_allow_deny_disabled_prefixes_and_pages() -> None:
    servers: dict[str, StdioServerConfig | RemoteServerConfig] = {
        "paged": server("paged.py", allow_tools=["tool[0-3]"], deny_tools=["tool1"], tool_prefix="p"),
        "bare": server("paged.py", deny_tools=["tool0", "tool1", "tool2"], tool_prefix=""),
        "off": server("echo.py", disabled=True),
        "weird.name": server("list_changed.py"),
    }
    async with open_tool_hub(servers) as hub:
        assert [spec.name for spec in hub.list_tools()] == [
            "p__tool0",
            "p__tool2",
            "p__tool3",
            "tool3",
            "tool4",
            "weird_name__add_tool",
            "weird_name__break_listing",
        ]
        assert [(s.name, s.status, s.tool_count) for s in hub.status()] == [
            ("paged", "up", 3),
            ("bare", "up", 2),
            ("off", "disabled", 0),
            ("weird.name", "up", 2),
        ]
        assert (await hub.call_tool("tool4", {})).text == "tool 4 ran"
        assert (await hub.call_tool("p__tool2", {})).text == "tool 2 ran"
        denied = await hub.call_tool("p__tool1", {})
        assert denied.is_error and denied.text.startswith(
            "unknown tool 'p__tool1'. Available tools: p__tool0, p__tool2"
        )


async def test_colliding_names_are_told_apart_with_a_warning() -> None:
    servers: dict[str, StdioServerConfig | RemoteServerConfig] = {
        "a": server("paged.py", tool_prefix="", allow_tools=["tool0"]),
        "b": server("paged.py", tool_prefix="", allow_tools=["tool0"]),
    }
    async with open_tool_hub(servers) as hub:
        names = sorted(spec.name for spec in hub.list_tools())
        assert names[0] == "tool0" and names[1].startswith("tool0_") and len(names) == 2
        assert any("collision" in warning for warning in hub.warnings)
        for name in names:
            assert (await hub.call_tool(name, {})).text == "tool 0 ran"


async def test_list_changed_updates_the_list_and_tells_subscribers() -> None:
    async with open_tool_hub({"lc": server("list_changed.py")}) as hub:
        seen: list[list[str]] = []
        unsubscribe = hub.subscribe(lambda: seen.append([spec.name for spec in hub.list_tools()]))
        hub.subscribe(lambda: 1 / 0)  # a raising subscriber is logged, not fatal
        await hub.call_tool("lc__add_tool", {"name": "first"})
        await until(lambda: len(seen) == 1)
        assert seen == [["lc__add_tool", "lc__break_listing", "lc__first"]]
        assert (await hub.call_tool("lc__first", {})).text == "first ran"
        unsubscribe()
        unsubscribe()  # twice is harmless
        await hub.call_tool("lc__add_tool", {"name": "second"})
        await until(lambda: "lc__second" in [spec.name for spec in hub.list_tools()])
        assert len(seen) == 1


async def test_a_crash_restart_and_giving_up_show_in_status_and_tool_list() -> None:
    async with open_tool_hub({"c": server("crashes.py")}, restart_policy=FAST_RESTARTS) as hub:
        changes: list[int] = []
        hub.subscribe(lambda: changes.append(len(hub.list_tools())))
        result = await hub.call_tool("c__crash", {"code": 4})
        assert result.is_error and "exit code 4" in result.text and "crashing on purpose" in result.text
        await until(lambda: by_name(hub)["c"].status == "up" and by_name(hub)["c"].restarts == 1)
        assert not (await hub.call_tool("c__echo", {"text": "back"})).is_error
        for _ in range(5):
            await until(lambda: by_name(hub)["c"].status == "up")
            await hub.call_tool("c__crash", {"code": 4})
            await until(lambda: by_name(hub)["c"].status != "up")
        await until(lambda: by_name(hub)["c"].status == "failed")
        status = by_name(hub)["c"]
        assert status.restarts == 5 and status.tool_count == 0
        assert status.error is not None and "gave up after 5 restarts" in status.error
        assert hub.list_tools() == () and changes[-1] == 0
        gone = await hub.call_tool("c__echo", {"text": "x"})
        assert gone.is_error and gone.text.startswith("tool c__echo is unavailable: server c failed: gave up")


@pytest.mark.parametrize(
    ("call_timeout", "default", "timeout", "expected"),
    [
        (0.2, None, 30, "timed out after 0.2 s"),  # the server's setting wins
        (None, None, 0.2, "timed out after 0.2 s"),  # else the caller's
        (None, 0.2, None, "timed out after 0.2 s"),  # else the hub's default
        (0, 0.2, 0.2, "slept"),  # 0 means none
        (None, 0.2, 0, "slept"),
    ],
)
async def test_timeout_precedence(
    call_timeout: float | None, default: float | None, timeout: float | None, expected: str
) -> None:
    config = server("slow.py", call_timeout_seconds=call_timeout)
    async with open_tool_hub({"slow": config}, default_timeout=default) as hub:
        assert {spec.timeout_seconds for spec in hub.list_tools()} == {call_timeout}
        with anyio.fail_after(20):
            result = await hub.call_tool("slow__sleep", {"seconds": 0.6}, timeout=timeout)
        assert result.text.endswith(expected)
        assert (await hub.call_tool("slow__ping", {})).text == "pong"


async def test_progress_passes_through_the_hub() -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with open_tool_hub({"p": server("progress.py")}) as hub:
        assert (await hub.call_tool("p__count", {"steps": 2}, on_progress=on_progress)).text == "counted to 2"
        await until(lambda: len(seen) == 2)


# ----------------------------------------------------------------------------- shutdown


async def test_leaving_the_hub_leaves_no_process_behind_grandchildren_included() -> None:
    servers: dict[str, StdioServerConfig | RemoteServerConfig] = {
        "g1": server("grandchild.py"),
        "g2": server("grandchild.py"),
    }
    async with open_tool_hub(servers) as hub:
        pids = [
            pid
            for name in ("g1__pids", "g2__pids")
            for pid in json.loads((await hub.call_tool(name, {})).text).values()
        ]
        assert len(alive(pids)) == 4
    assert alive(pids) == []
    closed = await hub.call_tool("g1__pids", {})
    assert closed.is_error and "shut down" in closed.text
    await hub.aclose()  # idempotent


async def test_cancelling_the_owner_still_reaps_every_process() -> None:
    pids: list[int] = []
    ready = anyio.Event()

    async def owner() -> None:
        async with open_tool_hub({"g": server("grandchild.py"), "s": server("slow.py")}) as hub:
            pids.extend(json.loads((await hub.call_tool("g__pids", {})).text).values())
            ready.set()
            await hub.call_tool("s__sleep", {"seconds": 60})  # in flight when the owner is cancelled

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner)
            await ready.wait()
            await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
    assert len(pids) == 2 and alive(pids) == []


async def test_sigterm_to_the_owning_process_reaps_its_servers() -> None:
    servers = {"g": server("grandchild.py").model_dump(by_alias=True, exclude_none=True)}
    owner = subprocess.Popen(
        [sys.executable, str(SERVERS / "hub_owner.py"), json.dumps(servers)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        with anyio.fail_after(20):
            line = await anyio.to_thread.run_sync(owner.stdout.readline)
        pids = json.loads(line)
        assert len(alive(pids)) == 2
        owner.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            code = await anyio.to_thread.run_sync(owner.wait)
        assert code == 0
        assert alive(pids) == []
    finally:
        owner.kill()
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


# -------------------------------------------------------------------------------- remote


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_remote_servers_over_streamable_http_and_sse(
    transport: str, request: pytest.FixtureRequest
) -> None:
    remote: Remote = request.getfixturevalue(f"{transport}_echo")
    config = RemoteServerConfig(
        url=remote.url, transport=transport, headers={"Authorization": "Bearer t0ken"}
    )
    async with open_tool_hub({"remote": config}) as hub:
        assert by_name(hub)["remote"].status == "up"
        assert [spec.name for spec in hub.list_tools()] == ["remote__echo", "remote__add"]
        result = await hub.call_tool("remote__echo", {"text": "over the wire"})
        assert (result.text, result.is_error) == ("over the wire", False)
    assert remote.authorizations and set(remote.authorizations) == {"Bearer t0ken"}


async def test_a_remote_server_over_streamable_http_has_its_own_message_limit(http_echo: Remote) -> None:
    async with open_tool_hub({"remote": RemoteServerConfig(url=http_echo.url)}) as hub:
        big = await hub.call_tool("remote__echo", {"text": "x" * 2_000_000})  # the SDK's default: 1 MiB
        assert (big.is_error, len(big.text)) == (False, 2_000_000)
    capped = RemoteServerConfig(url=http_echo.url, max_message_bytes=100_000)
    async with open_tool_hub({"remote": capped}) as hub:
        with anyio.fail_after(20):
            refused = await hub.call_tool("remote__echo", {"text": "x" * 200_000})
        assert refused.is_error and refused.text.startswith("tool remote__echo failed: server remote: ")
        assert refused.text.endswith("exceeded the 100000 byte limit. (mcpServers.remote.maxMessageBytes)")
        assert (await hub.call_tool("remote__echo", {"text": "small"})).text == "small"


async def test_an_unreachable_remote_server_fails_to_start() -> None:
    config = RemoteServerConfig(url="http://127.0.0.1:9/mcp", startup_timeout_seconds=5)
    with anyio.fail_after(20):
        async with open_tool_hub({"gone": config}) as hub:
            status = by_name(hub)["gone"]
    assert status.status == "failed" and status.error
    assert status.error.startswith("start-up failed at http://127.0.0.1:9/mcp: "), status.error
    secret = RemoteServerConfig(
        url="http://user:pw@127.0.0.1:9/mcp?api_key=s3cret", startup_timeout_seconds=5
    )
    with anyio.fail_after(20):
        async with open_tool_hub({"gone": secret}) as hub:
            error = by_name(hub)["gone"].error or ""
    assert "127.0.0.1:9/mcp" in error and "s3cret" not in error and "pw@" not in error


# ---------------------------------------------------------------------------- the seams


async def test_servers_from_agent_config_and_the_tool_source_protocol(tmp_path: Path) -> None:
    folder = tmp_path / "servers"
    folder.mkdir()
    (folder / "paged.py").write_text((SERVERS / "paged.py").read_text())
    (folder / "_raw.py").write_text((SERVERS / "_raw.py").read_text())
    config = AgentConfig.model_validate(
        {
            "mcpServers": {"lc": {"command": sys.executable, "args": [str(SERVERS / "list_changed.py")]}},
            "serversDir": "servers",
        }
    ).model_copy(update={"base_dir": tmp_path})
    async with open_tool_hub(config.servers()) as hub:
        source: ToolSource = hub
        assert len(source.list_tools()) == 7
        assert (await source.call_tool("paged__tool1", {})).text == "tool 1 ran"
        assert [s.to_dict()["name"] for s in hub.status()] == ["paged", "lc"]
        assert set(hub.status()[0].to_dict()) == {
            "name",
            "status",
            "error",
            "tool_count",
            "startup_ms",
            "restarts",
            "junk_lines",
            "from_cache",
            "protocol_version",
        }


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_remote_server_that_goes_away_is_reported_not_waited_for(transport: str) -> None:
    with socket.socket() as probe:  # a free port for a real server process we can kill
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await anyio.open_process(
        [sys.executable, str(SERVERS / "echo.py"), transport, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    async with process:
        with anyio.fail_after(20):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
        url = f"http://127.0.0.1:{port}/{'mcp' if transport == 'http' else 'sse'}"
        one_retry = RestartPolicy(first_delay=0.05, max_delay=0.05, max_restarts=1)
        async with open_tool_hub(
            {"r": RemoteServerConfig(url=url, transport=transport)}, restart_policy=one_retry
        ) as hub:
            assert (await hub.call_tool("r__echo", {"text": "x"})).text == "x"
            process.kill()
            await process.wait()
            with anyio.fail_after(20):
                assert (await hub.call_tool("r__echo", {"text": "x"})).is_error
                await until(lambda: by_name(hub)["r"].status == "failed")
            assert "gave up after 1 restarts" in (by_name(hub)["r"].error or "")
