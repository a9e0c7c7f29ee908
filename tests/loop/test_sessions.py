"""Sessions: the in-memory store (TTL, count cap, ids) and the Agent's use of it."""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio
import pytest

from mcp_agent._redact import remember_secrets
from mcp_agent.config import AgentConfig, Limits, SessionsConfig
from mcp_agent.events import ApprovalRequested, RecordingSink
from mcp_agent.exceptions import StateError
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.guards import FAILURE_HINT
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.loop.sessions import MemorySessionStore, Session, import_session_files
from mcp_agent.messages import Message, Turn
from mcp_agent.providers.base import DeltaCallback, ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.state import RunRecord, StateLimits
from mcp_agent.state.memory import MemoryRunStore, MemoryState

from ._helpers import assert_valid_transcript, call, echo_tools


async def opened(store: MemorySessionStore, session_id: str) -> Session:
    """The session ``session_id``, created (and stored) when new, as a run would find it."""
    async with store.hold(session_id) as session:
        return session


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------------------------
# the store


async def test_open_creates_and_returns_the_same_session() -> None:
    store = MemorySessionStore()
    first = await opened(store, "s1")
    assert isinstance(first, Session) and first.transcript == ()
    assert await opened(store, "s1") is first
    assert await store.get("s1") is first and await store.get("nope") is None


async def test_create_makes_unguessable_unique_ids() -> None:
    store = MemorySessionStore()
    ids = {(await store.create()).id for _ in range(100)}
    assert len(ids) == 100 and all(len(i) >= 20 for i in ids)


async def test_hold_rejects_an_empty_id() -> None:
    with pytest.raises(ValueError):
        await opened(MemorySessionStore(), "")


async def test_save_list_and_delete() -> None:
    store = MemorySessionStore()
    session = await opened(store, "s1")
    await store.save(session, [Message.user("q"), Message.assistant("a")])
    assert session.transcript == (Message.user("q"), Message.assistant("a")) and session.runs == 1
    [info] = await store.list()
    assert info.to_dict() | {"created": 0, "updated": 0} == {
        "id": "s1",
        "owner": None,
        "messages": 2,
        "runs": 1,
        "created": 0,
        "updated": 0,
        "busy": False,
    }
    assert await store.delete("s1") is True and await store.delete("s1") is False
    await store.save(session, [Message.user("late")])  # a run that ends after the delete
    assert await store.get("s1") is None and await store.list() == []


async def test_idle_sessions_expire() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=60, clock=clock)
    await opened(store, "old")
    clock.now += 30
    await opened(store, "young")
    clock.now += 31  # old: idle 61 s; young: 31 s
    assert [i.id for i in await store.list()] == ["young"]
    assert (await opened(store, "old")).transcript == ()  # an expired id starts afresh


async def test_use_keeps_a_session_alive() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=60, clock=clock)
    session = await opened(store, "s")
    for _ in range(5):
        clock.now += 50
        await store.save(session, [Message.user("q")])
    assert await store.get("s") is session


async def test_ttl_zero_is_never() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=0, clock=clock)
    await opened(store, "s")
    clock.now += 10**9
    assert await store.get("s") is not None


async def test_a_busy_session_is_not_evicted() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=60, max_sessions=1, clock=clock)
    async with store.hold("busy"):
        clock.now += 120
        assert [i.id for i in await store.list()] == ["busy"] and (await store.list())[0].busy
        await opened(store, "other")  # over the cap, but the busy one stays
        assert {i.id for i in await store.list()} == {"busy", "other"}
    clock.now += 120
    assert await store.list() == []


async def test_max_sessions_drops_the_least_recently_used() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=0, max_sessions=3, clock=clock)
    for name in ("a", "b", "c"):
        clock.now += 1
        await opened(store, name)
    clock.now += 1
    await opened(store, "a")  # a used again: b is now the least recently used
    clock.now += 1
    await opened(store, "d")
    assert sorted(i.id for i in await store.list()) == ["a", "c", "d"]
    assert len(store) == 3


