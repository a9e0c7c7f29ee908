"""The approval caps across processes: replicas submitting at the same instant, on one shared
store (an SQLite file, a Redis), never overshoot ``approvals.maxPending`` or a caller's share.

Each round, two real processes (``_approvals_child.py``) submit many gated calls each at one
agreed instant against a small cap; afterwards exactly the cap is pending and the rest were
refused. The store's count and add are one atomic step (``ApprovalStore.add``); with the count
read first and the add written after it, the processes both take the last places and these
tests fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
import pytest

from mcp_agent.state import Decision

from .conftest import Backend

ROOT = Path(__file__).resolve().parents[2]
CHILD = str(Path(__file__).with_name("_approvals_child.py"))
PROCESSES = 2
COUNT = 20
"""Calls each process submits a round, all at once."""
ROUNDS = 15
"""Rounds a test runs (the old count-then-add overshot by round 8 at the latest, in three runs)."""


class Submitter:
    """One child process: ``go AT`` in, ``added N refused M`` out."""

    def __init__(self, url: str, max_pending: int, max_per_caller: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, CHILD, url, str(max_pending), str(max_per_caller), str(COUNT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    async def line(self) -> str:
        assert self.proc.stdout is not None
        with anyio.fail_after(60):
            text = await anyio.to_thread.run_sync(self.proc.stdout.readline)
        if not text:
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"the child ended ({self.proc.wait()}): {stderr}")
        return text.strip()

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def submitters(url: str, max_pending: int, max_per_caller: int) -> Iterator[list[Submitter]]:
    with ExitStack() as stack:
        made = []
        for _ in range(PROCESSES):
            made.append(Submitter(url, max_pending, max_per_caller))
            stack.callback(made[-1].close)
        yield made


@pytest.mark.parametrize(
    ("max_pending", "max_per_caller"), [(5, 0), (0, 3)], ids=["maxPending", "callerShare"]
)
async def test_processes_submitting_at_once_never_overshoot_a_cap(
    backend: Backend, max_pending: int, max_per_caller: int
) -> None:
    if not backend.shared:
        pytest.skip("memory:// is one process: nothing to race with")
    cap = max_pending or max_per_caller
    judge = await backend.open()
    with submitters(backend.url, max_pending, max_per_caller) as children:
        for child in children:
            assert await child.line() == "ready"
        for round_ in range(ROUNDS):
            start = time.time() + 0.1
            for child in children:
                child.send(f"go {start!r}")
            added = refused = 0
            for child in children:
                _, got, _, lost = (await child.line()).split()
                added, refused = added + int(got), refused + int(lost)
            pending = await judge.approvals.pending()
            assert (len(pending), added, refused) == (cap, cap, PROCESSES * COUNT - cap), f"round {round_}"
            for approval in pending:
                assert await judge.approvals.decide(approval.id, Decision(False, "next round", by="test"))
        for child in children:
            child.send("quit")
