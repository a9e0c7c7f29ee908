"""What the Redis backend adds to the contract: replicas (several States on one real
``redis-server``) sharing locks, approvals and events; leases that lapse; Redis down or gone.

The server is Debian's ``redis-server`` on a free loopback port (``tests/scale/infra.py``): these
tests skip without it, naming the install command, and fail instead under ``CI=true``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from mcp_agent.events import RecordingSink, RunEnded, RunStarted
from mcp_agent.exceptions import ApprovalsFull, ConfigError, LeaseLost, StateError
from mcp_agent.loop.approvals import ApprovalQueue
from mcp_agent.messages import Message, ToolCall
from mcp_agent.state import Decision, StateLimits, open_state
from mcp_agent.state._redis_scripts import Keys
from mcp_agent.state.redis import RedisState
from tests.scale.infra import RedisServer

from .test_contract import TRANSCRIPT, approval, record

BOUND = 20  # seconds: "does not hang" bounds, never timings


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    running = RedisServer(tmp_path).start()
    try:
        yield running
    finally:
        running.stop()


class Replicas:
    """Opens States on one Redis, as separate gateway processes would; closes them all."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened: list[RedisState] = []

    async def open(self, *, replica: str | None = None, **limits: float) -> RedisState:
        state = await open_state(self.url, limits=StateLimits(**limits), replica=replica)  # type: ignore[arg-type]
        assert isinstance(state, RedisState)
        self.opened.append(state)
        return state


@pytest.fixture
async def replicas(server: RedisServer) -> AsyncIterator[Replicas]:
    made = Replicas(server.url)
    try:
        yield made
    finally:
        for state in made.opened:
            await state.aclose()


async def test_a_run_on_one_replica_makes_the_others_wait_and_they_see_its_transcript(
    replicas: Replicas,
) -> None:
    a, b = await replicas.open(), await replicas.open()
    order: list[str] = []
    a_in, release = anyio.Event(), anyio.Event()

    async def on_a() -> None:
        async with a.sessions.hold("conv") as session:
            order.append("a in")
            a_in.set()
            await release.wait()
            assert await a.sessions.save(session, TRANSCRIPT)
            order.append("a out")

    async def on_b() -> None:
        await a_in.wait()
        async with b.sessions.hold("conv") as session:
            order.append("b in")
            assert session.transcript == TRANSCRIPT

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            tg.start_soon(on_a)
            tg.start_soon(on_b)
            await a_in.wait()
            for _ in range(30):
                await anyio.sleep(0.01)
            assert order == ["a in"]
            assert [i.busy for i in await b.sessions.list()] == [True]
            release.set()
    assert order == ["a in", "a out", "b in"]


async def test_a_lock_is_renewed_while_held_however_long(replicas: Replicas) -> None:
    a, b = await replicas.open(lease_seconds=0.3), await replicas.open(lease_seconds=0.3)
    with anyio.fail_after(BOUND):
        async with a.sessions.hold("conv"):
            with anyio.move_on_after(1.5) as waited:  # five leases: b must still be waiting
                async with b.sessions.hold("conv"):
                    raise AssertionError("b got in while a held the lock")
            assert waited.cancelled_caught


async def test_a_lock_of_a_replica_that_is_gone_is_broken_at_once(
    replicas: Replicas, server: RedisServer
) -> None:
    b = await replicas.open(lease_seconds=60)
    # a crashed replica's lease on the session, 60 s long; its liveness lease is gone already
    assert server.command("SET", "mcp-agent:lock:conv", "deadbeef:1234", "PX", "60000") == b"+OK\r\n"
    with anyio.fail_after(BOUND):
        async with b.sessions.hold("conv") as session:
            assert session.id == "conv"


async def test_a_lock_of_a_live_replica_elsewhere_lapses_with_its_lease(
    replicas: Replicas, server: RedisServer
) -> None:
    b = await replicas.open(lease_seconds=60)
    elsewhere = json.dumps({"host": "another-host", "pidns": None, "pid": 1, "started": 1})
    server.command("SET", "mcp-agent:replica:far", elsewhere, "PX", "60000")
    server.command("HSET", "mcp-agent:replicas", "far", elsewhere)
    server.command("SET", "mcp-agent:lock:conv", "far:1234", "PX", "700")  # its holder stopped renewing
    with anyio.fail_after(BOUND):
        async with b.sessions.hold("conv") as session:
            assert session.id == "conv"


