"""Cached tool lists: warm starts, calls that wait, changed lists, lazy servers, retries, keys;
the resources and prompts in the same entry (the gateway's side: tests/gateway/test_fast_start.py).

Real fixture servers (``tests/servers/gated.py``) whose start the test holds back with a gate
file, so "the list was offered before the server was up" is a fact, not a timing.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError

from mcp_agent.config import StdioServerConfig
from mcp_agent.tools.cache import (
    CACHE_VERSION,
    MAX_CACHED_ENTRIES,
    MAX_CONTAINERS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    CachedList,
    ToolCache,
    cache_key,
    is_pinned,
    package_spec,
)
from mcp_agent.tools.hub import ToolHub, open_tool_hub
from mcp_agent.tools.presentation import cached_tools, exposed_specs
from mcp_agent.tools.server.connection import RestartPolicy

from .conftest import FAST_RESTARTS, SERVERS, server


async def until(condition: Any, seconds: float = 20) -> None:
    """Wait until ``condition()`` is true; a generous does-not-hang bound, not a timing claim."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.02)


def starts(log: Path) -> int:
    return sum(1 for line in log.read_text().splitlines() if line.startswith("start")) if log.exists() else 0


def status(hub: ToolHub, name: str = "g") -> Any:
    return next(s for s in hub.status() if s.name == name)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    names = {"log": "starts.log", "gate": "gate", "tools": "tools.txt", "ok": "ok", "state": "state"}
    paths = {key: tmp_path / value for key, value in names.items()}
    paths["tools"].write_text("echo\nshout\n")
    return paths


def gated(files: dict[str, Path], **options: Any) -> StdioServerConfig:
    env = {
        "GATED_LOG": str(files["log"]),
        "GATED_GATE": str(files["gate"]),
        "GATED_TOOLS": str(files["tools"]),
    }
    env.update(options.pop("env", {}))
    return server("gated.py", env=env, **options)


async def warm(files: dict[str, Path], config: StdioServerConfig) -> None:
    """One start with the gate open, so the next one starts from the cache."""
    files["gate"].touch()
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        assert status(hub).status == "up" and not status(hub).from_cache
    files["gate"].unlink()


async def test_a_warm_start_offers_the_cached_list_before_the_server_is_up_and_a_call_waits(
    files: dict[str, Path],
) -> None:
    config = gated(files)
    await warm(files, config)
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        # the gate is shut: the server cannot have answered initialize yet
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]
        assert status(hub).status == "starting" and status(hub).from_cache
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def call() -> None:
                results.append(await hub.call_tool("g__echo", {"text": "hi"}))

            tg.start_soon(call)
            await anyio.sleep(0.2)
            assert results == []  # waiting for the start, not failed
            files["gate"].touch()
        assert results[0].text == "echo: hi" and not results[0].is_error
        assert status(hub).status == "up" and not status(hub).from_cache


async def test_a_changed_list_replaces_the_cached_one_and_tells_subscribers(files: dict[str, Path]) -> None:
    config = gated(files)
    await warm(files, config)
    files["tools"].write_text("echo\nwhisper\n")  # same configuration, different list
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        changes: list[list[str]] = []
        hub.subscribe(lambda: changes.append([t.name for t in hub.list_tools()]))
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]
        files["gate"].touch()
        await until(lambda: status(hub).status == "up")
        assert changes[-1] == ["g__echo", "g__whisper"]
        assert (await hub.call_tool("g__whisper", {"text": "x"})).text == "whisper: x"
    cached = ToolCache(files["state"] / "tool-cache").load("g", config)
    assert cached is not None and [t["name"] for t in cached.tools] == ["echo", "whisper"]


async def test_the_same_list_sends_no_change(files: dict[str, Path]) -> None:
    config = gated(files)
    await warm(files, config)
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        changes: list[int] = []
        hub.subscribe(lambda: changes.append(1))
        files["gate"].touch()
        await until(lambda: status(hub).status == "up")
        assert changes == []


