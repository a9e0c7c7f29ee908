"""``serve`` with no ``approvals`` section: the model's call of a tool that declares
``destructiveHint`` is put to a caller that can answer a form, and without one it waits for the
dashboard or REST no longer than ``approvals.timeoutSeconds``, then is denied."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcp_agent.config import ApprovalsConfig

from ..conftest import Running, answer_of, make_config, running_gateway
from .test_ask_caller import Asked, approve
from .test_server import connect

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def _destructive_write(gateway: Running) -> None:
    def write_file(text: str) -> str:
        gateway.tools.written.append(text)
        return "written"

    gateway.tools.source.add(
        "write_file", write_file, parameters=TEXT, server="mem", annotations={"destructiveHint": True}
    )


def _config(timeout: float) -> Any:
    return make_config().model_copy(update={"approvals": ApprovalsConfig(timeout_seconds=timeout)})


@pytest.mark.parametrize(("transport", "era"), [("http", "legacy"), ("http", "modern")])
async def test_the_caller_is_asked_about_a_destructive_call_by_default(transport: str, era: str) -> None:
    async with running_gateway(_config(30)) as gateway:
        _destructive_write(gateway)
        asked = Asked(approve(True))
        async with connect(gateway.url, transport, era, elicitation_callback=asked) as client:
            with anyio.fail_after(30):
                result = await client.call_tool("agent_query", {"query": "write report.txt"})
        assert answer_of(result) == "write_file said: written"
        assert gateway.tools.written == ["report.txt"] and len(asked.questions) == 1


async def test_without_anyone_to_answer_the_call_is_denied_when_the_wait_ends() -> None:
    async with running_gateway(_config(0.2)) as gateway:
        _destructive_write(gateway)
        async with connect(gateway.url, "http", "legacy") as client:  # no elicitation
            with anyio.fail_after(30):
                result = await client.call_tool("agent_query", {"query": "write report.txt"})
        assert "approval timed out after 0.2 s" in answer_of(result)
        assert gateway.tools.written == []


async def test_a_tool_without_the_hint_is_not_asked_about() -> None:
    async with running_gateway(_config(30)) as gateway:
        asked = Asked(approve(False))
        async with connect(gateway.url, "http", "modern", elicitation_callback=asked) as client:
            with anyio.fail_after(30):
                result = await client.call_tool("agent_query", {"query": "write report.txt"})
        assert answer_of(result) == "write_file said: written" and asked.questions == []
