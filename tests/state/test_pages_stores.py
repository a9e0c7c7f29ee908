"""What the SQLite and Redis page stores add to the contract (``test_pages_contract.py``): the
SQLite tables arrive by migration and their sum of sizes stays exact, the least recently used
result is found through an index; Redis keeps a session's pages in its hash and drops what a
session that expired left in the global order once the total cap reaches it."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from mcp_agent.loop.pages import split_pages
from mcp_agent.messages import Message
from mcp_agent.state import StateLimits, open_state
from mcp_agent.state._sqlite_schema import MIGRATIONS, migrate
from mcp_agent.state.redis import RedisState
from mcp_agent.state.sqlite import SqliteState
from tests.scale.infra import RedisServer

TEXT = "".join(f"line {i:03d} é😀\n" for i in range(40))
PAGES = split_pages(TEXT, 100)


# --------------------------------------------------------------------------------------------
# SQLite


async def test_a_version_1_file_gets_the_page_tables_and_keeps_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path, isolation_level=None) as db:
        migrate(db, MIGRATIONS[:1])
        db.execute(
            "INSERT INTO sessions (id, created, updated, used, runs, messages, transcript) "
            'VALUES (\'old\', 1, 1, 1e12, 1, 1, \'[{"role":"user","content":"from version 1"}]\')'
        )
    state = await open_state(f"sqlite:///{path}", limits=StateLimits(session_ttl_seconds=0))
    try:
        async with state.sessions.hold("old") as session:
            assert session.transcript == (Message.user("from version 1"),)
            info = await state.pages.put("old", "t", PAGES, len(TEXT))
            assert info is not None
            page = await state.pages.read("old", info.handle, 2)
            assert page is not None and page.text == PAGES[1]
    finally:
        await state.aclose()


async def test_the_sum_of_sizes_follows_every_way_a_result_goes(tmp_path: Path) -> None:
    state = await open_state(f"sqlite:///{tmp_path}/state.db", limits=StateLimits(max_sessions=2))
    assert isinstance(state, SqliteState)
    db = state._database.db

    def total() -> int:
        return int(db.execute("SELECT bytes FROM page_totals").fetchone()[0])

    try:
        for name in ("a", "b"):
            async with state.sessions.hold(name):
                pass
        a = await state.pages.put("a", "t", PAGES, len(TEXT))
        b = await state.pages.put("b", "t", PAGES, len(TEXT))
        assert a and b and total() == a.size + b.size
        await state.pages.put("a", "t", PAGES, len(TEXT), max_scope_bytes=a.size)  # evicts a's first
        assert total() == a.size + b.size
        async with state.sessions.hold("c"):  # the session cap drops "a", the least recently used
            pass
        assert await state.sessions.get("a") is None and total() == b.size
        assert await state.sessions.delete("b")  # its results go with it (a cascade)
        assert total() == 0
        assert db.execute("SELECT count(*) FROM result_pages").fetchone()[0] == 0
    finally:
        await state.aclose()


async def test_the_least_recently_used_result_is_found_through_an_index(tmp_path: Path) -> None:
    state = await open_state(f"sqlite:///{tmp_path}/state.db", limits=StateLimits())
    assert isinstance(state, SqliteState)
    try:
        plans = [
            " ".join(str(row[-1]) for row in state._database.db.execute(f"EXPLAIN QUERY PLAN {sql}", args))
            for sql, args in (
                (
                    "SELECT session_id, handle, bytes FROM paged_results WHERE used > 0 ORDER BY used LIMIT 1",
                    (),
                ),
                (
                    "SELECT handle, bytes FROM paged_results WHERE session_id = ? AND used > 0 ORDER BY used LIMIT 1",
                    ("s",),
                ),
            )
        ]
        for plan in plans:
            assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan
    finally:
        await state.aclose()


# --------------------------------------------------------------------------------------------
# Redis


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    running = RedisServer(tmp_path, persist=False).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
async def redis_state(server: RedisServer) -> AsyncIterator[RedisState]:
    state = await open_state(server.url, limits=StateLimits(session_ttl_seconds=0.3, max_paged_bytes_total=0))
    assert isinstance(state, RedisState)
    try:
        yield state
    finally:
        await state.aclose()


async def test_a_sessions_pages_are_fields_of_its_hash(redis_state: RedisState) -> None:
    async with redis_state.sessions.hold("conv"):
        info = await redis_state.pages.put("conv", "t", PAGES, len(TEXT))
        assert info is not None
        fields = {f.decode() for f in await redis_state.client.hkeys("mcp-agent:session:conv")}
        assert {"pages", f"p:{info.handle}"} | {
            f"p:{info.handle}:{n}" for n in range(1, info.pages + 1)
        } <= fields
        totals = await redis_state.client.hgetall("mcp-agent:pages:totals")
        assert int(totals[b"bytes"]) == info.size
    assert await redis_state.sessions.delete("conv")
    assert int(await redis_state.client.hget("mcp-agent:pages:totals", "bytes") or 0) == 0
    assert await redis_state.client.zcard("mcp-agent:pages") == 0


async def test_what_an_expired_session_left_goes_when_the_total_cap_reaches_it(
    redis_state: RedisState, server: RedisServer
) -> None:
    async with redis_state.sessions.hold("old"):
        old = await redis_state.pages.put("old", "t", PAGES, len(TEXT))
    assert old is not None
    with anyio.fail_after(10):
        while await redis_state.client.exists("mcp-agent:session:old"):
            await anyio.sleep(0.05)
    assert await redis_state.client.zcard("mcp-agent:pages") == 1  # left behind, counted
    capped = await open_state(server.url, limits=StateLimits(max_paged_bytes_total=old.size))
    try:
        async with capped.sessions.hold("new"):
            new = await capped.pages.put("new", "t", PAGES, len(TEXT))
            assert new is not None
            page = await capped.pages.read("new", new.handle, 1)
            assert page is not None and page.text == PAGES[0]
        members = await redis_state.client.zrange("mcp-agent:pages", 0, -1)
        assert [m.decode().split(" ")[2] for m in members] == ["new"]
        assert int(await redis_state.client.hget("mcp-agent:pages:totals", "bytes") or 0) == new.size
    finally:
        await capped.aclose()