async def test_changing_args_env_or_filters_invalidates_the_cache(
    files: dict[str, Path], tmp_path: Path
) -> None:
    config = gated(files)
    await warm(files, config)
    cache = ToolCache(files["state"] / "tool-cache")
    assert cache.load("g", config) is not None
    variants = [
        config.model_copy(update={"args": [*config.args, "--extra"]}),
        config.model_copy(update={"env": {**config.env, "GATED_TOOLS": str(tmp_path / "other")}}),
        config.model_copy(update={"env": {**config.env, "NEW": "1"}}),
        config.model_copy(update={"allow_tools": ["echo"]}),
        config.model_copy(update={"deny_tools": ["shout"]}),
        config.model_copy(update={"command": "/usr/bin/python3"}),
    ]
    keys = {cache_key(config)} | {cache_key(v) for v in variants}
    assert len(keys) == len(variants) + 1
    for variant in variants:
        assert cache.load("g", variant) is None
    # touching the server script changes its key too
    script = Path(config.args[0])
    times = script.stat()
    before = cache_key(config)
    os.utime(script, ns=(times.st_atime_ns, times.st_mtime_ns + 1_000_000_000))
    try:
        assert cache_key(config) != before
    finally:
        os.utime(script, ns=(times.st_atime_ns, times.st_mtime_ns))
    # secrets are hashed into the key, never written
    secret = config.model_copy(update={"env": {**config.env, "TOKEN": "s3cret-value"}})
    assert cache.save("s", secret, CachedList(({"name": "x", "inputSchema": {"type": "object"}},), {}))
    assert "s3cret-value" not in cache.path("s").read_text()


async def test_a_corrupt_cache_file_is_ignored_with_a_warning(
    files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    config = gated(files)
    await warm(files, config)
    path = ToolCache(files["state"] / "tool-cache").path("g")
    key, tools = cache_key(config), [{"name": "echo"}]
    junks = [
        "{not json",
        json.dumps({"version": CACHE_VERSION, "key": key, "tools": "nope"}),
        "",
        json.dumps({"version": CACHE_VERSION, "key": key, "tools": tools, "resources": [{"name": "no uri"}]}),
        json.dumps({"version": CACHE_VERSION, "key": key, "tools": tools, "prompts": "nope"}),
        json.dumps({"version": "2", "key": key, "tools": tools}),
    ]
    for junk in junks:
        path.write_text(junk)
        caplog.clear()
        files["gate"].touch()
        with caplog.at_level(logging.WARNING):
            async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
                assert status(hub).status == "up" and not status(hub).from_cache  # started as without a cache
        assert "ignoring corrupt file" in caplog.text
        assert json.loads(path.read_text())["tools"][0]["name"] == "echo"  # rewritten whole
        files["gate"].unlink()


def hostile(kind: str, key: str) -> str:
    """A cache file no save writes: too deep, too large, too many containers or entries."""

    def entry(tools: list[Any], **more: Any) -> str:
        return json.dumps({"version": CACHE_VERSION, "key": key, "capabilities": {}, "tools": tools, **more})

    echo = {"name": "echo", "inputSchema": {"type": "object"}}
    if kind == "deep":
        return "[" * 100_000 + "]" * 100_000  # deeper than the JSON parser goes
    if kind == "deep_in_schema":  # the parser takes it; the nesting cap does not
        deep = "[" * (MAX_DEPTH + 10) + "]" * (MAX_DEPTH + 10)
        return entry([echo]).replace('"object"}', f'"object", "default": {deep}}}', 1)
    if kind == "large":
        return entry([echo], padding="x" * MAX_FILE_BYTES)
    if kind == "containers":
        return entry([{**echo, "examples": [[]] * MAX_CONTAINERS}])
    if kind == "many_tools":
        return entry([{"name": f"t{i}"} for i in range(MAX_CACHED_ENTRIES + 1)])
    assert kind == "many_prompts"
    return entry([echo], prompts=[{"name": f"p{i}"} for i in range(MAX_CACHED_ENTRIES + 1)])


@pytest.mark.parametrize(
    "kind", ["deep", "deep_in_schema", "large", "containers", "many_tools", "many_prompts"]
)
async def test_a_hostile_cache_file_is_ignored_with_a_warning_naming_it(
    files: dict[str, Path], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    config = gated(files, lazy=True)
    await warm(files, config)
    path = ToolCache(files["state"] / "tool-cache").path("g")
    path.write_text(hostile(kind, cache_key(config)))
    files["gate"].touch()
    with caplog.at_level(logging.WARNING):
        async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
            # started (lazy or not) to learn its list, as without a cache
            assert status(hub).status == "up" and not status(hub).from_cache
            assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]
    assert f"tool cache: ignoring corrupt file {path}: " in caplog.text
    assert json.loads(path.read_text())["tools"][0]["name"] == "echo"  # rewritten by the start


async def test_lists_a_load_would_refuse_are_not_saved(files: dict[str, Path]) -> None:
    files["tools"].write_text("".join(f"t{i}\n" for i in range(MAX_CACHED_ENTRIES + 1)))
    files["gate"].touch()
    config = gated(files)
    path = ToolCache(files["state"] / "tool-cache").path("g")
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"version": CACHE_VERSION, "key": cache_key(config), "tools": [{"name": "t0"}]})
    )
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        await until(lambda: status(hub).status == "up")
        assert len(hub.list_tools()) == MAX_CACHED_ENTRIES + 1
    assert not path.exists()  # not written, and the out-of-date entry is gone


