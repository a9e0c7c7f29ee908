"""The record of our tool-server processes, and reaping what a killed gateway left behind.

Every stdio server we start carries ``MCP_AGENT_OWNER=<our pid>:<random token>`` in its
environment; its children inherit it (through ``npx``, shells and the like). While it runs, a
small file in ``<state dir>/children/`` names its process group (pgid = the server's pid) and
the server's start time, the marker, and us (pid and start time). The file is written
atomically (rename) and owner-only (``_paths.write_private``) when the server starts, and
removed once its whole group is gone.

A gateway killed by SIGKILL cannot remove its files, and while its direct children get SIGTERM
from the kernel (``_spawn.py``), their own children live on. So when a hub starts,
``reap_orphans`` reads the files of gateways that no longer run (the pid is gone or belongs to
a process that started at another time) and stops every process still in those groups that
carries that gateway's marker: SIGTERM, a short wait, SIGKILL.

A record is a claim, not a proof: anyone who can write a file there can name any process
group, and a process of another user can carry any marker it likes (as root, a forged record
once killed another user's process). So before anything is signalled, the group is checked to
be ours: the record file belongs to this user (a regular file, small); the server's pid, if it
still runs, started at the recorded time (a pid that was reused has another start time) and
carries the marker; every process in the group that carries the marker belongs to this user
(real and effective uid) and started no earlier than the server. A record that fails any check
is dropped with a warning and nothing of its group is signalled. Processes without the marker
(or whose environment cannot be read) are never signalled, nothing of a gateway that still
runs is ever touched, and each signal goes through a pidfd opened and checked just before, so
a pid reused meanwhile is never hit. Without ``/proc`` (not Linux) nothing is recorded or
reaped.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import stat as stat_mode
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio

from ..state.folder import write_private
from . import _procfs

logger = logging.getLogger(__name__)

OWNER_ENV = "MCP_AGENT_OWNER"
"""The environment variable that marks a process (and its descendants) as started by us."""
REAP_GRACE_SECONDS = 1.0
"""How long orphans get to exit after SIGTERM, and to vanish after SIGKILL."""
MAX_RECORD_BYTES = 4096
"""A record is a few hundred bytes; a bigger file is not one of ours."""
_POLL_SECONDS = 0.02


@cache
def _marker_for(pid: int) -> str:
    return f"{pid}:{secrets.token_hex(8)}"


def owner_marker() -> str:
    """This process's marker value: ``<pid>:<random token>`` (a new one after a fork)."""
    return _marker_for(os.getpid())


@dataclass(frozen=True)
class ChildRecord:
    """One running tool server's process group, as written to ``<state dir>/children/``.

    Attributes:
        owner_pid: the pid of the process that started it (the gateway).
        owner_start: that process's start time (``/proc`` clock ticks since boot).
        marker: the value of ``MCP_AGENT_OWNER`` its processes carry.
        pgid: its process group (the server's pid).
        server: the server's name, for logs.
        pid_namespace: the owner's pid namespace (``/proc/self/ns/pid``): pids, and so this
            record, mean something only there (containers may share a state folder).
        pgid_start: the server's (the group leader's) start time, read right after the spawn:
            with ``pgid`` it names that one process, so a reused pid is told apart. None in
            records of older versions, which are therefore never acted upon.
    """

    owner_pid: int
    owner_start: int
    marker: str
    pgid: int
    server: str
    pid_namespace: str | None = None
    pgid_start: int | None = None

    @property
    def filename(self) -> str:
        return f"{self.owner_pid}-{self.pgid}.json"

    @property
    def environ_entry(self) -> str:
        """What the environment of each of its processes holds."""
        return f"{OWNER_ENV}={self.marker}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChildRecord:
        return cls(
            owner_pid=int(data["owner_pid"]),
            owner_start=int(data["owner_start"]),
            marker=str(data["marker"]),
            pgid=int(data["pgid"]),
            server=str(data["server"]),
            pid_namespace=data.get("pid_namespace"),
            pgid_start=None if data.get("pgid_start") is None else int(data["pgid_start"]),
        )


