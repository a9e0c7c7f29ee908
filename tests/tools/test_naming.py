"""Exposed tool names: sanitising, the 64-character rule, collisions, determinism."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_agent.tools.naming import NAME_PATTERN, NamedTool, assign_names, exposed_name, sanitize


def sha8(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:8]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("read_file", "read_file"),
        ("get-sum", "get-sum"),
        ("files__read_file", "files__read_file"),
        ("a.b", "a_b"),
        ("server/tool", "server_tool"),
        ("server:tool", "server_tool"),
        ("my tool", "my_tool"),
        ("weird!@#$%^&*()name", "weird__________name"),
        ("café", "caf_"),
        ("日本", "__"),  # one "_" per character; already starts with "_"
        ("emoji🙂", "emoji_"),
        ("3d_print", "_3d_print"),
        ("-dash", "_-dash"),
        ("_private", "_private"),
        ("", "_"),
        ("Tool", "Tool"),
    ],
)
def test_sanitize(raw: str, expected: str) -> None:
    assert sanitize(raw) == expected
    assert NAME_PATTERN.match(sanitize(raw))


def test_sanitize_cuts_long_names_with_a_hash_of_the_whole_name() -> None:
    raw = "a" * 100
    name = sanitize(raw)
    assert len(name) == 64
    assert name == "a" * 55 + "_" + sha8(raw)


def test_sanitize_keeps_exactly_64_characters() -> None:
    assert sanitize("a" * 64) == "a" * 64
    assert len(sanitize("a" * 65)) == 64


def test_long_names_that_share_a_stem_stay_distinct() -> None:
    stem = "x" * 70
    assert sanitize(stem + "one") != sanitize(stem + "two")
    # names that differ only in characters that sanitising erases still differ once cut
    assert sanitize(stem + ".b") != sanitize(stem + "_b")


@settings(deadline=None)
@given(st.text())
def test_sanitize_always_gives_a_valid_name(raw: str) -> None:
    assert NAME_PATTERN.match(sanitize(raw))


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        (NamedTool("files", "read_file"), "files__read_file"),
        (NamedTool("files", "read_file", prefix="fs"), "fs__read_file"),
        (NamedTool("files", "read_file", prefix=""), "read_file"),
        (NamedTool("my server", "get.thing"), "my_server__get_thing"),
        (NamedTool("9lives", "x"), "_9lives__x"),
        (NamedTool("s", "1tool", prefix=""), "_1tool"),
        (
            NamedTool("everything", "trigger-long-running-operation"),
            "everything__trigger-long-running-operation",
        ),
    ],
)
def test_exposed_name(tool: NamedTool, expected: str) -> None:
    assert exposed_name(tool) == expected


def test_no_collision_no_warning() -> None:
    names, warnings = assign_names([NamedTool("a", "x"), NamedTool("b", "x"), NamedTool("a", "y")])
    assert names == {("a", "x"): "a__x", ("b", "x"): "b__x", ("a", "y"): "a__y"}
    assert warnings == []


def test_same_tool_on_two_unprefixed_servers() -> None:
    names, warnings = assign_names([NamedTool("beta", "search", ""), NamedTool("alpha", "search", "")])
    # the first by (server, mcp_name) keeps the bare name
    assert names[("alpha", "search")] == "search"
    assert names[("beta", "search")] == "search_" + sha8("beta\x00search")
    assert len(warnings) == 1
    assert "collision" in warnings[0] and "'beta'" in warnings[0] and "'alpha'" in warnings[0]


def test_names_that_collide_only_after_sanitising() -> None:
    names, warnings = assign_names([NamedTool("s", "a_b"), NamedTool("s", "a.b")])
    assert names[("s", "a.b")] == "s__a_b"  # "a.b" < "a_b"
    assert names[("s", "a_b")] == "s__a_b_" + sha8("s\x00a_b")
    assert len(set(names.values())) == 2
    assert len(warnings) == 1


def test_prefix_and_tool_name_collide_with_another_server() -> None:
    # server "a" with tool "b__c" and server "a__b" with tool "c" both want "a__b__c"
    names, warnings = assign_names([NamedTool("a", "b__c"), NamedTool("a__b", "c")])
    assert len(set(names.values())) == 2
    assert names[("a", "b__c")] == "a__b__c"
    assert warnings


def test_three_way_collision() -> None:
    tools = [NamedTool(s, "search", "") for s in ("c", "b", "a")]
    names, warnings = assign_names(tools)
    assert names[("a", "search")] == "search"
    assert len(set(names.values())) == 3
    assert len(warnings) == 2


def test_a_renamed_tool_never_takes_another_tools_name() -> None:
    # "b"'s renamed "search" would be "search_<hash>"; a third tool is literally called that
    clash = "search_" + sha8("b\x00search")
    tools = [NamedTool("a", "search", ""), NamedTool("b", "search", ""), NamedTool("c", clash, "")]
    names, _ = assign_names(tools)
    assert names[("c", clash)] == clash
    assert names[("b", "search")] not in (clash, "search")
    assert len(set(names.values())) == 3


def test_long_prefixed_names_are_cut_with_a_warning() -> None:
    server = "awslabs_aws-iac-mcp-server"
    tool = "validate_cloudformation_template_against_best_practices"
    names, warnings = assign_names([NamedTool(server, tool)])
    name = names[(server, tool)]
    assert len(name) == 64
    assert NAME_PATTERN.match(name)
    assert name == sanitize(f"{server}__{tool}")
    assert warnings and "too long" in warnings[0]


def test_long_names_that_collide_once_cut_are_distinct() -> None:
    server = "s" * 60
    tools = [NamedTool(server, "tool_one"), NamedTool(server, "tool_two")]
    names, warnings = assign_names(tools)
    assert len(set(names.values())) == 2
    assert all(len(n) <= 64 for n in names.values())
    assert not any("collision" in w for w in warnings)  # the hash of the whole name separates them


def test_repeated_tool_is_named_once() -> None:
    names, warnings = assign_names([NamedTool("a", "x"), NamedTool("a", "x")])
    assert names == {("a", "x"): "a__x"}
    assert warnings == []
    names, warnings = assign_names([NamedTool("a", "x"), NamedTool("a", "x", prefix="p")])
    assert len(names) == 1
    assert warnings and "twice" in warnings[0]


def test_empty_input() -> None:
    assert assign_names([]) == ({}, [])


tool_lists = st.lists(
    st.builds(
        NamedTool,
        server=st.sampled_from(["a", "b", "a.b", "a_b", "x" * 70, "日本"]),
        mcp_name=st.sampled_from(["search", "read.file", "read_file", "read file", "1", "", "y" * 80]),
        prefix=st.sampled_from([None, "", "p", "a"]),
    ),
    max_size=20,
)


@settings(deadline=None)
@given(tool_lists, st.randoms(use_true_random=False))
def test_names_are_valid_unique_and_independent_of_order(tools: list[NamedTool], rnd: random.Random) -> None:
    names, warnings = assign_names(tools)
    assert set(names) == {(t.server, t.mcp_name) for t in tools}
    assert len(set(names.values())) == len(names)
    assert all(NAME_PATTERN.match(n) for n in names.values())
    # the result does not depend on the order the tools came in (a repeated tool with two
    # different prefixes is the one exception to "first wins", and it is sorted too)
    shuffled = list(tools)
    rnd.shuffle(shuffled)
    assert assign_names(shuffled) == (names, warnings)
