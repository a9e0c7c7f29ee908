"""The SQLite backend beyond the contract: the file (bad ones refused, untouched), two real
processes on one file (the session lease, a holder killed), a writer killed mid-save, recovery."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import anyio
import pytest

from mcp_agent.exceptions import ApprovalsFull, ConfigError, LeaseLost, StateError
from mcp_agent.messages import Message
from mcp_agent.state import INTERRUPTED, Approval, RunRecord, StateLimits, open_state
from mcp_agent.state.sqlite import SqliteState
from mcp_agent.state.sqlite.database import CHECKPOINT_EVERY, SCHEMA_VERSION

from .test_contract import approval

ROOT = Path(__file__).resolve().parents[2]
CHILD = str(Path(__file__).with_name("_sqlite_child.py"))


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


async def opened(path: Path, **limits: float) -> SqliteState:
    state = await open_state(url_of(path), limits=StateLimits(**limits))  # type: ignore[arg-type]
    assert isinstance(state, SqliteState)
    return state


class Child:
    """A second process on the same database (``_sqlite_child.py``)."""

    def __init__(self, url: str, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, CHILD, url, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    async def line(self) -> str:
        assert self.proc.stdout is not None
        with anyio.fail_after(60):
            text = await anyio.to_thread.run_sync(self.proc.stdout.readline)
        if not text:
            raise AssertionError(
                f"the child ended: {self.proc.wait()} {self.proc.stderr.read() if self.proc.stderr else ''}"
            )
        return text.strip()

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def child(url: str, *args: str) -> Iterator[Child]:
    running = Child(url, *args)
    try:
        yield running
    finally:
        running.close()


# --------------------------------------------------------------------------------------------
# the file


async def test_a_new_file_gets_the_schema_in_wal_mode_and_the_folder_is_made(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "state.db"
    state = await opened(path)
    await state.aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"sessions", "session_locks", "approvals", "runs", "replicas"} <= tables
    await (await opened(path)).aclose()  # and it opens again as it is


async def test_a_new_file_its_wal_and_shm_and_its_folder_are_the_users_alone(tmp_path: Path) -> None:
    path = tmp_path / "new" / "state.db"
    state = await opened(path)
    try:
        await state.runs.begin(RunRecord("r1", query="kept in the WAL"))
        files = [path, path.with_name("state.db-wal"), path.with_name("state.db-shm")]
        assert all(file.exists() for file in files)
        modes = {file.name: stat.S_IMODE(file.stat().st_mode) for file in files}
        assert modes == dict.fromkeys(modes, 0o600)  # SQLite gives -wal and -shm the file's mode
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        await state.aclose()


async def test_an_empty_file_is_refused_naming_it_and_what_to_do_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.touch()
    with pytest.raises(ConfigError) as caught:
        await opened(path)
    message = str(caught.value)
    assert caught.value.path == "state.url" and str(path) in message and "empty (0 bytes)" in message
    assert "restore it from a backup, or delete it to start a fresh store" in message
    assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]


async def test_a_store_truncated_after_use_is_refused_and_a_deleted_one_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    await state.sessions.create(owner="ada")
    await state.aclose()
    os.truncate(path, 0)
    with pytest.raises(ConfigError, match=r"empty \(0 bytes\)"):
        await opened(path)
    path.unlink()  # what the message says to do
    state = await opened(path)
    assert await state.sessions.list() == []
    await state.aclose()


async def test_a_missing_file_whose_write_ahead_log_is_left_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    holder = await opened(path)
    await holder.sessions.create(owner="ada")  # in the WAL, not yet in the file
    wal = tmp_path / "state.db-wal"
    try:
        assert wal.stat().st_size > 0
        path.unlink()
        with pytest.raises(ConfigError) as caught:
            await opened(path)
        message = str(caught.value)
        assert str(wal) in message and "deleted or moved away" in message and "state.db-shm" in message
        assert not path.exists()
    finally:
        await holder.aclose()


def test_processes_making_a_new_store_at_once_all_open_the_same_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    code = (
        "import sys, time; from pathlib import Path; from mcp_agent.state.sqlite.database import connect\n"
        "while time.time() < float(sys.argv[2]): pass\n"
        "db = connect(Path(sys.argv[1]), 'sqlite:///' + sys.argv[1])\n"
        "print(db.execute('PRAGMA user_version').fetchone()[0]); db.close()"
    )
    start = str(time.time() + 1.0)  # a common instant, so that they race for the new file
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for _ in range(8)
    ]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 8, [err.decode() for _, err in outputs]
    assert {out.decode().strip() for out, _ in outputs} == {str(SCHEMA_VERSION)}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no half-made file left


@pytest.mark.parametrize(
    "content",
    [
        b"this is not a database at all, just some text\n" * 100,
        os.urandom(8192),
        b"SQLite format 3\x00" + b"\xff" * 4000,
    ],
)
async def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        await opened(path)
    assert (
        "state.url" in str(caught.value)
        and str(path) in str(caught.value)
        and caught.value.path == "state.url"
    )
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]  # no journal or WAL beside it


async def test_a_damaged_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path, max_runs=0)
    for index in range(300):
        await state.runs.end(
            RunRecord(f"r{index}", query="q" * 500, termination_reason="success", ended=time.time())
        )
    await state.aclose()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(3 * page, min(len(data), 20 * page), page):
        data[offset : offset + 64] = os.urandom(64)  # wreck the headers of a run of b-tree pages
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"state\.url .*(damaged|not a readable|malformed)"):
        await opened(path)
    assert path.read_bytes() == bytes(data)


async def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"state\.url .* is a directory"):
        await opened(tmp_path)


async def test_a_folder_that_cannot_be_made_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"state\.url .*cannot create its folder"):
        await opened(blocker / "state.db")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes any file")
async def test_a_file_without_permission_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await (await opened(path)).aclose()
    before = path.read_bytes()
    path.chmod(0o400)
    try:
        with pytest.raises(ConfigError, match=r"state\.url .*no permission"):
            await opened(path)
    finally:
        path.chmod(0o600)
    assert path.read_bytes() == before


async def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await (await opened(path)).aclose()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigError, match=rf"newer mcp-agent \(schema {SCHEMA_VERSION + 1}"):
        await opened(path)


@pytest.mark.parametrize("url", ["sqlite://host/state.db", "sqlite:///", "sqlite://", "sqlite:///folder/"])
async def test_a_malformed_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match=r"state\.url"):
        await open_state(url)


async def test_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    state = await open_state("sqlite:///~/sub/state.db")
    await state.aclose()
    assert (tmp_path / "sub" / "state.db").exists()


@pytest.mark.parametrize("url", ["postgres://x/y", "state.db", "file:///tmp/x", ""])
async def test_an_unknown_scheme_is_a_config_error_naming_the_key(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        await open_state(url)
    assert caught.value.path == "state.url" and "state.url" in caught.value.message


async def test_a_closed_store_raises_a_state_error(tmp_path: Path) -> None:
    state = await opened(tmp_path / "state.db")
    await state.aclose()
    await state.aclose()  # idempotent
    with pytest.raises(StateError, match="closed"):
        await state.sessions.get("x")


async def test_the_wal_stays_bounded_under_writes_that_never_pause(tmp_path: Path) -> None:
    """The periodic checkpoint (every ``CHECKPOINT_EVERY`` writes) copies the whole WAL back, so
    the next write starts it over. A checkpoint that let writes go on beside it would never catch
    up with them under steady load, and the WAL would grow without end (tried: 256 MB after
    10,000 writes)."""
    path = tmp_path / "state.db"
    state = await opened(path)
    try:
        for index in range(20 * CHECKPOINT_EVERY):
            await state.runs.end(
                RunRecord(f"r{index}", query="q" * 2000, termination_reason="success", ended=time.time())
            )
        wal = path.with_name(path.name + "-wal").stat().st_size
    finally:
        await state.aclose()
    # about 3 MB (what CHECKPOINT_EVERY writes take) when each checkpoint is whole; never whole, these
    # 2,000 writes take about 60 MB
    assert wal < 16 * 1024 * 1024, wal


async def test_text_utf8_cannot_hold_is_stored_exactly(tmp_path: Path) -> None:
    state = await opened(tmp_path / "state.db")
    odd = "lone \ud800 surrogate"
    async with state.sessions.hold("s") as session:
        assert await state.sessions.save(session, [Message.user(odd)])
    await state.runs.end(
        RunRecord("r", query=odd, answer=odd, termination_reason="success", ended=time.time())
    )
    stored = await state.sessions.get("s")
    assert stored is not None and stored.transcript[0].content == odd
    record = await state.runs.get("r")
    assert record is not None and record.query == odd
    await state.aclose()


# --------------------------------------------------------------------------------------------
# two processes on one file


async def test_a_session_held_in_another_process_waits_for_it(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    entered = anyio.Event()
    with child(url_of(path), "hold", "shared") as other:
        assert await other.line() == "held"

        async def mine() -> None:
            async with state.sessions.hold("shared") as session:
                entered.set()
                assert [m.content for m in session.transcript] == ["from the child"]
                await state.sessions.save(session, [*session.transcript, Message.user("from the parent")])

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(mine)
                [info] = await state.sessions.list()
                assert info.busy
                await anyio.sleep(0.6)  # several of our looks at the lock while the child holds it
                assert not entered.is_set()
                other.send("go")
                assert await other.line() == "saved"
    stored = await state.sessions.get("shared")
    assert stored is not None and [m.content for m in stored.transcript] == [
        "from the child",
        "from the parent",
    ]
    assert stored.runs == 2
    await state.aclose()


async def test_a_holder_killed_mid_run_frees_the_session_for_the_next_run(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path, lease_seconds=600)  # only the dead process can free it in time
    with child(url_of(path), "hold", "shared") as other:
        assert await other.line() == "held"
        other.kill()
    with anyio.fail_after(30):
        async with state.sessions.hold("shared") as session:
            assert session.transcript == ()  # the killed run saved nothing
            assert await state.sessions.save(session, [Message.user("next")])
    await state.aclose()


@pytest.mark.parametrize("after", [3, 25, 60])
async def test_a_writer_killed_mid_save_leaves_a_sound_database_and_a_whole_transcript(
    tmp_path: Path, after: int
) -> None:
    path = tmp_path / "state.db"
    await (await opened(path)).aclose()
    with child(url_of(path), "writes", "s") as writer:
        while True:
            line = await writer.line()
            if int(line.split()[1]) >= after:
                break
        writer.kill()  # while it goes on saving
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    state = await opened(path)
    stored = await state.sessions.get("s")
    assert stored is not None and stored.transcript
    numbers = {m.content.split()[0] for m in stored.transcript}
    assert len(numbers) == 1  # whole: every message from the same save
    count = int(numbers.pop())
    assert count >= after and len(stored.transcript) == count % 200 + 1 and stored.runs == count
    await state.aclose()


async def test_a_process_killed_mid_run_is_recovered_by_the_next_one(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with child(url_of(path), "inflight") as other:
        assert await other.line() == "ready"
        state = await opened(path, lease_seconds=600)
        assert (await state.recover()).runs == 0  # alive: nothing to recover
        other.kill()
    found = await state.recover()
    assert (found.runs, found.approvals) == (1, 1)
    run = await state.runs.get("child-run")
    assert run is not None and run.termination_reason == "terminal_error" and run.detail == INTERRUPTED
    approval = await state.approvals.get("child-approval")
    assert approval is not None and approval.decision is not None and approval.decision.by == "recovery"
    assert await state.approvals.decide("child-approval", approval.decision) is False
    await state.aclose()


async def test_a_replica_on_another_host_is_dead_once_its_lease_lapsed(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    now = time.time()
    with sqlite3.connect(path) as db:
        for replica, expires in (("far-alive", now + 600), ("far-dead", now - 1)):
            db.execute(
                "INSERT INTO replicas (id, host, pid, process, started, expires) VALUES (?, 'elsewhere', 1, NULL, ?, ?)",
                (replica, now, expires),
            )
            db.execute(
                "INSERT INTO session_locks (session_id, holder, replica, expires) VALUES (?, 'h', ?, ?)",
                (f"s-{replica}", replica, expires),
            )
    for replica in ("far-alive", "far-dead"):
        await state.runs.begin(RunRecord(f"run-{replica}", query="q", replica=replica))
    found = await state.recover()
    assert (found.runs, found.locks) == (1, 1)
    assert (await state.runs.get("run-far-alive")).in_flight  # type: ignore[union-attr]
    assert not (await state.runs.get("run-far-dead")).in_flight  # type: ignore[union-attr]
    with anyio.fail_after(30):
        async with state.sessions.hold("s-far-dead"):  # its lock went with it
            pass
    await state.aclose()


async def test_retention_keeps_the_file_from_growing(tmp_path: Path) -> None:
    """Old records go, and their pages are reused: writing ten times the kept number of runs
    leaves the file near the size of the kept ones."""
    path = tmp_path / "state.db"
    state = await opened(path, max_runs=100)
    answer = "a" * 2000

    async def write(start: int, count: int) -> None:
        for index in range(start, start + count):
            await state.runs.end(
                RunRecord(
                    f"r{index}", query="q", answer=answer, termination_reason="success", ended=time.time()
                )
            )
        await state.beat()

    await write(0, 300)
    settled = path.stat().st_size + Path(f"{path}-wal").stat().st_size
    for start in range(300, 3000, 300):
        await write(start, 300)
    grown = path.stat().st_size + Path(f"{path}-wal").stat().st_size
    assert len(await state.runs.list(limit=1000)) == 100
    assert grown <= settled * 1.5 + 1_000_000
    await state.aclose()


async def test_a_later_schema_version_migrates_an_earlier_file_in_place(tmp_path: Path) -> None:
    """The migration path: a file with data, opened by a version that adds a step, keeps its
    data and gets the new step once; a step that fails leaves the file at its old version."""
    from mcp_agent.state.sqlite.database import MIGRATIONS, migrate

    path = tmp_path / "state.db"
    state = await opened(path)
    async with state.sessions.hold("kept") as session:
        await state.sessions.save(session, [Message.user("from this version")])
    await state.aclose()

    def later(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT ''")

    def broken(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE extra (x)")
        raise sqlite3.OperationalError("disk I/O error (injected)")

    now = len(MIGRATIONS)
    with sqlite3.connect(path, isolation_level=None) as db:
        assert migrate(db, [*MIGRATIONS, later]) == now
        assert migrate(db, [*MIGRATIONS, later]) == now + 1  # once only
        with pytest.raises(sqlite3.OperationalError, match="injected"):
            migrate(db, [*MIGRATIONS, later, broken])
        assert db.execute("PRAGMA user_version").fetchone()[0] == now + 1
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'extra'").fetchone()[0] == 0
        assert db.execute("SELECT title, transcript FROM sessions WHERE id = 'kept'").fetchone()[0] == ""


async def test_a_version_1_file_gets_its_approvals_callers_and_the_caps_count_them_from_an_index(
    tmp_path: Path,
) -> None:
    """Schema 2 keeps each approval's caller in a column, indexed among the pending ones: a
    version 1 file with approvals waiting is migrated in place, and the caps count them."""
    from mcp_agent.state.sqlite.database import MIGRATIONS, migrate

    path = tmp_path / "state.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        migrate(db, MIGRATIONS[:1])
        for id_, caller in (("p1", "alice"), ("p2", "alice"), ("p3", None)):
            record = Approval(id_, "r1", None, "c1", "fs__write", {}, time.time(), caller, "gone").to_record()
            db.execute(
                "INSERT INTO approvals (id, replica, created, decided, record) VALUES (?, ?, ?, NULL, ?)",
                (id_, "gone", record["created"], json.dumps(record)),
            )
    state = await opened(path)
    with pytest.raises(ApprovalsFull, match=r"caller 'alice' are waiting \(2, its share"):
        await state.approvals.add(approval("new", caller="alice"), max_per_caller=2)
    with pytest.raises(ApprovalsFull, match=r"waiting \(3, approvals\.maxPending"):
        await state.approvals.add(approval("new", caller="bob"), max_pending=3)
    await state.approvals.add(approval("new", caller="bob"), max_pending=4, max_per_caller=2)
    await state.aclose()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert dict(db.execute("SELECT id, caller FROM approvals")) == {
            "p1": "alice",
            "p2": "alice",
            "p3": None,
            "new": "bob",
        }
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM approvals WHERE decided IS NULL AND caller = ?",
            ("alice",),
        ).fetchall()
        assert "approvals_pending_by_caller" in " ".join(str(row[-1]) for row in plan)


async def test_a_run_whose_lock_was_taken_over_does_not_save_over_the_new_holder(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path)
    try:
        async with state.sessions.hold("conv") as first:
            assert await state.sessions.save(first, (Message.user("one"),))
        async with state.sessions.hold("conv") as stalled:
            # the lease lapsed while this run stalled, and another process's run took the lock
            with sqlite3.connect(path) as other:
                other.execute(
                    "UPDATE session_locks SET holder = 'other', replica = 'other' WHERE session_id = 'conv'"
                )
            with pytest.raises(LeaseLost, match=r"state\.leaseSeconds"):
                await state.sessions.save(stalled, (Message.user("one"), Message.user("stale")))
        found = await state.sessions.get("conv")
        assert found is not None and found.transcript == (Message.user("one"),)
    finally:
        await state.aclose()


# --------------------------------------------------------------------------------------------
# the conversation caps: each owner's count kept by triggers (schema 3)


def owner_counts(path: Path) -> tuple[dict[str | None, int], dict[str | None, int]]:
    """``session_owners`` as it is, and as the sessions say it should be."""
    with closing(sqlite3.connect(path)) as db:
        kept = {owner: n for owner, n in db.execute("SELECT owner, n FROM session_owners")}
        real = {owner: n for owner, n in db.execute("SELECT owner, count(*) FROM sessions GROUP BY owner")}
    return kept, real


async def test_each_owners_count_follows_every_session_that_comes_and_goes(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = await opened(path, session_ttl_seconds=0.3, max_sessions=4, max_sessions_per_owner=2)
    a1 = await state.sessions.create(owner="a")
    await state.sessions.create(owner="a")
    await state.sessions.create(owner="a")  # a's cap: its oldest goes
    await state.sessions.create(owner=None)
    async with state.sessions.hold("named", owner="b"):
        pass
    await state.sessions.create(owner="c")  # the total cap: a, holding the most, loses its oldest
    assert await state.sessions.get(a1.id) is None
    kept, real = owner_counts(path)
    assert kept == real and sum(real.values()) == 4
    assert await state.sessions.delete("named")
    kept, real = owner_counts(path)
    assert kept == real and "b" not in kept
    await anyio.sleep(0.5)
    await state.sessions.create(owner="d")  # the expired ones go
    kept, real = owner_counts(path)
    assert kept == real == {"d": 1}
    await state.aclose()


async def test_a_version_2_file_gets_each_owners_count(tmp_path: Path) -> None:
    from mcp_agent.state.sqlite.database import MIGRATIONS, migrate

    path = tmp_path / "state.db"
    now = time.time()
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        migrate(db, MIGRATIONS[:2])
        for index, owner in enumerate(("a", "a", None, "b", "a")):
            db.execute(
                "INSERT INTO sessions (id, owner, created, updated, used) VALUES (?, ?, ?, ?, ?)",
                (f"s{index}", owner, now, now, now + index),
            )
    state = await opened(path, max_sessions=5)
    assert owner_counts(path) == ({"a": 3, None: 1, "b": 1},) * 2
    await state.sessions.create(owner="c")  # one over: a, holding the most, loses s0
    assert await state.sessions.get("s0") is None and await state.sessions.get("s1") is not None
    await state.aclose()


def test_choosing_what_goes_does_not_walk_every_session(tmp_path: Path) -> None:
    """The work of picking the session the total cap drops, counted in SQLite's virtual machine
    steps (not timed): about the same with 5,000 sessions as with 200, with one owner holding
    the most, and with many owners holding one each."""
    from mcp_agent.state.sqlite.database import MIGRATIONS, migrate
    from mcp_agent.state.sqlite.sessions import SqliteSessionStore

    def steps(sessions: int, owners: int) -> int:
        path = tmp_path / f"steps-{sessions}-{owners}.db"
        with closing(sqlite3.connect(path, isolation_level=None)) as db:
            migrate(db, MIGRATIONS)
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO sessions (id, owner, created, updated, used) VALUES (?, ?, 0, 0, ?)",
                [(f"s{n}", f"o{n % owners}" if owners > 1 else "a", n) for n in range(sessions)],
            )
            db.execute("COMMIT")
            counted = [0]

            def count() -> int:
                counted[0] += 1
                return 0

            db.set_progress_handler(count, 10)
            victim = SqliteSessionStore._victim(db, time.time())
            assert victim == "s0"
            return counted[0]

    for owners in (1, 4, 1000):
        small, large = steps(200 if owners < 1000 else 2000, owners), steps(5000, owners)
        assert large < 2 * small + 50, (owners, small, large)
