"""The state seam: what the loop and the gateway keep outside a run, as small async Protocols.

Three stores and the bundle that owns them:

- ``SessionStore``: conversations (a transcript, its owner) and the lock that serialises runs on
  one conversation: in one process, and across processes for the shared backends, with a lease
  that lapses when its holder dies;
- ``ApprovalStore``: tool calls waiting for a human, and the decisions on them (who, when, why);
  writing a decision wakes the run waiting on it, in any process of the shared backends;
- ``RunStore``: one ``RunRecord`` per run, written at its start (in flight) and at its end, kept
  within ``StateLimits.max_runs`` and ``max_run_age_days``;
- ``State``: the three, the process's ``replica`` id, ``beat()`` (its liveness lease) and
  ``recover()`` (what dead replicas left behind: runs become ``terminal_error`` "interrupted by a
  gateway restart", their pending approvals are expired, their session locks are released).

Backends: ``memory.py`` (``memory://``), ``sqlite.py`` (``sqlite:///PATH``) and ``redis.py``
(``redis://HOST:PORT/DB``). ``mcp_agent.state.open_state(url, limits=…)`` picks one; a backend
module offers ``async def open_<name>_state(url: str, *, limits: StateLimits, replica: str | None
= None) -> State`` (``open_redis_state`` in ``redis.py``). Every store is also checked by one
contract suite (``tests/state/test_contract.py``), parametrised over the backends.

Contracts every backend keeps:

- Operations are async and raise ``StateError`` (never a driver's own exception) when the
  backend fails; ``SessionTooLarge`` when a transcript is over ``max_session_bytes``.
- A transcript is saved whole or not at all, and a deleted session stays deleted.
- Values are the frozen dataclasses below (``Session`` is the one mutable value: the store
  updates the object a ``hold`` yielded when it saves it).

This module imports nothing above ``messages``/``exceptions``/``_types`` (the loop imports
state, never the reverse).
"""

from __future__ import annotations

import re
import secrets
import string
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._types import JSONObject
from ..messages import Message, Usage

__all__ = [
    "INTERRUPTED",
    "SESSION_ID_PATTERN",
    "Approval",
    "ApprovalStore",
    "Decision",
    "Recovery",
    "RunRecord",
    "RunStore",
    "Session",
    "SessionInfo",
    "SessionStore",
    "State",
    "StateLimits",
    "new_replica_id",
    "new_session_id",
    "valid_session_id",
]

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
"""What a session id may look like: 1-128 characters of letters, digits and ``. _ : @ -``,
starting with a letter or digit. Always matched whole (``fullmatch``: no trailing newline)."""
_ID_ALPHABET = string.ascii_letters + string.digits
_ID_LENGTH = 24

INTERRUPTED = "interrupted by a gateway restart"
"""The ``detail`` of a run that was in flight on a replica that died (``State.recover``)."""


