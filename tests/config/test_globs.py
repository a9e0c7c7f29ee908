"""Globs that match nothing, and the names nearest to them (a table)."""

from __future__ import annotations

import pytest

from mcp_agent.config.globs import UnmatchedGlob, nearest_names, unmatched_globs

EXPOSED = ["files__read_file", "files__write_file", "files__list_directory", "time__get_current_time"]


@pytest.mark.parametrize(
    ("patterns", "names", "expected"),
    [
        # a glob that matches something is fine; only the others are reported
        (["*__write_*"], EXPOSED, []),
        (["files__*", "time__get_current_time"], EXPOSED, []),
        # a typo: the nearest names come back
        (["*__write_fle"], EXPOSED, [UnmatchedGlob("*__write_fle", ("files__write_file",))]),
        # the wrong case (globs are case-sensitive): the case-insensitive match first
        (
            ["Files__Write_File"],
            EXPOSED,
            [UnmatchedGlob("Files__Write_File", ("files__write_file", "files__read_file"))],
        ),
        # the prefix forgotten: names that contain the literal text, shortest first
        (["write_file"], EXPOSED, [UnmatchedGlob("write_file", ("files__write_file", "files__read_file"))]),
        (["read_*"], ["read_file", "read_multiple_files"], []),
        # nothing close at all
        (["zzz_qqq"], EXPOSED, [UnmatchedGlob("zzz_qqq", ())]),
        # no names at all (a server that lists no tools)
        (["read_file"], [], [UnmatchedGlob("read_file", ())]),
        # each glob once, in order
        (["a*", "b*", "a*"], ["c"], [UnmatchedGlob("a*"), UnmatchedGlob("b*")]),
        # fnmatch classes
        (["fs__[rw]*"], ["fs__write"], []),
        (["fs__[xy]*"], ["fs__write"], [UnmatchedGlob("fs__[xy]*", ("fs__write",))]),
        ([], EXPOSED, []),
    ],
)
def test_unmatched_globs(patterns: list[str], names: list[str], expected: list[UnmatchedGlob]) -> None:
    assert unmatched_globs(patterns, names) == expected


def test_nearest_names_are_capped_and_distinct() -> None:
    names = [f"srv__tool_{i}" for i in range(10)]
    nearest = nearest_names("srv__tool_*x", names, n=3)
    assert len(nearest) == 3 and len(set(nearest)) == 3


@pytest.mark.parametrize(
    ("glob", "line"),
    [
        (
            UnmatchedGlob("*__write_fle", ("files__write_file",)),
            "approvals.require: '*__write_fle' matches no tool; nearest: files__write_file",
        ),
        (UnmatchedGlob("zzz"), "approvals.require: 'zzz' matches no tool; no tool name is close"),
    ],
)
def test_describe(glob: UnmatchedGlob, line: str) -> None:
    assert glob.describe("approvals.require") == line
