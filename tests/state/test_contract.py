"""The state contract (``mcp_agent/state/base.py``), checked on every backend in ``BACKENDS``."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import anyio
import pytest

from mcp_agent.exceptions import ApprovalsFull, LeaseLost, SessionTooLarge
from mcp_agent.loop.approvals import ApprovalQueue
from mcp_agent.messages import Message, ToolCall, Usage
from mcp_agent.state import (
    INTERRUPTED,
    Approval,
    Decision,
    RunRecord,
    Session,
    State,
    new_session_id,
    valid_session_id,
)

from .conftest import Backend

CALL = ToolCall("c1", "time__now", {"tz": "UTC"})
TRANSCRIPT = (
    Message.system("be brief"),
    Message.user("what time is it? ÄÖ 日本"),
    Message.assistant("", tool_calls=(CALL,)),
    Message.tool(CALL, "12:00"),
    Message.assistant("It is noon."),
)


def approval(
    id_: str, *, replica: str = "", caller: str | None = "alice", created: float | None = None
) -> Approval:
    return Approval(
        id=id_,
        run_id="r1",
        session_id="s1",
        call_id="c1",
        name="fs__write",
        arguments={"path": "a.txt"},
        created=time.time() if created is None else created,
        caller=caller,
        replica=replica,
    )


# --------------------------------------------------------------------------------------------
# sessions


async def test_hold_of_an_unknown_id_stores_a_new_empty_session_held_until_the_block_ends(
    state: State,
) -> None:
    async with state.sessions.hold("conv-1", owner="alice") as session:
        assert isinstance(session, Session)
        assert (session.id, session.transcript, session.runs, session.owner) == ("conv-1", (), 0, "alice")
        stored = await state.sessions.get("conv-1")
        assert stored is not None and stored.owner == "alice"
        [info] = await state.sessions.list()
        assert info.id == "conv-1" and info.busy and info.owner == "alice"
    [info] = await state.sessions.list()
    assert not info.busy


async def test_save_stores_the_whole_transcript_and_updates_the_held_session(state: State) -> None:
    async with state.sessions.hold("conv-1") as session:
        before = session.updated
        assert await state.sessions.save(session, TRANSCRIPT) is True
        assert session.transcript == TRANSCRIPT and session.runs == 1 and session.updated >= before
    stored = await state.sessions.get("conv-1")
    assert stored is not None and stored.transcript == TRANSCRIPT and stored.runs == 1
    async with state.sessions.hold("conv-1", owner="someone else") as again:
        assert again.transcript == TRANSCRIPT and again.owner is None  # the stored owner stands
        assert await state.sessions.save(again, (*TRANSCRIPT, Message.user("more"))) is True
    [info] = await state.sessions.list()
    assert (info.messages, info.runs) == (len(TRANSCRIPT) + 1, 2)


async def test_a_session_deleted_during_a_run_stays_deleted(state: State) -> None:
    async with state.sessions.hold("conv-1") as session:
        assert await state.sessions.delete("conv-1") is True
        assert await state.sessions.save(session, TRANSCRIPT) is False
    assert await state.sessions.get("conv-1") is None
    assert await state.sessions.delete("conv-1") is False
    assert await state.sessions.list() == []


async def test_create_gives_new_unguessable_ids_owned_by_the_caller(state: State) -> None:
    made = [await state.sessions.create(owner="alice") for _ in range(5)]
    ids = {s.id for s in made}
    assert len(ids) == 5 and all(valid_session_id(i) and len(i) == 24 for i in ids)
    assert all(s.owner == "alice" and s.transcript == () for s in made)
    listed = await state.sessions.list()
    assert {i.id for i in listed} == ids and not any(i.busy for i in listed)
    assert valid_session_id(new_session_id())


async def test_get_of_an_unknown_session_is_none(state: State) -> None:
    assert await state.sessions.get("never") is None


async def test_runs_on_one_session_wait_for_each_other(state: State) -> None:
    order: list[str] = []
    first_in = anyio.Event()
    release_first = anyio.Event()

    async def first() -> None:
        async with state.sessions.hold("conv-1") as session:
            order.append("first in")
            first_in.set()
            await release_first.wait()
            await state.sessions.save(session, TRANSCRIPT[:2])
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with state.sessions.hold("conv-1") as session:
            order.append("second in")
            assert session.transcript == TRANSCRIPT[:2]  # sees what the first saved

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            tg.start_soon(second)
            await first_in.wait()
            for _ in range(20):
                await anyio.sleep(0.01)  # give the second every chance to get in too early
            assert order == ["first in"]
            release_first.set()
    assert order == ["first in", "first out", "second in"]


async def test_a_last_save_lets_the_lock_go_before_the_block_is_left(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """``save(release=True)``: on a shared backend another replica's run gets the session at once
    (its lock went with the save, one round trip), a second save through the session is fenced
    off, and leaving the block afterwards is quiet (the renewal does not warn of a lapsed lock)."""
    if not backend.shared:
        pytest.skip("one process: the lock goes when the block is left")
    first, second = await backend.open(lease_seconds=1.5), await backend.open(lease_seconds=1.5)
    with anyio.fail_after(20):
        async with first.sessions.hold("conv-1") as session:
            assert await first.sessions.save(session, TRANSCRIPT, release=True) is True
            assert session.runs == 1
            async with second.sessions.hold("conv-1") as other:  # would wait for the block without
                assert other.transcript == TRANSCRIPT and other.runs == 1
                with pytest.raises(LeaseLost):
                    await first.sessions.save(session, (*TRANSCRIPT, Message.user("late")))
                assert await second.sessions.save(other, (*TRANSCRIPT, Message.user("more"))) is True
            await anyio.sleep(0.6)  # past a renewal (every 0.5 s): it finds the lock gone, and says nothing
        assert not (await first.sessions.list())[0].busy
        async with first.sessions.hold("conv-1") as again:
            assert again.runs == 2 and again.transcript[-1] == Message.user("more")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_last_save_of_a_deleted_session_lets_the_lock_go_too(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("one process: the lock goes when the block is left")
    first, second = await backend.open(), await backend.open()
    with anyio.fail_after(20):
        async with first.sessions.hold("conv-1") as session:
            assert await first.sessions.delete("conv-1") is True
            assert await first.sessions.save(session, TRANSCRIPT, release=True) is False
            async with second.sessions.hold("conv-1", owner="bob") as fresh:  # at once
                assert fresh.transcript == () and fresh.owner == "bob"


async def test_a_last_save_in_one_process_still_holds_the_session_until_the_block_is_left(
    state: State,
) -> None:
    order: list[str] = []
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg, state.sessions.hold("conv-1") as session:
            await state.sessions.save(session, TRANSCRIPT, release=True)

            async def second() -> None:
                async with state.sessions.hold("conv-1") as again:
                    order.append(f"second in, runs {again.runs}")

            tg.start_soon(second)
            await anyio.sleep(0.05)
            order.append("first out")
    assert order == ["first out", "second in, runs 1"]


async def test_runs_on_different_sessions_run_at_once(state: State) -> None:
    with anyio.fail_after(20):
        async with state.sessions.hold("a"), state.sessions.hold("b"):
            busy = {i.id: i.busy for i in await state.sessions.list()}
    assert busy == {"a": True, "b": True}


async def test_an_error_in_the_block_releases_the_lock_and_propagates_as_it_is(state: State) -> None:
    with pytest.raises(KeyError, match="boom"):
        async with state.sessions.hold("conv-1"):
            raise KeyError("boom")
    with anyio.fail_after(20):
        async with state.sessions.hold("conv-1"):
            pass


async def test_cancelling_a_holder_or_a_waiter_releases_everything(state: State) -> None:
    entered = anyio.Event()

    async def hold_forever() -> None:
        async with state.sessions.hold("conv-1"):
            entered.set()
            await anyio.sleep_forever()

    async def wait_forever() -> None:
        async with state.sessions.hold("conv-1"):
            raise AssertionError("must not get in while the first holds it")

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_forever)
            await entered.wait()
            tg.start_soon(wait_forever)
            await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
        async with state.sessions.hold("conv-1"):
            [info] = await state.sessions.list()
            assert info.busy
    assert not (await state.sessions.list())[0].busy


async def test_a_transcript_over_the_cap_is_refused_and_nothing_is_written(backend: Backend) -> None:
    state = await backend.open(max_session_bytes=2000)
    async with state.sessions.hold("conv-1") as session:
        assert await state.sessions.save(session, TRANSCRIPT)
        with pytest.raises(SessionTooLarge) as caught:
            await state.sessions.save(session, (*TRANSCRIPT, Message.user("x" * 5000)))
        assert caught.value.limit == 2000 and caught.value.size > 5000
        assert "state.maxSessionBytes" in str(caught.value)
    stored = await state.sessions.get("conv-1")
    assert stored is not None and stored.transcript == TRANSCRIPT and stored.runs == 1


async def test_an_idle_session_expires_after_its_ttl_but_a_held_one_does_not(backend: Backend) -> None:
    state = await backend.open(session_ttl_seconds=0.3)
    await state.sessions.create(owner="alice")
    with anyio.fail_after(20):
        async with state.sessions.hold("held") as held:
            await anyio.sleep(1.0)  # both are past their TTL now; "held" is in use
            assert {i.id for i in await state.sessions.list()} == {"held"}
            assert await state.sessions.save(held, TRANSCRIPT)
    stored = await state.sessions.get("held")
    assert stored is not None and stored.transcript == TRANSCRIPT


async def test_the_count_cap_evicts_the_oldest_idle_session_of_the_owner_holding_most(
    backend: Backend,
) -> None:
    state = await backend.open(max_sessions=3)
    a1 = await state.sessions.create(owner="a")
    await anyio.sleep(0.01)
    b1 = await state.sessions.create(owner="b")
    await anyio.sleep(0.01)
    a2 = await state.sessions.create(owner="a")
    await anyio.sleep(0.01)
    b2 = await state.sessions.create(owner="b")  # "a" holds the most: its oldest goes
    left = {i.id for i in await state.sessions.list()}
    assert left == {b1.id, a2.id, b2.id}
    async with state.sessions.hold(a2.id):  # busy: never evicted
        await state.sessions.create(owner="a")
        assert a2.id in {i.id for i in await state.sessions.list()}
    assert a1.id not in left


async def test_between_owners_holding_as_many_the_least_recently_used_idle_session_goes(
    backend: Backend,
) -> None:
    state = await backend.open(max_sessions=4)
    made = {}
    for name, owner in (("b1", "b"), ("a1", "a"), ("a2", "a"), ("b2", "b")):
        made[name] = await state.sessions.create(owner=owner)
        await anyio.sleep(0.01)
    async with state.sessions.hold(made["b1"].id, owner="b"):  # b1 used again: a1 is the oldest now
        pass
    await anyio.sleep(0.01)
    await state.sessions.create(owner="c")  # a and b hold two each: the oldest of all goes
    left = {i.id for i in await state.sessions.list()}
    assert made["a1"].id not in left and {made[n].id for n in ("a2", "b1", "b2")} <= left


async def test_the_per_owner_cap_evicts_that_owners_own_oldest(backend: Backend) -> None:
    state = await backend.open(max_sessions_per_owner=2)
    a1 = await state.sessions.create(owner="a")
    await anyio.sleep(0.01)
    b1 = await state.sessions.create(owner="b")
    await anyio.sleep(0.01)
    a2 = await state.sessions.create(owner="a")
    await anyio.sleep(0.01)
    a3 = await state.sessions.create(owner="a")
    assert {i.id for i in await state.sessions.list()} == {b1.id, a2.id, a3.id}
    assert a1.id not in {i.id for i in await state.sessions.list()}


# --------------------------------------------------------------------------------------------
# approvals


async def test_an_approval_is_pending_until_exactly_one_decision(state: State) -> None:
    await state.approvals.add(approval("ap1", replica=state.replica))
    [pending] = await state.approvals.pending()
    assert pending.id == "ap1" and pending.pending and pending.arguments == {"path": "a.txt"}
    assert pending.to_dict()["caller"] == "alice" and "decision" not in pending.to_dict()
    yes = Decision(True, "fine", by="ops", at=1234.5)
    assert await state.approvals.decide("ap1", yes) is True
    assert await state.approvals.decide("ap1", Decision(False, "too late", by="bob")) is False
    assert await state.approvals.pending() == []
    stored = await state.approvals.get("ap1")
    assert stored is not None and stored.decision == yes and stored.replica == state.replica
    assert stored.to_dict()["decision"] == {"approved": True, "reason": "fine", "by": "ops", "at": 1234.5}
    assert await state.approvals.wait("ap1") == yes  # decided already: at once


async def test_a_decision_wakes_the_waiting_run(state: State) -> None:
    await state.approvals.add(approval("ap1"))
    got: list[Decision] = []

    async def waiter() -> None:
        got.append(await state.approvals.wait("ap1"))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.05)
            assert got == []
            assert await state.approvals.decide("ap1", Decision(False, "no", by="ops"))
    assert [(d.approved, d.reason, d.by) for d in got] == [(False, "no", "ops")]


async def test_waiting_is_cancellable_and_the_approval_stays_pending(state: State) -> None:
    await state.approvals.add(approval("ap1"))
    with anyio.move_on_after(0.2) as scope:
        await state.approvals.wait("ap1")
    assert scope.cancelled_caught
    assert [a.id for a in await state.approvals.pending()] == ["ap1"]


async def test_unknown_approvals(state: State) -> None:
    assert await state.approvals.get("nope") is None
    assert await state.approvals.decide("nope", Decision(True)) is False


async def test_pending_lists_oldest_first(state: State) -> None:
    now = time.time()
    for id_, created in (("b", now - 5), ("c", now), ("a", now - 10)):
        await state.approvals.add(approval(id_, created=created))
    assert [a.id for a in await state.approvals.pending()] == ["a", "b", "c"]


async def test_add_beyond_the_cap_raises_and_stores_nothing(state: State) -> None:
    for id_ in ("a1", "a2", "a3"):
        await state.approvals.add(approval(id_, caller=id_), max_pending=3)
    with pytest.raises(
        ApprovalsFull, match=r"^too many approvals are waiting \(3, approvals\.maxPending\); try ag"
    ):
        await state.approvals.add(approval("a4", caller="someone new"), max_pending=3)
    assert await state.approvals.get("a4") is None
    assert [a.id for a in await state.approvals.pending()] == ["a1", "a2", "a3"]
    await state.approvals.add(approval("a5"))  # no cap given: none applies
    assert len(await state.approvals.pending()) == 4
    decided = replace(approval("a6", replica=state.replica), decision=Decision(True, by="ops"))
    await state.approvals.add(decided, max_pending=1)  # decided already: nothing waits, nothing is refused
    assert await state.approvals.get("a6") == decided


async def test_add_beyond_a_callers_share_raises_naming_the_caller_and_others_still_fit(state: State) -> None:
    for index in range(2):
        await state.approvals.add(approval(f"alice-{index}", caller="alice"), max_pending=5, max_per_caller=2)
    with pytest.raises(
        ApprovalsFull, match=r"^too many approvals of caller 'alice' are waiting \(2, its share"
    ) as refused:
        await state.approvals.add(approval("alice-2", caller="alice"), max_pending=5, max_per_caller=2)
    assert (refused.value.waiting, refused.value.limit, refused.value.caller) == (2, 2, "alice")
    assert await state.approvals.get("alice-2") is None
    await state.approvals.add(approval("bob-0", caller="bob"), max_pending=5, max_per_caller=2)
    for index in range(2):  # no caller: no share of its own, only the total cap
        await state.approvals.add(approval(f"anon-{index}", caller=None), max_pending=5, max_per_caller=1)
    with pytest.raises(ApprovalsFull, match=r"waiting \(5, approvals\.maxPending"):
        await state.approvals.add(approval("bob-1", caller="bob"), max_pending=5, max_per_caller=2)
    assert sorted(a.id for a in await state.approvals.pending()) == [
        "alice-0",
        "alice-1",
        "anon-0",
        "anon-1",
        "bob-0",
    ]


async def test_every_way_out_of_pending_frees_room(state: State) -> None:
    """An answer, a timeout and a withdrawal (the queue's decisions) each free a place, in all
    and in the caller's share; a caller's room is its own."""
    queue = ApprovalQueue(timeout_seconds=0.05, max_pending=5, max_per_caller=4, store=state.approvals)
    calls = [ToolCall(f"c{index}", "fs__write", {}) for index in range(6)]
    mine = [await queue.submit(call, run_id="r", caller="alice") for call in calls[:4]]
    with pytest.raises(ApprovalsFull, match="caller 'alice'"):
        await queue.submit(calls[4], run_id="r", caller="alice")
    await queue.submit(calls[4], run_id="r", caller="bob")
    assert await queue.resolve(mine[0].id, True)  # answered
    with anyio.fail_after(20):
        assert (await queue.wait(mine[1].id)).by == "timeout"  # timed out
    with anyio.move_on_after(0.05):
        await ApprovalQueue(timeout_seconds=0, store=state.approvals).wait(mine[2].id)  # withdrawn
    assert sorted(a.caller or "" for a in await queue.pending()) == ["alice", "bob"]
    for call in calls[:3]:
        await queue.submit(call, run_id="r", caller="alice")
    with pytest.raises(ApprovalsFull, match=r"waiting \(5, approvals.maxPending"):
        await queue.submit(calls[5], run_id="r", caller="carol")
    assert sorted(a.caller or "" for a in await queue.pending()) == ["alice"] * 4 + ["bob"]


# --------------------------------------------------------------------------------------------
# runs


def record(id_: str, *, started: float, ended: bool = True, **fields: object) -> RunRecord:
    base: dict[str, object] = {"caller": "alice", "query": f"question {id_}", "replica": "r"}
    if ended:
        base |= {
            "ended": started + 1,
            "termination_reason": "success",
            "answer": f"answer {id_}",
            "usage": Usage(10, 5, 15),
            "tool_calls": ({"name": "time__now", "ok": True, "ms": 3.5},),
            "rounds": 2,
            "elapsed_ms": 1000.0,
            "model": "m",
        }
    return RunRecord(id_, started=started, **(base | fields))  # type: ignore[arg-type]


async def test_a_run_is_in_flight_from_begin_and_final_after_end(state: State) -> None:
    now = time.time()
    begun = record("r1", started=now, ended=False, session_id="s1")
    await state.runs.begin(begun)
    got = await state.runs.get("r1")
    assert got == begun and got.in_flight
    final = record("r1", started=now, session_id="s1", detail="ok")
    await state.runs.end(final)
    got = await state.runs.get("r1")
    assert got == final and not got.in_flight
    assert got.to_dict()["tool_calls"] == [{"name": "time__now", "ok": True, "ms": 3.5}]
    assert RunRecord.from_dict(got.to_dict()) == got
    assert await state.runs.get("nope") is None


async def test_listing_is_newest_first_and_filtered(state: State) -> None:
    now = time.time()
    await state.runs.end(record("old", started=now - 30, caller="bob", query="Über Straße"))
    await state.runs.end(record("mid", started=now - 20, termination_reason="timeout", answer=""))
    await state.runs.end(record("new", started=now - 10, answer="The PORT is free"))
    await state.runs.begin(record("live", started=now, ended=False))

    async def ids(**filters: object) -> list[str]:
        return [r.id for r in await state.runs.list(**filters)]  # type: ignore[arg-type]

    assert await ids() == ["live", "new", "mid", "old"]
    assert await ids(caller="alice") == ["live", "new", "mid"]
    assert await ids(caller="bob") == ["old"]
    assert await ids(reason="timeout") == ["mid"]
    assert await ids(text="port") == ["new"]
    assert await ids(text="ÜBER STRASSE") == ["old"]  # casefold: ß is ss
    assert await ids(text="über straße") == ["old"]
    assert await ids(text="question m") == ["mid"]
    assert await ids(limit=2) == ["live", "new"]
    assert await ids(before=now - 10) == ["mid", "old"]
    assert await ids(before=now - 10, limit=1) == ["mid"]
    assert await ids(caller="nobody") == []


async def test_retention_keeps_the_newest_finished_runs_and_every_run_in_flight(backend: Backend) -> None:
    state = await backend.open(max_runs=3)
    now = time.time()
    await state.runs.begin(record("live", started=now - 100, ended=False))
    for index in range(6):
        await state.runs.end(record(f"r{index}", started=now - 50 + index))
    await state.beat()
    assert [r.id for r in await state.runs.list()] == ["r5", "r4", "r3", "live"]


async def test_retention_drops_finished_runs_and_decided_approvals_older_than_the_age(
    backend: Backend,
) -> None:
    state = await backend.open(max_run_age_days=1)
    now = time.time()
    await state.runs.end(record("ancient", started=now - 3 * 86400))
    await state.runs.begin(record("live-ancient", started=now - 3 * 86400, ended=False))
    await state.runs.end(record("recent", started=now - 3600))
    await state.approvals.add(approval("old", created=now - 3 * 86400))
    await state.approvals.decide("old", Decision(True, at=now - 2 * 86400))
    await state.approvals.add(approval("waiting", created=now - 3 * 86400))
    await state.beat()
    assert [r.id for r in await state.runs.list()] == ["recent", "live-ancient"]
    assert await state.approvals.get("old") is None
    assert await state.approvals.get("waiting") is not None


# --------------------------------------------------------------------------------------------
# the state: replicas, beat, recover


async def test_each_state_is_a_replica_of_its_own(backend: Backend) -> None:
    one, two = await backend.open(), await backend.open()
    assert one.replica and two.replica and one.replica != two.replica
    named = await backend.open(replica="gw-1")
    assert named.replica == "gw-1"
    await one.beat()


async def test_recover_leaves_this_replicas_own_runs_and_approvals_alone(state: State) -> None:
    await state.runs.begin(record("mine", started=time.time(), ended=False, replica=state.replica))
    await state.approvals.add(approval("ap-mine", replica=state.replica))
    found = await state.recover()
    assert (found.runs, found.approvals) == (0, 0)
    got = await state.runs.get("mine")
    assert got is not None and got.in_flight
    assert [a.id for a in await state.approvals.pending()] == ["ap-mine"]


async def test_a_replica_that_is_gone_has_its_runs_interrupted_and_its_approvals_expired(
    backend: Backend,
) -> None:
    if not backend.shared:
        pytest.skip("memory:// is one process: no other replica can leave anything behind")
    gone = await backend.open()
    started = time.time()
    await gone.runs.begin(record("lost", started=started, ended=False, replica=gone.replica, session_id="s1"))
    await gone.approvals.add(approval("ap-lost", replica=gone.replica))
    await gone.aclose()
    survivor = await backend.open()
    await survivor.runs.begin(record("alive", started=started, ended=False, replica=survivor.replica))
    found = await survivor.recover()
    assert (found.runs, found.approvals) == (1, 1)
    lost = await survivor.runs.get("lost")
    assert lost is not None and lost.termination_reason == "terminal_error" and lost.detail == INTERRUPTED
    assert lost.ended is not None and lost.session_id == "s1" and lost.query == "question lost"
    expired = await survivor.approvals.get("ap-lost")
    assert expired is not None and expired.decision is not None
    assert not expired.decision.approved and expired.decision.by == "recovery"
    assert (
        await survivor.approvals.decide("ap-lost", Decision(True, by="ops")) is False
    )  # never applied later
    alive = await survivor.runs.get("alive")
    assert alive is not None and alive.in_flight
    assert (await survivor.recover()).runs == 0  # once only


async def test_the_caps_count_every_replicas_approvals_and_a_dead_ones_are_freed_by_recovery(
    backend: Backend,
) -> None:
    if not backend.shared:
        pytest.skip("memory:// is one process: no other replica shares its approvals")
    gone, survivor = await backend.open(), await backend.open()
    caps = {"max_pending": 3, "max_per_caller": 2}
    for id_ in ("g1", "g2"):
        await gone.approvals.add(approval(id_, replica=gone.replica), **caps)
    with pytest.raises(ApprovalsFull, match="caller 'alice'"):
        await survivor.approvals.add(approval("s1", replica=survivor.replica), **caps)
    await survivor.approvals.add(approval("s2", replica=survivor.replica, caller="bob"), **caps)
    with pytest.raises(ApprovalsFull, match=r"waiting \(3, approvals\.maxPending"):
        await gone.approvals.add(approval("g3", replica=gone.replica, caller="carol"), **caps)
    await gone.aclose()
    assert (await survivor.recover()).approvals == 2
    for id_ in ("s1", "s3"):
        await survivor.approvals.add(approval(id_, replica=survivor.replica), **caps)
    with pytest.raises(ApprovalsFull, match=r"waiting \(3, approvals\.maxPending"):
        await survivor.approvals.add(approval("s4", replica=survivor.replica, caller="carol"), **caps)
    assert sorted(a.id for a in await survivor.approvals.pending()) == ["s1", "s2", "s3"]