def write_record(folder: Path, record: ChildRecord) -> None:
    """Write ``record`` atomically (a reader sees the whole file or none), for this user only."""
    write_private(folder / record.filename, json.dumps(record.to_dict()))


class ChildRecords:
    """This process's records in one folder (``<state dir>/children``); I/O errors are logged,
    never raised: a missing record only costs the clean-up after a crash."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._warned = False

    def add(self, pgid: int, server: str) -> None:
        """Record a server's process group (just started, its marker is ours).

        Its start time is read now, while it is our child: a child that is already gone and
        waited for (its pid may be another process's now) is not recorded.
        """
        me, leader = _procfs.read_stat(os.getpid()), _procfs.read_stat(pgid)
        if me is None or leader is None or leader.ppid != os.getpid():
            return
        record = ChildRecord(
            os.getpid(),
            me.start_time,
            owner_marker(),
            pgid,
            server,
            _procfs.pid_namespace(),
            leader.start_time,
        )
        try:
            write_record(self.folder, record)
        except OSError as exc:
            if not self._warned:
                logger.warning("cannot record tool-server processes in %s: %s", self.folder, exc)
                self._warned = True

    def remove(self, pgid: int) -> None:
        """Forget a process group (it is gone)."""
        try:
            (self.folder / f"{os.getpid()}-{pgid}.json").unlink(missing_ok=True)
        except OSError as exc:
            logger.debug("cannot remove the record of process group %d: %s", pgid, exc)


async def reap_orphans(folder: Path) -> None:
    """Stop what killed gateways left (see the module docstring). Fast when there is nothing to
    do (one directory listing); the reaping itself, which waits, runs in a worker thread."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    if any(name.endswith(".json") for name in names):
        await anyio.to_thread.run_sync(reap_orphans_sync, folder)


def reap_orphans_sync(folder: Path, grace: float = REAP_GRACE_SECONDS) -> None:
    """The blocking part of :func:`reap_orphans`."""
    here = _procfs.pid_namespace()
    stale = [r for r in _read_records(folder) if r.pid_namespace in (here, None) and not _owner_alive(r)]
    if not stale:
        return
    groups = {record.pgid for record in stale}
    members: dict[int, list[_procfs.ProcStat]] = {}
    for stat in _procfs.all_stats():
        if stat.pgid in groups and not stat.dead:
            members.setdefault(stat.pgid, []).append(stat)
    marked: dict[ChildRecord, list[_procfs.ProcStat]] = {}
    for record in stale:
        ours, refusal = _vet(record, members.get(record.pgid, []))
        if refusal is None:
            marked[record] = ours
            continue
        logger.warning(
            "not reaping process group %d of tool server %r (record %s, left by gateway pid %d): %s; "
            "the record is dropped and nothing was signalled",
            record.pgid,
            record.server,
            folder / record.filename,
            record.owner_pid,
            refusal,
        )
        with suppress(OSError):
            (folder / record.filename).unlink(missing_ok=True)
    survivors = _stop([stat for stats in marked.values() for stat in stats], grace)
    for record, stats in marked.items():
        unmarked = len(members.get(record.pgid, [])) - len(stats)
        logger.log(
            logging.INFO if stats else logging.DEBUG,
            "reaped %d orphaned process(es) of tool server %r (process group %d) left by gateway pid %d%s",
            len(stats),
            record.server,
            record.pgid,
            record.owner_pid,
            f"; left {unmarked} without its marker alone" if unmarked else "",
        )
        if survivors.intersection(stats):
            logger.warning(
                "process group %d: some processes survived SIGKILL; keeping its record", record.pgid
            )
            continue
        with suppress(OSError):
            (folder / record.filename).unlink(missing_ok=True)


def _vet(record: ChildRecord, members: list[_procfs.ProcStat]) -> tuple[list[_procfs.ProcStat], str | None]:
    """The processes of ``record``'s group that are ours to stop, or why none of them is.

    Every member that carries the record's marker must belong to this user and have started no
    earlier than the server; the server itself, if it still runs, must be the process that
    was recorded (its start time) and carry the marker. Members without the marker are left
    alone (they are not in the list).
    """
    if record.pgid_start is None:
        return [], "it does not say when the server started (written by an older version)"
    leader = _procfs.read_stat(record.pgid)  # also a zombie: its start time still tells
    if leader is not None and leader.start_time != record.pgid_start:
        return [], (
            f"process {record.pgid} started at tick {leader.start_time}, not at the recorded "
            f"{record.pgid_start}: it is another process that reuses the server's pid"
        )
    ours = []
    for stat in members:
        uids = _procfs.read_uids(stat.pid)
        if uids is None:  # gone meanwhile
            continue
        if uids != _our_uids():
            return [], f"process {stat.pid} belongs to another user (uid {uids[0]}, effective {uids[1]})"
        if not _procfs.environ_has(stat.pid, record.environ_entry):
            if stat.pid == record.pgid:
                return [], f"process {stat.pid} (the server's pid) does not carry the recorded marker"
            continue
        if stat.start_time < record.pgid_start:
            return [], f"process {stat.pid} started before the server it would descend from"
        ours.append(stat)
    return ours, None


def _our_uids() -> tuple[int, int]:
    return os.getuid(), os.geteuid()


def _read_records(folder: Path) -> list[ChildRecord]:
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(ChildRecord.from_dict(json.loads(_read_record_file(path))))
        except FileNotFoundError:  # removed meanwhile by its owner
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("removing unreadable record %s: %s", path, exc)
            with suppress(OSError):
                path.unlink(missing_ok=True)
    return records


def _read_record_file(path: Path) -> bytes:
    """The bytes of a record file that this user owns; never follows a link, never blocks on a
    FIFO, never reads more than ``MAX_RECORD_BYTES``.

    Raises:
        OSError: it cannot be opened (a symbolic link: ``ELOOP``).
        ValueError: it is not a regular file of ours, or too big to be a record.
    """
    flags = (
        os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    )  # not inherited (PEP 446)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat_mode.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_uid != os.geteuid():
            raise ValueError(f"owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})")
        data = file.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"larger than {MAX_RECORD_BYTES} bytes: not a record")
    return data