async def test_a_cached_server_that_fails_to_start_says_it_is_down(files: dict[str, Path]) -> None:
    config = gated(files, env={"GATED_FAIL_UNLESS": str(files["ok"])})
    files["ok"].touch()
    await warm(files, config)
    files["ok"].unlink()
    async with open_tool_hub({"g": config}, state_dir=files["state"], restart_policy=FAST_RESTARTS) as hub:
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]
        result = await hub.call_tool("g__echo", {"text": "hi"})
        assert result.is_error
        assert "server g" in result.text and "exited during start-up" in result.text
        assert "unknown tool" not in result.text
        assert status(hub).status == "failed"


async def test_a_failed_first_start_is_retried_with_backoff_and_its_tools_appear(
    files: dict[str, Path],
) -> None:
    files["gate"].touch()
    config = gated(files, env={"GATED_FAIL_UNLESS": str(files["ok"])})
    async with open_tool_hub({"g": config}, state_dir=files["state"], restart_policy=FAST_RESTARTS) as hub:
        assert status(hub).status == "failed" and hub.list_tools() == ()
        changes: list[int] = []
        hub.subscribe(lambda: changes.append(1))
        await until(lambda: starts(files["log"]) >= 3)  # retried, not given up
        files["ok"].touch()
        await until(lambda: status(hub).status == "up")
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"] and changes
        assert (await hub.call_tool("g__shout", {"text": "x"})).text == "shout: x"


async def test_a_lazy_server_starts_on_its_first_call_and_stops_when_idle(files: dict[str, Path]) -> None:
    files["gate"].touch()
    config = gated(files, lazy=True, idle_seconds=0.5)
    # no cache yet: a lazy server starts once to learn its list, then stops when idle
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        assert status(hub).status == "up" and status(hub).lazy
        await until(lambda: status(hub).status == "idle")
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]
    assert starts(files["log"]) == 1
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        assert status(hub).status == "idle" and status(hub).from_cache
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]
        await anyio.sleep(0.3)
        assert starts(files["log"]) == 1  # not started: nothing called it
        assert (await hub.call_tool("g__echo", {"text": "a"})).text == "echo: a"
        assert starts(files["log"]) == 2 and status(hub).status == "up"
        await until(lambda: status(hub).status == "idle")
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]  # still offered
        assert (await hub.call_tool("g__echo", {"text": "b"})).text == "echo: b"
        assert starts(files["log"]) == 3


async def test_wait_mode_waits_for_the_real_start(files: dict[str, Path]) -> None:
    config = gated(files)
    await warm(files, config)
    files["gate"].touch()
    async with open_tool_hub({"g": config}, state_dir=files["state"], start="wait") as hub:
        assert status(hub).status == "up" and not status(hub).from_cache


async def test_on_call_mode_starts_nothing_until_called(files: dict[str, Path]) -> None:
    config = gated(files)
    await warm(files, config)
    async with open_tool_hub({"g": config}, state_dir=files["state"], start="on_call") as hub:
        assert status(hub).from_cache and status(hub).status == "idle"
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__shout"]
    assert starts(files["log"]) == 1


