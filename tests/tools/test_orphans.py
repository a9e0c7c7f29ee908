"""A killed hub owner's servers die with it; the next start reaps their children, and only theirs.

Real processes throughout: ``hub_owner.py`` owns a ToolHub the way the gateway does, with the
``grandchild.py`` server (which forks a long-lived grandchild into its process group).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from mcp_agent.tools import _procfs
from mcp_agent.tools._orphans import OWNER_ENV, ChildRecord, _stop, reap_orphans_sync, write_record

from .conftest import SERVERS, alive, server

pytestmark = pytest.mark.skipif(not _procfs.available(), reason="needs Linux's /proc")

GRANDCHILD = server("grandchild.py").model_dump(by_alias=True, exclude_none=True)
# the server ignores the end of its stdin: only a signal stops it
STAYING = server("grandchild.py", env={"GRANDCHILD_STAYS": "1"}).model_dump(by_alias=True, exclude_none=True)


async def until(condition: Any, seconds: float = 20) -> None:
    """Wait until ``condition()`` is true; a generous does-not-hang bound, not a timing claim."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.02)


@dataclass
class Owner:
    process: subprocess.Popen[str]
    pids: list[int]
    stderr: Path

    def log(self) -> str:
        return self.stderr.read_text()


class Leftovers:
    """Everything a test starts, killed at teardown if still there (psutil refuses reused pids)."""

    def __init__(self) -> None:
        self.owners: list[subprocess.Popen[str]] = []
        self.processes: list[psutil.Process] = []

    def watch(self, pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                self.processes.append(psutil.Process(pid))

    def kill_all(self) -> None:
        for owner in self.owners:
            owner.kill()
            owner.wait()
            if owner.stdout is not None:
                owner.stdout.close()
        for process in self.processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        deadline = time.monotonic() + 20
        while alive(p.pid for p in self.processes) and time.monotonic() < deadline:
            time.sleep(0.02)


@pytest.fixture
def leftovers() -> Iterator[Leftovers]:
    left = Leftovers()
    try:
        yield left
    finally:
        left.kill_all()


async def start_owner(left: Leftovers, servers: dict[str, Any], state: Path, log: Path) -> Owner:
    """Start ``hub_owner.py`` on ``servers`` with ``state`` as its state folder; return once its
    hub is up (orphans reaped, servers started) with the pids of its servers and grandchildren."""
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(SERVERS / "hub_owner.py"), json.dumps(servers), str(state)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    left.owners.append(process)
    assert process.stdout is not None
    with anyio.fail_after(30):
        line = await anyio.to_thread.run_sync(process.stdout.readline)
    pids = json.loads(line)
    left.watch(pids)
    return Owner(process, pids, log)


async def stop_owner(owner: Owner) -> None:
    owner.process.send_signal(signal.SIGTERM)
    with anyio.fail_after(20):
        assert await anyio.to_thread.run_sync(owner.process.wait) == 0


def records(state: Path) -> list[Path]:
    return sorted((state / "children").glob("*.json"))


async def test_servers_die_with_their_killed_owner_and_the_next_start_reaps_the_grandchild(
    tmp_path: Path, leftovers: Leftovers
) -> None:
    state = tmp_path / "state"
    first = await start_owner(leftovers, {"g": STAYING}, state, tmp_path / "first.log")
    server_pid, grandchild_pid = first.pids
    [record] = records(state)
    assert json.loads(record.read_text())["pgid"] == server_pid
    assert json.loads(record.read_text())["pgid_start"] == started_at(server_pid)  # read at spawn

    first.process.kill()  # SIGKILL: nothing of the owner runs to stop its server
    first.process.wait()
    await until(lambda: alive([server_pid]) == [])  # the kernel's SIGTERM (PR_SET_PDEATHSIG)
    assert alive([grandchild_pid]) == [grandchild_pid]  # the signal reaches direct children only
    assert record.exists()

    second = await start_owner(leftovers, {}, state, tmp_path / "second.log")
    assert alive([grandchild_pid]) == []  # reaped before the new hub started
    assert records(state) == []
    assert f"reaped 1 orphaned process(es) of tool server 'g' (process group {server_pid})" in second.log()
    await stop_owner(second)


async def test_a_running_owners_processes_and_records_are_left_alone(
    tmp_path: Path, leftovers: Leftovers
) -> None:
    state = tmp_path / "state"
    first = await start_owner(leftovers, {"g": GRANDCHILD}, state, tmp_path / "first.log")
    second = await start_owner(leftovers, {"g": GRANDCHILD}, state, tmp_path / "second.log")
    assert alive(first.pids) == first.pids and alive(second.pids) == second.pids
    groups = {json.loads(path.read_text())["pgid"] for path in records(state)}
    assert groups == {first.pids[0], second.pids[0]}
    assert "reaped" not in second.log()

    await stop_owner(first)  # a normal shutdown stops the group and removes its record
    assert alive(first.pids) == []
    assert [json.loads(path.read_text())["pgid"] for path in records(state)] == [second.pids[0]]
    await stop_owner(second)
    assert alive(second.pids) == [] and records(state) == []


# ------------------------------------------------------------------- reaping, process by process

# a group leader that starts two sleepers in its group: one without any marker, one with another
# gateway's; prints their pids and sleeps
LEADER = f"""
import os, subprocess, sys, time
env = {{k: v for k, v in os.environ.items() if k != {OWNER_ENV!r}}}
sleep = [sys.executable, "-c", "import time; time.sleep(600)  # orphans-test"]
bare = subprocess.Popen(sleep, env=env)
foreign = subprocess.Popen(sleep, env=env | {{{OWNER_ENV!r}: "1:other-gateway"}})
print(bare.pid, foreign.pid, flush=True)
time.sleep(600)
"""
MARKER = "4242:0123456789abcdef"


def start_group(left: Leftovers) -> tuple[subprocess.Popen[str], list[int]]:
    """A marked group leader (our child) with an unmarked and a foreign-marked member."""
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER],
        env=os.environ | {OWNER_ENV: MARKER},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    left.owners.append(leader)
    assert leader.stdout is not None
    members = [int(pid) for pid in leader.stdout.readline().split()]
    left.watch(members)
    return leader, members


