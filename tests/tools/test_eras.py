"""Both protocol eras towards the servers behind the hub (``tools/server/era.py``): the probe,
the fallback, the config key, the era in the tool cache, the wire, list refresh via listen."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_agent.config import RemoteServerConfig, StdioServerConfig
from mcp_agent.config.load import parse_config
from mcp_agent.exceptions import ConfigError
from mcp_agent.tools.cache import ToolCache
from mcp_agent.tools.server.connection import ServerConnection

from .conftest import FAST_RESTARTS, SERVERS, Remote

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def eras(mode: str, log: Path | None = None, **options: Any) -> StdioServerConfig:
    """``tests/servers/eras.py stdio MODE`` as a stdio config."""
    env = {"ERA_LOG": str(log)} if log is not None else {}
    return StdioServerConfig(
        command=sys.executable, args=[str(SERVERS / "eras.py"), "stdio", mode], env=env, **options
    )


@asynccontextmanager
async def running(
    config: StdioServerConfig | RemoteServerConfig, cache: ToolCache | None = None
) -> AsyncIterator[ServerConnection]:
    """A started ServerConnection (up or failed)."""
    connection = ServerConnection("srv", config, policy=FAST_RESTARTS, cache=cache)
    async with anyio.create_task_group() as tg:
        await tg.start(connection.run)
        try:
            yield connection
        finally:
            connection.stop()


async def until(condition: Any, seconds: float = 20) -> None:
    """Wait until ``condition()`` is true; a generous does-not-hang bound, not a timing claim."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.02)


def names(connection: ServerConnection) -> list[str]:
    return sorted(tool.mcp_name for tool in connection.tools)


class Wire(Remote):
    """``eras.py``'s MCPServer over Streamable HTTP in this process, behind the filter of a mode,
    with every POST it received in ``posts``."""

    def __init__(self, mode: str) -> None:
        from tests.servers.eras import build, filtered

        self.posts: list[dict[str, Any]] = []
        super().__init__(filtered(build().streamable_http_app(), mode, self.posts), "/mcp")


@pytest.fixture(params=["modern", "reject", "ignore"])
def wire(request: pytest.FixtureRequest) -> Iterator[Wire]:
    remote = Wire(request.param)
    with remote.running:
        yield remote


# ----------------------------------------------------------------------- stdio


async def test_a_2026_server_over_stdio_is_spoken_to_in_2026() -> None:
    async with running(eras("modern", discover_timeout_seconds=30)) as connection:
        assert (connection.state, connection.protocol_version) == ("up", MODERN)
        assert "echo" in names(connection)
        result = await connection.call("echo", {"text": "hi"})
        assert (result.text, result.is_error) == ("hi", False)


async def test_a_2026_server_too_slow_for_the_probe_is_still_spoken_to_in_2026() -> None:
    # the probe times out while the server starts; it answers it late and takes the era of the
    # probe, so it refuses the initialize that followed (-32022): one more probe settles 2026
    async with running(eras("modern", discover_timeout_seconds=0.001)) as connection:
        assert (connection.state, connection.protocol_version) == ("up", MODERN), connection.error
        assert (await connection.call("echo", {"text": "slow"})).text == "slow"


async def test_a_server_that_rejects_discover_gets_initialize(tmp_path: Path) -> None:
    log = tmp_path / "methods"
    async with running(eras("reject", log)) as connection:
        assert (connection.state, connection.protocol_version) == ("up", LEGACY)
        assert (await connection.call("echo", {"text": "old"})).text == "old"
    assert log.read_text().split()[:2] == ["server/discover", "initialize"]


async def test_a_server_that_ignores_discover_gets_initialize_after_the_probe_timeout(tmp_path: Path) -> None:
    log = tmp_path / "methods"
    async with running(eras("ignore", log, discover_timeout_seconds=0.2)) as connection:
        assert (connection.state, connection.protocol_version) == ("up", LEGACY)
        assert (await connection.call("echo", {"text": "late"})).text == "late"
    assert log.read_text().split()[:2] == ["server/discover", "initialize"]


async def test_protocol_legacy_never_probes(tmp_path: Path) -> None:
    log = tmp_path / "methods"
    async with running(eras("reject", log, protocol="legacy")) as connection:
        assert connection.protocol_version == LEGACY
    assert "server/discover" not in log.read_text().split()
    async with running(eras("modern", protocol="legacy")) as connection:
        assert (connection.state, connection.protocol_version) == ("up", LEGACY)


async def test_protocol_2026_fails_the_start_of_a_legacy_server_and_says_what_to_set() -> None:
    async with running(eras("reject", protocol=MODERN)) as connection:
        assert connection.state == "failed"
        assert connection.error is not None
        assert "does not speak 2026-07-28" in connection.error
        assert 'mcpServers.srv.protocol to "auto" or "legacy"' in connection.error
    async with running(eras("modern", protocol=MODERN)) as connection:
        assert (connection.state, connection.protocol_version) == ("up", MODERN)


async def test_the_era_is_cached_so_a_legacy_server_is_not_probed_again(tmp_path: Path) -> None:
    log = tmp_path / "methods"
    cache = ToolCache(tmp_path / "tool-cache")
    config = eras("ignore", log, discover_timeout_seconds=0.2)
    async with running(config, cache) as connection:
        assert connection.protocol_version == LEGACY
    loaded = cache.load("srv", config)
    assert loaded is not None and loaded.protocol_version == LEGACY
    log.write_text("")
    async with running(config, cache) as connection:
        await until(lambda: connection.state == "up")  # offered from the cache, then started
        assert connection.protocol_version == LEGACY
    assert log.read_text().split()[:1] == ["initialize"]
    assert "server/discover" not in log.read_text().split()