def _owner_alive(record: ChildRecord) -> bool:
    stat = _procfs.read_stat(record.owner_pid)
    return stat is not None and not stat.dead and stat.start_time == record.owner_start


def _stop(stats: Iterable[_procfs.ProcStat], grace: float) -> set[_procfs.ProcStat]:
    """SIGTERM the processes, wait, SIGKILL those left, wait; return those still there."""
    handles = {stat: _Handle(stat) for stat in stats}
    try:
        left = set(handles)
        for signum in (signal.SIGTERM, signal.SIGKILL):
            for stat in left:
                handles[stat].signal(signum)
            deadline = time.monotonic() + grace
            while (left := {s for s in left if _same_process_runs(s)}) and time.monotonic() < deadline:
                time.sleep(_POLL_SECONDS)
            if not left:
                break
        return left
    finally:
        for handle in handles.values():
            handle.close()


class _Handle:
    """A way to signal one vetted process and no other: a pidfd (Linux 5.3+) opened, then
    checked to still be that process (start time, owner), so a pid reused between the check and
    the signal is never hit; without pidfds, ``kill`` right after the same check."""

    def __init__(self, stat: _procfs.ProcStat) -> None:
        self.stat = stat
        self.fd: int | None = None
        with suppress(OSError, AttributeError):
            self.fd = os.pidfd_open(stat.pid)

    def signal(self, signum: int) -> None:
        if not (_same_process_runs(self.stat) and _procfs.read_uids(self.stat.pid) == _our_uids()):
            return  # gone, or no longer the process that was vetted
        with suppress(OSError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, signum)
            else:
                os.kill(self.stat.pid, signum)

    def close(self) -> None:
        if self.fd is not None:
            with suppress(OSError):
                os.close(self.fd)
            self.fd = None


def _same_process_runs(stat: _procfs.ProcStat) -> bool:
    now = _procfs.read_stat(stat.pid)
    return now is not None and not now.dead and now.start_time == stat.start_time
