"""Our stdio servers' processes, which never outlive us: spawned to die with us, recorded while
they run, and reaped after a gateway that was killed (read from Linux's ``/proc``).

Three parts, top to bottom: ``open_child_process`` starts a child that gets SIGTERM from the
kernel when we die; ``ChildRecords`` and ``reap_orphans`` keep a record of each server's process
group and stop what a killed gateway left behind (its servers' own children); the ``/proc``
readers say who a process is (start time, group, owner, environment), which is how the reaper
tells our processes from anyone else's.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import stat as stat_mode
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from ...state.folder import write_private

# Starting a child process that dies with us: ``open_child_process``.
#
# On Linux the child asks the kernel for ``PR_SET_PDEATHSIG`` before it runs its command, so it
# gets SIGTERM when we die, even by SIGKILL, when nothing of ours runs to stop it. SIGTERM rather
# than SIGKILL: the launchers most servers run under (``npx``, ``uvx``) pass SIGTERM on to the
# real server (and a script ending in ``exec`` becomes the server: the setting survives exec),
# and any server gets a chance to stop its own children; SIGKILL would orphan the real server
# behind every launcher. A child that ignores SIGTERM outlives us until the next start reaps it
# (``reap_orphans``, below).
#
# How: anyio's ``open_process`` has no ``preexec_fn``, so on asyncio the child is spawned with
# ``loop.subprocess_exec(..., preexec_fn=...)`` and wrapped in a small ``anyio.abc.Process``
# with anyio's semantics. The fork happens on the event loop's thread, and the parent-death
# signal fires when the thread that forked exits: the loop's thread lives as long as anything
# that could stop the child. Between the fork and the ``prctl`` we may already have died; the
# child then sees another parent and exits. ``preexec_fn`` makes ``subprocess`` fork instead
# of vfork, which costs (2 cores, 75 MB gateway process) about 1.7 ms more per bare spawn and
# about 4-5 ms more per server start from spawn to tools listed (copy-on-write faults in the
# parent until the child execs); a Python exec shim would cost about 7.5 ms per spawn. It also
# runs Python in the child before exec, so the hook does as little as possible: two system calls
# through a function resolved beforehand. Elsewhere
# (not Linux, not asyncio, no ``prctl``) children are spawned by ``anyio.open_process`` without
# the signal.

PR_SET_PDEATHSIG = 1
PARENT_DEATH_SIGNAL = signal.SIGTERM
"""What a child gets when we die (see above for why not SIGKILL)."""
_PIPE_LIMIT = 2**16


def start_problem(command: str, cwd: str | None, env: Mapping[str, str]) -> str | None:
    """Why ``command`` cannot start in ``cwd``, as far as can be seen without starting it (a
    missing working folder, a command that is not there or not executable, a bare name not on
    ``env``'s PATH, else ours); None: it may start. A server whose tool list is cached is then
    shown as down instead of as if fine, since its cached list is all it would offer."""
    if cwd and not Path(cwd).is_dir():
        return f"cannot start {command!r}: {cwd!r} not found"
    if os.sep in command or "/" in command:
        path = Path(cwd or ".") / os.path.expanduser(command)
        if not path.is_file():
            return f"cannot start {command!r}: {command!r} not found"
        if not os.access(path, os.X_OK):
            return f"cannot start {command!r}: not executable"
        return None
    search = env.get("PATH", os.environ.get("PATH", os.defpath))
    if shutil.which(command, path=search) is None:
        return f"cannot start {command!r}: {command!r} not found on PATH"
    return None


async def open_child_process(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None
) -> anyio.abc.Process:
    """Start ``argv`` in a new session (its own process group), with pipes for stdin, stdout and
    stderr; on Linux with asyncio the child dies with us (``PR_SET_PDEATHSIG``).

    Raises:
        OSError: the command cannot be started (``FileNotFoundError`` for a missing command or
            working folder).
    """
    hook = die_with_parent_hook(os.getpid())
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend
        hook = None
    if hook is None:
        return await anyio.open_process(list(argv), env=env, cwd=cwd, start_new_session=True)
    # shielded: cancelled halfway, asyncio kills the child but no longer waits for it, and the
    # child is reaped (if ever) by a watcher whose loop may be gone; whole, the caller stops it
    with anyio.CancelScope(shield=True):
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=hook,
        )
    return _Process(transport, protocol)


@cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def die_with_parent_hook(parent: int) -> Callable[[], None] | None:
    """The ``preexec_fn`` that makes a child die with ``parent`` (the pid of the process that
    forks it), or None where that is unsupported. A child whose parent is no longer ``parent``
    when it runs (it died meanwhile) exits with status 1 instead of running its command."""
    prctl = _prctl()
    if prctl is None:
        return None
    signum = int(PARENT_DEATH_SIGNAL)

    def die_with_parent() -> None:  # runs in the child between fork and exec: keep it minimal
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # we died before the prctl: nobody will send the signal
            os._exit(1)

    return die_with_parent


# -------------------------------------------------------------------- anyio Process over asyncio


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol plus an ``exited`` event: its own ``wait()`` also waits for
    every pipe to close, which a grandchild holding stdout open can delay forever."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_PIPE_LIMIT, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


class _Receive(anyio.abc.ByteReceiveStream):
    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self._stream.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._stream.set_exception(anyio.ClosedResourceError())
        await anyio.lowlevel.checkpoint()


class _Send(anyio.abc.ByteSendStream):
    def __init__(self, stream: asyncio.StreamWriter) -> None:
        self._stream = stream
        self._closed = False

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            self._stream.write(item)
            await self._stream.drain()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True
        self._stream.close()
        await anyio.lowlevel.checkpoint()


class _Process(anyio.abc.Process):
    """An asyncio subprocess as an ``anyio.abc.Process`` (what ``anyio.open_process`` returns)."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._pid: int = transport.get_pid()
        self._stdin = _Send(protocol.stdin) if protocol.stdin else None
        self._stdout = _Receive(protocol.stdout) if protocol.stdout else None
        self._stderr = _Receive(protocol.stderr) if protocol.stderr else None

    async def aclose(self) -> None:
        """Close the pipes (a child blocked on a full pipe then gets SIGPIPE) and wait for the
        exit; cancelled while waiting, kill the child and wait for it."""
        with anyio.CancelScope(shield=True) as scope:
            for fd, stream in ((0, self._stdin), (1, self._stdout), (2, self._stderr)):
                if stream is not None:
                    await stream.aclose()
                    if pipe := self._transport.get_pipe_transport(fd):
                        pipe.close()
            scope.shield = False
            try:
                await self.wait()
            except BaseException:
                scope.shield = True
                self._transport.close()  # kills the child if it still runs
                await self.wait()
                raise

    async def wait(self) -> int:
        await self._protocol.exited.wait()
        code = self._transport.get_returncode()
        assert code is not None
        return code

    def terminate(self) -> None:
        self._transport.terminate()

    def kill(self) -> None:
        self._transport.kill()

    def send_signal(self, signal: int) -> None:
        self._transport.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stderr


# The record of our tool-server processes, and reaping what a killed gateway left behind.
#
# Every stdio server we start carries ``MCP_AGENT_OWNER=<our pid>:<random token>`` in its
# environment; its children inherit it (through ``npx``, shells and the like). While it runs, a
# small file in ``<state dir>/children/`` names its process group (pgid = the server's pid) and
# the server's start time, the marker, and us (pid and start time). The file is written
# atomically (rename) and owner-only (``state.folder.write_private``) when the server starts, and
# removed once its whole group is gone.
#
# A gateway killed by SIGKILL cannot remove its files, and while its direct children get SIGTERM
# from the kernel (``open_child_process``, above), their own children live on. So when a hub starts,
# ``reap_orphans`` reads the files of gateways that no longer run (the pid is gone or belongs to
# a process that started at another time) and stops every process still in those groups that
# carries that gateway's marker: SIGTERM, a short wait, SIGKILL.
#
# A record is a claim, not a proof: anyone who can write a file there can name any process
# group, and a process of another user can carry any marker it likes (as root, a forged record
# once killed another user's process). So before anything is signalled, the group is checked to
# be ours: the record file belongs to this user (a regular file, small); the server's pid, if it
# still runs, started at the recorded time (a pid that was reused has another start time) and
# carries the marker; every process in the group that carries the marker belongs to this user
# (real and effective uid) and started no earlier than the server. A record that fails any check
# is dropped with a warning and nothing of its group is signalled. Processes without the marker
# (or whose environment cannot be read) are never signalled, nothing of a gateway that still
# runs is ever touched, and each signal goes through a pidfd opened and checked just before, so
# a pid reused meanwhile is never hit. Without ``/proc`` (not Linux) nothing is recorded or
# reaped.
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
        me, leader = read_stat(os.getpid()), read_stat(pgid)
        if me is None or leader is None or leader.ppid != os.getpid():
            return
        record = ChildRecord(
            os.getpid(),
            me.start_time,
            owner_marker(),
            pgid,
            server,
            pid_namespace(),
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
    """Stop what killed gateways left (see above). Fast when there is nothing to
    do (one directory listing); the reaping itself, which waits, runs in a worker thread."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    if any(name.endswith(".json") for name in names):
        await anyio.to_thread.run_sync(reap_orphans_sync, folder)


async def reap_what_killed_gateways_left(state_dir: Path) -> None:
    """What a hub does first when it opens: stop the tool servers' children that
    killed gateways left behind. A listing from the cache starts nothing, but it is a start."""
    if procfs_available():
        await reap_orphans(state_dir / "children")


def reap_orphans_sync(folder: Path, grace: float = REAP_GRACE_SECONDS) -> None:
    """The blocking part of :func:`reap_orphans`."""
    here = pid_namespace()
    stale = [r for r in _read_records(folder) if r.pid_namespace in (here, None) and not _owner_alive(r)]
    if not stale:
        return
    groups = {record.pgid for record in stale}
    members: dict[int, list[ProcStat]] = {}
    for stat in all_stats():
        if stat.pgid in groups and not stat.dead:
            members.setdefault(stat.pgid, []).append(stat)
    marked: dict[ChildRecord, list[ProcStat]] = {}
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


def _vet(record: ChildRecord, members: list[ProcStat]) -> tuple[list[ProcStat], str | None]:
    """The processes of ``record``'s group that are ours to stop, or why none of them is.

    Every member that carries the record's marker must belong to this user and have started no
    earlier than the server; the server itself, if it still runs, must be the process that
    was recorded (its start time) and carry the marker. Members without the marker are left
    alone (they are not in the list).
    """
    if record.pgid_start is None:
        return [], "it does not say when the server started (written by an older version)"
    leader = read_stat(record.pgid)  # also a zombie: its start time still tells
    if leader is not None and leader.start_time != record.pgid_start:
        return [], (
            f"process {record.pgid} started at tick {leader.start_time}, not at the recorded "
            f"{record.pgid_start}: it is another process that reuses the server's pid"
        )
    ours = []
    for stat in members:
        uids = read_uids(stat.pid)
        if uids is None:  # gone meanwhile
            continue
        if uids != _our_uids():
            return [], f"process {stat.pid} belongs to another user (uid {uids[0]}, effective {uids[1]})"
        if not environ_has(stat.pid, record.environ_entry):
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
    stat = read_stat(record.owner_pid)
    return stat is not None and not stat.dead and stat.start_time == record.owner_start


def _stop(stats: Iterable[ProcStat], grace: float) -> set[ProcStat]:
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

    def __init__(self, stat: ProcStat) -> None:
        self.stat = stat
        self.fd: int | None = None
        with suppress(OSError, AttributeError):
            self.fd = os.pidfd_open(stat.pid)

    def signal(self, signum: int) -> None:
        if not (_same_process_runs(self.stat) and read_uids(self.stat.pid) == _our_uids()):
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


def _same_process_runs(stat: ProcStat) -> bool:
    now = read_stat(stat.pid)
    return now is not None and not now.dead and now.start_time == stat.start_time


# What Linux's ``/proc`` says about processes: state, parent, group, start time, owner and environment.
#
# Small readers over one pure parser. Every reader answers None (or False) when the process is
# gone or unreadable, never raises: callers decide what "unknown" means (the orphan reaper takes
# it as "not ours, leave it alone"). Without ``/proc`` (macOS, BSD) ``procfs_available()`` is False.
PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` we use.

    Attributes:
        pid: the process id.
        state: one letter: R, S, D, ... ``Z`` (zombie) and ``X`` (dead) hold no resources.
        ppid: the parent's pid.
        pgid: the process group id.
        start_time: when the process started, in clock ticks since boot; with ``pid`` it names
            one process even when pids are reused.
    """

    pid: int
    state: str
    ppid: int
    pgid: int
    start_time: int

    @property
    def dead(self) -> bool:
        """A zombie (exited, not yet waited for) or dead: nothing left to stop."""
        return self.state in ("Z", "X")


def parse_stat(text: str) -> ProcStat | None:
    """Parse one ``/proc/<pid>/stat`` line; None when it is not one.

    ``pid (comm) state ppid pgrp ...``: comm may hold spaces and parentheses, so the fields
    are counted from the last ``)``.
    """
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        return None
    fields = text[close + 2 :].split()
    try:
        return ProcStat(
            pid=int(text[:open_]),
            state=fields[0],
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            start_time=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def parse_uids(text: str) -> tuple[int, int] | None:
    """The real and effective uid from the text of ``/proc/<pid>/status``; None when it has none.

    The ``Uid:`` line holds the real, effective, saved and filesystem uids, tab-separated.
    """
    for line in text.splitlines():
        if line.startswith("Uid:"):
            fields = line[4:].split()
            try:
                return int(fields[0]), int(fields[1])
            except (IndexError, ValueError):
                return None
    return None


def procfs_available() -> bool:
    """Whether this system has a Linux-style ``/proc``."""
    return (PROC / "self" / "stat").is_file()


def read_stat(pid: int | str) -> ProcStat | None:
    """The process's stat, or None when it is gone or unreadable."""
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except OSError:
        return None


def read_uids(pid: int) -> tuple[int, int] | None:
    """The process's real and effective uid, or None when it is gone or unreadable.

    ``status`` is readable by every user for every process, unlike ``environ``: this is how a
    process of another user is told apart from one whose marker we merely cannot read.
    """
    try:
        return parse_uids((PROC / str(pid) / "status").read_text())
    except OSError:
        return None


def pid_namespace() -> str | None:
    """This process's pid namespace (``pid:[4026531836]``), or None when it cannot be read."""
    try:
        return os.readlink(PROC / "self" / "ns" / "pid")
    except OSError:
        return None


def all_stats() -> Iterator[ProcStat]:
    """Every process this user can see (a snapshot; processes come and go while it runs)."""
    try:
        names = os.listdir(PROC)
    except OSError:
        return
    for name in names:
        if name.isdigit() and (stat := read_stat(name)) is not None:
            yield stat


def environ_has(pid: int, entry: str) -> bool:
    """Whether ``entry`` (``NAME=value``) is in the environment the process was started with.

    False when it cannot be read: another user's process, or one that is gone.
    """
    try:
        data = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return entry.encode() in data.split(b"\0")