async def test_a_restart_after_a_crash_probes_the_era_again(tmp_path: Path) -> None:
    log = tmp_path / "methods"
    async with running(eras("reject", log)) as connection:
        assert connection.protocol_version == LEGACY
        await connection.call("crash", {})
        await until(lambda: connection.restarts == 1 and connection.state == "up")
    assert log.read_text().split().count("server/discover") == 2


async def test_tools_list_changes_arrive_through_subscriptions_listen() -> None:
    async with running(eras("modern", discover_timeout_seconds=30)) as connection:
        assert connection.protocol_version == MODERN
        assert "added_later" not in names(connection)
        result = await connection.call("grow", {"name": "added_later"})
        assert not result.is_error, result.text
        await until(lambda: "added_later" in names(connection))


async def test_input_required_from_a_2026_server_is_a_clear_error_result() -> None:
    async with running(eras("modern", discover_timeout_seconds=30)) as connection:
        result = await connection.call("ask", {}, display_name="srv__ask")
        assert result.is_error
        assert result.text == (
            "tool srv__ask needs elicitation/create from the client, which a tool called by the agent "
            "cannot ask for; the call did not complete"
        )


# ------------------------------------------------------------------------ HTTP


async def test_each_era_over_http(wire: Wire) -> None:
    async with running(RemoteServerConfig(url=wire.url, discover_timeout_seconds=0.5)) as connection:
        assert connection.state == "up", connection.error
        result = await connection.call("echo", {"text": "over http"})
        assert (result.text, result.is_error) == ("over http", False)
        version = connection.protocol_version
    probes = [post for post in wire.posts if post["method"] == "server/discover"]
    assert len(probes) == 1 and probes[0]["headers"]["mcp-method"] == "server/discover"
    methods = [post["method"] for post in wire.posts]
    if version == MODERN:
        assert "initialize" not in methods
    else:
        assert methods[:2] == ["server/discover", "initialize"]


@pytest.mark.parametrize("wire", ["modern"], indirect=True)
async def test_a_2026_connection_sends_headers_meta_and_a_log_level_on_the_wire(wire: Wire) -> None:
    async with running(RemoteServerConfig(url=wire.url)) as connection:
        assert connection.protocol_version == MODERN
        await connection.call("echo", {"text": "x"})
    call = next(post for post in wire.posts if post["method"] == "tools/call")
    assert call["headers"] == {"mcp-method": "tools/call", "mcp-name": "echo", "mcp-protocol-version": MODERN}
    assert {
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/logLevel",
    } <= set(call["meta"])
    listing = next(post for post in wire.posts if post["method"] == "tools/list")
    assert listing["headers"]["mcp-method"] == "tools/list"


@pytest.mark.parametrize("wire", ["reject"], indirect=True)
async def test_a_legacy_connection_over_http_sends_no_2026_envelope(wire: Wire) -> None:
    async with running(RemoteServerConfig(url=wire.url)) as connection:
        assert connection.protocol_version == LEGACY
        await connection.call("echo", {"text": "x"})
    call = next(post for post in wire.posts if post["method"] == "tools/call")
    assert "mcp-method" not in call["headers"]
    assert not [key for key in call["meta"] if key.startswith("io.modelcontextprotocol/")]


# ---------------------------------------------------------------------- config


def test_protocol_and_discover_timeout_are_read_and_checked() -> None:
    config = parse_config(
        {"mcpServers": {"a": {"command": "x", "protocol": "legacy", "discoverTimeoutSeconds": 0.5}}}
    )
    server = config.mcp_servers["a"]
    assert (server.protocol, server.discover_timeout_seconds) == ("legacy", 0.5)
    assert parse_config({"mcpServers": {"a": {"url": "http://h/mcp"}}}).mcp_servers["a"].protocol == "auto"
    with pytest.raises(ConfigError, match=r"mcpServers\.a\.protocol"):
        parse_config({"mcpServers": {"a": {"command": "x", "protocol": "2025-11-25"}}})
    with pytest.raises(ConfigError, match=r"mcpServers\.a\.discoverTimeoutSeconds"):
        parse_config({"mcpServers": {"a": {"command": "x", "discoverTimeoutSeconds": 0}}})


async def test_a_listen_stream_that_ends_is_opened_again_and_the_tools_listed_anew(tmp_path: Path) -> None:
    log = tmp_path / "methods"
    config = StdioServerConfig(
        command=sys.executable, args=[str(SERVERS / "modern_raw.py")], env={"ERA_LOG": str(log)}
    )
    async with running(config) as connection:
        # listed although the server left out the ttlMs, cacheScope and resultType 2026 requires
        assert (connection.protocol_version, names(connection)) == (MODERN, ["add", "drop"])
        await until(lambda: "subscriptions/listen" in log.read_text().split())
        await connection.call("add", {"name": "loud"})
        await until(lambda: "loud" in names(connection))
        await connection.call("add", {"name": "quiet", "quiet": True})  # announced to no one
        assert "quiet" not in names(connection)
        await connection.call("drop", {})  # the stream ends: listen again, and list again
        await until(lambda: "quiet" in names(connection))
        assert log.read_text().split().count("subscriptions/listen") == 2
