"""Fixtures for the gateway: a rule-following fake model, in-memory tools, a real uvicorn server.

``RuleModel`` is a deterministic Provider that reads the query and acts on it:

- ``echo X`` calls the ``echo`` tool with ``X`` and then answers ``echo said: <result>``;
- ``sleep N`` calls ``sleep`` (a tool that records whether it was cancelled);
- ``write X`` calls ``write_file`` (which needs approval in ``approvals_config``);
- ``history`` answers with the user messages seen so far in the conversation;
- ``empty`` answers nothing (the run ends ``empty_response``);
- ``rounds`` keeps calling ``echo`` forever (``max_rounds`` ends it);
- anything else is answered ``answer: <query>``.

``running_gateway(config, ...)`` serves the real app on a free 127.0.0.1 port with uvicorn in
the test's own event loop and yields a ``Running`` handle (base URL, the app, the tools).
"""

from __future__ import annotations

import itertools
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.gateway.app import GatewayApp, create_app
from mcp_agent.gateway.serve import bind_socket, serve_app
from mcp_agent.gateway.service import AgentFactory
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import ToolCall, ToolResult, ToolSpec, Turn, Usage
from mcp_agent.providers.base import DeltaCallback, ModelRequest
from mcp_agent.providers.fake import text_turn, tool_turn
from mcp_agent.state.base import State
from mcp_agent.tools.hub import ToolHub
from mcp_agent.tools.memory import MemoryToolSource
from mcp_agent.tools.status import ServerStatus

_ids = itertools.count(1)


class RuleModel:
    """A Provider that follows the rules of the module docstring. Counts its calls."""

    def __init__(self, *, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        self.calls += 1
        if self.delay:
            await anyio.sleep(self.delay)
        messages = list(request.messages)
        last = messages[-1]
        users = [m.content for m in messages if m.role == "user"]
        query = users[-1] if users else ""
        usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
        if last.role == "tool":
            if query == "rounds":
                return tool_turn(ToolCall(f"c{next(_ids)}", "echo", {"text": str(next(_ids))}), usage=usage)
            return text_turn(f"{last.name} said: {last.content}", usage=usage)
        verb, _, rest = query.partition(" ")
        if verb == "echo":
            return tool_turn(ToolCall(f"c{next(_ids)}", "echo", {"text": rest}), usage=usage)
        if verb == "sleep":
            return tool_turn(ToolCall(f"c{next(_ids)}", "sleep", {"seconds": float(rest or 30)}), usage=usage)
        if verb == "write":
            return tool_turn(ToolCall(f"c{next(_ids)}", "write_file", {"text": rest}), usage=usage)
        if verb == "rounds":
            return tool_turn(ToolCall(f"c{next(_ids)}", "echo", {"text": "0"}), usage=usage)
        if verb == "history":
            return text_turn("seen: " + " | ".join(users), usage=usage)
        if verb == "empty":
            return text_turn("", usage=usage)
        return text_turn(f"answer: {query}", usage=usage)


@dataclass
class Tools:
    """In-memory tools: echo, sleep (records cancellation), write_file (for approvals)."""

    source: MemoryToolSource = field(default_factory=MemoryToolSource)
    cancelled: list[float] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    sleeping: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        text_schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

        async def echo(text: str) -> str:
            return text

        async def sleep(seconds: float) -> str:
            self.sleeping.set()
            try:
                await anyio.sleep(seconds)
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(seconds)
                raise
            return "slept"

        def write_file(text: str) -> str:
            self.written.append(text)
            return "written"

        self.source.add("echo", echo, description="Echo the text.", parameters=text_schema, server="mem")
        self.source.add(
            "sleep",
            sleep,
            description="Sleep.",
            parameters={
                "type": "object",
                "properties": {"seconds": {"type": "number"}},
                "required": ["seconds"],
            },
            server="mem",
        )
        self.source.add("write_file", write_file, description="Write.", parameters=text_schema, server="mem")


class HubLike(ToolHub):
    """A ToolHub without servers over a MemoryToolSource: its tools, one ``mem`` server up, and
    ``changed()`` to tell its subscribers that the tools changed."""

    def __init__(self, source: MemoryToolSource) -> None:
        super().__init__({})
        self.source = source

    def list_tools(self) -> Sequence[ToolSpec]:
        return self.source.list_tools()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolResult:
        return await self.source.call_tool(name, arguments, timeout=timeout)

    async def live_spec(self, name: str) -> ToolSpec | ToolResult:
        spec = next((spec for spec in self.source.list_tools() if spec.name == name), None)
        return spec if spec is not None else ToolResult(f"unknown tool {name!r}", is_error=True)

    def status(self) -> list[ServerStatus]:
        return [ServerStatus(name="mem", status="up", tool_count=len(self.source.list_tools()))]

    def changed(self) -> None:
        for callback in list(self._subscribers):
            callback()


def make_config(limits: dict[str, Any] | None = None, **gateway: Any) -> AgentConfig:
    """A config with the given gateway settings (snake_case keys) and test-friendly limits."""
    data: dict[str, Any] = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "limits": {"maxRounds": 4, "toolTimeoutSeconds": 30, "timeoutSeconds": 60, **(limits or {})},
        "approvals": {"require": ["write_file"], "timeoutSeconds": 30},
        "gateway": {"description": "Test agent."},
    }
    config = parse_config(data, environ={})
    return config.model_copy(update={"gateway": config.gateway.model_copy(update=gateway)})


