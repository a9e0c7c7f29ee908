"""``memory://``: conversations, approvals and run records in this process's memory.

What tests, ``serve --stateless`` and a directly constructed ``Agent`` use: nothing survives the
process, and nothing is shared with another one (so ``recover`` never finds a dead replica).

``MemorySessionStore`` forgets a session idle for ``ttl_seconds`` and, beyond ``max_sessions``,
the least recently used idle ones of the owner holding the most (so one caller's flood of new
conversations evicts its own first, never another's while it holds more); an owner beyond
``max_per_owner`` loses its own least recently used idle one. A session with a run in progress
(its lock held) is never evicted. Each session's lock is an ``anyio.Lock``: runs on one session
wait for each other, in this process.

``MemoryPageStore`` (``_memory_pages``) keeps the paged results of the sessions; a session that
goes (deleted, expired, evicted) takes its results with it.
"""

from __future__ import annotations

import builtins
import collections
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace

import anyio

from ..exceptions import SessionTooLarge
from ..messages import Message
from ._encode import to_json
from ._keyed import KeyedLocks
from ._memory_pages import MemoryPageStore
from .records import (
    Approval,
    Decision,
    Recovery,
    RunRecord,
    Session,
    SessionInfo,
    StateLimits,
    check_room,
    new_replica_id,
    new_session_id,
)

__all__ = [
    "MemoryApprovalStore",
    "MemoryPageStore",
    "MemoryRunStore",
    "MemorySessionStore",
    "MemoryState",
    "open_memory_state",
    "transcript_bytes",
]


def transcript_bytes(transcript: Sequence[Message]) -> bytes:
    """A transcript's stored form: compact JSON, UTF-8 (what ``max_session_bytes`` measures)."""
    return to_json([m.to_dict() for m in transcript]).encode("utf-8")


