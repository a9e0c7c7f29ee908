"""What one ``agent_query`` writes to the default (SQLite) store: a new conversation is stored by
the run's hold, in the lock's own write transaction, not by a write of its own beforehand."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from mcp_agent.config import AgentConfig
from mcp_agent.exceptions import StateError
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import Message
from mcp_agent.state import State, StateLimits, open_state
from mcp_agent.state.memory import MemorySessionStore, MemoryState
from mcp_agent.state.records import Session
from mcp_agent.state.sqlite import database

from ..conftest import HubLike, RuleModel, Tools, make_config, running_gateway
from .test_server import connect

T = TypeVar("T")


def on_the_state(state: State) -> Any:
    """An Agent factory that keeps its conversations in ``state`` (as the real one does)."""
    hub = HubLike(Tools().source)

    @asynccontextmanager
    async def factory(config: AgentConfig, *, state: State) -> AsyncIterator[Agent]:
        yield Agent(RuleModel(), hub, config, state=state)

    return factory


@pytest.fixture
async def sqlite_state(tmp_path: Path) -> AsyncIterator[State]:
    state = await open_state(f"sqlite:///{tmp_path / 'state.db'}", limits=StateLimits())
    try:
        yield state
    finally:
        await state.aclose()


@pytest.fixture
def write_transactions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each write transaction of the SQLite store, as it begins (its work's name)."""
    seen: list[str] = []
    real = database.write_transaction

    def counted(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
        seen.append(getattr(work, "__qualname__", repr(work)))
        return real(db, work)

    monkeypatch.setattr(database, "write_transaction", counted)
    return seen


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_query_without_session_id_is_four_writes_and_its_conversation_continues(
    era: str, sqlite_state: State, write_transactions: list[str]
) -> None:
    config = make_config()
    async with (
        running_gateway(config, factory=on_the_state(sqlite_state), state=sqlite_state) as gw,
        connect(gw.url, "streamable_http", era) as client,
    ):
        await client.call_tool("agent_query", {"query": "hello"})  # first use: nothing extra below
        write_transactions.clear()
        first = await client.call_tool("agent_query", {"query": "hello"})
        writes = list(write_transactions)
        session_id = first.structured_content["session_id"]
        again = await client.call_tool("agent_query", {"query": "history", "session_id": session_id})
    # the hold (storing the new conversation), the run's start, the save (releasing the lock), its end
    assert len(writes) == 4, writes
    assert not first.is_error and not again.is_error
    assert again.structured_content["session_id"] == session_id
    [info] = [s for s in await sqlite_state.sessions.list() if s.id == session_id]
    assert info.runs == 2 and info.owner == "local"  # the caller's, as a conversation made beforehand


class HoldFails(MemorySessionStore):
    """Sessions whose hold meets a failing store (as a full disk would)."""

    def hold(self, session_id: str, *, owner: str | None = None) -> AbstractAsyncContextManager[Session]:
        raise StateError("state.url 'sqlite:////x/state.db': OperationalError: database or disk is full")

    async def save(self, session: Session, transcript: Sequence[Message], *, release: bool = False) -> bool:
        raise AssertionError("nothing is saved without a hold")


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_store_failing_at_the_hold_of_a_new_conversation_says_so_and_keeps_nothing(era: str) -> None:
    config = make_config()
    state = MemoryState(StateLimits())
    sessions = HoldFails()
    hub = HubLike(Tools().source)

    @asynccontextmanager
    async def factory(config: AgentConfig, *, state: State) -> AsyncIterator[Agent]:
        yield Agent(RuleModel(), hub, config, state=state, sessions=sessions)

    async with (
        running_gateway(config, factory=factory, state=state) as gw,
        connect(gw.url, "streamable_http", era) as client,
    ):
        result = await client.call_tool("agent_query", {"query": "hello"})
    assert result.is_error
    assert "the conversation could not be loaded" in result.content[0].text
    assert "database or disk is full" in result.content[0].text
    assert await sessions.list() == []
