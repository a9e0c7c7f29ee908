"""The scale tier's own infrastructure: processes come up on loopback, the balancer alternates
between replicas, and everything is gone after stop; a missing program skips, or fails on CI."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import psutil
import pytest

from tests.fakes.model_server import FakeModelServer

from .conftest import running_cluster
from .infra import ROOT, HAProxy, require


@pytest.mark.scale
def test_the_cluster_alternates_and_leaves_nothing_behind(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    with running_cluster(tmp_path, model_server.base_url) as cluster:
        pids = [cluster.redis.process.pid, cluster.balancer.process.pid]  # type: ignore[union-attr]
        for replica in cluster.replicas:
            pids += [replica.process.pid, *(c.pid for c in replica.children)]  # type: ignore[union-attr]
        with httpx.Client(base_url=cluster.url, timeout=30) as http:
            served = [http.get("/api/v1/health").headers["x-served-by"] for _ in range(6)]
        assert served in (["a", "b"] * 3, ["b", "a"] * 3)
    assert [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"] == []


@pytest.mark.parametrize("ci", ["true", ""])
def test_a_missing_program_skips_with_the_command_or_fails_on_ci(
    ci: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("PATH", "/nonexistent")
    outcome = pytest.fail.Exception if ci == "true" else pytest.skip.Exception
    with pytest.raises(outcome, match="apt-get install -y redis-server haproxy"):
        require("no-such-redis-server")


@pytest.mark.scale
def test_the_readme_haproxy_cfg_balances_the_replicas(model_server: FakeModelServer, tmp_path: Path) -> None:
    """docs/state.md's "Running several replicas" shows a haproxy.cfg: run it as written, only with the
    ports of this test's replicas, and see both answer in turn."""
    readme = (ROOT / "docs" / "state.md").read_text(encoding="utf-8")
    [text] = re.findall(r"^```haproxy\n(.*?)^```", readme, flags=re.S | re.M)
    with running_cluster(tmp_path, model_server.base_url) as cluster:
        a, b = cluster.replicas
        balancer = HAProxy(tmp_path / "readme", [a, b])
        for port, mine in (("8765", balancer.port), ("8801", a.port), ("8802", b.port)):
            assert f"127.0.0.1:{port}" in text
            text = text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{mine}")
        balancer.config = text
        try:
            balancer.start()
            with httpx.Client(base_url=balancer.url, timeout=30) as http:
                served = [http.get("/api/v1/health").headers["x-served-by"] for _ in range(4)]
        finally:
            balancer.stop()
    assert served in (["a", "b"] * 2, ["b", "a"] * 2)