def agent_factory(model: Any, tools: Any) -> AgentFactory:
    """An Agent over ``model`` and ``tools`` that keeps its own (memory) state."""

    @asynccontextmanager
    async def factory(config: AgentConfig, *, state: State) -> AsyncIterator[Agent]:
        yield Agent(model, tools, config)

    return factory


@dataclass
class Running:
    url: str
    app: GatewayApp
    tools: Tools
    hub: HubLike
    model: RuleModel
    port: int

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=30, **kwargs)


@asynccontextmanager
async def running_gateway(
    config: AgentConfig | None = None,
    *,
    model: RuleModel | None = None,
    factory: AgentFactory | None = None,
    stateless: bool | None = None,
    sock: socket.socket | None = None,
) -> AsyncIterator[Running]:
    """The real app under uvicorn on a free port (or on ``sock``, bound beforehand by a test
    whose config names its own URL); stopped (gracefully) on exit."""
    config = config or make_config()
    tools = Tools()
    hub = HubLike(tools.source)
    model = model or RuleModel()
    app = create_app(config, factory=factory or agent_factory(model, hub), stateless=stateless)
    sock = sock or bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    stop = anyio.Event()
    ready = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: serve_app(app, sock, stop=stop, handle_signals=False, on_ready=lambda h, p: ready.set())
        )
        with anyio.fail_after(20):
            await ready.wait()
            await app.service.ready.wait()
        try:
            yield Running(f"http://127.0.0.1:{port}", app, tools, hub, model, port)
        finally:
            stop.set()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that module-scoped gateways can be shared by read-only tests."""
    return "asyncio"


@pytest.fixture
async def gateway() -> AsyncIterator[Running]:
    async with running_gateway() as running:
        yield running


@pytest.fixture(scope="module")
async def shared_gateway() -> AsyncIterator[Running]:
    """One gateway for a module's tests that only read, or that compare counters before and after."""
    async with running_gateway() as running:
        yield running


SESSION_LINE = re.compile(
    r"\n\n\[session_id: (\S+) \(pass it as session_id to continue this conversation\)\]$"
)


def answer_of(result: Any) -> str:
    """An agent_query result's text without its last line, the conversation id (checked against
    structuredContent)."""
    text: str = result.content[0].text
    match = SESSION_LINE.search(text)
    if match is None:
        return text
    assert result.structured_content["session_id"] == match.group(1)
    return text[: match.start()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """Parse a text/event-stream response into (event, data) pairs."""
    event, data = "message", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data += line[6:]
        elif line == "":
            if data:
                yield event, json.loads(data)
            event, data = "message", ""


async def eventually(check: Callable[[], bool | Awaitable[bool]], timeout: float = 10) -> None:
    """Wait until ``check()`` is true (a "does not hang" bound, not a timing assertion)."""
    with anyio.fail_after(timeout):
        while True:
            value = check()
            if not isinstance(value, bool):
                value = await value
            if value:
                return
            await anyio.sleep(0.02)