def dead_owner() -> _procfs.ProcStat:
    """The pid and start time of a process that has exited (a gateway that was killed)."""
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    stat = _procfs.read_stat(process.pid)
    assert process.stdin is not None
    process.stdin.close()
    process.wait()
    assert stat is not None
    return stat


def started_at(pid: int) -> int:
    stat = _procfs.read_stat(pid)
    assert stat is not None
    return stat.start_time


def orphan_record(pgid: int, *, start: int | None = None, marker: str = MARKER) -> ChildRecord:
    """A record of a killed gateway's server ``pgid`` (started at ``start``: its real start
    time unless given)."""
    owner = dead_owner()
    start = started_at(pgid) if start is None else start
    return ChildRecord(owner.pid, owner.start_time, marker, pgid, "fixture", _procfs.pid_namespace(), start)


def test_only_processes_with_the_dead_owners_marker_are_reaped(tmp_path: Path, leftovers: Leftovers) -> None:
    leader, members = start_group(leftovers)
    write_record(tmp_path, orphan_record(leader.pid))

    reap_orphans_sync(tmp_path)

    assert leader.wait(timeout=20) == -signal.SIGTERM
    assert alive(members) == members  # no marker, or another gateway's: never signalled
    assert list(tmp_path.glob("*.json")) == []