async def test_a_cache_file_of_another_version_is_ignored_quietly(
    files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    config = gated(files)
    await warm(files, config)
    path = ToolCache(files["state"] / "tool-cache").path("g")
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "version": CACHE_VERSION - 1}))
    files["gate"].touch()
    with caplog.at_level(logging.WARNING):
        async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
            assert status(hub).status == "up" and not status(hub).from_cache  # started as without a cache
    assert caplog.text == ""
    assert json.loads(path.read_text())["version"] == CACHE_VERSION


# ------------------------------------------------------------------ resources and prompts


def test_the_catalog_round_trips_through_the_file(tmp_path: Path) -> None:
    config = server("gated.py")
    cache = ToolCache(tmp_path)
    listed = CachedList(
        tools=({"name": "echo", "inputSchema": {"type": "object"}},),
        capabilities={"resources": {"listChanged": True}, "prompts": {}},
        resources=({"uri": "a://1", "name": "one"},),
        resource_templates=(),
        prompts=({"name": "p", "arguments": [{"name": "x", "required": True}]},),
    )
    assert cache.save("g", config, listed)
    assert cache.load("g", config) == listed
    bare = CachedList(tools=listed.tools, capabilities={})
    assert cache.save("g", config, bare)
    assert cache.load("g", config) == bare  # unknown lists stay unknown, not empty
    assert "resources" not in json.loads(cache.path("g").read_text())


