"""``as_live``: which tool sources give live definitions, the same answer as the Protocol check."""

from __future__ import annotations

from mcp_agent.messages import ToolResult, ToolSpec
from mcp_agent.tools.base import LiveToolSource, as_live
from mcp_agent.tools.memory import MemoryToolSource
from mcp_agent.tools.router.routing import ToolRouter


class Live(MemoryToolSource):
    async def live_spec(self, name: str) -> ToolSpec | ToolResult:
        return ToolResult("none", is_error=True)


class NotCallable(MemoryToolSource):
    live_spec = "not a method"


def test_as_live_answers_as_the_protocol_check() -> None:
    live = Live()
    routed = ToolRouter().for_run(live, 1000)
    for source in (MemoryToolSource(), live, NotCallable(), routed):
        assert (as_live(source) is source) is isinstance(source, LiveToolSource), source
    assert as_live(live) is live and as_live(MemoryToolSource()) is None
