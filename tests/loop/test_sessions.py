"""Sessions: the in-memory store (TTL, count cap, ids) and the Agent's use of it."""

from __future__ import annotations

import anyio
import pytest

from mcp_agent.config import AgentConfig, Limits, SessionsConfig
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.guards import FAILURE_HINT
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.loop.sessions import MemorySessionStore, Session
from mcp_agent.messages import Message, Turn
from mcp_agent.providers.base import DeltaCallback, ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn

from ._helpers import assert_valid_transcript, call, echo_tools


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------------------------
# the store


def test_open_creates_and_returns_the_same_session() -> None:
    store = MemorySessionStore()
    first = store.open("s1")
    assert isinstance(first, Session) and first.transcript == ()
    assert store.open("s1") is first
    assert store.get("s1") is first and store.get("nope") is None


def test_create_makes_unguessable_unique_ids() -> None:
    store = MemorySessionStore()
    ids = {store.create().id for _ in range(100)}
    assert len(ids) == 100 and all(len(i) >= 20 for i in ids)


def test_open_rejects_an_empty_id() -> None:
    with pytest.raises(ValueError):
        MemorySessionStore().open("")


def test_save_list_and_delete() -> None:
    store = MemorySessionStore()
    session = store.open("s1")
    store.save(session, [Message.user("q"), Message.assistant("a")])
    assert session.transcript == (Message.user("q"), Message.assistant("a")) and session.runs == 1
    [info] = store.list()
    assert info.to_dict() | {"created": 0, "updated": 0} == {
        "id": "s1",
        "owner": None,
        "messages": 2,
        "runs": 1,
        "created": 0,
        "updated": 0,
        "busy": False,
    }
    assert store.delete("s1") is True and store.delete("s1") is False
    store.save(session, [Message.user("late")])  # a run that ends after the delete
    assert store.get("s1") is None and store.list() == []


def test_idle_sessions_expire() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=60, clock=clock)
    store.open("old")
    clock.now += 30
    store.open("young")
    clock.now += 31  # old: idle 61 s; young: 31 s
    assert [i.id for i in store.list()] == ["young"]
    assert store.open("old").transcript == ()  # an expired id starts afresh


def test_use_keeps_a_session_alive() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=60, clock=clock)
    session = store.open("s")
    for _ in range(5):
        clock.now += 50
        store.save(session, [Message.user("q")])
    assert store.get("s") is session


def test_ttl_zero_is_never() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=0, clock=clock)
    store.open("s")
    clock.now += 10**9
    assert store.get("s") is not None


async def test_a_busy_session_is_not_evicted() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=60, max_sessions=1, clock=clock)
    session = store.open("busy")
    async with session.lock:
        clock.now += 120
        assert [i.id for i in store.list()] == ["busy"] and store.list()[0].busy
        store.open("other")  # over the cap, but the busy one stays
        assert {i.id for i in store.list()} == {"busy", "other"}
    clock.now += 120
    assert store.list() == []


def test_max_sessions_drops_the_least_recently_used() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=0, max_sessions=3, clock=clock)
    for name in ("a", "b", "c"):
        clock.now += 1
        store.open(name)
    clock.now += 1
    store.open("a")  # a used again: b is now the least recently used
    clock.now += 1
    store.open("d")
    assert sorted(i.id for i in store.list()) == ["a", "c", "d"]
    assert len(store) == 3


def test_max_sessions_zero_is_no_cap() -> None:
    store = MemorySessionStore(max_sessions=0)
    for i in range(50):
        store.open(f"s{i}")
    assert len(store) == 50


def test_from_config() -> None:
    store = MemorySessionStore.from_config(SessionsConfig(ttl_seconds=5, max_sessions=7))
    assert (store.ttl_seconds, store.max_sessions) == (5, 7)


# --------------------------------------------------------------------------------------------
# sessions through the Agent


def _agent(provider: object, **config: object) -> Agent:
    return Agent(provider, echo_tools(), AgentConfig(system_prompt="Be brief.", **config))  # type: ignore[arg-type]


async def test_context_is_carried_within_a_session() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", "c1", text="Paris")), text_turn("Paris."), text_turn("Yes.")]
    )
    agent = _agent(provider)
    first = await agent.query("Capital of France?", session_id="s")
    second = await agent.query("Are you sure?", session_id="s")
    assert (first.session_id, second.session_id) == ("s", "s")
    sent = provider.requests[-1].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[0] == Message.system("Be brief.") and sent[-1] == Message.user("Are you sure?")
    stored = agent.sessions.get("s")  # type: ignore[attr-defined]
    assert stored.transcript == second.transcript
    assert_valid_transcript(stored.transcript)


async def test_sessions_are_isolated_and_none_is_stateless() -> None:
    provider = ScriptedProvider([text_turn("a1"), text_turn("b1"), text_turn("a2"), text_turn("x")])
    agent = _agent(provider)
    await agent.query("to A", session_id="A")
    await agent.query("to B", session_id="B")
    await agent.query("to A again", session_id="A")
    assert [m.content for m in provider.requests[2].messages if m.role == "user"] == ["to A", "to A again"]
    alone = await agent.query("alone", session_id="")
    assert alone.session_id is None
    assert [m.content for m in provider.requests[3].messages if m.role == "user"] == ["alone"]
    assert {i.id for i in agent.sessions.list()} == {"A", "B"}


