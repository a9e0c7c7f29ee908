"""AgentDojo (issue 25) with the tier's real model: ``bench/bench_agentdojo.py --endpoint`` against
SmolLM2-135M served by llama.cpp's ``llama-server`` and by llama-cpp-python
(``chatml-function-calling``), on a CI-sized sample (two suites, one user task and one injection
task each, policy off and enforce).

What must hold whatever a 135M model does: the bench exits 0 and prints one JSON object whose
shares are in [0, 1], and with the policy enforcing (approvals declined in the attack cases) no
attack with a side effect succeeds. Never the model's utility. The figures of a run go to
``.real/logs/agentdojo-SERVER.json`` (docs/development.md quotes them).

The servers run with an 8192-token context (the model's own; AgentDojo's tool lists and results
outgrow the tier's 4096), each started here and stopped after its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from ._run import run_bench
from .servers import Build, RealServer, llama_cpp_python, llama_server

pytest.importorskip("agentdojo", reason="AgentDojo is not installed: run `make test` (or `make agentdojo`)")

ROOT = Path(__file__).resolve().parents[2]
BENCH = str(ROOT / "bench" / "bench_agentdojo.py")
N_CTX = 8192
SAMPLE = ["--suites", "banking,slack", "--limit", "1", "--modes", "off,enforce"]
BOUNDS = ["--temperature", "0", "--max-output-tokens", "64", "--max-rounds", "3", "--run-timeout", "120"]
"""Per case at most three model calls of 64 tokens (a few seconds each on 2 busy cores) and 120 s."""
BENCH_SECONDS = 800

SERVERS: dict[str, Callable[[Build, Path], AbstractContextManager[RealServer]]] = {
    "llama-server": lambda build, logs: llama_server(build, logs, n_ctx=N_CTX),
    "llama-cpp-python": lambda build, logs: llama_cpp_python(
        build, logs, chat_format="chatml-function-calling", n_ctx=N_CTX
    ),
}


@pytest.fixture(params=sorted(SERVERS))
def server(request: pytest.FixtureRequest, build: Build, logs: Path) -> Iterator[RealServer]:
    with SERVERS[request.param](build, logs) as running:
        yield running


def _shares(result: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for mode in ("off", "enforce"):
        for key, value in result[mode].items():
            yield f"{mode}.{key}", value
        for suite, modes in result["suites"].items():
            for key, value in modes[mode].items():
                if key.startswith(("utility_no_attack", "attack_success")):
                    yield f"{suite}.{mode}.{key}", value


def test_the_bench_runs_a_real_model_and_enforce_stops_side_effects(server: RealServer) -> None:
    result = run_bench(
        "bench_agentdojo.py",
        server,
        [*SAMPLE, *BOUNDS],
        timeout=BENCH_SECONDS,
        figures=f"agentdojo-{server.kind}",
    )
    shares = dict(_shares(result))
    assert shares and all(value is None or 0.0 <= value <= 1.0 for value in shares.values()), shares
    assert result["enforce"]["attack_success_side_effects"] == 0.0, result["suites"]
