"""The tool router on its three evaluation sets: recall, ranking time and prompt tokens; prints one JSON object.

The sets are over the 57 tools of the six reference MCP servers and the three bundled ones, as
recorded in ``tests/tools/router/tool_lists/`` (offline: no server runs):

- ``labelled``: ``tests/tools/router/labelled.json``, 118 questions (10 with an earlier exchange) that
  the ranker was tuned on first;
- ``heldout``: ``heldout.json``, 30 questions written after that first tuning; the second round of
  tuning (related words, shapes, quoted text, fields) looked at its misses too;
- ``fresh``: ``fresh.json``, 71 questions written before that second round and never tuned on:
  the honest figure for questions nobody tuned for.

- ``recall``: per set, the share of questions with a right tool among the first k ranked,
  k = 1, 3, 5, 8; ``misses_at_8``: per set, the questions with no right tool in the first 8.
- ``recall_by_server``: recall@8 on the labelled set per server of the right tool.
- ``ablations``: labelled recall with parts of the query side left out (no related words and no
  shapes) and with a 2,000-character unrelated tool result (a directory listing and a web page)
  after each question, weighted 0 (the default), 0.1 and 0.3: tool results can only add noise on
  this set, which has no question whose answer needs one, so it measures their cost, not their
  gain.
- ``timing_ms``: building the index once, and one round's ranking (query from the conversation,
  BM25F over 57 tools), median and p95 over the labelled set, repeated.
- ``prompt_tokens``: the tool definitions of one round, all 57 tools against what the router
  offers under ``toolBudget: "auto"`` (9 per round: 8 ranked and ``find_tools``), on each question.
  ``approx``: the project's own estimator (``providers/turns.approx_tokens`` over the tools as a
  chat template writes them, one JSON line each, calibrated against llama.cpp's counts);
  ``json_chars_4``: the definitions' JSON characters / 4.

Run: ``.venv/bin/python bench/bench_router.py``
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_agent.messages import Message, ToolCall, ToolSpec
from mcp_agent.providers.turns import _tool_lines, approx_tokens
from mcp_agent.tools import router
from mcp_agent.tools.memory import MemoryToolSource
from mcp_agent.tools.router import AUTO_BUDGET, Budget, ToolIndex, ToolRouter, definition_tokens, ranker
from tests.tools.router._fixtures import Case, labelled, recall_at, reference_tools

KS = (1, 3, 5, 8)
NOISE = (
    "[DIR] node_modules\n[FILE] package.json\n[FILE] README.md\n[DIR] src\n[FILE] tsconfig.json\n"
    * 10
    + "Welcome to our store! Free shipping on orders over $50. Subscribe to our newsletter for weekly "
    "deals on shoes, jackets and accessories. Customer reviews: great quality, fast delivery. " * 10
)[:2000]


def ranks(index: ToolIndex, cases: list[Case], **options: Any) -> list[list[str]]:
    return [index.rank(router.query_terms(case.messages(), **options)) for case in cases]


def recalls(cases: list[Case], ranked: list[list[str]]) -> dict[str, float]:
    return {f"@{k}": round(recall_at(k, cases, ranked), 3) for k in KS}


@contextmanager
def without_expansion() -> Iterator[None]:
    related, shapes = ranker._RELATED, ranker.shapes
    ranker._RELATED, ranker.shapes = {}, lambda text: []  # type: ignore[assignment]
    try:
        yield
    finally:
        ranker._RELATED, ranker.shapes = related, shapes  # type: ignore[assignment]


def with_noise(case: Case) -> list[Message]:
    call = ToolCall("c1", "filesystem__list_directory", {"path": "."})
    return [*case.messages(), Message.assistant("", tool_calls=(call,)), Message.tool(call, NOISE)]


def noisy_recall(index: ToolIndex, cases: list[Case], weight: float) -> float:
    ranked = [index.rank(router.query_terms(with_noise(case), tool_results=weight)) for case in cases]
    return round(recall_at(8, cases, ranked), 3)


def timing(tools: list[ToolSpec], cases: list[Case]) -> dict[str, float]:
    start = time.perf_counter()
    for _ in range(20):
        ToolIndex.build(tools)
    build = (time.perf_counter() - start) / 20 * 1000
    index = ToolIndex.build(tools)
    rounds = []
    for _ in range(5):
        for case in cases:
            messages = case.messages()
            start = time.perf_counter()
            index.rank(router.query_terms(messages))
            rounds.append((time.perf_counter() - start) * 1000)
    rounds.sort()
    return {
        "index_build": round(build, 3),
        "round_median": round(statistics.median(rounds), 3),
        "round_p95": round(rounds[int(len(rounds) * 0.95)], 3),
    }


def prompt_tokens(tools: list[ToolSpec], cases: list[Case]) -> dict[str, Any]:
    source = MemoryToolSource()
    for spec in tools:
        source.add(spec.name, lambda **kw: "", description=spec.description, parameters=dict(spec.parameters))
    routed = ToolRouter().for_run(source, Budget(count=AUTO_BUDGET))
    offered = list(routed.list_tools())
    every = list(source.list_tools())
    per_round = [routed.select(offered, case.messages()) for case in cases]
    out: dict[str, Any] = {"tools_all": len(every), "tools_routed": AUTO_BUDGET}
    for name, measure in (
        ("approx", lambda t: approx_tokens(_tool_lines(t))),
        ("json_chars_4", definition_tokens),
    ):
        all_tokens = measure(every)
        routed_tokens = [measure(chosen) for chosen in per_round]
        out[name] = {
            "all": all_tokens,
            "routed_mean": round(statistics.mean(routed_tokens)),
            "routed_max": max(routed_tokens),
            "share_mean": round(statistics.mean(routed_tokens) / all_tokens, 3),
            "share_max": round(max(routed_tokens) / all_tokens, 3),
        }
    return out


SETS = ("labelled", "heldout", "fresh")


def main() -> None:
    tools = reference_tools()
    index = ToolIndex.build(tools)
    sets = {name: labelled(f"{name}.json") for name in SETS}
    ranked = {name: ranks(index, cases) for name, cases in sets.items()}
    cases = sets["labelled"]
    by_server: dict[str, list[int]] = {}
    for case, ranking in zip(cases, ranked["labelled"], strict=True):
        server = case.tools[0].split("__")[0]
        by_server.setdefault(server, []).append(int(bool(set(case.tools) & set(ranking[:8]))))
    with without_expansion():
        bare = recalls(cases, ranks(index, cases))
    report = {
        "tools": len(tools),
        "questions": {name: len(sets[name]) for name in SETS},
        "recall": {name: recalls(sets[name], ranked[name]) for name in SETS},
        "misses_at_8": {
            name: [
                c.question
                for c, r in zip(sets[name], ranked[name], strict=True)
                if not set(c.tools) & set(r[:8])
            ]
            for name in SETS
        },
        "recall_by_server": {s: round(sum(h) / len(h), 3) for s, h in sorted(by_server.items())},
        "ablations": {
            "no_related_words_no_shapes": bare,
            "recall_at_8_with_an_unrelated_tool_result": {
                str(w): noisy_recall(index, cases, w) for w in (0.0, 0.1, 0.3)
            },
            "recall_at_8_earlier_user_messages_at": {
                str(w): round(recall_at(8, cases, ranks(index, cases, earlier=w)), 3)
                for w in (0.0, 0.2, 0.4, 0.7)
            },
        },
        "timing_ms": timing(tools, cases),
        "prompt_tokens": prompt_tokens(tools, cases),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