def test_a_record_and_its_folder_are_the_users_alone(tmp_path: Path) -> None:
    owner = dead_owner()
    record = ChildRecord(owner.pid, owner.start_time, MARKER, 1, "fixture", _procfs.pid_namespace())
    write_record(tmp_path / "children", record)
    assert [p.name for p in (tmp_path / "children").iterdir()] == [record.filename]  # nothing left beside it
    assert stat.S_IMODE((tmp_path / "children").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "children" / record.filename).stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("start_offset", "namespace", "reaped"),
    [(0, "ours", False), (-1, "ours", True), (-1, None, True), (-1, "pid:[1]", False)],
)
def test_the_owner_is_its_pid_and_start_time_in_its_pid_namespace(
    start_offset: int, namespace: str | None, reaped: bool, tmp_path: Path, leftovers: Leftovers
) -> None:
    """A record of this (running) process is left alone; the same pid with another start time
    is a process that reused the pid of a gateway that is gone; pids of another pid namespace
    (a container sharing the state folder) mean nothing here."""
    leader, _ = start_group(leftovers)
    me = _procfs.read_stat(os.getpid())
    assert me is not None
    pid_namespace = _procfs.pid_namespace() if namespace == "ours" else namespace
    record = ChildRecord(
        me.pid,
        me.start_time + start_offset,
        MARKER,
        leader.pid,
        "fixture",
        pid_namespace,
        started_at(leader.pid),
    )
    write_record(tmp_path, record)

    reap_orphans_sync(tmp_path)

    if reaped:
        assert leader.wait(timeout=20) == -signal.SIGTERM
        assert list(tmp_path.glob("*.json")) == []
    else:
        assert leader.poll() is None
        assert len(list(tmp_path.glob("*.json"))) == 1


def test_unreadable_records_are_removed_and_a_missing_folder_is_nothing_to_do(tmp_path: Path) -> None:
    (tmp_path / "1-2.json").write_text("{not json")
    (tmp_path / "3-4.json").write_text(json.dumps({"pgid": 4}))
    reap_orphans_sync(tmp_path)
    assert list(tmp_path.iterdir()) == []
    reap_orphans_sync(tmp_path / "missing")


# ------------------------------------------- a record is a claim: checked before anything is signalled

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="starting a process of another user needs root")


def start_marked(left: Leftovers, argv: list[str], **options: Any) -> subprocess.Popen[str]:
    """A process that carries the marker, in its own process group, killed at teardown."""
    process = subprocess.Popen(
        argv, env=os.environ | {OWNER_ENV: MARKER}, start_new_session=True, text=True, **options
    )
    left.owners.append(process)
    left.watch([process.pid])
    return process


def refused(caplog: pytest.LogCaptureFixture, why: str) -> bool:
    return any(
        "not reaping process group" in r.getMessage() and why in r.getMessage() and r.levelname == "WARNING"
        for r in caplog.records
    )


@as_root
def test_a_forged_record_never_signals_another_users_process(
    tmp_path: Path, leftovers: Leftovers, caplog: pytest.LogCaptureFixture
) -> None:
    """As root, a record naming another user's process that carries the marker in its
    environment, with its true start time (anyone can read it), signals nothing."""
    victim = start_marked(leftovers, ["sleep", "600"], user=NOBODY)
    write_record(tmp_path, orphan_record(victim.pid))

    reap_orphans_sync(tmp_path, grace=0.2)

    assert alive([victim.pid]) == [victim.pid]
    assert list(tmp_path.glob("*.json")) == []  # dropped
    assert refused(caplog, f"process {victim.pid} belongs to another user (uid {NOBODY}")


# a group leader (ours, marked) that starts a sleeper of another user in its group, prints its pid
MIXED_LEADER = f"""
import subprocess, time
other = subprocess.Popen(["sleep", "600"], user={NOBODY})
print(other.pid, flush=True)
time.sleep(600)
"""


@as_root
def test_a_group_holding_another_users_marked_process_is_left_alone(
    tmp_path: Path, leftovers: Leftovers, caplog: pytest.LogCaptureFixture
) -> None:
    """The server (the group's leader) is gone, as after a killed gateway; what is left in the
    group carries the marker but is another user's: nothing is signalled."""
    leader = start_marked(leftovers, [sys.executable, "-c", MIXED_LEADER], stdout=subprocess.PIPE)
    assert leader.stdout is not None
    other = int(leader.stdout.readline())
    leftovers.watch([other])
    record = orphan_record(leader.pid)
    leader.kill()
    leader.wait()
    write_record(tmp_path, record)

    reap_orphans_sync(tmp_path, grace=0.2)

    assert alive([other]) == [other]
    assert list(tmp_path.glob("*.json")) == []
    assert refused(caplog, f"process {other} belongs to another user")


