"""Admissions: query slots, a bounded queue, each caller within its share, FIFO among the eligible."""

from __future__ import annotations

import anyio
import pytest

from mcp_agent.gateway.admission import Admissions, Busy, Closed, Slot
from mcp_agent.gateway.callers import ALL_SCOPES, Caller, CallerBook

from .conftest import eventually


def admissions(running: int = 2, queued: int = 4, timeout: float = 30, callers: int = 1) -> Admissions:
    book = CallerBook({Caller(f"c{i}", ALL_SCOPES): f"t{i}" for i in range(callers)})
    return Admissions(max_running=running, max_queued=queued, queue_timeout=timeout, share=book.share_of)


async def test_slots_are_granted_until_full_then_queue_in_order() -> None:
    gate = admissions(running=2, queued=4)
    first, second = await gate.acquire("c0"), await gate.acquire("c0")
    assert gate.running == 2
    got: list[tuple[str, Slot]] = []
    async with anyio.create_task_group() as tg:
        for index, name in enumerate(("a", "b", "c")):

            async def wait(name: str = name) -> None:
                got.append((name, await gate.acquire("c0")))

            tg.start_soon(wait)
            await eventually(lambda index=index: gate.queued == index + 1)
        gate.release(first)
        await eventually(lambda: [name for name, _ in got] == ["a"])
        gate.release(second)
        gate.release(second)  # idempotent: frees nothing more
        await eventually(lambda: [name for name, _ in got] == ["a", "b"])
        assert gate.queued == 1 and gate.running == 2
        gate.release(got[0][1])
    assert [name for name, _ in got] == ["a", "b", "c"]


async def test_a_full_queue_is_busy_at_once() -> None:
    gate = admissions(running=1, queued=1)
    await gate.acquire("c0")
    async with anyio.create_task_group() as tg:
        tg.start_soon(gate.acquire, "c0")
        await eventually(lambda: gate.queued == 1)
        with pytest.raises(Busy, match="1 queries are running and 1 waiting"):
            await gate.acquire("c0")
        tg.cancel_scope.cancel()
    assert gate.queued == 0  # the cancelled waiter left the queue


async def test_no_queue_means_busy_at_once() -> None:
    gate = admissions(running=1, queued=0)
    await gate.acquire("c0")
    with pytest.raises(Busy, match="queueing is off"):
        await gate.acquire("c0")


async def test_a_waiter_gives_up_after_the_queue_timeout() -> None:
    gate = admissions(running=1, queued=4, timeout=0.05)
    await gate.acquire("c0")
    with pytest.raises(Busy, match=r"stayed taken for 0\.05 s"):
        await gate.acquire("c0")
    assert gate.queued == 0 and gate.running == 1


async def test_no_caller_holds_more_than_its_share_while_others_exist() -> None:
    gate = admissions(running=4, queued=8, callers=2)  # share: ceil(4 * 0.75) = 3
    alice = [await gate.acquire("c0") for _ in range(3)]
    async with anyio.create_task_group() as tg:
        tg.start_soon(gate.acquire, "c0")  # a 4th for alice waits, though a slot is free
        await eventually(lambda: gate.queued == 1)
        assert gate.running == 3  # all three are alice's
        bob = await gate.acquire("c1")  # bob gets the free slot at once
        assert gate.running == 4 and gate.queued == 1
        gate.release(bob)  # alice is still at her share: the slot stays free for others
        assert gate.queued == 1 and gate.running == 3
        gate.release(alice[0])  # now alice's waiter may run
        await eventually(lambda: gate.queued == 0 and gate.running == 3)  # alice's three
        tg.cancel_scope.cancel()


async def test_a_freed_slot_goes_to_the_first_eligible_waiter() -> None:
    gate = admissions(running=4, queued=8, callers=2)
    alice = [await gate.acquire("c0") for _ in range(3)]
    bob = await gate.acquire("c1")  # all 4 slots taken
    order: list[str] = []
    async with anyio.create_task_group() as tg:

        async def wait(caller: str, tag: str) -> None:
            await gate.acquire(caller)
            order.append(tag)

        tg.start_soon(wait, "c0", "alice")  # first in the queue
        await eventually(lambda: gate.queued == 1)
        tg.start_soon(wait, "c1", "bob")
        await eventually(lambda: gate.queued == 2)
        gate.release(bob)  # alice holds her share (3): bob, behind her, takes the slot
        await eventually(lambda: order == ["bob"])
        gate.release(alice[0])  # alice drops to 2: her waiter runs now
        await eventually(lambda: order == ["bob", "alice"])
    assert gate.queued == 0 and gate.running == 4


async def test_each_caller_has_its_share_of_the_queue() -> None:
    gate = admissions(running=1, queued=4, callers=2)  # queue share: 3
    await gate.acquire("c1")
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(gate.acquire, "c0")
        await eventually(lambda: gate.queued == 3)
        with pytest.raises(Busy, match="already has 3 queries waiting"):
            await gate.acquire("c0")
        tg.start_soon(gate.acquire, "c1")  # the other caller still finds a place
        await eventually(lambda: gate.queued == 4)
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("settle", [False, True])
async def test_a_slot_granted_to_a_cancelled_waiter_is_given_back(settle: bool) -> None:
    gate = admissions(running=1, queued=4)
    held = await gate.acquire("c0")

    async def holder() -> None:  # as the gateway holds a slot: release in finally
        slot = await gate.acquire("c0")
        try:
            await anyio.sleep_forever()
        finally:
            gate.release(slot)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await eventually(lambda: gate.queued == 1)
            gate.release(held)  # granted to the waiter...
            if settle:
                await anyio.sleep(0)
            scope.cancel()  # ...which is cancelled at once, or once it holds the slot
    assert gate.running == 0 and gate.queued == 0


async def test_close_turns_the_queue_away() -> None:
    gate = admissions(running=1, queued=4)
    await gate.acquire("c0")
    errors: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            try:
                await gate.acquire("c0")
            except Closed as exc:
                errors.append(exc)

        tg.start_soon(wait)
        await eventually(lambda: gate.queued == 1)
        gate.close()
    assert len(errors) == 1 and gate.queued == 0
    with pytest.raises(Closed):
        await gate.acquire("c0")


def test_share_of() -> None:
    one = CallerBook({Caller("a", ALL_SCOPES): "t"})
    two = CallerBook({Caller("a", ALL_SCOPES): "t", Caller("b", ALL_SCOPES): "u"}, share=0.75)
    assert [one.share_of(n) for n in (0, 1, 4, 16)] == [0, 1, 4, 16]
    assert [two.share_of(n) for n in (0, 1, 2, 4, 16, 64)] == [0, 1, 2, 3, 12, 48]
    assert CallerBook().share_of(16) == 16
