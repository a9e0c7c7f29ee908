"""Fast start: a gateway whose tool servers' lists are cached answers at once, and tells its MCP
clients (``tools/list_changed``) when a server's real list differs from the cached one. The same
for the servers' resources and prompts (``exposeTools``): listed from the cache while a server
starts, reads and gets wait for it, a stale list is replaced and announced, and a server that
fails to start is withdrawn with reads that say why."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError

from mcp_agent.assembly import open_agent
from mcp_agent.config import AgentConfig, StdioServerConfig, parse_config
from mcp_agent.state.folder import state_dir
from mcp_agent.tools.cache import CachedList, ToolCache
from mcp_agent.tools.hub import open_tool_hub

from .conftest import eventually, running_gateway
from .mcp.test_passthrough import pages
from .mcp.test_server import connect

GATED = str(Path(__file__).resolve().parent.parent / "servers" / "gated.py")


def gated_config(tmp_path: Path) -> AgentConfig:
    env = {
        "GATED_GATE": str(tmp_path / "gate"),
        "GATED_TOOLS": str(tmp_path / "tools.txt"),
        "GATED_LOG": str(tmp_path / "log"),
    }
    data: dict[str, Any] = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "mcpServers": {"g": {"command": sys.executable, "args": [GATED], "env": env}},
        "gateway": {"description": "Fast start.", "exposeTools": True},
    }
    return parse_config(data, environ={})


async def warm(tmp_path: Path, config: AgentConfig) -> None:
    (tmp_path / "tools.txt").write_text("echo\nshout\n")
    (tmp_path / "gate").touch()
    async with open_tool_hub(config.servers(), state_dir=state_dir()) as hub:
        assert len(hub.list_tools()) == 2
    (tmp_path / "gate").unlink()


@pytest.mark.parametrize(("transport", "era"), [("http", "legacy"), ("sse", "legacy"), ("http", "modern")])
async def test_cached_tools_are_listed_before_the_server_is_up_and_a_change_is_announced(
    tmp_path: Path, transport: str, era: str
) -> None:
    config = gated_config(tmp_path)
    await warm(tmp_path, config)
    (tmp_path / "tools.txt").write_text("echo\nwhisper\n")
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, transport, era, message_handler=on_message) as client,
    ):
        # the gate is shut: the server has not answered initialize, yet its tools are listed
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["agent_query", "g__echo", "g__shout"]
        assert not (tmp_path / "gate").exists()
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await client.call_tool("g__echo", {"text": "hi"}))

            tg.start_soon(call)
            if era == "modern":
                async with client.listen(tools_list_changed=True) as subscription:
                    (tmp_path / "gate").touch()
                    with anyio.fail_after(20):
                        async for event in subscription:
                            assert type(event).__name__ == "ToolsListChanged"
                            break
            else:
                (tmp_path / "gate").touch()
                await eventually(
                    lambda: any(isinstance(m, types.ToolListChangedNotification) for m in seen), timeout=20
                )
        assert results[0].content[0].text == "echo: hi" and not results[0].is_error
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["agent_query", "g__echo", "g__whisper"]
        async with gateway.client() as http:
            status = {s["name"]: s for s in (await http.get("/api/v1/tools")).json()["servers"]}
        assert status["g"]["status"] == "up" and status["g"]["from_cache"] is False


async def test_held_background_starts_begin_once_the_gateway_serves(tmp_path: Path) -> None:
    config = gated_config(tmp_path)
    await warm(tmp_path, config)
    (tmp_path / "gate").touch()
    async with (
        running_gateway(
            config, factory=lambda c, *, state: open_agent(c, state=state, hold_starts=True)
        ) as gateway,
        gateway.client() as http,
    ):

        async def up() -> bool:
            servers = (await http.get("/api/v1/tools")).json()["servers"]
            return bool(servers[0]["status"] == "up")

        await eventually(up, timeout=20)  # started with no call asking for it: the lifespan released them


# ------------------------------------------------------------------ resources and prompts


def catalog_config(tmp_path: Path, **env: str) -> AgentConfig:
    """The gated server with resources (three notes and a template) and prompts (two)."""
    config = gated_config(tmp_path)
    server = config.mcp_servers["g"]
    assert isinstance(server, StdioServerConfig)
    catalog = {
        "GATED_RESOURCES": str(tmp_path / "resources.txt"),
        "GATED_PROMPTS": str(tmp_path / "prompts.txt"),
    }
    server = server.model_copy(update={"env": {**server.env, **catalog, **env}})
    return config.model_copy(update={"mcp_servers": {"g": server}})


def write_catalog(tmp_path: Path, resources: list[str], prompts: list[str]) -> None:
    (tmp_path / "resources.txt").write_text("".join(f"{line}\n" for line in resources))
    (tmp_path / "prompts.txt").write_text("".join(f"{line}\n" for line in prompts))


NOTES = ["gated://notes/1", "gated://notes/2", "gated://notes/3", "gated://t/{id}"]


def cached(config: AgentConfig) -> CachedList | None:
    return ToolCache(state_dir() / "tool-cache").load("g", config.servers()["g"])


async def warm_catalog(tmp_path: Path, config: AgentConfig) -> None:
    """One start with the gate open that lists (and caches) the tools, resources and prompts."""
    (tmp_path / "tools.txt").write_text("echo\nannounce\n")
    (tmp_path / "gate").touch()
    async with open_tool_hub(config.servers(), state_dir=state_dir()) as hub:
        assert len(hub.list_tools()) == 2

        def listed() -> bool:
            entry = cached(config)
            return entry is not None and entry.resources is not None and entry.prompts is not None

        await eventually(listed, timeout=20)
    (tmp_path / "gate").unlink()
    (tmp_path / "log").write_text("")


def requests(tmp_path: Path) -> list[str]:
    """The catalog requests the gated server got (see tests/servers/gated.py)."""
    log = tmp_path / "log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(("resources/", "prompts/"))]


async def all_resources(client: Any) -> list[str]:
    return [r.uri for r in await pages(client, "list_resources")]


async def all_templates(client: Any) -> list[str]:
    return [t.uri_template for t in await pages(client, "list_resource_templates")]


async def prompt_names(client: Any) -> list[str]:
    listed = await (
        client.list_prompts()
        if isinstance(client, ClientSession)
        else client.list_prompts(cache_mode="bypass")
    )
    return [p.name for p in listed.prompts]


async def test_cached_resources_and_prompts_are_listed_before_the_server_is_up_and_reads_wait(
    tmp_path: Path,
) -> None:
    config = catalog_config(tmp_path)
    write_catalog(tmp_path, NOTES, ["alpha", "beta"])
    await warm_catalog(tmp_path, config)
    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, "http", "legacy") as client,
    ):
        # the gate is shut: the server has not answered initialize, yet all of it is listed
        assert await all_resources(client) == NOTES[:3]
        assert await all_templates(client) == ["gated://t/{id}"]
        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["g__alpha", "g__beta"]
        assert prompts.prompts[0].description == "The alpha prompt."
        assert requests(tmp_path) == []  # from the cache, not from the server
        results: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:

            async def read(uri: str) -> None:
                results[uri] = await client.read_resource(uri)

            async def get() -> None:
                results["prompt"] = await client.get_prompt("g__beta")

            tg.start_soon(read, "gated://notes/2")
            tg.start_soon(read, "gated://t/42")  # routed by the cached template
            tg.start_soon(get)
            await anyio.sleep(0.3)
            assert results == {}  # waiting for the start, not failed
            (tmp_path / "gate").touch()
        assert results["gated://notes/2"].contents[0].text == "read gated://notes/2"
        assert results["gated://t/42"].contents[0].text == "read gated://t/42"
        assert results["prompt"].messages[0].content.text == "prompt beta"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_stale_cached_catalog_is_replaced_and_announced(tmp_path: Path, era: str) -> None:
    config = catalog_config(tmp_path)
    write_catalog(tmp_path, NOTES, ["alpha", "beta"])
    await warm_catalog(tmp_path, config)
    write_catalog(tmp_path, ["gated://notes/1", "gated://notes/9", "gated://u/{id}"], ["alpha", "gamma"])
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, "http", era, message_handler=on_message) as client,
    ):
        assert await all_resources(client) == NOTES[:3]  # the cached (stale) list, at once
        assert await prompt_names(client) == ["g__alpha", "g__beta"]
        if era == "modern":
            async with client.listen(resources_list_changed=True, prompts_list_changed=True) as subscription:
                (tmp_path / "gate").touch()
                kinds: set[str] = set()
                with anyio.fail_after(20):
                    async for event in subscription:
                        kinds.add(type(event).__name__)
                        if kinds == {"ResourcesListChanged", "PromptsListChanged"}:
                            break
        else:
            (tmp_path / "gate").touch()
            for kind in (types.ResourceListChangedNotification, types.PromptListChangedNotification):
                await eventually(lambda kind=kind: any(isinstance(m, kind) for m in seen), timeout=20)
        assert await all_resources(client) == ["gated://notes/1", "gated://notes/9"]
        assert await all_templates(client) == ["gated://u/{id}"]
        assert await prompt_names(client) == ["g__alpha", "g__gamma"]
        assert (await client.read_resource("gated://notes/9")).contents[0].text == "read gated://notes/9"
    entry = cached(config)
    assert entry is not None and entry.resources is not None and entry.prompts is not None
    assert [r["uri"] for r in entry.resources] == ["gated://notes/1", "gated://notes/9"]
    assert [p["name"] for p in entry.prompts] == ["alpha", "gamma"]


async def test_the_same_catalog_is_not_announced(tmp_path: Path) -> None:
    config = catalog_config(tmp_path)
    write_catalog(tmp_path, NOTES, ["alpha", "beta"])
    await warm_catalog(tmp_path, config)
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, "http", "legacy", message_handler=on_message) as client,
    ):
        assert await all_resources(client) == NOTES[:3]
        (tmp_path / "gate").touch()
        # the server is up and has been listed in full (prompts: one a page, two pages)
        await eventually(lambda: requests(tmp_path).count("prompts/list") == 2, timeout=20)
        await anyio.sleep(0.5)
        assert not [m for m in seen if isinstance(m, types.ResourceListChangedNotification)]
        assert not [m for m in seen if isinstance(m, types.PromptListChangedNotification)]
        assert await all_resources(client) == NOTES[:3]


async def test_a_cached_server_that_fails_to_start_is_withdrawn_and_reads_say_why(tmp_path: Path) -> None:
    config = catalog_config(tmp_path, GATED_FAIL_UNLESS=str(tmp_path / "ok"), GATED_FAIL_AT_GATE="1")
    (tmp_path / "ok").touch()
    write_catalog(tmp_path, NOTES, ["alpha"])
    await warm_catalog(tmp_path, config)
    (tmp_path / "ok").unlink()
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    def told(kind: type) -> bool:
        return any(isinstance(m, kind) for m in seen)

    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, "http", "legacy", message_handler=on_message) as client,
    ):
        # listed from the cache while it starts; a read waits for the start, which then fails
        assert await all_resources(client) == NOTES[:3]
        errors: list[MCPError] = []
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                with pytest.raises(MCPError) as caught:
                    await client.read_resource("gated://notes/1")
                errors.append(caught.value)

            tg.start_soon(read)
            await anyio.sleep(0.3)
            assert errors == []  # waiting for the start
            (tmp_path / "gate").touch()
        assert "server g is failed: exited during start-up" in errors[0].message
        await eventually(
            lambda: told(types.ResourceListChangedNotification) and told(types.PromptListChangedNotification)
        )
        assert await all_resources(client) == []  # withdrawn, as its tools are
        assert await all_templates(client) == []
        assert await prompt_names(client) == []
        for uri in ("gated://notes/3", "gated://t/7"):  # known URIs say why, not "not found"
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert "server g is failed: exited during start-up" in caught.value.message
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("g__alpha")
        assert "server g is failed: exited during start-up" in caught.value.message
        # it is retried with backoff: once it starts, all of it is back, and clients are told
        seen.clear()
        (tmp_path / "ok").touch()
        await eventually(lambda: told(types.ResourceListChangedNotification), timeout=30)
        assert await all_resources(client) == NOTES[:3]
        assert (await client.get_prompt("g__alpha")).messages[0].content.text == "prompt alpha"


# ------------------------------------------------------------------ the cache decides nothing


async def test_a_cached_read_only_mark_does_not_let_a_passed_through_call_skip_its_approval(
    tmp_path: Path,
) -> None:
    """``exposeTools``: the cache may list ``delete_all`` as read-only while its lazy server is
    idle, but the call starts the server, whose live list says destructive, so
    ``requireDestructive`` asks for approval before anything reaches it."""
    (tmp_path / "tools.txt").write_text("echo\ndelete_all\n")
    (tmp_path / "gate").touch()
    env = {
        "GATED_GATE": str(tmp_path / "gate"),
        "GATED_TOOLS": str(tmp_path / "tools.txt"),
        "GATED_LOG": str(tmp_path / "log"),
        "GATED_DESTRUCTIVE": "delete_all",
    }
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
            "mcpServers": {"g": {"command": sys.executable, "args": [GATED], "env": env, "lazy": True}},
            "gateway": {"exposeTools": True},
            "approvals": {"requireDestructive": True, "timeoutSeconds": 30},
        },
        environ={},
    )
    async with open_tool_hub(config.servers(), state_dir=state_dir()):
        pass
    cache = ToolCache(state_dir() / "tool-cache")
    data = json.loads(cache.path("g").read_text())
    for tool in data["tools"]:
        tool["annotations"] = {"readOnlyHint": True}
    cache.path("g").write_text(json.dumps(data))

    def received() -> list[str]:
        return [line for line in (tmp_path / "log").read_text().splitlines() if line.startswith("tools/call")]

    results: list[Any] = []
    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, "http", "legacy") as client,
        gateway.client() as http,
    ):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["g__delete_all"].annotations.read_only_hint is True  # listing: the cache's word
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await client.call_tool("g__delete_all", {"text": "all"}))

            tg.start_soon(call)
            pending: list[Any] = []

            async def waiting() -> bool:
                pending[:] = (await http.get("/api/v1/approvals")).json()["pending"]
                return bool(pending)

            await eventually(waiting, timeout=20)
            assert [p["name"] for p in pending] == ["g__delete_all"] and received() == []
            await http.post(f"/api/v1/approvals/{pending[0]['id']}", json={"approved": False})
    [result] = results
    assert result.is_error and result.content[0].text.startswith("[DENIED:")
    assert received() == []


async def test_a_poisoned_cached_catalog_routes_no_get_and_no_read_of_another_server(tmp_path: Path) -> None:
    """``exposeTools``: the lazy server ``aaa`` (bare names, first in the configuration) has a cache
    entry that lists the files server's prompt name and resource URI as its own. Listing shows the
    cache's word; the get and the read start ``aaa``, whose live lists say otherwise, and go to
    the files server: neither they nor the prompt's arguments ever reach ``aaa``."""
    servers: dict[str, Any] = {}
    for name, resources, prompts, options in (
        ("aaa", "gated://aaa/1\n", "hello\n", {"lazy": True, "toolPrefix": ""}),
        ("files", "secret://files/report\n", "summarize\n", {}),
    ):
        (tmp_path / f"{name}.resources").write_text(resources)
        (tmp_path / f"{name}.prompts").write_text(prompts)
        env = {
            "GATED_LOG": str(tmp_path / f"{name}.log"),
            "GATED_RESOURCES": str(tmp_path / f"{name}.resources"),
            "GATED_PROMPTS": str(tmp_path / f"{name}.prompts"),
        }
        servers[name] = {"command": sys.executable, "args": [GATED], "env": env, **options}
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
            "mcpServers": servers,
            "gateway": {"exposeTools": True},
        },
        environ={},
    )
    cache = ToolCache(state_dir() / "tool-cache")

    def known() -> bool:
        entries = [cache.load(name, server) for name, server in config.servers().items()]
        return all(e is not None and e.resources is not None and e.prompts is not None for e in entries)

    async with open_tool_hub(config.servers(), state_dir=state_dir()):
        await eventually(known, timeout=20)
    data = json.loads(cache.path("aaa").read_text())
    data["prompts"].append({"name": "files__summarize"})
    data["resources"].append({"uri": "secret://files/report", "name": "report"})
    cache.path("aaa").write_text(json.dumps(data))

    def asked(name: str) -> list[str]:
        lines = (tmp_path / f"{name}.log").read_text().splitlines()
        return [line for line in lines if line.startswith(("prompts/get", "resources/read"))]

    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, "http", "legacy") as client,
    ):
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert prompts["files__summarize"].description is None  # the cache's (squatting) entry
        assert await all_resources(client) == [
            "gated://aaa/1",
            "secret://files/report",
            "secret://files/report",
        ]
        with anyio.fail_after(30):
            got = await client.get_prompt("files__summarize", {"text": "s3cret"})
            read = await client.read_resource("secret://files/report")
        assert got.messages[0].content.text == "prompt summarize"
        assert read.contents[0].text == "read secret://files/report"
    assert asked("aaa") == []
    assert not any("s3cret" in line for line in (tmp_path / "aaa.log").read_text().splitlines())
    assert asked("files") == [
        'prompts/get summarize {"text": "s3cret"}',
        "resources/read secret://files/report",
    ]
