"""The ``TaskStore`` contract, on every backend: a task is read back whole, is gone after its TTL,
keeps a cancellation asked across its owner's rewrites, and is seen by every replica of a shared
backend."""

from __future__ import annotations

import time
from dataclasses import replace

from mcp_agent.state import State
from mcp_agent.state.records import TaskRecord

from .conftest import Backend


def task(task_id: str = "task_1", **changes: object) -> TaskRecord:
    now = time.time()
    record = TaskRecord(
        id=task_id,
        caller="alice",
        created=now,
        updated=now,
        ttl_ms=60_000,
        replica="r1",
        alive_until=now + 30,
    )
    return replace(record, **changes)  # type: ignore[arg-type]


async def test_a_task_is_read_back_whole(state: State) -> None:
    assert await state.tasks.get("task_1") is None
    record = task(input_requests={"a1": {"method": "elicitation/create", "params": {"message": "ok?"}}})
    await state.tasks.put(record)
    assert await state.tasks.get("task_1") == record
    done = replace(record, status="completed", result={"content": [{"type": "text", "text": "é \ud800"}]})
    await state.tasks.put(done)
    assert await state.tasks.get("task_1") == done


async def test_an_expired_task_is_gone(state: State) -> None:
    old = task(created=time.time() - 120, ttl_ms=60_000)
    await state.tasks.put(old)
    assert await state.tasks.get(old.id) is None
    assert await state.tasks.request_cancel(old.id) is False
    await state.beat()  # retention drops it for good
    assert await state.tasks.get(old.id) is None


async def test_a_cancellation_asked_survives_the_owners_rewrites(state: State) -> None:
    assert await state.tasks.request_cancel("task_unknown") is False
    record = task()
    await state.tasks.put(record)
    assert await state.tasks.request_cancel(record.id) is True
    await state.tasks.put(replace(record, alive_until=time.time() + 60))  # the owner renews its lease
    found = await state.tasks.get(record.id)
    assert found is not None and found.cancel_requested


async def test_every_replica_sees_a_task(backend: Backend) -> None:
    if not backend.shared:
        return
    first, second = await backend.open(), await backend.open()
    record = task("task_shared")
    await first.tasks.put(record)
    assert await second.tasks.get(record.id) == record
    assert await second.tasks.request_cancel(record.id) is True
    found = await first.tasks.get(record.id)
    assert found is not None and found.cancel_requested
