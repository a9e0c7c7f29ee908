"""The slow tier: agent frameworks call ``agent_query`` through their own MCP client layers.

A real gateway process (``mcp-agent serve``) with the fake model server and the echo and slow
fixture tool servers; each framework runs in its own virtual environment (``make
test-frameworks`` makes them from the pins beside this file) the docs/clients.md snippet for it, as
written, over Streamable HTTP and over SSE. Its first question is ``sleep 6``: a run longer
than the 5 s defaults that fail real runs (the OpenAI Agents SDK's session timeout). Each must
get the answer, and continue the conversation with the id it read from the answer. Strict-mode
frameworks (the OpenAI Agents SDK, smolagents) must take the published schema as it is. And an
MCP 1.x client (langchain-mcp-adapters) whose read timeout is shorter than the run still gets the
answer: over Streamable HTTP by resuming the stream, over SSE thanks to the keep-alive comments.

Selected by ``-m frameworks`` (``make test-frameworks``); ``make test`` leaves it out.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.model_server import RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import completion
from tests.gateway.conftest import free_port
from tests.gateway.e2e import rule_reply, write_config

from .snippets import FOLLOW_UP, FRAMEWORKS, QUESTION, ROOT, SESSION_LINE, Framework

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]

BY_NAME = {framework.name: framework for framework in FRAMEWORKS}
FIRST = "sleep 6"
FIRST_ANSWER = "slow__sleep said: slept"
SECOND_ANSWER = f"answer: {FOLLOW_UP} (earlier: {FIRST})"
BOUND = 120  # seconds: a "does not hang" bound for one script, not a timing


def continuing_reply(request: RecordedRequest) -> Reply:
    """``rule_reply``, but a question that continues a conversation is answered with the earlier
    questions too, which shows the conversation really was continued."""
    if request.path.endswith("/chat/completions"):
        messages = request.json["messages"]
        users = [m.get("content") or "" for m in messages if m["role"] == "user"]
        if messages[-1]["role"] == "user" and len(users) > 1:
            return Reply.json(completion(content=f"answer: {users[-1]} (earlier: {' | '.join(users[:-1])})"))
    return rule_reply(request)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A real gateway process on a free port; yields the port once it answers health."""
    folder = tmp_path_factory.mktemp("frameworks")
    port = free_port()
    with running_model_server() as model:
        model.handler = continuing_reply
        config = write_config(folder, model.base_url, folder / "slow.log", port=port)
        environ = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_AGENT_STATE_DIR": str(folder / "state")}
        with subprocess.Popen(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config)],
            cwd=ROOT,
            env=environ,
            stderr=subprocess.DEVNULL,
        ) as process:
            try:
                deadline = time.monotonic() + 60  # a does-not-hang bound
                while not ready(port):
                    assert process.poll() is None, "the gateway exited"
                    assert time.monotonic() < deadline, "the gateway did not come up with both tool servers"
                    time.sleep(0.2)
                yield port
            finally:
                process.terminate()
                process.wait(timeout=30)


def ready(port: int) -> bool:
    """Whether the gateway on ``port`` answers health with both tool servers up."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        return bool(httpx.get(f"http://127.0.0.1:{port}/api/v1/health").json()["servers_up"] == 2)
    return False


def execute(framework: Framework, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with the framework's Python, outside this repository."""
    assert framework.python.exists(), (
        f"{framework.python} is missing: `make test-frameworks` makes it from {framework.pins.name}"
    )
    environ = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # no key here to export traces with
    return subprocess.run(
        [str(framework.python), "-c", code],
        capture_output=True,
        text=True,
        timeout=BOUND,
        cwd=tmp_path,
        env=environ,
    )


def run(framework: Framework, code: str, tmp_path: Path) -> str:
    """``execute``, which must succeed; its stdout."""
    done = execute(framework, code, tmp_path)
    assert done.returncode == 0, f"{framework.name} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def check_conversation(framework: Framework, stdout: str) -> None:
    """Both answers came, the second from the same conversation (and, where the model sees the
    text, both texts end with that conversation's id)."""
    lines = [line for line in stdout.splitlines() if line]
    answers = [line for line in lines if not SESSION_LINE.match(line)]
    assert answers == [FIRST_ANSWER, SECOND_ANSWER], stdout
    if framework.text:  # each text's last line is the id, the same for both
        assert len(lines) == 4 and lines[0::2] == answers, stdout
        ids = [SESSION_LINE.match(line) for line in lines[1::2]]
        assert ids[0] and ids[1] and ids[0].group(1) == ids[1].group(1), stdout


@pytest.mark.parametrize("transport", ["http", "sse"])
@pytest.mark.parametrize("framework", FRAMEWORKS, ids=[framework.name for framework in FRAMEWORKS])
def test_the_readme_snippet_runs(gateway: int, framework: Framework, transport: str, tmp_path: Path) -> None:
    stdout = run(framework, framework.code(gateway, transport, (QUESTION, FIRST)), tmp_path)
    check_conversation(framework, stdout)


