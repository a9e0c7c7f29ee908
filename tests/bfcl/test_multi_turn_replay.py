"""BFCL's multi-turn ground truth replayed through a real ``mcp-agent serve`` (``agent_query``
sessions by a real MCP client, the replay model on a real socket, one real stdio server per API
class): a sample of every category reaches BFCL's expected state, the model is offered what BFCL
offers at each turn, and a wrong call fails the comparison."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bfcl.multi_turn.data import CATEGORIES, load_entries
from bench.bfcl.multi_turn.replay import run_multi_turn


@pytest.fixture(scope="module")
def sample() -> dict[str, Any]:
    return run_multi_turn(CATEGORIES, limit=2, keep_offered=True)


def test_two_entries_of_every_category_reach_bfcls_expected_state(sample: dict[str, Any]) -> None:
    assert sample["entries"] == 8
    for category in CATEGORIES:
        row = sample["categories"][category]
        assert (row["entries"], row["failed"], row["passed"]) == (2, [], 1.0), category
    assert sample["passed"] == 1.0


def test_an_excluded_function_is_never_offered(sample: dict[str, Any]) -> None:
    outcome = sample["outcomes"]["multi_turn_base_0"]
    assert load_entries("multi_turn_base")[0].excluded == {"cp"}
    offered = [names for turn in outcome.offered for names in turn]
    assert offered and all("cp" not in names and "mv" in names for names in offered)


def test_a_missed_function_is_offered_from_its_turn_on(sample: dict[str, Any]) -> None:
    entry = load_entries("multi_turn_miss_func")[0]
    assert entry.missed == {3: ["sort"]}
    outcome = sample["outcomes"][entry.id]
    assert len(outcome.offered) == len(entry.ground_truth) == 5
    for index, turn in enumerate(outcome.offered):
        assert turn, index  # the model was asked at every turn
        assert all(("sort" in names) is (index >= 3) for names in turn), index


def test_a_wrong_call_a_withheld_one_or_a_failed_run_fails_the_comparison() -> None:
    base = load_entries("multi_turn_base")[0].ground_truth
    wrong_folder = [list(turn) for turn in base]
    wrong_folder[0] = [call.replace("dir_name='temp'", "dir_name='tmp'") for call in base[0]]
    assert wrong_folder[0] != base[0]
    missed = load_entries("multi_turn_miss_func")[0].ground_truth
    too_early = [list(turn) for turn in missed]
    # `sort` called before its turn only: the gateway does not offer it yet, so it never runs
    too_early[2], too_early[3] = ["sort('final_report.pdf')"], []
    # the same call again and again: the gateway's loop guard ends the run, an error result
    looping = [["pwd()"] * 5, *load_entries("multi_turn_miss_param")[0].ground_truth[1:]]
    result = run_multi_turn(
        ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param"],
        ids=["multi_turn_base_0", "multi_turn_miss_func_0", "multi_turn_miss_param_0"],
        scripts={
            "multi_turn_base_0": wrong_folder,
            "multi_turn_miss_func_0": too_early,
            "multi_turn_miss_param_0": looping,
        },
    )
    (base_failure,) = result["categories"]["multi_turn_base"]["failed"]
    assert base_failure["id"] == "multi_turn_base_0"
    assert "turn 0" in base_failure["why"] and "instance_state_mismatch" in base_failure["why"]
    (missed_failure,) = result["categories"]["multi_turn_miss_func"]["failed"]
    assert missed_failure["id"] == "multi_turn_miss_func_0"
    assert "turn 3: no call reached a server" in missed_failure["why"]
    (stopped,) = result["categories"]["multi_turn_miss_param"]["failed"]
    assert stopped["why"].startswith("turn 0: agent_query failed: ")
    assert "loop" in stopped["why"].lower(), stopped["why"]
    assert result["passed"] == 0.0