class _Gated:
    """Every call waits until released; counts how many are in flight at once."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.release = anyio.Event()

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await self.release.wait()
        self.now -= 1
        return text_turn("ok")


@pytest.mark.parametrize(
    ("sessions", "peak"), [(("s", "s", "s"), 1), (("a", "b", "c"), 3), ((None, None), 2)]
)
async def test_runs_on_one_session_are_serialised_others_concurrent(sessions: tuple, peak: int) -> None:
    provider = _Gated()
    agent = _agent(provider)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for sid in sessions:
                tg.start_soon(lambda sid=sid: agent.query("q", session_id=sid))
            await anyio.sleep(0.05)
            provider.release.set()
    assert provider.peak == peak
    if sessions[0] == "s":
        transcript = agent.sessions.get("s").transcript  # type: ignore[attr-defined]
        assert [m.role for m in transcript].count("user") == 3
        assert_valid_transcript(transcript)


async def test_per_run_state_is_fresh_for_each_query_on_a_session() -> None:
    tools = echo_tools()

    def flaky(n: int) -> str:
        raise RuntimeError("down")

    tools.add("flaky", flaky, parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    provider = ScriptedProvider(
        [
            tool_turn(call("flaky", "c1", n=1)),
            tool_turn(call("flaky", "c2", n=2)),
            text_turn("gave up"),
            tool_turn(call("flaky", "c3", n=3)),
            text_turn("again"),
        ]
    )
    agent = Agent(provider, tools, AgentConfig(limits=Limits(failure_hint_after=2)))
    first = await agent.query("q1", session_id="s")
    assert [m.content.endswith(FAILURE_HINT) for m in first.transcript if m.role == "tool"] == [False, True]
    second = await agent.query("q2", session_id="s")
    assert not [m for m in second.transcript if m.role == "tool"][-1].content.endswith(FAILURE_HINT)


async def test_a_cancelled_run_leaves_a_valid_session() -> None:
    cancel = anyio.Event()

    def cancel_then_call(request: ModelRequest) -> Turn:
        cancel.set()
        return tool_turn(call("echo", "c1", text="x"))

    provider = ScriptedProvider([cancel_then_call, text_turn("next")])
    agent = _agent(provider)
    result = await agent.query("q1", session_id="s", cancel=cancel)
    assert result.termination_reason is R.CANCELLED
    stored = agent.sessions.get("s").transcript  # type: ignore[attr-defined]
    assert_valid_transcript(stored)
    await agent.query("q2", session_id="s")
    assert_valid_transcript(provider.requests[-1].messages)


async def test_external_cancellation_leaves_the_session_as_it_was() -> None:
    provider = ScriptedProvider([text_turn("a1"), text_turn("late")])
    agent = _agent(provider)
    await agent.query("q1", session_id="s")
    before = agent.sessions.get("s").transcript  # type: ignore[attr-defined]
    provider.delay = 60
    with anyio.move_on_after(0.05):
        await agent.query("q2", session_id="s")
    assert agent.sessions.get("s").transcript == before  # type: ignore[attr-defined]
    assert not agent.sessions.get("s").lock.locked()  # type: ignore[attr-defined]


async def test_the_stored_transcript_is_trimmed_to_the_history_limit() -> None:
    provider = ScriptedProvider([text_turn("x" * 600) for _ in range(5)])
    agent = _agent(provider, limits=Limits(max_history_chars=1500))
    for i in range(5):
        await agent.query(f"q{i}", session_id="s")
    stored = agent.sessions.get("s").transcript  # type: ignore[attr-defined]
    assert stored[0] == Message.system("Be brief.")
    assert sum(len(m.content) for m in stored) <= 1500
    assert stored[-2:] == (Message.user("q4"), Message.assistant("x" * 600))


def test_every_issued_id_passes_the_rule() -> None:
    """About 3 % of ids once started with '-' or '_' and were refused on the next turn."""
    from mcp_agent.loop.sessions import new_session_id, valid_session_id

    store = MemorySessionStore(max_sessions=0)
    ids = [new_session_id() for _ in range(5000)] + [store.create().id for _ in range(5000)]
    assert all(valid_session_id(session_id) for session_id in ids)
    assert len(set(ids)) == len(ids)
    assert all(len(session_id) == 24 and session_id.isalnum() for session_id in ids)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("abc", True),
        ("a" * 128, True),
        ("a.b_c:d@e-f", True),
        ("abc\n", False),  # '$' once let a trailing newline through
        ("-abc", False),
        ("_abc", False),
        ("", False),
        ("a" * 129, False),
        ("a b", False),
        ("a/b", False),
    ],
)
def test_the_session_id_rule(value: str, ok: bool) -> None:
    from mcp_agent.loop.sessions import valid_session_id

    assert valid_session_id(value) is ok


def test_an_owner_beyond_its_share_loses_its_own_oldest() -> None:
    clock = Clock()
    store = MemorySessionStore(max_sessions=100, max_per_owner=3, clock=clock)
    bob = store.create(owner="bob")
    alice = []
    for _ in range(5):
        clock.now += 1
        alice.append(store.create(owner="alice"))
    assert store.get(bob.id) is bob  # never touched by alice's flood
    assert [store.get(s.id) is not None for s in alice] == [False, False, True, True, True]


def test_the_global_cap_evicts_from_the_owner_holding_the_most() -> None:
    """A caller creating conversations at 234/s once evicted everyone else's."""
    clock = Clock()
    store = MemorySessionStore(max_sessions=10, clock=clock)
    others = [store.create(owner=name) for name in ("bob", "carol")]
    for _ in range(50):
        clock.now += 1
        store.create(owner="mallory")
    assert all(store.get(s.id) is not None for s in others)
    assert sum(1 for info in store.list() if info.owner == "mallory") == 8


async def test_busy_sessions_are_never_evicted_by_the_owner_cap() -> None:
    store = MemorySessionStore(max_per_owner=1)
    first = store.create(owner="a")
    async with first.lock:
        second = store.create(owner="a")
        assert store.get(first.id) is first and store.get(second.id) is second