async def test_a_decision_on_one_replica_wakes_the_run_waiting_on_another(replicas: Replicas) -> None:
    a, b = await replicas.open(), await replicas.open()
    await a.approvals.add(approval("ap1", replica=a.replica))
    got: list[Decision] = []

    async def wait_on_a() -> None:
        got.append(await a.approvals.wait("ap1"))

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_on_a)
            [seen] = await b.approvals.pending()
            assert seen.replica == a.replica
            await anyio.sleep(0.05)
            assert await b.approvals.decide("ap1", Decision(True, "go", by="ops"))
            assert not await a.approvals.decide("ap1", Decision(False, "late", by="bob"))
    assert [(d.approved, d.by) for d in got] == [(True, "ops")]


async def test_each_callers_count_follows_every_way_out_of_pending(replicas: Replicas) -> None:
    """A caller's share is counted from a set of its pending approvals, kept beside the pending
    index: after approvals are answered, time out, are withdrawn and are recovered from a dead
    replica, each set holds exactly its caller's pending approvals, and an empty one is gone."""
    a, gone = await replicas.open(), await replicas.open()
    queue = ApprovalQueue(0.05, max_pending=100, max_per_caller=50, store=a.approvals, replica=a.replica)
    lost = ApprovalQueue(0, max_pending=100, max_per_caller=50, store=gone.approvals, replica=gone.replica)

    async def submit(on: ApprovalQueue, caller: str | None, count: int) -> list[str]:
        return [
            (await on.submit(ToolCall("c", "fs__write", {}), run_id="r", caller=caller)).id
            for _ in range(count)
        ]

    made = {caller: await submit(queue, caller, 6) for caller in ("alice", "bob", "carol")}
    await submit(lost, "alice", 3)
    await submit(lost, "bob", 3)
    await submit(queue, None, 1)
    assert await queue.resolve(made["alice"][0], True) and await queue.resolve(
        made["bob"][0], False
    )  # answered
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:  # timed out
            for approval_id in (made["alice"][1], made["carol"][1]):
                tg.start_soon(queue.wait, approval_id)
    with anyio.move_on_after(0.05):
        await ApprovalQueue(0, store=a.approvals).wait(made["bob"][2])  # withdrawn by its run
    for approval_id in made["carol"][2:]:
        assert await queue.resolve(approval_id, True)
    assert await queue.resolve(made["carol"][0], True)
    await gone.aclose()
    assert (await a.recover()).approvals == 6  # expired: its replica is gone

    keys, pending = Keys(), await a.approvals.pending()
    counts = {
        caller: await a.client.scard(keys.approvals_of_caller(caller)) for caller in ("alice", "bob", "carol")
    }
    assert counts == {"alice": 4, "bob": 4, "carol": 0}
    assert counts == {caller: sum(p.caller == caller for p in pending) for caller in counts}
    for caller in ("alice", "bob"):
        assert {i.decode() for i in await a.client.smembers(keys.approvals_of_caller(caller))} == {
            p.id for p in pending if p.caller == caller
        }
    assert await a.client.exists(keys.approvals_of_caller("carol")) == 0
    assert await a.client.zcard(keys.pending) == len(pending) == 9


async def test_a_callers_share_is_not_filled_by_approvals_no_longer_pending(
    replicas: Replicas, server: RedisServer
) -> None:
    """A decision written by a replica of a version without the callers' sets (a rolling upgrade)
    leaves its approval in its caller's set; the share then counts only what still is pending."""
    a = await replicas.open()
    for index in range(2):
        await a.approvals.add(approval(f"ap{index}"), max_per_caller=2)
    server.command("ZREM", "mcp-agent:approvals:pending", "ap0")  # as the older DECIDE did
    server.command("HSET", "mcp-agent:approval:ap0", "decision", json.dumps(Decision(True).to_dict()))
    await a.approvals.add(approval("ap2"), max_per_caller=2)
    with pytest.raises(ApprovalsFull, match=r"caller 'alice' are waiting \(2, its share"):
        await a.approvals.add(approval("ap3"), max_per_caller=2)
    members = await a.client.smembers(Keys().approvals_of_caller("alice"))
    assert {i.decode() for i in members} == {"ap1", "ap2"}