async def test_max_sessions_zero_is_no_cap() -> None:
    store = MemorySessionStore(max_sessions=0)
    for i in range(50):
        await opened(store, f"s{i}")
    assert len(store) == 50


async def test_from_limits() -> None:
    store = MemorySessionStore.from_limits(
        StateLimits(session_ttl_seconds=5, max_sessions=7, max_session_bytes=9)
    )
    assert (store.ttl_seconds, store.max_sessions, store.max_session_bytes) == (5, 7, 9)
    agent = _agent(ScriptedProvider([]), sessions=SessionsConfig(ttl_seconds=3, max_sessions=4))
    assert (agent.sessions.ttl_seconds, agent.sessions.max_sessions) == (3, 4)  # type: ignore[attr-defined]


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
    stored = await agent.sessions.get("s")  # type: ignore[attr-defined]
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
    assert {i.id for i in await agent.sessions.list()} == {"A", "B"}


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
        transcript = (await agent.sessions.get("s")).transcript  # type: ignore[attr-defined]
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
    stored = (await agent.sessions.get("s")).transcript  # type: ignore[attr-defined]
    assert_valid_transcript(stored)
    await agent.query("q2", session_id="s")
    assert_valid_transcript(provider.requests[-1].messages)


async def test_external_cancellation_leaves_the_session_as_it_was() -> None:
    provider = ScriptedProvider([text_turn("a1"), text_turn("late")])
    agent = _agent(provider)
    await agent.query("q1", session_id="s")
    before = (await agent.sessions.get("s")).transcript  # type: ignore[attr-defined]
    provider.delay = 60
    with anyio.move_on_after(0.05):
        await agent.query("q2", session_id="s")
    assert (await agent.sessions.get("s")).transcript == before  # type: ignore[attr-defined]
    assert not any(info.busy for info in await agent.sessions.list())


async def test_the_stored_transcript_is_trimmed_to_the_history_limit() -> None:
    provider = ScriptedProvider([text_turn("x" * 600) for _ in range(5)])
    agent = _agent(provider, limits=Limits(max_history_chars=1500))
    for i in range(5):
        await agent.query(f"q{i}", session_id="s")
    stored = (await agent.sessions.get("s")).transcript  # type: ignore[attr-defined]
    assert stored[0] == Message.system("Be brief.")
    assert sum(len(m.content) for m in stored) <= 1500
    assert stored[-2:] == (Message.user("q4"), Message.assistant("x" * 600))


async def test_every_issued_id_passes_the_rule() -> None:
    """About 3 % of ids once started with '-' or '_' and were refused on the next turn."""
    from mcp_agent.loop.sessions import new_session_id, valid_session_id

    store = MemorySessionStore(max_sessions=0)
    ids = [new_session_id() for _ in range(5000)] + [(await store.create()).id for _ in range(5000)]
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


async def test_an_owner_beyond_its_share_loses_its_own_oldest() -> None:
    clock = Clock()
    store = MemorySessionStore(max_sessions=100, max_per_owner=3, clock=clock)
    bob = await store.create(owner="bob")
    alice = []
    for _ in range(5):
        clock.now += 1
        alice.append(await store.create(owner="alice"))
    assert await store.get(bob.id) is bob  # never touched by alice's flood
    assert [await store.get(s.id) is not None for s in alice] == [False, False, True, True, True]


async def test_the_global_cap_evicts_from_the_owner_holding_the_most() -> None:
    """A caller creating conversations at 234/s once evicted everyone else's."""
    clock = Clock()
    store = MemorySessionStore(max_sessions=10, clock=clock)
    others = [await store.create(owner=name) for name in ("bob", "carol")]
    for _ in range(50):
        clock.now += 1
        await store.create(owner="mallory")
    assert all([await store.get(s.id) is not None for s in others])
    assert sum(1 for info in await store.list() if info.owner == "mallory") == 8


async def test_busy_sessions_are_never_evicted_by_the_owner_cap() -> None:
    store = MemorySessionStore(max_per_owner=1)
    first = await store.create(owner="a")
    async with store.hold(first.id):
        second = await store.create(owner="a")
        assert await store.get(first.id) is first and await store.get(second.id) is second


