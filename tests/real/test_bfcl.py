"""BFCL (issue 26) with the tier's real models: ``bench/bench_bfcl.py --endpoint`` against SmolLM2-135M
and Gemma 3 270M, each on llama.cpp's ``llama-server --jinja`` with the tier's tool template, on a
CI-sized sample (``SAMPLE``: the first entry of six single-turn categories), the gateway's
text-call parsing on and off for the same entries, at temperature 0.

What must hold whatever a small model does: the bench exits 0 and prints one JSON object, and in
no category is parsing on worse than parsing off (the gateway's own parsing must only add calls
the model meant). At temperature 0 the same build answers the same prompt the same way, so the
two settings differ only by what the gateway does. The figures go to
``.real/logs/bfcl-MODEL.json``; ``make bench-bfcl-real`` runs larger samples
(``docs/_incoming/bfcl3.md`` has the table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from ._run import run_bench
from .servers import GEMMA_TEMPLATE, Build, RealServer, llama_server

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed: run `make test`")

ROOT = Path(__file__).resolve().parents[2]
BENCH = str(ROOT / "bench" / "bench_bfcl.py")
CATEGORIES = ("simple_python", "multiple", "parallel", "live_simple", "irrelevance", "live_irrelevance")
"""One of each kind: a call, a call among several functions, several calls, a user's own schema,
and the two where the right answer calls nothing (where text parsing could only do harm)."""
SAMPLE = ["--categories", ",".join(CATEGORIES), "--limit", "1", "--text-calls", "on,off"]
BOUNDS = ["--temperature", "0", "--max-output-tokens", "64", "--request-timeout", "120"]
"""Per entry and setting at most three model calls of 64 tokens (the harness's limits)."""
BENCH_SECONDS = 880

MODELS: dict[str, Callable[[Build, Path], AbstractContextManager[RealServer]]] = {
    "smollm2": lambda build, logs: llama_server(build, logs),
    "gemma": lambda build, logs: llama_server(build, logs, model=build.gemma, template=GEMMA_TEMPLATE),
}


@pytest.fixture(params=sorted(MODELS))
def model(request: pytest.FixtureRequest, build: Build, logs: Path) -> Iterator[tuple[str, RealServer]]:
    with MODELS[request.param](build, logs) as running:
        yield request.param, running


def test_parsing_on_is_never_worse_than_off(model: tuple[str, RealServer]) -> None:
    name, server = model
    result = run_bench(
        "bench_bfcl.py", server, [*SAMPLE, *BOUNDS], timeout=BENCH_SECONDS, figures=f"bfcl-{name}"
    )
    worse = {
        category: (rows["parsing_on"]["passed"], rows["parsing_off"]["passed"])
        for category, rows in result["categories"].items()
        if rows["parsing_on"]["passed"] < rows["parsing_off"]["passed"]
    }
    assert not worse, (
        worse,
        {c: r["parsing_on"]["failures"] for c, r in result["categories"].items() if c in worse},
    )
    assert result["runs"] == 2 * sum(rows["parsing_on"]["entries"] for rows in result["categories"].values())
