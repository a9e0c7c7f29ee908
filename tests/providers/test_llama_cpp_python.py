"""The OpenAI-compatible provider against what a real llama-cpp-python 0.3.36 server sent.

Every answer here is a recording (``tests/fakes/recorded/llama-cpp-python``, from
``docs/reference/wire-samples``), replayed byte for byte by the fake model server.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.messages import Message, ToolSpec
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.endpoints import resolve_endpoint
from mcp_agent.providers.openai_compat import OpenAICompatProvider
from mcp_agent.providers.retry import RetryPolicy
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.recordings import recorded
from tests.providers.conftest import SleepRecorder

SERVER = "llama-cpp-python"
CHECK_PORT = ToolSpec(
    name="ports__check_port",
    description="Check whether a TCP port on this machine is in use.",
    parameters={"type": "object", "properties": {"port": {"type": "integer"}}, "required": ["port"]},
)
MEMORY = ToolSpec(
    name="system__memory_usage", description="Memory.", parameters={"type": "object", "properties": {}}
)
REQUEST = ModelRequest(
    messages=[Message.system("sys"), Message.user("Is port 22 in use?")], tools=(CHECK_PORT, MEMORY)
)


def sample(name: str) -> Reply:
    return recorded(SERVER, name)


def make(
    server: FakeModelServer, client: httpx.AsyncClient, sleeps: SleepRecorder, **llm: Any
) -> OpenAICompatProvider:
    config = LLMConfig(
        **{"endpoint": server.base_url, "model": "models/SmolLM2-135M-Instruct.Q4_1.gguf", **llm}
    )
    return OpenAICompatProvider(
        config,
        client,
        endpoint=resolve_endpoint(config),
        retry=RetryPolicy(max_retries=config.max_retries, sleep=sleeps, rand=lambda: 0.0),
    )


# --------------------------------------------------------------------------------------------
# 1. the legacy function_call beside tool_calls


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "after-an-empty-stream"])
async def test_function_call_beside_tool_calls_is_no_second_call(
    stream: bool, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    if stream:
        model_server.enqueue(sample("A-chat-tools-stream"))
    model_server.enqueue(sample("A-chat-tools"))
    turn = await make(model_server, http_client, sleeps, stream=stream).complete(REQUEST)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("ports__check_port", {"port": 22})]
    assert turn.tool_calls[0].id == "call__0_ports__check_port_cmpl-7f6dd5ae-674a-4a14-a5cc-56b3f031de6c"