async def test_specs_hold_the_input_schema_the_server_sent_itself_warm_or_not(files: dict[str, Path]) -> None:
    """The spec keeps the very dict the server listed (no copy: big tool sets), the normalised
    one for the model beside it; a warm start gives the same from the file."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"t": {"$anchor": "t", "type": "string"}},
        "properties": {"text": {"$ref": "#t"}},
    }
    files["schema"] = files["tools"].with_name("schema.json")
    files["schema"].write_text(json.dumps(schema))
    files["tools"].write_text("echo\n")
    config = gated(files, env={"GATED_SCHEMA": str(files["schema"])})
    files["gate"].touch()
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        [spec] = hub.list_tools()
    assert spec.input_schema == schema
    assert spec.parameters == {"type": "object", "properties": {"text": {"type": "string"}}}
    files["gate"].unlink()
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        [warm] = hub.list_tools()  # the gate is shut: from the cache
        assert status(hub).from_cache
        files["gate"].touch()
    assert warm.input_schema == schema and list(warm.input_schema) == list(schema)
    entry = cached(files, config)
    assert entry is not None
    [tool] = cached_tools("g", config, entry.tools)
    assert tool.input_schema is entry.tools[0]["inputSchema"]
    [offered], _, _ = exposed_specs([tool], {"g": config})
    assert offered.input_schema is entry.tools[0]["inputSchema"]


def with_catalog(
    files: dict[str, Path], resources: list[str], prompts: list[str], **options: Any
) -> StdioServerConfig:
    files["resources"] = files["tools"].with_name("resources.txt")
    files["prompts"] = files["tools"].with_name("prompts.txt")
    files["resources"].write_text("".join(f"{line}\n" for line in resources))
    files["prompts"].write_text("".join(f"{line}\n" for line in prompts))
    env = {"GATED_RESOURCES": str(files["resources"]), "GATED_PROMPTS": str(files["prompts"])}
    env.update(options.pop("env", {}))
    return gated(files, env=env, **options)


def cached(files: dict[str, Path], config: StdioServerConfig) -> CachedList | None:
    return ToolCache(files["state"] / "tool-cache").load("g", config)


def catalog_known(files: dict[str, Path], config: StdioServerConfig) -> bool:
    entry = cached(files, config)
    return entry is not None and entry.resources is not None and entry.prompts is not None


async def uris(hub: ToolHub) -> list[str]:
    return [r.uri for r in (await hub.catalog.list_resources()).resources]


async def test_a_lazy_server_lists_its_cached_catalog_without_starting_and_a_read_starts_it(
    files: dict[str, Path],
) -> None:
    files["gate"].touch()
    config = with_catalog(files, ["gated://a", "gated://b"], ["p"], lazy=True, idle_seconds=0.5)
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        await until(lambda: catalog_known(files, config))  # learnt at its first start
        await until(lambda: status(hub).status == "idle")
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        assert status(hub).status == "idle"
        assert await uris(hub) == ["gated://a", "gated://b"]
        assert [p.name for p in (await hub.catalog.list_prompts()).prompts] == ["g__p"]
        assert starts(files["log"]) == 1  # listed without starting it
        read = await hub.catalog.read_resource("gated://b")
        assert read.contents[0].text == "read gated://b"  # type: ignore[union-attr]
        assert starts(files["log"]) == 2 and status(hub).status == "up"
        await until(lambda: status(hub).status == "idle")
        assert await uris(hub) == ["gated://a", "gated://b"]  # still listed while idle


async def test_a_servers_own_list_changed_updates_the_cached_catalog(files: dict[str, Path]) -> None:
    files["gate"].touch()
    files["tools"].write_text("echo\nannounce\n")
    config = with_catalog(files, ["gated://a"], ["p"])
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        await until(lambda: catalog_known(files, config))
        told: list[str] = []
        hub.subscribe_catalog(told.append)
        files["resources"].write_text("gated://a\ngated://c\n")
        files["prompts"].write_text("q\n")
        await hub.call_tool("g__announce", {})

        def updated() -> bool:
            entry = cached(files, config)
            return entry is not None and len(entry.resources or ()) == 2 and len(entry.prompts or ()) == 1

        await until(lambda: updated() and entry_prompts(files, config) == ["q"])
        assert sorted(told) == ["prompts", "resources"]  # the server's notifications, once each
        assert await uris(hub) == ["gated://a", "gated://c"]


def entry_prompts(files: dict[str, Path], config: StdioServerConfig) -> list[str]:
    entry = cached(files, config)
    return [p["name"] for p in (entry.prompts or ())] if entry else []


async def test_a_catalog_longer_than_the_cache_holds_is_not_cached(files: dict[str, Path]) -> None:
    files["gate"].touch()
    many = [f"gated://n/{i}" for i in range(MAX_CACHED_ENTRIES + 1)]
    config = with_catalog(files, many, ["p"], env={"GATED_PAGE": str(MAX_CACHED_ENTRIES)})
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        await until(lambda: entry_prompts(files, config) == ["p"])
        entry = cached(files, config)
        assert entry is not None and entry.resources is None and entry.resource_templates == ()
        assert (
            len((await hub.catalog.list_resources()).resources) == MAX_CACHED_ENTRIES
        )  # asked of the server
    files["gate"].unlink()
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        assert status(hub).status == "starting"
        assert await uris(hub) == []  # not known while it starts
        assert [p.name for p in (await hub.catalog.list_prompts()).prompts] == ["g__p"]


async def test_a_restarting_server_keeps_its_catalog_listed_and_reads_say_it_restarts(
    files: dict[str, Path],
) -> None:
    files["gate"].touch()
    config = with_catalog(files, ["gated://a"], ["p"])
    slow = RestartPolicy(first_delay=30, max_delay=30, max_restarts=5, window_seconds=300)
    async with open_tool_hub({"g": config}, state_dir=files["state"], restart_policy=slow) as hub:
        await until(lambda: catalog_known(files, config))
        told: list[str] = []
        hub.subscribe_catalog(told.append)
        pid = int(files["log"].read_text().split()[1])
        os.kill(pid, signal.SIGKILL)
        await until(lambda: status(hub).status == "restarting")
        assert await uris(hub) == ["gated://a"]
        assert [p.name for p in (await hub.catalog.list_prompts()).prompts] == ["g__p"]
        with pytest.raises(MCPError) as caught:
            await hub.catalog.read_resource("gated://a")
        assert "server g is restarting" in caught.value.message
        assert told == []  # nothing was withdrawn


def test_the_cache_folder_and_its_files_are_the_users_alone(tmp_path: Path) -> None:
    cache = ToolCache.of_state_dir(tmp_path / "state")
    config = StdioServerConfig(command="python", args=["server.py"])
    assert cache.save("s", config, CachedList(tools=({"name": "echo"},), capabilities={}))
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE(cache.folder.stat().st_mode) == 0o700
    assert [stat.S_IMODE(p.stat().st_mode) for p in cache.folder.iterdir()] == [0o600]


# ------------------------------------------------------------------ what the command resolves to


def launcher(path: Path, body: str = "") -> Path:
    """An executable at ``path`` that runs the gated server (a stand-in for npx, uvx, a binary)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n{body}exec "{sys.executable}" "{SERVERS / "gated.py"}"\n')
    path.chmod(0o755)
    return path


