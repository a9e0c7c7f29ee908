"""Where mcp-agent keeps state between runs: one folder, resolved in one place.

``$MCP_AGENT_STATE_DIR`` when set, else ``$XDG_STATE_HOME/mcp-agent``, else
``~/.local/state/mcp-agent``. It holds ``state.db`` (conversations, approvals and run records,
when ``state.url`` is not set: ``serve`` and ``query --session``) and ``children/`` (the record of
running tool-server processes, so a gateway that was killed can be cleaned up after by the next
start); ``sessions.imported/`` holds the JSON conversations of earlier versions, once imported.
"""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """The state folder (not created here; whoever writes into it creates what it needs)."""
    if folder := os.environ.get("MCP_AGENT_STATE_DIR"):
        return Path(folder)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "mcp-agent"
