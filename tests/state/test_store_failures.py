"""A store that fails under a running process: every failure, whatever call meets it, is a
``StateError`` naming ``state.url`` as configured, and the store works again once the cause is
gone.

SQLite: a real full disk (a small tmpfs, ``tests/small_disk.py``), the same error injected at the
``sqlite3`` boundary (a connection that fails its checkpoints, for machines that cannot mount),
the file truncated, deleted or replaced under the process. Redis (a real ``redis-server``): gone,
read-only (a replica after a failover), out of memory.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_agent.exceptions import ConfigError, StateError
from mcp_agent.state import RunRecord, State, StateLimits, open_state
from mcp_agent.state._sqlite_db import CHECKPOINT_EVERY, Database
from mcp_agent.state.sqlite import SqliteState
from tests.scale.infra import RedisServer
from tests.small_disk import small_disk


def run(index: int, size: int = 2000) -> RunRecord:
    return RunRecord(f"r{index}", query="q" * size, termination_reason="success", ended=time.time())


async def every_call_fails(state: State, pattern: str) -> None:
    """Each kind of call raises ``StateError`` matching ``pattern``, never a foreign error."""
    calls: list[Callable[[], Awaitable[Any]]] = [
        state.beat,
        lambda: state.sessions.create(owner="ada"),
        lambda: state.runs.end(run(999)),
    ]
    for call in calls:
        with pytest.raises(StateError, match=pattern):
            await call()


# --------------------------------------------------------------------------------------------
# SQLite


class CheckpointsFail(sqlite3.Connection):
    """A real connection whose WAL checkpoints fail, while ``failing``, as they do on a full disk
    (the WAL reuses its space, the database file cannot grow)."""

    failing = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if self.failing and "wal_checkpoint" in sql:
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)


async def test_a_failing_checkpoint_is_a_state_error_and_the_store_recovers(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    await (await open_state(url)).aclose()  # the file and its schema
    db = sqlite3.connect(path, factory=CheckpointsFail, isolation_level=None, check_same_thread=False)
    assert isinstance(db, CheckpointsFail)
    state = SqliteState(Database(db, url, path), StateLimits(), "r")
    try:
        db.failing = True
        with pytest.raises(StateError) as caught:
            await state.beat()
        assert str(caught.value) == f"state.url {url!r}: OperationalError: database or disk is full"
        for index in range(CHECKPOINT_EVERY + 1):  # the periodic checkpoint fails too: not the write's fault
            await state.runs.end(run(index, size=10))
        db.failing = False
        await state.beat()
        assert len(await state.runs.list(limit=500)) == CHECKPOINT_EVERY + 1
    finally:
        db.failing = False
        await state.aclose()


async def test_a_full_disk_is_a_state_error_and_the_store_works_again_once_space_is_back(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        url = f"sqlite:///{disk.path}/state.db"
        state = await open_state(url)
        try:
            for index in range(50):
                await state.runs.end(run(index))
            await state.beat()
            disk.fill()
            with pytest.raises(StateError) as caught:
                for index in range(50, 5000):  # the WAL reuses its space for a while, then must grow
                    await state.runs.end(run(index))
                    if index % 10 == 0:
                        await (
                            state.beat()
                        )  # its checkpoint cannot grow the file (a raw sqlite3 error until issue 20)
            assert str(caught.value) == f"state.url {url!r}: OperationalError: database or disk is full"
            with pytest.raises(StateError, match="database or disk is full"):
                await state.beat()
            assert len(await state.runs.list(limit=10)) == 10  # reading still works
            disk.free()
            await state.beat()
            await state.sessions.create(owner="ada")
            await state.runs.end(run(5000))
            assert await state.runs.get("r5000") is not None
        finally:
            disk.free()
            await state.aclose()


async def test_a_full_disk_at_start_is_a_config_error_about_the_disk_never_about_the_file(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        path = disk.path / "state.db"
        state = await open_state(f"sqlite:///{path}")
        await state.sessions.create(owner="ada")
        await state.aclose()
        kept = path.read_bytes()
        disk.fill()
        try:
            for url in (f"sqlite:///{path}", f"sqlite:///{disk.path}/new.db"):
                with pytest.raises(ConfigError) as caught:
                    await open_state(url)
                message = str(caught.value)
                assert message.startswith(f"state.url {url!r}") and caught.value.path == "state.url"
                assert (
                    "cannot open or create the database" in message
                    and "check the disk (free space" in message
                )
                assert "move it away" not in message  # the file is sound: never advise dropping it
        finally:
            disk.free()
        assert path.read_bytes() == kept and not (disk.path / "new.db").exists()
        state = await open_state(f"sqlite:///{path}")
        assert len(await state.sessions.list()) == 1
        await state.aclose()


async def test_a_file_truncated_under_the_process_is_a_state_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await open_state(f"sqlite:///{path}")
    try:
        for _ in range(5):
            await state.sessions.create(owner="ada")
        await state.beat()
        os.truncate(path, 0)
        with pytest.raises(StateError) as caught:
            await state.beat()
        assert f"the database file {path} was emptied (truncated to 0 bytes)" in str(caught.value)
        for call in (
            state.sessions.list,
            lambda: state.sessions.create(owner="ada"),
        ):  # not from a stale cache
            with pytest.raises(StateError, match="emptied"):
                await call()
    finally:
        await state.aclose()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_file_deleted_or_replaced_under_the_process_fails_every_call_until_it_is_back(
    tmp_path: Path, how: str
) -> None:
    path, kept = tmp_path / "state.db", tmp_path / "kept.db"
    state = await open_state(f"sqlite:///{path}")
    try:
        session = await state.sessions.create(owner="ada")
        await state.beat()
        os.link(path, kept)  # the same file under another name, to put back
        if how == "deleted":
            path.unlink()
            expected = "was deleted or moved away while this process used it"
        else:
            shutil.copy(path, tmp_path / "copy.db")
            os.replace(tmp_path / "copy.db", path)
            expected = "was replaced by another file while this process used it"
        with pytest.raises(StateError) as caught:
            await state.beat()
        assert str(path) in str(caught.value) and expected in str(caught.value)
        assert "put it back, or stop this process" in str(caught.value)
        for call in (state.sessions.list, lambda: state.sessions.create(owner="bob")):
            with pytest.raises(StateError, match=expected):
                await call()
        os.replace(kept, path)  # put back
        await state.beat()
        assert [info.id for info in await state.sessions.list()] == [session.id]
    finally:
        await state.aclose()


# --------------------------------------------------------------------------------------------
# Redis


@pytest.fixture
async def redis_state(tmp_path: Path) -> AsyncIterator[tuple[State, RedisServer]]:
    server = RedisServer(tmp_path, persist=False).start()
    state = await open_state(server.url, limits=StateLimits(lease_seconds=3))
    try:
        yield state, server
    finally:
        await state.aclose()
        server.stop()


async def test_redis_gone_is_a_state_error_and_used_again_once_back(
    redis_state: tuple[State, RedisServer],
) -> None:
    state, server = redis_state
    server.stop()
    with anyio.fail_after(60):
        await every_call_fails(state, rf"state\.url {server.url}: Redis failed while .*Error 111 connecting")
        server.start()
        await state.beat()
        await state.sessions.create(owner="ada")


@pytest.mark.parametrize(
    ("break_it", "mend_it", "said"),
    [
        (
            ("REPLICAOF", "127.0.0.1", "9"),
            ("REPLICAOF", "NO", "ONE"),
            "write against a read only replica",
        ),  # after a failover
        (
            ("CONFIG", "SET", "maxmemory", "1"),
            ("CONFIG", "SET", "maxmemory", "0"),
            "used memory > 'maxmemory'",
        ),
    ],
)
async def test_a_redis_refusing_writes_is_a_state_error_and_used_again_once_mended(
    redis_state: tuple[State, RedisServer], break_it: tuple[str, ...], mend_it: tuple[str, ...], said: str
) -> None:
    state, server = redis_state
    assert server.command("CONFIG", "SET", "maxmemory-policy", "noeviction").startswith(b"+OK")
    assert server.command(*break_it).startswith(b"+OK")
    try:
        with anyio.fail_after(60):
            await every_call_fails(state, rf"state\.url {server.url}: Redis failed while .*{said}")
    finally:
        assert server.command(*mend_it).startswith(b"+OK")
    with anyio.fail_after(60):
        await state.beat()
        await state.sessions.create(owner="ada")
