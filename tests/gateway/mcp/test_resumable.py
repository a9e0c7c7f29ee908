"""Per-session event stores: ids, replay after Last-Event-ID, bounds, and no mixing of sessions."""

from __future__ import annotations

import mcp_types as types
from mcp.server import Server
from mcp.server.streamable_http import EventMessage, StreamableHTTPServerTransport

from mcp_agent.gateway.mcp.resumable import EventBudget, ResumableSessionManager, SessionEventStore, Streams


def message(n: int) -> types.JSONRPCNotification:
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"n": n})


async def replayed(store: SessionEventStore, after: str) -> list[EventMessage]:
    got: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        got.append(event)

    await store.replay_events_after(after, send)
    return got


async def test_events_after_the_last_seen_one_are_replayed_for_that_stream_only() -> None:
    resumed: list[tuple[str, object]] = []
    store = SessionEventStore("s1", EventBudget(), lambda s, stream: resumed.append((s, stream)))
    priming = await store.store_event("7", None)
    first = await store.store_event("7", message(1))
    await store.store_event("8", message(99))  # another request's stream
    await store.store_event("7", message(2))
    got = await replayed(store, priming)
    assert [e.message.params for e in got] == [{"n": 1}, {"n": 2}]  # type: ignore[union-attr]
    assert [e.message.params for e in await replayed(store, first)] == [{"n": 2}]  # type: ignore[union-attr]
    assert resumed == [("s1", "7"), ("s1", "7")]
    assert await store.replay_events_after("unknown", lambda e: None) is None  # type: ignore[arg-type,return-value]


async def test_two_sessions_with_the_same_request_ids_never_see_each_others_events() -> None:
    budget = EventBudget()
    alice, bob = SessionEventStore("a", budget), SessionEventStore("b", budget)
    mark = await alice.store_event("1", None)
    await bob.store_event("1", message(666))  # bob's request 1
    await alice.store_event("1", message(1))
    assert [e.message.params for e in await replayed(alice, mark)] == [{"n": 1}]  # type: ignore[union-attr]
    assert await bob.replay_events_after(mark, lambda e: None) is None  # type: ignore[arg-type,return-value]


async def test_a_store_keeps_at_most_its_events_and_the_budget_evicts_the_oldest_everywhere() -> None:
    budget = EventBudget(max_bytes=2000)
    small = SessionEventStore("s", budget, max_events=3)
    for n in range(10):
        await small.store_event("1", message(n))
    assert small.count == 3
    other = SessionEventStore("t", budget)
    for n in range(100):
        await other.store_event("1", message(n))
    assert budget.used <= 2000 and small.count == 0  # the oldest went first, whoever owned them


async def test_events_older_than_the_ttl_go() -> None:
    now = [0.0]
    store = SessionEventStore("s", EventBudget(), ttl=10, clock=lambda: now[0])
    await store.store_event("1", message(1))
    now[0] = 11
    await store.store_event("1", message(2))
    assert store.count == 1


def test_each_new_session_gets_its_own_store() -> None:
    """The manager sets ``StreamableHTTPServerTransport._event_store`` (mcp 2.3): pinned here."""
    assert "_event_store" in vars(StreamableHTTPServerTransport(mcp_session_id="x"))
    manager = ResumableSessionManager(app=Server("x"), budget=EventBudget(), streams=Streams())
    one, two = manager._admit_session(None), manager._admit_session(None)
    assert one is not None and two is not None
    assert isinstance(one._event_store, SessionEventStore) and one._event_store is not two._event_store