def test_a_marked_process_with_another_start_time_is_not_signalled(
    tmp_path: Path, leftovers: Leftovers, caplog: pytest.LogCaptureFixture
) -> None:
    """The recorded server's pid now belongs to a process that started at another time (a
    reused pid), even one that carries the marker: nothing is signalled."""
    process = start_marked(leftovers, [sys.executable, "-c", "import time; time.sleep(600)"])
    write_record(tmp_path, orphan_record(process.pid, start=started_at(process.pid) - 1))

    reap_orphans_sync(tmp_path, grace=0.2)

    assert process.poll() is None
    assert list(tmp_path.glob("*.json")) == []
    assert refused(caplog, "it is another process that reuses the server's pid")


def test_a_record_naming_an_unrelated_process_signals_nothing(
    tmp_path: Path, leftovers: Leftovers, caplog: pytest.LogCaptureFixture
) -> None:
    """A process of ours, with its true start time, but without the marker: not ours to stop."""
    unrelated = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True, text=True
    )
    leftovers.owners.append(unrelated)
    write_record(tmp_path, orphan_record(unrelated.pid))

    reap_orphans_sync(tmp_path, grace=0.2)

    assert unrelated.poll() is None
    assert list(tmp_path.glob("*.json")) == []
    assert refused(caplog, "does not carry the recorded marker")


def test_a_record_without_the_servers_start_time_signals_nothing(
    tmp_path: Path, leftovers: Leftovers, caplog: pytest.LogCaptureFixture
) -> None:
    """A record of an older version (no ``pgid_start``) cannot be checked: it is dropped."""
    leader, _ = start_group(leftovers)
    record = orphan_record(leader.pid)
    (tmp_path / record.filename).write_text(json.dumps({**record.to_dict(), "pgid_start": None}))

    reap_orphans_sync(tmp_path, grace=0.2)

    assert leader.poll() is None
    assert list(tmp_path.glob("*.json")) == []
    assert refused(caplog, "does not say when the server started")


@as_root
def test_a_record_file_of_another_user_is_dropped_unread(
    tmp_path: Path, leftovers: Leftovers, caplog: pytest.LogCaptureFixture
) -> None:
    leader, _ = start_group(leftovers)
    record = orphan_record(leader.pid)
    write_record(tmp_path, record)
    os.chown(tmp_path / record.filename, NOBODY, NOBODY)

    reap_orphans_sync(tmp_path, grace=0.2)

    assert leader.poll() is None
    assert list(tmp_path.glob("*.json")) == []
    assert f"owned by uid {NOBODY}, not by this user" in caplog.text


@pytest.mark.parametrize("kind", ["fifo", "link", "huge"])
def test_a_record_that_is_no_record_file_is_dropped_without_hanging(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO is never opened for a blocking read, a link never followed, a big file never read
    whole."""
    path = tmp_path / "1-2.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        path.symlink_to("/dev/zero")
    else:  # a valid record, padded
        record = ChildRecord(1, 2, MARKER, 2, "fixture", _procfs.pid_namespace(), 3)
        path.write_text(json.dumps(record.to_dict()) + " " * 10_000)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(reap_orphans_sync, tmp_path).result(timeout=20)
    assert list(tmp_path.iterdir()) == []
    assert "removing unreadable record" in caplog.text


def test_a_pid_that_is_no_longer_the_vetted_process_is_never_signalled(leftovers: Leftovers) -> None:
    """The last check before each signal: the process must still be the one that was vetted
    (same start time); a stat of the same pid with another start time is not it."""
    process = start_marked(leftovers, [sys.executable, "-c", "import time; time.sleep(600)"])
    stat = _procfs.read_stat(process.pid)
    assert stat is not None
    other = _procfs.ProcStat(stat.pid, stat.state, stat.ppid, stat.pgid, stat.start_time - 1)

    assert _stop([other], grace=0.1) == set()  # "gone": the process that was vetted no longer runs
    assert process.poll() is None
    assert _stop([stat], grace=5) == set()
    assert process.wait(timeout=20) == -signal.SIGTERM
