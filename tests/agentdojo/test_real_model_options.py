"""``bench_agentdojo.py --endpoint``'s options for a real model, end to end: the bench as a real
process against the fake model server on 127.0.0.1 (a model that calls a read-only tool forever),
the requests it receives checked for the key, the output cap and the temperature, and the rounds
per case for the cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion

ROOT = Path(__file__).resolve().parents[2]
BENCH = str(ROOT / "bench" / "bench_agentdojo.py")


class Restless:
    """A model that never answers: every turn calls banking's read-only ``get_balance``."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.path.endswith("/models"):
            return Reply.json({"object": "list", "data": [{"id": "small", "object": "model"}]})
        self.calls += 1
        return Reply.json(completion(content=None, calls=[Call("get_balance", {}, id=f"c{self.calls}")]))


@pytest.mark.timeout(300)  # a gateway and the bridge start in it: slow on a busy machine, not hung
def test_the_key_the_output_cap_the_temperature_and_the_rounds_reach_the_run() -> None:
    with running_model_server() as server:
        server.handler = Restless()
        argv = [
            sys.executable, BENCH, "--endpoint", server.base_url, "--model", "small",
            "--suites", "banking", "--limit", "1", "--modes", "off",
            "--api-key-env", "DOJO_TEST_KEY", "--max-output-tokens", "7", "--temperature", "0",
            "--max-rounds", "2", "--run-timeout", "60",
        ]  # fmt: skip
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=280,
            env={**os.environ, "DOJO_TEST_KEY": "sk-dojo-test"},
        )
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["model"] == "small" and result["suites"]["banking"]["off"]["attack_cases"] == 1
    # two cases (one user task, one attack), each ended by the round cap after two model calls
    assert len(chats) == 4, [r.json.get("messages", [])[-1:] for r in chats]
    for request in chats:
        body = request.json
        assert request.headers["authorization"] == "Bearer sk-dojo-test"
        assert body.get("max_tokens", body.get("max_completion_tokens")) == 7
        assert body["temperature"] == 0


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--max-rounds", "0"], "--max-rounds"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--run-timeout", "-1"], "--run-timeout"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--max-output-tokens", "0"], "--max-output"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--temperature", "3"], "--temperature"),
        (["--obedient", "--max-rounds", "3"], "need --endpoint"),
    ],
)
def test_bad_real_model_options_are_named(args: list[str], named: str) -> None:
    done = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and named in done.stderr and done.stdout == ""