def new_session_id() -> str:
    """A new, unguessable session id: 24 random letters and digits (about 142 bits)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


def valid_session_id(value: str) -> bool:
    """Whether ``value`` is a well-formed session id (see ``SESSION_ID_PATTERN``)."""
    return SESSION_ID_PATTERN.fullmatch(value) is not None


def new_replica_id() -> str:
    """A new id for one gateway process (one incarnation: a restart gets a new one)."""
    return secrets.token_hex(6)


# --------------------------------------------------------------------------------------------
# values


@dataclass(frozen=True)
class StateLimits:
    """How much the state keeps, and how long a lease lasts (``state`` in agent.json).

    Attributes:
        session_ttl_seconds: a conversation idle this long is forgotten (0 = never).
        max_sessions: beyond this many conversations the least recently used idle ones go, first
            those of the owner holding the most (0 = no cap).
        max_sessions_per_owner: one owner's least recently used idle conversation goes when it
            would hold more (0 = no cap of its own; the gateway sets each caller's share).
        max_session_bytes: a transcript whose stored form (JSON, UTF-8) is bigger is refused
            with ``SessionTooLarge`` (0 = no cap).
        max_runs: run records kept; the oldest finished ones go first (0 = no cap).
        max_run_age_days: finished run records older than this go (0 = kept forever).
        lease_seconds: a session lock, and a replica's liveness lease, lapse this long after
            their holder last renewed them (holders renew every third of it).
    """

    session_ttl_seconds: float = 1800
    max_sessions: int = 1000
    max_sessions_per_owner: int = 0
    max_session_bytes: int = 16 * 1024 * 1024
    max_runs: int = 10_000
    max_run_age_days: float = 30
    lease_seconds: float = 30


@dataclass
class Session:
    """One conversation, as a ``hold`` or ``get`` read it.

    Attributes:
        id: the session id.
        transcript: the conversation so far, system prompt first.
        created: wall time of creation.
        updated: wall time of the last save.
        runs: how many runs saved into it.
        owner: the caller that started it (the gateway's caller name), if any.
        lease: the token of the lock the ``hold`` that yielded it took (None from ``get``): a
            save writes only while that lock is still this token's (a fencing token).
    """

    id: str
    transcript: tuple[Message, ...] = ()
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    runs: int = 0
    owner: str | None = None
    lease: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SessionInfo:
    """A session as the gateway lists it (``busy``: a run holds its lock now)."""

    id: str
    messages: int
    runs: int
    created: float
    updated: float
    busy: bool
    owner: str | None = None

    def to_dict(self) -> JSONObject:
        return {
            "id": self.id,
            "owner": self.owner,
            "messages": self.messages,
            "runs": self.runs,
            "created": self.created,
            "updated": self.updated,
            "busy": self.busy,
        }


@dataclass(frozen=True)
class Decision:
    """How an approval ended.

    Attributes:
        approved: whether the call may run.
        reason: why (the model reads it when denied).
        by: who decided (a caller's name; ``timeout``, ``run`` or ``recovery`` for the system).
        at: wall time of the decision.
    """

    approved: bool
    reason: str = ""
    by: str | None = None
    at: float = field(default_factory=time.time)

    def to_dict(self) -> JSONObject:
        return {"approved": self.approved, "reason": self.reason, "by": self.by, "at": self.at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        return cls(bool(data["approved"]), str(data.get("reason", "")), data.get("by"), float(data.get("at", 0.0)))


@dataclass(frozen=True)
class Approval:
    """A tool call that needs a human's yes: asked, and (once decided) its decision.

    Attributes:
        id: unguessable (``secrets.token_urlsafe``).
        run_id: the run that made the call.
        session_id: its conversation, if any.
        call_id: the tool call's id.
        name: the exposed tool name.
        arguments: the validated, coerced arguments.
        created: wall time of the request.
        caller: who asked for the run (the gateway's caller name).
        replica: the gateway process whose run waits on it (``State.replica``).
        decision: None while pending.
    """

    id: str
    run_id: str
    session_id: str | None
    call_id: str
    name: str
    arguments: JSONObject
    created: float = field(default_factory=time.time)
    caller: str | None = None
    replica: str = ""
    decision: Decision | None = None

    @property
    def pending(self) -> bool:
        return self.decision is None

    def to_dict(self) -> JSONObject:
        """The REST shape (``GET /api/v1/approvals``); ``decision`` only once decided."""
        data: JSONObject = {
            "id": self.id,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "caller": self.caller,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "created": self.created,
        }
        if self.decision is not None:
            data["decision"] = self.decision.to_dict()
        return data

    def to_record(self) -> JSONObject:
        """Everything, for a backend to store (``from_record`` reads it back)."""
        return {**self.to_dict(), "replica": self.replica}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Approval:
        decision = data.get("decision")
        return cls(
            id=str(data["id"]),
            run_id=str(data["run_id"]),
            session_id=data.get("session_id"),
            call_id=str(data["call_id"]),
            name=str(data["name"]),
            arguments=dict(data.get("arguments") or {}),
            created=float(data.get("created", 0.0)),
            caller=data.get("caller"),
            replica=str(data.get("replica", "")),
            decision=Decision.from_dict(decision) if decision else None,
        )


@dataclass(frozen=True)
class RunRecord:
    """One run, as ``GET /api/v1/runs`` shows it. In flight while ``termination_reason`` is None.

    Attributes:
        id: the run id (every event of the run carries it).
        session_id: its conversation, if any.
        caller: who asked.
        query: the question.
        started: wall time of the start.
        ended: wall time of the end (None in flight).
        termination_reason: a ``TerminationReason`` value (None in flight).
        answer: the answer (may be empty).
        detail: what happened, when not a plain success.
        early_stopped: the answer was written by the early-stop synthesis.
        truncated: the answer was cut off at the length limit.
        usage: the tokens the run used.
        tool_calls: one ``{"name", "ok", "ms", ...}`` per call (``ToolCallRecord.to_dict``).
        rounds: model rounds.
        elapsed_ms: the run's wall time.
        model: the model that answered.
        replica: the gateway process that ran it (``State.replica``).
        timeline: its model and tool calls as spans (start offset, duration, tokens, arguments,
            a result preview), in start order; bounded (``loop/_timeline.py``). Empty in flight
            and for records written before it existed.
    """

    id: str
    session_id: str | None = None
    caller: str | None = None
    query: str = ""
    started: float = field(default_factory=time.time)
    ended: float | None = None
    termination_reason: str | None = None
    answer: str = ""
    detail: str = ""
    early_stopped: bool = False
    truncated: bool = False
    usage: Usage = field(default_factory=Usage)
    tool_calls: tuple[JSONObject, ...] = ()
    rounds: int = 0
    elapsed_ms: float = 0.0
    model: str | None = None
    replica: str = ""
    timeline: tuple[JSONObject, ...] = ()

    @property
    def in_flight(self) -> bool:
        return self.termination_reason is None

    def to_dict(self) -> JSONObject:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "caller": self.caller,
            "query": self.query,
            "started": self.started,
            "ended": self.ended,
            "termination_reason": self.termination_reason,
            "answer": self.answer,
            "detail": self.detail,
            "early_stopped": self.early_stopped,
            "truncated": self.truncated,
            "usage": self.usage.to_dict(),
            "tool_calls": [dict(call) for call in self.tool_calls],
            "rounds": self.rounds,
            "elapsed_ms": self.elapsed_ms,
            "model": self.model,
            "replica": self.replica,
            "timeline": [dict(span) for span in self.timeline],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        ended = data.get("ended")
        return cls(
            id=str(data["id"]),
            session_id=data.get("session_id"),
            caller=data.get("caller"),
            query=str(data.get("query", "")),
            started=float(data.get("started", 0.0)),
            ended=None if ended is None else float(ended),
            termination_reason=data.get("termination_reason"),
            answer=str(data.get("answer", "")),
            detail=str(data.get("detail", "")),
            early_stopped=bool(data.get("early_stopped", False)),
            truncated=bool(data.get("truncated", False)),
            usage=Usage.from_dict(data.get("usage") or {}),
            tool_calls=tuple(dict(call) for call in data.get("tool_calls") or ()),
            rounds=int(data.get("rounds", 0)),
            elapsed_ms=float(data.get("elapsed_ms", 0.0)),
            model=data.get("model"),
            replica=str(data.get("replica", "")),
            timeline=tuple(dict(span) for span in data.get("timeline") or ()),
        )

    def matches(self, *, caller: str | None, reason: str | None, text: str | None, before: float | None) -> bool:
        """Whether ``RunStore.list`` with these filters shows this record (the reference rule)."""
        if caller is not None and self.caller != caller:
            return False
        if reason is not None and self.termination_reason != reason:
            return False
        if before is not None and not self.started < before:
            return False
        if text:
            needle = text.casefold()
            return needle in self.query.casefold() or needle in self.answer.casefold()
        return True


@dataclass(frozen=True)
class Recovery:
    """What ``State.recover`` found of dead replicas: runs marked interrupted, approvals
    expired, session locks released."""

    runs: int = 0
    approvals: int = 0
    locks: int = 0


# --------------------------------------------------------------------------------------------
# the protocols


class SessionStore(Protocol):
    """Where conversations live.

    ``hold(id, owner=…)`` takes the session's lock, waiting while another run holds it (in this
    process, or in another one sharing the backend), and yields the stored session, or a new
    empty one owned by ``owner`` when there is none (an unknown or expired id starts afresh; the
    new session is stored at once, so ``list`` shows it, ``busy``). The lock is a lease: its
    holder renews it while the block runs, and it lapses ``lease_seconds`` after a holder died.
    Leaving the block releases it (also on error and cancellation).

    ``save(session, transcript)`` stores a run's transcript into the session a ``hold`` yielded,
    whole or not at all, and updates that object (``transcript``, ``updated``, ``runs``). False
    when the session was deleted meanwhile (it stays deleted). Raises ``SessionTooLarge`` over
    ``max_session_bytes`` (nothing is written), ``LeaseLost`` when a shared backend's lock of
    that hold lapsed meanwhile and so another run may have written (nothing is written: the
    lock's token fences the save), and ``StateError`` when the backend fails.

    ``create(owner)`` stores a new empty session under a new, unguessable id. ``get`` reads one
    (None when unknown or expired), ``list`` describes all, ``delete`` removes one (False when
    unknown; a run holding it finishes, and its save then returns False).
    """

    def hold(self, session_id: str, *, owner: str | None = None) -> AbstractAsyncContextManager[Session]: ...

    async def create(self, owner: str | None = None) -> Session: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def save(self, session: Session, transcript: Sequence[Message]) -> bool: ...

    async def list(self) -> list[SessionInfo]: ...

    async def delete(self, session_id: str) -> bool: ...


class ApprovalStore(Protocol):
    """Approvals asked and decided, and the wake-up of the run waiting on one.

    ``add`` records a pending approval. ``decide`` writes the decision on a *pending* one and
    wakes its waiter wherever it is: exactly one decider wins, in every process (False for an
    unknown or already decided id, and nothing changes). ``wait`` returns the decision once
    there is one (at once when decided already); it has no timeout of its own (the caller sets
    one around it) and is cancellable. ``get`` reads one, pending or decided; ``pending`` lists
    the pending ones, oldest first. Decided approvals are kept for a while (with the run
    records' age limit) and then dropped.
    """

    async def add(self, approval: Approval) -> None: ...

    async def decide(self, approval_id: str, decision: Decision) -> bool: ...

    async def wait(self, approval_id: str) -> Decision: ...

    async def get(self, approval_id: str) -> Approval | None: ...

    async def pending(self) -> list[Approval]: ...


class RunStore(Protocol):
    """The record of runs.

    ``begin`` stores a run in flight (no ``termination_reason``); ``end`` stores its final
    record (replacing the in-flight one, or adding it when ``begin`` was never called).
    ``get`` reads one. ``list`` answers newest first (by ``started``), at most ``limit``,
    filtered as ``RunRecord.matches`` says: only ``caller``'s (None: everyone's), only ending
    with ``reason``, only with ``text`` in the query or the answer (case-insensitive), only
    started before ``before``. Retention (``max_runs``, ``max_run_age_days``) drops the
    oldest finished records; the backend applies it on ``State.beat`` and now and then on
    ``end``; a record in flight is never dropped.
    """

    async def begin(self, record: RunRecord) -> None: ...

    async def end(self, record: RunRecord) -> None: ...

    async def get(self, run_id: str) -> RunRecord | None: ...

    async def list(
        self,
        *,
        caller: str | None = None,
        reason: str | None = None,
        text: str | None = None,
        limit: int = 50,
        before: float | None = None,
    ) -> list[RunRecord]: ...


class State(Protocol):
    """The three stores of one backend, for one process (``replica``).

    ``beat`` renews this replica's liveness lease (call it every third of ``lease_seconds``;
    it applies retention too). ``recover`` finds replicas whose lease lapsed (or, on this
    host, whose process is gone): their runs in flight are ended ``terminal_error`` with the
    detail ``INTERRUPTED``, their pending approvals are decided denied (``by="recovery"``, so
    they can never be applied later), their session locks are released. This replica itself is
    never recovered. ``aclose`` releases what the backend holds (idempotent) and ends this
    replica's lease at once: whatever it left in flight is then another replica's to recover
    (the contract suite closes a replica to stand for one that died). A closed state must not
    be used (a shared backend's operations then raise ``StateError``).
    """

    @property
    def replica(self) -> str: ...

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def approvals(self) -> ApprovalStore: ...

    @property
    def runs(self) -> RunStore: ...

    @property
    def limits(self) -> StateLimits: ...

    async def beat(self) -> None: ...

    async def recover(self) -> Recovery: ...

    async def aclose(self) -> None: ...
