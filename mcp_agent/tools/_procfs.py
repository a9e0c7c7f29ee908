"""What Linux's ``/proc`` says about processes: state, parent, group, start time, owner and environment.

Small readers over one pure parser. Every reader answers None (or False) when the process is
gone or unreadable, never raises: callers decide what "unknown" means (the orphan reaper takes
it as "not ours, leave it alone"). Without ``/proc`` (macOS, BSD) ``available()`` is False.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


def available() -> bool:
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