async def test_waiting_on_an_unknown_approval_raises(replicas: Replicas) -> None:
    a = await replicas.open()
    with pytest.raises(KeyError):
        await a.approvals.wait("never")


async def test_a_replica_elsewhere_is_recovered_once_its_lease_lapses(
    replicas: Replicas, server: RedisServer
) -> None:
    far = await replicas.open(replica="far", lease_seconds=1)
    await far.runs.begin(record("lost", started=time.time(), ended=False, replica="far"))
    await far.approvals.add(approval("ap-lost", replica="far"))
    survivor = await replicas.open(lease_seconds=1)
    # "far" runs on another host (its process cannot be checked, only its lease) and froze
    # holding a session's lock: nothing renews its leases any more
    elsewhere = json.dumps({"host": "another-host", "pidns": None, "pid": 1, "started": 1})
    server.command("SET", "mcp-agent:replica:far", elsewhere, "PX", "1000")
    server.command("HSET", "mcp-agent:replicas", "far", elsewhere)
    server.command("SET", "mcp-agent:lock:conv", "far:stalled", "PX", "60000")
    server.command("SADD", "mcp-agent:locks:far", "conv")
    assert (await survivor.recover()).runs == 0  # its lease holds yet
    with anyio.fail_after(BOUND):
        while not (await survivor.recover()).runs:
            await anyio.sleep(0.1)
    lost = await survivor.runs.get("lost")
    assert lost is not None and lost.termination_reason == "terminal_error"
    stored = await survivor.approvals.get("ap-lost")
    assert stored is not None and stored.decision is not None and stored.decision.by == "recovery"
    assert server.command("EXISTS", "mcp-agent:lock:conv") == b":0\r\n"


async def test_events_of_one_replica_reach_the_others_and_not_itself(replicas: Replicas) -> None:
    a, b = await replicas.open(), await replicas.open()
    seen_by_a, seen_by_b = RecordingSink(), RecordingSink()
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            await tg.start(a.events.relay, seen_by_a)
            await tg.start(b.events.relay, seen_by_b)  # listens (no ``wanted``: always)
            while not a.events.heard():
                await anyio.sleep(0.02)
            a.events.emit(RunStarted(run_id="r1", session_id="s", caller="alice", query="q"))
            a.events.emit(RunEnded(run_id="r1", termination_reason="success", rounds=1))
            while len(seen_by_b.events) < 2:
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    assert seen_by_b.events == [
        RunStarted(run_id="r1", session_id="s", caller="alice", query="q", ts=seen_by_b.events[0].ts),
        RunEnded(run_id="r1", termination_reason="success", rounds=1, ts=seen_by_b.events[1].ts),
    ]
    assert seen_by_a.events == []


class Wanted:
    """A replica's ``wanted``: whether its bus has listeners, switched by the test."""

    def __init__(self) -> None:
        self.value = False

    def __call__(self) -> bool:
        return self.value


