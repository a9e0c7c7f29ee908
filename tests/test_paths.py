"""The state folder is resolved in one place, and the default state database lives there."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_agent._paths import state_dir
from mcp_agent.config import AgentConfig


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MCP_AGENT_STATE_DIR": "/srv/agent", "XDG_STATE_HOME": "/xdg"}, "/srv/agent"),
        ({"MCP_AGENT_STATE_DIR": "", "XDG_STATE_HOME": "/xdg"}, "/xdg/mcp-agent"),
        ({"XDG_STATE_HOME": "/xdg"}, "/xdg/mcp-agent"),
        ({"HOME": "/home/ada"}, "/home/ada/.local/state/mcp-agent"),
    ],
)
def test_state_dir(env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MCP_AGENT_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert state_dir() == Path(expected)
    assert AgentConfig().state_url(state_dir() / "state.db") == f"sqlite:///{expected}/state.db"