def npm_manifest(folder: Path, version: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"name": "gated-pkg", "version": version}))


def dist_info(site: Path, version: str) -> None:
    for old in site.glob("gated_pkg-*.dist-info") if site.exists() else []:
        old.rename(site / f"gated_pkg-{version}.dist-info")
        return
    (site / f"gated_pkg-{version}.dist-info").mkdir(parents=True)


def upgrade_npx(tmp: Path, version: str) -> None:
    npm_manifest(tmp / "npm" / "_npx" / "0a1b2c" / "node_modules" / "gated-pkg", version)


def upgrade_local(tmp: Path, version: str) -> None:
    npm_manifest(tmp / "work" / "node_modules" / "gated-pkg", version)


def upgrade_uv_tool(tmp: Path, version: str) -> None:
    tool = tmp / "uv-tools" / "gated-pkg"
    dist_info(tool / "lib" / "python3.12" / "site-packages", version)
    (tool / "uv-receipt.toml").write_text(f'[tool]\nrequirements = [{{ name = "gated-pkg" }}]\n# {version}\n')


def upgrade_pipx_run(tmp: Path, version: str) -> None:
    dist_info(tmp / "pipx" / ".cache" / "5e6f" / "lib" / "python3.12" / "site-packages", version)


RUNNERS = {
    "npx cache": ("npx", ["-y", "gated-pkg"], upgrade_npx),
    "npx in cwd": ("npx", ["--yes", "gated-pkg"], upgrade_local),
    "uvx tool": ("uvx", ["gated-pkg"], upgrade_uv_tool),
    "uv tool run": ("uv", ["tool", "run", "--python", "3.12", "gated-pkg"], upgrade_uv_tool),
    "pipx run": ("pipx", ["run", "gated-pkg"], upgrade_pipx_run),
}


@pytest.mark.parametrize("runner", list(RUNNERS))
async def test_a_package_upgrade_found_on_disk_is_a_new_cache_key(
    files: dict[str, Path], tmp_path: Path, runner: str
) -> None:
    command, args, upgrade = RUNNERS[runner]
    env = {
        "npm_config_cache": str(tmp_path / "npm"),
        "UV_TOOL_DIR": str(tmp_path / "uv-tools"),
        "PIPX_HOME": str(tmp_path / "pipx"),
    }
    (tmp_path / "work").mkdir()
    upgrade(tmp_path, "1.0.0")
    config = gated(files, env=env, lazy=True).model_copy(
        update={
            "command": str(launcher(tmp_path / "bin" / command)),
            "args": args,
            "cwd": str(tmp_path / "work"),
        }
    )
    files["gate"].touch()
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:  # learns and caches its list
        assert status(hub).status == "up"
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        assert status(hub).status == "idle" and status(hub).from_cache  # the same package: the cache serves
    upgrade(tmp_path, "1.1.0")  # the runner now has another version of the package: not that list
    files["tools"].write_text("echo\nnew_in_1_1\n")
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        # no cached list for this version: started at once to learn it, as without a cache
        assert status(hub).status == "up" and not status(hub).from_cache
        assert [t.name for t in hub.list_tools()] == ["g__echo", "g__new_in_1_1"]
    assert starts(files["log"]) == 2