async def published(server: RedisServer, during: float) -> list[bytes]:
    """What is published on the events channel for ``during`` seconds (a plain subscriber)."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(server.url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    seen: list[bytes] = []
    try:
        await pubsub.subscribe("mcp-agent:events")
        with anyio.move_on_after(during):
            while True:
                message = await pubsub.get_message(timeout=during)
                if message is not None:
                    seen.append(message["data"])
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await client.aclose()
    return seen


async def test_with_nobody_listening_no_event_is_published_and_a_new_listener_is_heard_at_once(
    replicas: Replicas, server: RedisServer
) -> None:
    a, b = await replicas.open(), await replicas.open()
    wanted_a, wanted_b = Wanted(), Wanted()
    seen_by_b = RecordingSink()
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            await tg.start(lambda **kw: a.events.relay(RecordingSink(), wanted=wanted_a, **kw))
            await tg.start(lambda **kw: b.events.relay(seen_by_b, wanted=wanted_b, **kw))
            async with anyio.create_task_group() as watch:
                results: list[list[bytes]] = []

                async def collect() -> None:
                    results.append(await published(server, 0.5))

                watch.start_soon(collect)
                await anyio.sleep(0.1)
                for index in range(20):
                    a.events.emit(RunStarted(run_id=f"r{index}", session_id="s", caller="x", query="q"))
            assert results == [[]]  # nobody listened: nothing went to Redis
            assert a.events.unheard == 20 and not a.events.heard()
            # what the /api/v1/events route awaits before ": listening". b's relay announces only
            # while it wants events, and it does not yet: the announcement a hears is this one
            await b.events.listening()
            while not a.events.heard():  # a message away, no polling pause
                await anyio.sleep(0.005)
            wanted_b.value = True  # b decodes what arrives from now on
            a.events.emit(RunEnded(run_id="r1", termination_reason="success", rounds=1))
            while not seen_by_b.events:
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    assert [event.type for event in seen_by_b.events] == ["run_ended"]


async def test_a_replica_that_starts_later_learns_at_once_who_listens(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_agent.state import _redis_events

    monkeypatch.setattr(_redis_events, "ANNOUNCE_EVERY", 3600.0)  # no periodic announcement helps
    a, b = await replicas.open(), await replicas.open()
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            await tg.start(b.events.relay, RecordingSink())  # b listens, announced when it started
            await anyio.sleep(0.2)
            await tg.start(a.events.relay, RecordingSink())  # a asks who listens; b answers
            while not a.events.heard():
                await anyio.sleep(0.005)
            tg.cancel_scope.cancel()


async def test_an_audience_that_stops_announcing_is_forgotten(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_agent.state import _redis_events

    monkeypatch.setattr(_redis_events, "ANNOUNCE_EVERY", 0.1)
    monkeypatch.setattr(_redis_events, "AUDIENCE_SECONDS", 0.3)
    a, b = await replicas.open(), await replicas.open()
    wanted_b = Wanted()
    wanted_b.value = True
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            await tg.start(lambda **kw: a.events.relay(RecordingSink(), wanted=lambda: False, **kw))
            await tg.start(lambda **kw: b.events.relay(RecordingSink(), wanted=wanted_b, **kw))
            while not a.events.heard():
                await anyio.sleep(0.02)
            await anyio.sleep(1.0)  # b's announcements keep it heard past AUDIENCE_SECONDS
            assert a.events.heard()
            wanted_b.value = False  # b's last listener went
            while a.events.heard():
                await anyio.sleep(0.05)
            a.events.emit(RunStarted(run_id="r", session_id="s", caller="x", query="q"))
            assert a.events.unheard == 1
            tg.cancel_scope.cancel()


async def test_redis_down_at_start_is_a_config_error_naming_state_url(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)  # its port, with nothing listening
    with pytest.raises(ConfigError) as caught:
        await open_state(f"redis://:secret@127.0.0.1:{server.port}/0", limits=StateLimits())
    message = str(caught.value)
    assert caught.value.path == "state.url" and "state.url" in message and "redis-server" in message
    assert "secret" not in message


async def test_redis_gone_during_a_run_fails_the_save_not_the_run_and_keeps_what_was_stored(
    replicas: Replicas, server: RedisServer
) -> None:
    state = await replicas.open(lease_seconds=2)
    async with state.sessions.hold("conv") as session:
        assert await state.sessions.save(session, TRANSCRIPT)
    with anyio.fail_after(BOUND):
        async with state.sessions.hold("conv") as session:
            server.stop()
            with pytest.raises(StateError, match=r"state\.url redis://127\.0\.0\.1:\d+/0: Redis failed"):
                await state.sessions.save(session, (*TRANSCRIPT, Message.user("lost")))
        # leaving the block could not release the lock: logged, not raised (it lapses)
    server.start()  # on the same port, with what it had written
    with anyio.fail_after(BOUND):
        async with state.sessions.hold("conv") as session:
            assert session.transcript == TRANSCRIPT


async def test_a_replica_of_this_host_whose_lease_lapsed_but_whose_process_runs_is_not_recovered(
    replicas: Replicas, server: RedisServer
) -> None:
    # as after a Redis outage longer than the lease: nobody could renew, but the process lives
    lapsed = await replicas.open(lease_seconds=1)
    await lapsed.runs.begin(record("running", started=time.time(), ended=False, replica=lapsed.replica))
    server.command("DEL", f"mcp-agent:replica:{lapsed.replica}")
    survivor = await replicas.open(lease_seconds=1)
    await anyio.sleep(1.2)  # the survivor is settled: an outage is no excuse any more
    assert await survivor.alive(lapsed.replica)
    assert (await survivor.recover()).runs == 0
    running = await survivor.runs.get("running")
    assert running is not None and running.in_flight


async def test_an_end_that_redis_missed_is_written_on_a_later_beat(
    replicas: Replicas, server: RedisServer
) -> None:
    state = await replicas.open(lease_seconds=2)
    begun = record("r1", started=time.time(), ended=False, replica=state.replica)
    await state.runs.begin(begun)
    server.stop()
    with pytest.raises(StateError):
        await state.runs.end(record("r1", started=begun.started, replica=state.replica))
    with pytest.raises(StateError):
        await state.beat()
    server.start()
    with anyio.fail_after(BOUND):
        await state.beat()
    ended = await state.runs.get("r1")
    assert ended is not None and ended.termination_reason == "success"


async def test_a_transcript_is_parsed_once_per_version_and_read_again_when_another_replica_saved(
    replicas: Replicas,
) -> None:
    a, b = await replicas.open(), await replicas.open()
    async with a.sessions.hold("conv") as session:
        assert await a.sessions.save(session, TRANSCRIPT)
    first = await a.sessions.get("conv")
    again = await a.sessions.get("conv")
    assert first is not None and again is not None
    assert again.transcript is first.transcript  # not parsed again: the same objects
    async with b.sessions.hold("conv") as on_b:  # another replica adds a turn
        assert on_b.transcript == TRANSCRIPT
        assert await b.sessions.save(on_b, (*TRANSCRIPT, Message.user("from b")))
    async with a.sessions.hold("conv") as back:
        assert back.transcript == (*TRANSCRIPT, Message.user("from b")) and back.runs == 2
    assert await a.sessions.delete("conv")
    async with a.sessions.hold("conv") as fresh:  # the same id anew: nothing of the old one
        assert fresh.transcript == () and fresh.runs == 0


async def test_the_event_relay_outlives_a_redis_restart(replicas: Replicas, server: RedisServer) -> None:
    a, b = await replicas.open(), await replicas.open()
    seen_by_b = RecordingSink()
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            await tg.start(a.events.relay, RecordingSink())
            await tg.start(b.events.relay, seen_by_b)
            while not a.events.heard():
                await anyio.sleep(0.02)
            server.stop()
            await anyio.sleep(0.5)  # both relays lose Redis and try again, with a growing pause
            server.start()
            while not seen_by_b.events:  # once b is subscribed again and a hears it, events flow
                a.events.emit(RunStarted(run_id="again", session_id="s", caller="x", query="q"))
                await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
    assert seen_by_b.events[0].run_id == "again"


async def test_a_run_whose_lock_was_taken_over_does_not_save_over_the_new_holder(
    replicas: Replicas, server: RedisServer
) -> None:
    state = await replicas.open()
    async with state.sessions.hold("conv") as first:
        assert await state.sessions.save(first, TRANSCRIPT)
    with anyio.fail_after(BOUND):
        async with state.sessions.hold("conv") as stalled:
            # the lease lapsed while this replica stalled, and another replica's run took the lock
            server.command("SET", "mcp-agent:lock:conv", "other:token")
            with pytest.raises(LeaseLost, match=r"state\.leaseSeconds"):
                await state.sessions.save(stalled, (*TRANSCRIPT, Message.user("stale")))
    assert server.command("GET", "mcp-agent:lock:conv").endswith(b"other:token\r\n")  # not released by us
    found = await state.sessions.get("conv")
    assert found is not None and found.transcript == TRANSCRIPT
