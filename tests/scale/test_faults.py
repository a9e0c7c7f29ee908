"""Redis faults under real gateway processes: down at start-up, gone in the middle of a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.fakes.model_server import FakeModelServer

from .conftest import Cluster, replica_config
from .infra import ROOT, RedisServer
from .test_scale_out import BOUND, ask, client, started_on, until

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]


def test_redis_down_at_start_up_stops_the_gateway_naming_state_url(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    nobody = RedisServer(tmp_path)  # its free port, with nothing listening
    config = tmp_path / "agent.json"
    config.write_text(
        __import__("json").dumps(replica_config(model_server.base_url, tmp_path / "slow.log", nobody.url))
    )
    done = subprocess.run(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"state.url {nobody.url}: Redis does not answer" in done.stderr
    assert "redis-server" in done.stderr


async def test_redis_gone_mid_run_the_run_finishes_saying_so_and_nothing_stored_is_lost(
    cluster: Cluster,
) -> None:
    async with client(cluster) as http:
        first, _ = await ask(http, "hello")
        session_id = first["session_id"]
        answers: list[dict[str, Any]] = []
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                answers.append((await ask(http, "sleep 2", session_id))[0])

            tg.start_soon(run)
            await until(lambda: started_on(cluster) is not None, "the sleep")
            cluster.redis.stop()
        [answer] = answers
        assert answer["termination_reason"] == "success"
        assert answer["answer"] == "slow__sleep said: slept"
        assert "the conversation could not be saved" in answer["detail"] and "state.url" in answer["detail"]
        cluster.redis.start()  # on the same port, with what it had stored (append-only file)
        again, _ = await ask(http, "history", session_id)
        assert again["answer"] == "seen: hello | history"  # the earlier turn is intact
        runs: list[dict[str, Any]] = []

        async def recorded() -> bool:
            response = await http.get("/api/v1/runs", params={"text": "sleep 2"})
            runs[:] = response.json()["runs"] if response.status_code == 200 else []
            return bool(runs) and runs[0]["termination_reason"] is not None

        # the run's end, missed while Redis was away, is written on a later beat of its replica
        await until(recorded, "the run's end recorded", BOUND)
        assert runs[0]["termination_reason"] == "success"


@pytest.fixture
def cluster(model_server: FakeModelServer, tmp_path: Path) -> Any:
    from .conftest import running_cluster

    with running_cluster(tmp_path, model_server.base_url) as running:
        yield running


_ = httpx
