"""Parsing ``/proc/<pid>/stat``: the command name may hold spaces and parentheses."""

from __future__ import annotations

import os

import pytest

from mcp_agent.tools import _procfs
from mcp_agent.tools._procfs import ProcStat, parse_stat, parse_uids

TAIL = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 777 18 19\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"12 (python3) S 1 12 {TAIL}", ProcStat(12, "S", 1, 12, 777)),
        (f"34 (a b) (c)) Z 12 30 {TAIL}", ProcStat(34, "Z", 12, 30, 777)),
        ("56 (short) R 1 56 7\n", None),
        ("garbage", None),
        ("", None),
    ],
)
def test_parse_stat(text: str, expected: ProcStat | None) -> None:
    assert parse_stat(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Name:\tpython3\nUmask:\t0022\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n", (1000, 1001)),
        ("Uid:\t0\n", None),
        ("Uid:\tx\ty\n", None),
        ("Name:\tno uid line\n", None),
        ("", None),
    ],
)
def test_parse_uids(text: str, expected: tuple[int, int] | None) -> None:
    assert parse_uids(text) == expected


@pytest.mark.skipif(not _procfs.available(), reason="needs Linux's /proc")
def test_this_process_reads_as_itself() -> None:
    me = _procfs.read_stat(os.getpid())
    assert me is not None and (me.pid, me.ppid, me.pgid, me.dead) == (
        os.getpid(),
        os.getppid(),
        os.getpgid(0),
        False,
    )
    assert any(stat.pid == os.getpid() for stat in _procfs.all_stats())
    assert _procfs.read_stat(2**31 - 1) is None
    assert _procfs.read_uids(os.getpid()) == (os.getuid(), os.geteuid())
    assert _procfs.read_uids(2**31 - 1) is None