class MemorySessionStore:
    """Sessions in a dict, with idle expiry and count caps (see the module docstring).

    Args:
        ttl_seconds: a session idle this long is forgotten (0 = never).
        max_sessions: beyond this many, the least recently used idle sessions of the owner
            holding the most go (0 = no cap).
        max_per_owner: one owner's own least recently used idle session goes when it would hold
            more than this (0 = no cap of its own).
        max_session_bytes: a transcript bigger than this (as JSON) is refused (0 = no cap).
        clock: the monotonic clock used for expiry (injectable for tests).
    """

    def __init__(
        self,
        *,
        ttl_seconds: float = 1800,
        max_sessions: int = 1000,
        max_per_owner: int = 0,
        max_session_bytes: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_sessions = max_sessions
        self.max_per_owner = max_per_owner
        self.max_session_bytes = max_session_bytes
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._used: collections.OrderedDict[str, float] = collections.OrderedDict()
        """When each session was last used (the store's clock), least recently used first."""
        self._owned: dict[str | None, collections.OrderedDict[str, None]] = {}
        """Each owner's sessions, least recently used first."""
        self._locks = KeyedLocks()
        self.on_remove: Callable[[str], None] | None = None
        """Called with the id of each session that goes (deleted, expired, evicted)."""

    @classmethod
    def from_limits(cls, limits: StateLimits) -> MemorySessionStore:
        return cls(
            ttl_seconds=limits.session_ttl_seconds,
            max_sessions=limits.max_sessions,
            max_per_owner=limits.max_sessions_per_owner,
            max_session_bytes=limits.max_session_bytes,
        )

    def __len__(self) -> int:
        return len(self._sessions)

    def hold(self, session_id: str, *, owner: str | None = None) -> AbstractAsyncContextManager[Session]:
        if not session_id:
            raise ValueError("a session id must be a non-empty string")
        return self._hold(session_id, owner)

    @asynccontextmanager
    async def _hold(self, session_id: str, owner: str | None) -> AsyncIterator[Session]:
        async with self._locks.hold(session_id):
            self._evict()
            session = self._sessions.get(session_id)
            if session is None:
                session = self._add(Session(session_id, owner=owner))
            else:
                self._touch(session)
            yield session

    async def create(self, owner: str | None = None) -> Session:
        self._evict()
        return self._add(Session(new_session_id(), owner=owner))

    async def get(self, session_id: str) -> Session | None:
        self._evict()
        return self._sessions.get(session_id)

    async def save(self, session: Session, transcript: Sequence[Message], *, release: bool = False) -> bool:
        """(``release`` changes nothing here: one process, no round trip to save; the lock goes
        when the block is left.)"""
        if self.max_session_bytes:
            size = len(transcript_bytes(transcript))
            if size > self.max_session_bytes:
                raise SessionTooLarge(session.id, size, self.max_session_bytes)
        if self._sessions.get(session.id) is not session:
            return False  # deleted (or replaced) while the run went on: not put back
        session.transcript = tuple(transcript)
        session.updated = time.time()
        session.runs += 1
        self._touch(session)
        return True

    async def list(self) -> list[SessionInfo]:
        self._evict()
        return [
            SessionInfo(s.id, len(s.transcript), s.runs, s.created, s.updated, self._busy(s.id), s.owner)
            for s in self._sessions.values()
        ]

    async def delete(self, session_id: str) -> bool:
        if session_id not in self._sessions:
            return False
        self._remove(session_id)
        return True

    def _busy(self, session_id: str) -> bool:
        return self._locks.locked(session_id)

    def _touch(self, session: Session) -> None:
        self._used[session.id] = self._clock()
        self._used.move_to_end(session.id)
        self._owned[session.owner].move_to_end(session.id)

    def exists(self, session_id: str) -> bool:
        """Whether the session is kept now (no expiry applied)."""
        return session_id in self._sessions

    def _remove(self, session_id: str) -> None:
        if self.on_remove is not None:
            self.on_remove(session_id)
        owner = self._sessions.pop(session_id).owner
        del self._used[session_id]
        owned = self._owned[owner]
        del owned[session_id]
        if not owned:
            del self._owned[owner]

    def _add(self, session: Session) -> Session:
        if self.max_per_owner:
            self._shrink_owner(session.owner, self.max_per_owner - 1)
        if self.max_sessions:
            self._shrink(self.max_sessions - 1)
        self._sessions[session.id] = session
        self._used[session.id] = self._clock()
        self._owned.setdefault(session.owner, collections.OrderedDict())[session.id] = None
        return session

    def _evict(self) -> None:
        """Forget the idle sessions unused for ``ttl_seconds``: a walk from the least recently
        used one to the first that is young enough (past busy ones, which stay)."""
        if not self.ttl_seconds:
            return
        cutoff = self._clock() - self.ttl_seconds
        expired = []
        for session_id, used in self._used.items():
            if used > cutoff:
                break
            if not self._busy(session_id):
                expired.append(session_id)
        for session_id in expired:
            self._remove(session_id)

    def _oldest_idle(self, owner: str | None, count: int) -> builtins.list[str]:
        """Up to ``count`` of ``owner``'s idle sessions, least recently used first."""
        found: builtins.list[str] = []
        for session_id in self._owned.get(owner, ()):
            if len(found) == count:
                break
            if not self._busy(session_id):
                found.append(session_id)
        return found

    def _shrink(self, keep: int) -> None:
        """Drop idle sessions until at most ``keep`` remain: always the least recently used idle
        one of the owner holding the most sessions (of the owners with an idle one; between
        owners holding as many, the least recently used idle session of all goes)."""
        while len(self._sessions) > keep:
            candidates = []
            for owner, owned in self._owned.items():
                oldest = self._oldest_idle(owner, 1)
                if oldest:
                    candidates.append((-len(owned), self._used[oldest[0]], oldest[0]))
            if not candidates:
                return  # every session left is busy: nothing can go
            self._remove(min(candidates)[2])

    def _shrink_owner(self, owner: str | None, keep: int) -> None:
        """Drop ``owner``'s least recently used idle sessions until it holds at most ``keep``."""
        excess = len(self._owned.get(owner, ())) - keep
        if excess > 0:
            for session_id in self._oldest_idle(owner, excess):
                self._remove(session_id)


class MemoryApprovalStore:
    """Approvals in a dict; a decision wakes its waiter through an ``anyio.Event``. How many are
    pending, in all and per caller, is counted as they come and go, so ``add`` checks its caps
    without a walk.

    Args:
        keep_seconds: decided approvals older than this are dropped on ``prune`` (0 = kept).
        max_decided: at most this many decided approvals are kept; the oldest decisions go
            first (0 = no cap).
    """

    def __init__(self, *, keep_seconds: float = 0, max_decided: int = 10_000) -> None:
        self.keep_seconds = keep_seconds
        self.max_decided = max_decided
        self._approvals: dict[str, Approval] = {}
        self._decided: dict[str, anyio.Event] = {}
        self._order: collections.OrderedDict[str, None] = collections.OrderedDict()  # decided, oldest first
        self._waiting = 0  # pending approvals
        self._mine: collections.Counter[str] = collections.Counter()  # pending approvals per caller

    async def add(self, approval: Approval, *, max_pending: int = 0, max_per_caller: int = 0) -> None:
        caller = approval.caller
        if approval.pending:
            mine = self._mine[caller] if caller is not None else 0
            check_room(
                self._waiting, mine, max_pending=max_pending, max_per_caller=max_per_caller, caller=caller
            )
        previous = self._approvals.get(approval.id)
        if previous is not None and previous.pending:
            self._count(previous, -1)  # the same id again replaces the one counted
        self._order.pop(approval.id, None)
        self._approvals[approval.id] = approval
        if approval.decision is None:
            self._count(approval, 1)
            self._decided.setdefault(approval.id, anyio.Event())
        else:
            self._order[approval.id] = None

    def _count(self, approval: Approval, step: int) -> None:
        self._waiting += step
        if approval.caller is not None:
            self._mine[approval.caller] += step
            if not self._mine[approval.caller]:
                del self._mine[approval.caller]

    async def decide(self, approval_id: str, decision: Decision) -> bool:
        approval = self._approvals.get(approval_id)
        if approval is None or approval.decision is not None:
            return False
        self._approvals[approval_id] = replace(approval, decision=decision)
        self._count(approval, -1)
        self._decided.pop(approval_id, anyio.Event()).set()
        self._order[approval_id] = None
        while self.max_decided and len(self._order) > self.max_decided:
            self._approvals.pop(self._order.popitem(last=False)[0], None)
        return True

    async def wait(self, approval_id: str) -> Decision:
        approval = self._approvals.get(approval_id)
        if approval is None:
            raise KeyError(approval_id)
        if approval.decision is None:
            await self._decided.setdefault(approval_id, anyio.Event()).wait()
        decision = self._approvals[approval_id].decision
        assert decision is not None
        return decision

    async def get(self, approval_id: str) -> Approval | None:
        return self._approvals.get(approval_id)

    async def pending(self) -> list[Approval]:
        return sorted((a for a in self._approvals.values() if a.decision is None), key=lambda a: a.created)

    def prune(self) -> None:
        if not self.keep_seconds:
            return
        cutoff = time.time() - self.keep_seconds
        for approval in list(self._approvals.values()):
            if approval.decision is not None and approval.decision.at < cutoff:
                del self._approvals[approval.id]
                self._order.pop(approval.id, None)


class MemoryRunStore:
    """Run records in a dict, kept within ``max_runs`` and ``max_age_seconds``."""

    def __init__(self, *, max_runs: int = 10_000, max_age_seconds: float = 0) -> None:
        self.max_runs = max_runs
        self.max_age_seconds = max_age_seconds
        self._runs: dict[str, RunRecord] = {}
        self._live: set[str] = set()  # the ids of the runs in flight

    async def begin(self, record: RunRecord) -> None:
        self._runs[record.id] = record
        if record.in_flight:
            self._live.add(record.id)

    async def end(self, record: RunRecord) -> None:
        self._runs[record.id] = record
        self._live.discard(record.id)
        self.prune()

    async def get(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def list(
        self,
        *,
        caller: str | None = None,
        reason: str | None = None,
        text: str | None = None,
        limit: int = 50,
        before: float | None = None,
    ) -> list[RunRecord]:
        found = [
            r
            for r in self._runs.values()
            if r.matches(caller=caller, reason=reason, text=text, before=before)
        ]
        found.sort(key=lambda r: r.started, reverse=True)
        return found[: max(limit, 0)]

    def prune(self, *, full: bool = False) -> None:
        """Drop the oldest finished records beyond ``max_runs`` and those older than
        ``max_age_seconds`` (runs in flight are skipped, never dropped). The dict keeps records
        in the order they began, so after a run's end only the oldest are looked at: it costs
        O(dropped), not a sort of every record. ``full`` (the state's ``beat``) looks at every
        record, for one that was ended without having begun here."""
        excess = len(self._runs) - len(self._live) - self.max_runs if self.max_runs else 0
        cutoff = time.time() - self.max_age_seconds if self.max_age_seconds else None
        drop: list[str] = []
        for record in self._runs.values():
            old = cutoff is not None and (record.ended or record.started) < cutoff
            if not full and len(drop) >= excess and not old and (cutoff is None or record.started >= cutoff):
                break  # every later record began later still: none is old, none is in excess
            if not record.in_flight and (len(drop) < excess or old):
                drop.append(record.id)
        for run_id in drop:
            del self._runs[run_id]

    def __len__(self) -> int:
        return len(self._runs)


class MemoryState:
    """The memory backend's ``State``: one process, no leases to keep, nobody to recover."""

    def __init__(self, limits: StateLimits | None = None, *, replica: str | None = None) -> None:
        self._limits = limits = limits or StateLimits()
        self._replica = replica or new_replica_id()
        age = limits.max_run_age_days * 86400
        self._sessions = MemorySessionStore.from_limits(limits)
        self._approvals = MemoryApprovalStore(keep_seconds=age)
        self._runs = MemoryRunStore(max_runs=limits.max_runs, max_age_seconds=age)
        self._pages = MemoryPageStore(limits.max_paged_bytes_total, live=self._sessions.exists)
        self._sessions.on_remove = self._pages.forget

    @property
    def replica(self) -> str:
        return self._replica

    @property
    def sessions(self) -> MemorySessionStore:
        return self._sessions

    @property
    def approvals(self) -> MemoryApprovalStore:
        return self._approvals

    @property
    def runs(self) -> MemoryRunStore:
        return self._runs

    @property
    def pages(self) -> MemoryPageStore:
        return self._pages

    @property
    def limits(self) -> StateLimits:
        return self._limits

    async def beat(self) -> None:
        self._runs.prune(full=True)
        self._approvals.prune()

    async def recover(self) -> Recovery:
        return Recovery()

    async def aclose(self) -> None:
        pass


async def open_memory_state(
    url: str = "memory://", *, limits: StateLimits, replica: str | None = None
) -> MemoryState:
    """``memory://``: a new, empty MemoryState."""
    return MemoryState(limits, replica=replica)
