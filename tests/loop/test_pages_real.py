"""Paged results end to end: the fake model server over HTTP, the real ``huge`` fixture server.

The model (a rule handler) asks ``huge__lines`` for 400 lines (5,200 characters, each line with
``é`` and ``😀``), which ``maxResultChars: 1000`` pages; it then reads pages 2 and 3 with
``read_result`` and answers. A second query on the same session reads page 4 of the same result.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_agent.config import parse_config
from mcp_agent.events import RecordingSink, ToolCallEnded
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.pages import page_starts
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion

from ._helpers import assert_valid_transcript

SERVERS = Path(__file__).resolve().parents[1] / "servers"
COUNT, PAGE = 400, 1000
TEXT = "".join(f"line {i:04d} é😀\n" for i in range(COUNT))  # as huge.py's lines_text
HANDLE = re.compile(r"paged result (r[0-9a-f]{8})")


def expected_pages() -> list[str]:
    starts = page_starts(TEXT, PAGE)
    return [TEXT[a:b] for a, b in zip(starts, [*starts[1:], len(TEXT)], strict=True)]


def rules(request: RecordedRequest) -> Reply:
    """``lines``: call huge__lines, then read pages 2 and 3; ``page N [HANDLE]``: read page N (of the
    first handle in the history, or HANDLE); then answer."""
    messages: list[dict[str, Any]] = request.json["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    query = messages[last_user]["content"]
    since = [m for m in messages[last_user:] if m["role"] == "tool"]
    handles = HANDLE.findall("\n".join(m["content"] for m in messages if m["role"] == "tool"))
    wanted = [2, 3] if query == "lines" else [int(query.split()[1])]
    handles = query.split()[2:] or handles
    if query == "lines" and not since:
        return Reply.json(completion(content=None, calls=[Call("huge__lines", {"count": COUNT}, id="lines")]))
    done = len(since) - (1 if query == "lines" else 0)
    if done < len(wanted):
        page = wanted[done]
        call = Call("read_result", {"handle": handles[0], "page": page}, id=f"{query[:4]}_p{page}")
        return Reply.json(completion(content=None, calls=[call]))
    return Reply.json(completion(content=f"read {len(since)} results"))


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.handler = rules
        yield server


@pytest.fixture
async def agent(model_server: FakeModelServer) -> AsyncIterator[Agent]:
    config = parse_config(
        {
            "llm": {
                "endpoint": model_server.base_url,
                "model": "rule-model",
                "provider": "openai",
                "stream": False,
                "maxRetries": 0,
            },
            "limits": {"maxResultChars": PAGE, "maxRounds": 6, "timeoutSeconds": 120},
            "mcpServers": {"huge": {"command": sys.executable, "args": [str(SERVERS / "huge.py")]}},
        },
        environ={},
    )
    async with Agent.from_config(config, record_children=False) as agent:
        yield agent


def tool_texts(transcript: Any) -> list[str]:
    return [m.content for m in transcript if m.role == "tool"]


def page_body(read: str) -> str:
    _head, _, rest = read.partition("\n")
    return re.sub(r"\n\[\.\.\. [^\n]*\]\Z", "", rest)


async def test_the_model_reads_pages_of_a_real_servers_result(
    model_server: FakeModelServer, agent: Agent
) -> None:
    model_server.requests.clear()
    sink = RecordingSink()
    result = await agent.query("lines", events=sink)
    assert result.ok and result.answer == "read 3 results", result.detail
    assert_valid_transcript(result.transcript)
    first, two, three = tool_texts(result.transcript)
    pages = expected_pages()
    assert len(pages) == 6 and all(len(p) <= PAGE for p in pages)
    assert (
        first.startswith(pages[0] + "\n[... paged result r") and f"{len(TEXT)} characters in 6 pages" in first
    )
    assert page_body(two) == pages[1] and page_body(three) == pages[2]
    # on the wire: read_result is offered only once a handle exists
    offered = [[t["function"]["name"] for t in r.json.get("tools", [])] for r in model_server.requests]
    assert "read_result" not in offered[0] and "huge__lines" in offered[0]
    assert all("read_result" in names for names in offered[1:])
    ended = sink.of(ToolCallEnded)
    assert [(e.name, e.pages, e.total_chars) for e in ended] == [
        ("huge__lines", 6, len(TEXT)),
        ("read_result", 0, 0),
        ("read_result", 0, 0),
    ]
    assert result.to_structured()["tool_calls"][0]["paged"] == {"pages": 6, "total_chars": len(TEXT)}


async def test_the_next_query_on_the_session_reads_a_page(agent: Agent) -> None:
    first = await agent.query("lines", session_id="pages-session")
    assert first.ok, first.detail
    second = await agent.query("page 4", session_id="pages-session")
    assert second.ok, second.detail
    assert_valid_transcript(second.transcript)
    assert page_body(tool_texts(second.transcript)[-1]) == expected_pages()[3]
    handle = HANDLE.findall(tool_texts(first.transcript)[0])[0]
    other = await agent.query(f"page 4 {handle}", session_id="another-session")  # not its handle
    assert tool_texts(other.transcript)[-1].startswith("error: unknown tool 'read_result'")