def test_the_openai_agents_sdk_needs_its_session_timeout_raised(gateway: int, tmp_path: Path) -> None:
    """What docs/clients.md says: with the SDK's default session timeout (5 s) the same 6 s run fails."""
    framework = BY_NAME["openai-agents"]
    default = ("        client_session_timeout_seconds=300,  # the default, 5 s, fails longer runs\n", "")
    text = (
        '(await tool.on_invoke_tool(context, arguments))["text"]',
        "await tool.on_invoke_tool(context, arguments)",
    )
    done = execute(framework, framework.code(gateway, "http", (QUESTION, FIRST), default, text), tmp_path)
    assert done.returncode != 0 and FIRST_ANSWER not in done.stdout, done.stdout
    assert done.stdout.startswith("An error occurred while running the tool."), done.stdout


# --------------------------------------------------------------------------------------------
# strict mode: every input required, so the optional ones are sent as null


LIMITS = {
    "maxRounds": 3,
    "maxTokens": None,
    "maxToolCalls": None,
    "timeoutSeconds": None,
    "toolTimeoutSeconds": None,
    "maxResultChars": None,
    "maxHistoryChars": None,
    "maxParallelTools": None,
    "loopThreshold": None,
    "failureHintAfter": None,
    "disableToolAfter": None,
    "earlyStop": None,
}

OPENAI_STRICT = """
import asyncio, json
from agents import Agent, RunContextWrapper
from agents.mcp import MCPServerStreamableHttp
from agents.tool_context import ToolContext

async def main():
    async with MCPServerStreamableHttp(params={"url": URL}, client_session_timeout_seconds=60) as gateway:
        agent = Agent(name="a", mcp_servers=[gateway], mcp_config={"convert_schemas_to_strict": True})
        [tool] = [t for t in await agent.get_all_tools(RunContextWrapper(None)) if t.name == "agent_query"]
        arguments = json.dumps(ARGUMENTS)
        context = ToolContext(None, tool_name=tool.name, tool_call_id="c1", tool_arguments=arguments)
        output = await tool.on_invoke_tool(context, arguments)
        print(json.dumps({"strict": tool.strict_json_schema, "schema": tool.params_json_schema, "text": output["text"]}))

asyncio.run(main())
"""

SMOLAGENTS_STRICT = """
import json
from smolagents import MCPClient
from smolagents.models import get_tool_json_schema
from smolagents.tools import validate_tool_arguments

with MCPClient({"url": URL, "transport": "streamable-http"}, structured_output=False) as tools:
    [tool] = [t for t in tools if t.name == "agent_query"]
    validate_tool_arguments(tool, ARGUMENTS)  # what a smolagents agent checks before a call
    schema = get_tool_json_schema(tool)["function"]["parameters"]  # what its model is shown
    print(json.dumps({"strict": True, "schema": schema, "text": tool(**ARGUMENTS)}))
"""


@pytest.mark.parametrize(
    ("name", "probe"),
    [("openai-agents", OPENAI_STRICT), ("smolagents", SMOLAGENTS_STRICT)],
    ids=["openai-agents", "smolagents"],
)
def test_strict_mode_takes_the_published_schema(gateway: int, name: str, probe: str, tmp_path: Path) -> None:
    """The framework requires every input; the nulls it then sends (limits' members too) are
    taken as "not given"."""
    arguments = {"query": "echo strict", "session_id": None, "limits": LIMITS}
    code = probe.replace("URL", repr(f"http://127.0.0.1:{gateway}/mcp")).replace("ARGUMENTS", repr(arguments))
    got = json.loads(run(BY_NAME[name], code, tmp_path).splitlines()[-1])
    assert got["strict"], got
    assert sorted(got["schema"]["required"]) == ["limits", "query", "session_id"], got
    assert got["text"].startswith("echo__echo said: strict\n\n[session_id: "), got


# --------------------------------------------------------------------------------------------
# an MCP 1.x client whose read timeout is shorter than the run


def test_langchain_resumes_a_streamable_http_stream_silent_past_its_read_timeout(
    gateway: int, tmp_path: Path
) -> None:
    """Silent for 12 s against a 5 s read timeout: the client resumes with Last-Event-ID (after
    the 250 ms the priming event asks for, inside the gateway's 1 s grace) and gets the answer.
    Before the ``retry`` it came back after 1 s, just too late: the run had been cancelled."""
    framework = BY_NAME["langchain-mcp-adapters"]
    code = framework.code(
        gateway, "http", (QUESTION, "sleep 12"), ('"sse_read_timeout": 300', '"sse_read_timeout": 5')
    )
    stdout = run(framework, code, tmp_path)
    assert [line for line in stdout.splitlines() if line and not SESSION_LINE.match(line)] == [
        FIRST_ANSWER,
        f"answer: {FOLLOW_UP} (earlier: sleep 12)",
    ], stdout


def test_langchain_over_sse_is_kept_alive_past_its_read_timeout(gateway: int, tmp_path: Path) -> None:
    """Over SSE nothing resumes: a keep-alive comment at least every 15 s keeps a stream with an
    18 s read timeout open through a 20 s silent run."""
    framework = BY_NAME["langchain-mcp-adapters"]
    code = framework.code(
        gateway, "sse", (QUESTION, "sleep 20"), ('"sse_read_timeout": 300', '"sse_read_timeout": 18')
    )
    stdout = run(framework, code, tmp_path)
    assert [line for line in stdout.splitlines() if line and not SESSION_LINE.match(line)] == [
        FIRST_ANSWER,
        f"answer: {FOLLOW_UP} (earlier: sleep 20)",
    ], stdout