async def test_a_replaced_executable_is_a_new_cache_key_even_with_its_old_mtime(
    files: dict[str, Path], tmp_path: Path
) -> None:
    binary = launcher(tmp_path / "bin" / "my-server")
    config = gated(files).model_copy(update={"command": "my-server", "args": []})
    config = config.model_copy(update={"env": {**config.env, "PATH": f"{binary.parent}:/usr/bin:/bin"}})
    await warm(files, config)
    cache = ToolCache(files["state"] / "tool-cache")
    assert cache.load("g", config) is not None
    before = binary.stat()
    launcher(binary, body=": upgraded\n")  # a new build at the same path, its mtime kept
    os.utime(binary, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert cache.load("g", config) is None


@pytest.mark.parametrize(
    ("command", "args", "spec", "pinned"),
    [
        (
            "npx",
            ["-y", "@modelcontextprotocol/server-filesystem", "."],
            ("npm", "@modelcontextprotocol/server-filesystem"),
            False,
        ),
        ("npx", ["-y", "@scope/pkg@1.2.3"], ("npm", "@scope/pkg@1.2.3"), True),
        ("npx", ["-y", "pkg@latest"], ("npm", "pkg@latest"), False),
        ("npx", ["--yes", "-p", "pkg@2", "pkg-cli"], ("npm", "pkg@2"), False),
        ("/usr/local/bin/bunx", ["pkg@1.0.0-rc.1"], ("npm", "pkg@1.0.0-rc.1"), True),
        ("npm", ["exec", "--", "pkg@1.0.0"], ("npm", "pkg@1.0.0"), True),
        ("pnpm", ["dlx", "pkg"], ("npm", "pkg"), False),
        ("uvx", ["mcp-server-git"], ("uv", "mcp-server-git"), False),
        ("uvx", ["mcp-server-git@0.6.2"], ("uv", "mcp-server-git@0.6.2"), True),
        ("uvx", ["--from", "mcp-server-git==0.6.2", "mcp-server-git"], ("uv", "mcp-server-git==0.6.2"), True),
        ("uvx", ["--python", "3.12", "pkg>=1"], ("uv", "pkg>=1"), False),
        ("uv", ["tool", "run", "pkg"], ("uv", "pkg"), False),
        ("pipx", ["run", "--spec", "pkg==1.0", "pkg"], ("pipx", "pkg==1.0"), True),
        ("python", ["server.py"], None, None),
        ("uv", ["run", "server.py"], None, None),
    ],
)
def test_package_runners_and_their_packages(
    command: str, args: list[str], spec: tuple[str, str] | None, pinned: bool | None
) -> None:
    assert package_spec(command, args) == spec
    if spec is not None:
        assert is_pinned(spec[0], spec[1]) is pinned  # type: ignore[arg-type]


@pytest.mark.parametrize("breakage", ["not executable", "folder gone"])
@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "background"])
async def test_a_cached_server_that_cannot_start_is_shown_down_not_idle(
    files: dict[str, Path], tmp_path: Path, lazy: bool, breakage: str
) -> None:
    """Its command lost its execute bit, or its working folder is gone: neither changes the
    cache key (the file is the same), and the cached list would make it look fine. It is not
    offered, and the hub, the gateway's health (which reads the hub) and ``tools`` from the
    cache all say it is down, and why."""
    from mcp_agent.tools.cache import cached_listing

    wrapper, folder = tmp_path / "run-python", tmp_path / "work"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    folder.mkdir()
    config = gated(files, lazy=lazy).model_copy(update={"command": str(wrapper), "cwd": str(folder)})
    await warm(files, config)
    if breakage == "not executable":
        wrapper.chmod(0o644)
        why = f"cannot start {str(wrapper)!r}: not executable"
    else:
        folder.rmdir()
        why = f"cannot start {str(wrapper)!r}: {str(folder)!r} not found"
    listed = cached_listing({"g": config}, ToolCache.of_state_dir(files["state"]))
    assert listed is not None  # the cache still holds its list for this configuration
    tools, statuses = listed
    assert (list(tools), statuses[0].status, statuses[0].tool_count) == ([], "failed", 0)
    assert statuses[0].error == why
    async with open_tool_hub({"g": config}, state_dir=files["state"]) as hub:
        shown = status(hub)
        assert (shown.status, shown.from_cache, hub.list_tools()) == ("failed", False, ())
        assert shown.error, shown
