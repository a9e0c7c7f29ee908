"""Fast start: a gateway whose tool servers' lists are cached answers at once, and tells its MCP
clients (``tools/list_changed``) when a server's real list differs from the cached one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp_agent._paths import state_dir
from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.loop.agent import Agent
from mcp_agent.tools.hub import open_tool_hub

from .conftest import eventually, running_gateway
from .test_mcp import connect

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
        running_gateway(config, factory=Agent.from_config) as gateway,
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
