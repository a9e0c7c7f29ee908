"""A conversation whose tool result was paged on one replica, continued on another: the second
reads page 2 of it. The pages live beside the session in the shared state (SQLite, Redis), so
this holds across processes and after a restart; when they lived in each process's memory the
second replica answered that the handle had expired.

Two Agents on two States of one store (as two gateway replicas behind a load balancer are), and
two real processes on one SQLite file (the second starting after the first has closed its state).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest

from mcp_agent.config import AgentConfig, Limits
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.pages import page_starts
from mcp_agent.messages import ToolCall, Turn
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.state import StateLimits, open_state
from tests.loop._helpers import echo_tools

from .conftest import Backend

ROOT = Path(__file__).resolve().parents[2]
CHILD = str(Path(__file__).with_name("_pages_child.py"))
LINES = "".join(f"line {i:04d} é😀\n" for i in range(200))  # 2600 characters: 29 pages of 100 or fewer
HANDLE = re.compile(r"paged result (r[0-9a-f]{8})")
CONFIG = AgentConfig(limits=Limits(max_result_chars=100))


def pages() -> list[str]:
    starts = page_starts(LINES, 100)
    return [LINES[a:b] for a, b in zip(starts, [*starts[1:], len(LINES)], strict=True)]


def first_agent(state: object) -> Agent:
    """Pages LINES (the echo tool's result) and answers."""
    script = [tool_turn(ToolCall("c1", "echo", {"text": LINES})), text_turn("first answer")]
    return Agent(ScriptedProvider(script), echo_tools(), CONFIG, state=state)  # type: ignore[arg-type]


def reads(page: int) -> ScriptedProvider:
    """Reads ``page`` of the handle its history mentions, then answers."""

    def read(request: ModelRequest) -> Turn:
        found = HANDLE.search("\n".join(m.content for m in request.messages if m.role == "tool"))
        assert found, "no handle in the history"
        return tool_turn(ToolCall("read_it", "read_result", {"handle": found.group(1), "page": page}))

    return ScriptedProvider([read, text_turn("second answer")])


def handle_of(agent_result: object) -> str:
    transcript = agent_result.transcript  # type: ignore[attr-defined]
    found = HANDLE.search("\n".join(m.content for m in transcript if m.role == "tool"))
    assert found
    return found.group(1)


def assert_page_two(text: str, handle: str) -> None:
    expected = pages()
    assert text.startswith(f"[paged result {handle} (echo), page 2 of {len(expected)}: characters "), text
    assert text.split("\n", 1)[1].startswith(expected[1])


async def test_a_conversation_continued_on_another_replica_reads_page_two(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("memory:// is one process: no other replica shares it")
    a, b = await backend.open(), await backend.open()
    first = await first_agent(a).query("show me the lines", session_id="conv")
    assert first.ok and first.tool_calls[0].pages == len(pages()), first.detail
    handle = handle_of(first)
    second = await Agent(reads(2), echo_tools(), CONFIG, state=b).query("page two please", session_id="conv")
    assert second.ok, second.detail
    [text] = [m.content for m in second.transcript if m.role == "tool" and m.tool_call_id == "read_it"]
    assert_page_two(text, handle)


async def test_a_second_process_on_the_sqlite_file_reads_page_two_after_the_first_closed(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    state = await open_state(url, limits=StateLimits())
    try:
        first = await first_agent(state).query("show me the lines", session_id="conv")
    finally:
        await state.aclose()
    assert first.ok, first.detail
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, CHILD, url, "conv", "2"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert answer["ok"]
    assert_page_two(answer["text"], handle_of(first))
