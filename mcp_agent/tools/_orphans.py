"""The record of our tool-server processes, and reaping what a killed gateway left behind.

Every stdio server we start carries ``MCP_AGENT_OWNER=<our pid>:<random token>`` in its
environment; its children inherit it (through ``npx``, shells and the like). While it runs, a
small file in ``<state dir>/children/`` names its process group (pgid = the server's pid), the
marker, and us (pid and start time). The file is written atomically (rename) and owner-only
(``_paths.write_private``) when the server starts, and removed once its whole group is gone.

A gateway killed by SIGKILL cannot remove its files, and while its direct children get SIGTERM
from the kernel (``_spawn.py``), their own children live on. So when a hub starts,
``reap_orphans`` reads the files of gateways that no longer run (the pid is gone or belongs to
a process that started at another time) and stops every process still in those groups that
carries that gateway's marker: SIGTERM, a short wait, SIGKILL. A process without the marker
(pids are reused), or whose environment cannot be read (another user's), is never signalled;
nothing of a gateway that still runs is ever touched. Without ``/proc`` (not Linux) nothing is
recorded or reaped.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio

from .._paths import write_private
from . import _procfs

logger = logging.getLogger(__name__)

OWNER_ENV = "MCP_AGENT_OWNER"
"""The environment variable that marks a process (and its descendants) as started by us."""
REAP_GRACE_SECONDS = 1.0
"""How long orphans get to exit after SIGTERM, and to vanish after SIGKILL."""
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
    """

    owner_pid: int
    owner_start: int
    marker: str
    pgid: int
    server: str
    pid_namespace: str | None = None

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
        """Record a server's process group (just started, its marker is ours)."""
        me = _procfs.read_stat(os.getpid())
        if me is None:
            return
        record = ChildRecord(os.getpid(), me.start_time, owner_marker(), pgid, server, _procfs.pid_namespace())
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
    marked = {
        record: [s for s in members.get(record.pgid, []) if _procfs.environ_has(s.pid, record.environ_entry)]
        for record in stale
    }
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
            logger.warning("process group %d: some processes survived SIGKILL; keeping its record", record.pgid)
            continue
        with suppress(OSError):
            (folder / record.filename).unlink(missing_ok=True)


def _read_records(folder: Path) -> list[ChildRecord]:
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(ChildRecord.from_dict(json.loads(path.read_text())))
        except FileNotFoundError:  # removed meanwhile by its owner
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("removing unreadable record %s: %s", path, exc)
            with suppress(OSError):
                path.unlink(missing_ok=True)
    return records


def _owner_alive(record: ChildRecord) -> bool:
    stat = _procfs.read_stat(record.owner_pid)
    return stat is not None and not stat.dead and stat.start_time == record.owner_start


def _stop(stats: Iterable[_procfs.ProcStat], grace: float) -> set[_procfs.ProcStat]:
    """SIGTERM the processes, wait, SIGKILL those left, wait; return those still there."""
    left = set(stats)
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for stat in left:
            if _same_process_runs(stat):  # never signal a pid that was reused meanwhile
                with suppress(OSError):
                    os.kill(stat.pid, signum)
        deadline = time.monotonic() + grace
        while (left := {s for s in left if _same_process_runs(s)}) and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
        if not left:
            break
    return left


def _same_process_runs(stat: _procfs.ProcStat) -> bool:
    now = _procfs.read_stat(stat.pid)
    return now is not None and not now.dead and now.start_time == stat.start_time

