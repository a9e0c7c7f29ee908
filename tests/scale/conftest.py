"""Fixtures of the scale-out tier: one fake model server for every replica, a Redis, replicas
behind HAProxy (``infra.py``).

The model follows ``tests/gateway/e2e.py``'s rules, plus:

- ``history``: answers ``seen: <every user message so far, joined by " | ">``, which shows
  what context the replica that ran the turn had;
- ``approve X``: calls ``echo__add`` with ``{"a": 2, "b": 3}``, which needs approval here.

Each replica's ``slow`` tool server records in its own file (``Replica.record``), so a test knows
which replica runs a ``sleep``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion
from tests.gateway.e2e import SERVERS, rule_reply

from .infra import HAProxy, RedisServer, Replica


def scale_reply(request: RecordedRequest) -> Reply:
    """``rule_reply`` plus ``history`` and ``approve`` (see the module docstring)."""
    if request.path.endswith("/chat/completions"):
        messages = request.json["messages"]
        users = [m.get("content") or "" for m in messages if m["role"] == "user"]
        if messages[-1]["role"] == "user":
            verb = users[-1].partition(" ")[0]
            if verb == "history":
                return Reply.json(completion(content="seen: " + " | ".join(users)))
            if verb == "approve":
                call = Call("echo__add", {"a": 2, "b": 3}, id=f"add{len(messages)}")
                return Reply.json(completion(content=None, calls=[call]))
    return rule_reply(request)


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.handler = scale_reply
        yield server


LEASE_SECONDS = 3
"""``state.leaseSeconds`` of the replicas: short, so that a dead replica's leases lapse soon (and
its survivors look for what it left every second)."""


def replica_config(model_url: str, record: Path, state_url: str | None, **extra: Any) -> dict[str, Any]:
    """An agent.json for one replica: the fake model, the slow and echo fixture servers,
    ``echo__add`` gated by approval, and ``state.url`` (with a short lease) when given."""
    config: dict[str, Any] = {
        "llm": {
            "endpoint": model_url,
            "model": "rule-model",
            "provider": "openai",
            "stream": False,
            "maxRetries": 0,
        },
        "limits": {"maxRounds": 4, "toolTimeoutSeconds": 120, "timeoutSeconds": 180},
        "mcpServers": {
            "slow": {
                "command": sys.executable,
                "args": [str(SERVERS / "slow.py")],
                "env": {"SLOW_RECORD": str(record)},
            },
            "echo": {"command": sys.executable, "args": [str(SERVERS / "echo.py")]},
        },
        "approvals": {"require": ["echo__add"], "timeoutSeconds": 120},
        "gateway": {"description": "A replica behind a balancer."},
        **extra,
    }
    if state_url is not None:
        config["state"] = {"url": state_url, "leaseSeconds": LEASE_SECONDS, **config.get("state", {})}
    return config


@dataclass
class Cluster:
    """Replicas (named ``a``, ``b``...) behind one HAProxy, sharing one Redis."""

    redis: RedisServer
    replicas: list[Replica]
    balancer: HAProxy

    @property
    def url(self) -> str:
        return self.balancer.url

    def by_name(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def record(self, replica: Replica) -> Path:
        return replica.folder / "slow.log"

    def other(self, replica: Replica) -> Replica:
        return next(r for r in self.replicas if r is not replica)


@contextmanager
def running_cluster(
    folder: Path,
    model_url: str,
    *,
    replicas: int = 2,
    stateless: bool = False,
    balancer: Sequence[str] = (),
    **extra: Any,
) -> Iterator[Cluster]:
    """A Redis, ``replicas`` gateway processes using it, HAProxy in front (``balancer``: more
    lines for its backend); all stopped on exit."""
    with ExitStack() as stack:
        redis = RedisServer(folder)
        stack.callback(redis.stop)
        redis.start()
        started: list[Replica] = []
        for name in "abcdefgh"[:replicas]:
            replica = Replica(folder, name, {}, stateless=stateless)
            replica.config = replica_config(model_url, replica.folder / "slow.log", redis.url, **extra)
            stack.callback(replica.stop)
            started.append(replica.start())
        front = HAProxy(folder, started, backend=balancer)
        stack.callback(front.stop)
        front.start()
        yield Cluster(redis, started, front)


@pytest.fixture
def cluster(model_server: FakeModelServer, tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path, model_server.base_url) as running:
        yield running
