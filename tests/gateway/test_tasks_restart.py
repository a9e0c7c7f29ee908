"""Tasks across restarts of a real gateway process on the default SQLite state: a restarted
gateway answers ``tasks/get`` with the stored result; a task whose gateway was killed mid-run is
answered ``failed``, saying that its run died with its replica; one whose gateway stopped
gracefully got the ``cancelled`` answer a plain call gets."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from .conftest import eventually
from .mcp.test_tasks import create, get, until
from .test_restart import gateway, model, write_config  # noqa: F401 (model: a fixture)

pytestmark = pytest.mark.anyio


async def test_a_restart_answers_with_the_stored_result_and_a_killed_run_says_it_died(
    tmp_path: Path,
    model: Any,  # noqa: F811 (the fixture imported above)
) -> None:
    config = write_config(tmp_path, model.base_url, state={"leaseSeconds": 2})  # a short lease
    state, log = tmp_path / "state", tmp_path / "log.txt"
    async with gateway(config, state, log) as first:
        done = await create(first.http, "hello")
        finished = await until(first.http, done["taskId"], "completed")
        assert finished["result"]["content"][0]["text"].startswith("I heard: hello")
        stuck = await create(first.http, "echo danger")  # waits for an approval on the dashboard

        async def waiting() -> bool:
            return bool((await first.http.get("/api/v1/approvals")).json()["pending"])

        await eventually(waiting, timeout=60)
        assert (await get(first.http, stuck["taskId"]))["result"]["status"] == "working"
        await first.stop(signal.SIGKILL)
    async with gateway(config, state, log) as second:
        again = await get(second.http, done["taskId"])
        assert again["result"]["status"] == "completed"
        assert again["result"]["result"] == finished["result"]
        assert again["result"]["createdAt"] == finished["createdAt"]
        died = await until(second.http, stuck["taskId"], "failed", "completed", "cancelled")
        assert died["status"] == "failed"
        assert "died with its replica" in died["statusMessage"]
        assert died["error"]["code"] == -32603 and "died with its replica" in died["error"]["message"]
        assert "result" not in died
        # a graceful stop: the run is cancelled as a plain call's would be, and the task says so
        stopped = await create(second.http, "echo later")

        async def asked() -> bool:
            return bool((await second.http.get("/api/v1/approvals")).json()["pending"])

        await eventually(asked, timeout=60)
        await second.stop(signal.SIGTERM)
    async with gateway(config, state, log) as third:
        ended = await get(third.http, stopped["taskId"])
        assert ended["result"]["status"] == "completed"
        assert ended["result"]["result"]["isError"] is True
        assert "shutting down" in ended["result"]["result"]["content"][0]["text"]
