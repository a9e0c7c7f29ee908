"""The router's recall on its three evaluation sets, over the 57 tools of the six reference servers
and the three bundled ones (``tool_lists/``, recorded by ``record_tool_lists.py``).

- ``labelled.json``: 118 questions, the set the ranker was first tuned on.
- ``heldout.json``: 30 questions written after that first tuning; the second round (related words,
  shapes, quoted text, field weights) was tuned on both sets.
- ``fresh.json``: 71 questions written before the second round and never tuned on: its figures are
  the honest estimate of recall on questions nobody tuned for. (Two of its questions turned out to
  be worded as two labelled ones are; both are hits.)

The floors sit a little under the measured figures (``bench/bench_router.py`` prints them all),
so a change that costs recall fails here. Fresh is under the 0.95 aimed at: see its floor.
"""

from __future__ import annotations

import pytest

from mcp_agent.tools.router import ToolIndex, query_terms
from tests.tools.router._fixtures import SERVERS, Case, labelled, recall_at, reference_tools


def rankings(name: str = "labelled.json") -> tuple[list[Case], list[list[str]]]:
    cases = labelled(name)
    index = ToolIndex.build(reference_tools())
    return cases, [index.rank(query_terms(case.messages())) for case in cases]


@pytest.mark.parametrize(("name", "size"), [("labelled.json", 100), ("heldout.json", 30), ("fresh.json", 60)])
def test_each_set_is_big_enough_names_real_tools_and_asks_every_server(name: str, size: int) -> None:
    cases = labelled(name)
    tools = {spec.name for spec in reference_tools()}
    assert len(tools) >= 50 and len(cases) >= size
    assert {spec.server for spec in reference_tools()} == set(SERVERS)
    for case in cases:
        assert case.tools and set(case.tools) <= tools, case
    assert len({case.question for case in cases}) == len(cases)
    assert {tool.split("__")[0] for case in cases for tool in case.tools} == set(SERVERS)  # every server


def test_labelled_recall_is_above_its_floors() -> None:
    cases, ranked = rankings()
    assert recall_at(8, cases, ranked) >= 0.97  # measured: 0.992 (117 of 118)
    assert recall_at(3, cases, ranked) >= 0.92  # measured: 0.949
    assert recall_at(1, cases, ranked) >= 0.72  # measured: 0.754


def test_held_out_recall_is_above_its_floors() -> None:
    cases, ranked = rankings("heldout.json")
    assert recall_at(8, cases, ranked) >= 0.95  # measured: 1.000 (30 of 30)
    assert recall_at(3, cases, ranked) >= 0.95  # measured: 1.000
    assert recall_at(1, cases, ranked) >= 0.65  # measured: 0.700


def test_fresh_recall_is_above_its_floors() -> None:
    """Never tuned on. Measured 0.915 at 8 (65 of 71), under the 0.95 aimed at: the floor is the
    figure reached less one question, not the aim."""
    cases, ranked = rankings("fresh.json")
    assert recall_at(8, cases, ranked) >= 0.90  # measured: 0.915 (65 of 71); before this round 0.831
    assert recall_at(3, cases, ranked) >= 0.88  # measured: 0.901; before 0.704
    assert recall_at(1, cases, ranked) >= 0.62  # measured: 0.648; before 0.535
