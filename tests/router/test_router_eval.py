"""The router's recall on the labelled set: 118 questions over the 57 tools of the six reference
servers and the three bundled ones (``tool_lists/``, recorded by ``record_tool_lists.py``).

``heldout.json`` holds 30 more questions, written after the ranker was tuned on the first set
and never tuned on: its figures are the honest estimate of recall on questions nobody tuned for.

The floors sit a little under the measured figures (``bench/bench_router.py`` prints them all),
so a change that costs recall fails here.
"""

from __future__ import annotations

from mcp_agent.tools.router import ToolIndex, query_terms
from tests.router._fixtures import SERVERS, Case, labelled, recall_at, reference_tools


def rankings(name: str = "labelled.json") -> tuple[list[Case], list[list[str]]]:
    cases = labelled(name)
    index = ToolIndex.build(reference_tools())
    return cases, [index.rank(query_terms(case.messages())) for case in cases]


def test_the_set_is_big_enough_and_names_real_tools() -> None:
    cases = labelled()
    tools = {spec.name for spec in reference_tools()}
    assert len(tools) >= 50 and len(cases) >= 100
    assert {spec.server for spec in reference_tools()} == set(SERVERS)
    for case in cases:
        assert case.tools and set(case.tools) <= tools, case
    assert len({case.question for case in cases}) == len(cases)
    for server in SERVERS:  # every server is asked about
        assert any(name.startswith(f"{server}__") for case in cases for name in case.tools), server


def test_recall_at_8_is_above_its_floor() -> None:
    cases, ranked = rankings()
    assert recall_at(8, cases, ranked) >= 0.97  # measured: 0.992 (117 of 118)


def test_recall_at_1_and_3_are_above_their_floors() -> None:
    cases, ranked = rankings()
    assert recall_at(1, cases, ranked) >= 0.70  # measured: 0.737
    assert recall_at(3, cases, ranked) >= 0.87  # measured: 0.898


def test_held_out_recall_is_above_its_floor() -> None:
    cases, ranked = rankings("heldout.json")
    assert len(cases) == 30 and all(set(case.tools) <= {s.name for s in reference_tools()} for case in cases)
    assert recall_at(8, cases, ranked) >= 0.75  # measured: 0.800 (24 of 30)
