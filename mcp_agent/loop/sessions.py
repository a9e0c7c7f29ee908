"""Conversation sessions, as the loop knows them: the names kept where they always were.

Sessions now live in ``mcp_agent.state`` (the ``SessionStore`` protocol and the ``Session``
values in ``state/base.py``, the in-memory store in ``state/memory.py``, SQLite and Redis
beside it). A session is a conversation carried across queries: its transcript (always valid:
every tool call answered, so it can be sent to a strict server next time) and a lock, taken by
``SessionStore.hold``, so that runs on one session are serialised while different sessions run
concurrently. Per-run state (failure ledger, fingerprints, budgets) is never kept there: each
query starts fresh.

``query --session`` once kept one JSON file per conversation in ``sessions/`` of the state
folder (``FileSessionStore``); it now uses the SQLite store, and ``import_session_files`` moves
those files into it once (see ``mcp_agent/state/__init__.py``).
"""

from __future__ import annotations

from ..state import import_session_files
from ..state.base import SessionStore
from ..state.memory import MemorySessionStore
from ..state.records import SESSION_ID_PATTERN, Session, SessionInfo, new_session_id, valid_session_id

__all__ = [
    "SESSION_ID_PATTERN",
    "MemorySessionStore",
    "Session",
    "SessionInfo",
    "SessionStore",
    "import_session_files",
    "new_session_id",
    "valid_session_id",
]
