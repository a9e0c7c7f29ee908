"""A second gateway process continuing a conversation, for ``test_pages_replicas.py``.

``python _pages_child.py URL SESSION PAGE``: an Agent on the state at URL whose scripted model
asks ``read_result`` for page PAGE of the first handle its history mentions, then answers. It
prints the text of that ``read_result`` call as one JSON line.
"""

from __future__ import annotations

import json
import re
import sys

import anyio

from mcp_agent.config import AgentConfig, Limits
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import ToolCall, Turn
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.state import StateLimits, open_state
from tests.loop._helpers import echo_tools

HANDLE = re.compile(r"paged result (r[0-9a-f]{8})")


async def main(url: str, session_id: str, page: str) -> None:
    def read(request: ModelRequest) -> Turn:
        found = HANDLE.search("\n".join(m.content for m in request.messages if m.role == "tool"))
        assert found, "no handle in the history"
        return tool_turn(ToolCall("read_it", "read_result", {"handle": found.group(1), "page": int(page)}))

    state = await open_state(url, limits=StateLimits())
    try:
        config = AgentConfig(limits=Limits(max_result_chars=100))
        agent = Agent(ScriptedProvider([read, text_turn("read it")]), echo_tools(), config, state=state)
        result = await agent.query("go on", session_id=session_id)
        [text] = [m.content for m in result.transcript if m.role == "tool" and m.tool_call_id == "read_it"]
        print(json.dumps({"text": text, "ok": result.ok}), flush=True)
    finally:
        await state.aclose()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