# --------------------------------------------------------------------------------------------
# the state under the Agent: what a failing or full store does to a run, and the run records


class FailingSessions(MemorySessionStore):
    """Sessions whose ``save`` (or ``hold``) fails as a broken disk or database would."""

    def __init__(self, *, fail_hold: bool = False) -> None:
        super().__init__()
        self.fail_hold = fail_hold

    def hold(self, session_id: str, *, owner: str | None = None) -> Any:
        if self.fail_hold:
            raise StateError("state.url 'sqlite:///x': disk I/O error")
        return super().hold(session_id, owner=owner)

    async def save(self, session: Session, transcript: Any, *, release: bool = False) -> bool:
        raise StateError("state.url 'sqlite:///x': database or disk is full")


async def test_a_conversation_too_big_to_store_still_answers_and_says_so() -> None:
    state = MemoryState(StateLimits(max_session_bytes=600))
    provider = ScriptedProvider([text_turn("short"), text_turn("long " * 200)])
    agent = Agent(provider, echo_tools(), AgentConfig(system_prompt="Be brief."), state=state)
    first = await agent.query("q1", session_id="s")
    assert first.ok and first.detail == ""
    second = await agent.query("q2", session_id="s")
    assert second.ok and second.answer == ("long " * 200).strip()
    assert "the conversation could not be saved" in second.detail and "state.maxSessionBytes" in second.detail
    stored = await state.sessions.get("s")
    assert stored is not None and stored.transcript == first.transcript  # the last whole one stays
    [record, _] = await state.runs.list()
    assert record.id == second.run_id and "could not be saved" in record.detail


async def test_a_failing_save_does_not_lose_the_answer() -> None:
    agent = Agent(ScriptedProvider([text_turn("the answer")]), echo_tools(), sessions=FailingSessions())
    result = await agent.query("q", session_id="s")
    assert result.ok and result.answer == "the answer"
    assert (
        result.detail
        == "the conversation could not be saved: state.url 'sqlite:///x': database or disk is full"
    )


async def test_a_conversation_that_cannot_be_loaded_ends_the_run_before_the_model() -> None:
    provider = ScriptedProvider([text_turn("never")])
    agent = Agent(provider, echo_tools(), sessions=FailingSessions(fail_hold=True))
    result = await agent.query("q", session_id="s")
    assert result.termination_reason is R.TERMINAL_ERROR and "could not be loaded" in result.detail
    assert "disk I/O error" in result.detail and provider.requests == []


async def test_a_session_deleted_during_the_run_says_its_answer_was_not_kept() -> None:
    agent = _agent(ScriptedProvider([text_turn("a1"), text_turn("a2")], delay=0.2))
    await agent.query("q1", session_id="s")
    async with anyio.create_task_group() as tg:
        results: list[Any] = []

        async def ask() -> None:
            results.append(await agent.query("q2", session_id="s"))

        tg.start_soon(ask)
        await anyio.sleep(0.05)
        assert await agent.sessions.delete("s")
    [result] = results
    assert result.ok and "deleted while the run went on" in result.detail
    assert await agent.sessions.get("s") is None


async def test_every_run_is_recorded_even_one_the_caller_abandons() -> None:
    provider = ScriptedProvider([text_turn("a1"), text_turn("late")])
    agent = _agent(provider)
    done = await agent.query("q1", session_id="s", caller="alice")
    provider.delay = 60
    with anyio.move_on_after(0.1):
        await agent.query("q2", session_id="s", caller="alice")
    [abandoned, finished] = await agent.runs.list()
    assert (finished.id, finished.termination_reason, finished.caller) == (done.run_id, "success", "alice")
    assert (finished.session_id, finished.query, finished.answer) == ("s", "q1", "a1")
    assert (abandoned.termination_reason, abandoned.detail, abandoned.query) == (
        "cancelled",
        "the caller went away",
        "q2",
    )
    assert abandoned.ended is not None


async def test_a_failing_run_store_costs_nothing_but_the_record() -> None:
    class Broken(MemoryRunStore):
        async def begin(self, record: RunRecord) -> None:
            raise StateError("no room")

        async def end(self, record: RunRecord) -> None:
            raise StateError("no room")

    state = MemoryState()
    state._runs = Broken()
    agent = Agent(ScriptedProvider([text_turn("fine")]), echo_tools(), state=state)
    result = await agent.query("q")
    assert result.ok and result.answer == "fine" and result.detail == ""


async def test_max_sessions_between_owners_holding_as_many_drops_the_oldest_of_all() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl_seconds=0, max_sessions=4, clock=clock)
    for owner, name in (("b", "b1"), ("a", "a1"), ("a", "a2"), ("b", "b2")):
        clock.now += 1
        async with store.hold(name, owner=owner):
            pass
    clock.now += 1
    async with store.hold("b1", owner="b"):  # b1 used again: a1 is now the oldest of all
        pass
    clock.now += 1
    async with store.hold("c1", owner="c"):
        pass
    assert sorted(i.id for i in await store.list()) == ["a2", "b1", "b2", "c1"]


async def test_what_the_agent_keeps_shows_no_known_secret_and_is_still_a_transcript() -> None:
    """A secret in the query, in a long (paged) tool result, in a gated call's arguments and in
    the answer: the session, the run record, the approval and the pages keep ``***`` instead,
    and the next run sends the masked conversation to the model as a valid transcript."""
    secret = f"tok{secrets.token_hex(8)}"
    remember_secrets([secret])
    tools = echo_tools()
    tools.add(
        "note",
        lambda text: f"noted {text}",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    provider = ScriptedProvider(
        [
            tool_turn(call("echo", "c1", text=f"the key is {secret}. " + "filler " * 300)),
            tool_turn(call("note", "c2", text=f"remember {secret}")),
            text_turn(f"done, the key was {secret}"),
            text_turn("the second answer"),
        ]
    )
    config = AgentConfig.model_validate(
        {"limits": {"maxResultChars": 500}, "approvals": {"require": ["note"], "timeoutSeconds": 0.01}}
    )
    state = MemoryState(StateLimits())
    sink = RecordingSink()
    agent = Agent(provider, tools, config, state=state, events=sink)
    session = await agent.sessions.create()

    first = await agent.query(f"the key is {secret}", session_id=session.id)
    assert (
        first.termination_reason is R.SUCCESS and secret in first.answer
    )  # the caller's own answer is whole

    kept = await state.sessions.get(session.id)
    assert kept is not None
    shown = json.dumps([message.to_dict() for message in kept.transcript])
    assert secret not in shown and shown.count("***") >= 4  # query, result, call, answer
    assert_valid_transcript(kept.transcript)
    [record] = await state.runs.list()
    assert secret not in json.dumps(record.to_dict()) and "***" in record.query
    [asked] = sink.of(ApprovalRequested)
    approval = await state.approvals.get(asked.approval_id)
    assert approval is not None and approval.arguments == {"text": "remember ***"}
    [paged] = await state.pages.entries(session.id)
    pages = [await state.pages.read(session.id, paged.handle, n) for n in range(1, paged.pages + 1)]
    assert all(page is not None and page.text is not None and secret not in page.text for page in pages)

    second = await agent.query("again", session_id=session.id)
    assert second.termination_reason is R.SUCCESS
    sent = provider.requests[-1].messages
    assert_valid_transcript(sent)
    assert any("***" in message.content for message in sent if message.role == "user")


async def test_conversations_of_earlier_versions_are_imported_without_known_secrets(tmp_path: Any) -> None:
    secret = f"tok{secrets.token_hex(8)}"
    remember_secrets([secret])
    folder = tmp_path / "sessions"
    folder.mkdir()
    transcript = [
        {"role": "user", "content": f"the key is {secret}"},
        {"role": "assistant", "content": "noted"},
    ]
    (folder / "old-1.json").write_text(json.dumps({"id": "old-1", "runs": 1, "transcript": transcript}))
    store = MemorySessionStore()
    assert await import_session_files(folder, store) == 1
    kept = await store.get("old-1")
    assert kept is not None and kept.transcript == (
        Message.user("the key is ***"),
        Message.assistant("noted"),
    )
