"""``memory://``: conversations, approvals, run records and paged results in this process's memory.

What tests, ``serve --stateless`` and a directly constructed ``Agent`` use: nothing survives the
process, and nothing is shared with another one (so ``recover`` never finds a dead replica).

``MemorySessionStore`` forgets a session idle for ``ttl_seconds`` and, beyond ``max_sessions``,
the least recently used idle ones of the owner holding the most (so one caller's flood of new
conversations evicts its own first, never another's while it holds more); an owner beyond
``max_per_owner`` loses its own least recently used idle one. A session with a run in progress
(its lock held) is never evicted. Each session's lock is one of ``KeyedLocks``: an
``anyio.Lock`` per session id, made when first wanted and dropped when nobody holds or waits for
it, so runs on one session wait for each other, in this process. The SQLite and Redis session
stores take the same lock before their own, so that a process's runs on one session queue here
rather than against the shared store.

``MemoryPageStore`` keeps the paged results of the sessions (a session that goes, deleted,
expired or evicted, takes its results with it), and is the store an Agent keeps for runs
without a session. Results sit in one ``OrderedDict`` in least recently used order (the total
cap evicts from its head) and, per scope, in another (the scope's cap evicts from its head), so
making room costs what is evicted, never a walk over every result. An evicted handle is
remembered (the last ``TOMBSTONES``) so that reading it answers that it expired. Nothing there
awaits: concurrent runs on one event loop need no lock.
"""

from __future__ import annotations

import builtins
import collections
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace

import anyio

from ..exceptions import SessionTooLarge
from ..messages import Message
from .records import (
    Approval,
    Decision,
    Page,
    PageInfo,
    Recovery,
    RunRecord,
    Session,
    SessionInfo,
    StateLimits,
    TaskRecord,
    ToolPin,
    check_room,
    new_page_handle,
    new_replica_id,
    new_session_id,
    paged_size,
    to_json,
)

logger = logging.getLogger(__name__)

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


class MemoryTaskStore:
    """Tasks in a dict; an expired one is dropped when looked at, or on ``prune``."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._cancels: set[str] = set()

    async def put(self, record: TaskRecord) -> None:
        self._tasks[record.id] = replace(record, cancel_requested=False)

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self._tasks.get(task_id)
        if record is None or record.expires <= time.time():
            self._drop(task_id)
            return None
        return replace(record, cancel_requested=task_id in self._cancels)

    async def request_cancel(self, task_id: str) -> bool:
        if await self.get(task_id) is None:
            return False
        self._cancels.add(task_id)
        return True

    def _drop(self, task_id: str) -> None:
        self._tasks.pop(task_id, None)
        self._cancels.discard(task_id)

    def prune(self) -> None:
        now = time.time()
        for task_id in [t.id for t in self._tasks.values() if t.expires <= now]:
            self._drop(task_id)

    def __len__(self) -> int:
        return len(self._tasks)


class MemoryPinStore:
    """Pinned and seen tool definitions in a dict, by ``(kind, server)``."""

    def __init__(self) -> None:
        self._pins: dict[tuple[str, str], ToolPin] = {}

    async def put(self, pin: ToolPin) -> None:
        self._pins[pin.kind, pin.server] = pin

    async def get(self, server: str, kind: str = "pinned") -> ToolPin | None:
        return self._pins.get((kind, server))

    async def list(self, kind: str = "pinned") -> builtins.list[ToolPin]:
        return sorted((p for (k, _), p in self._pins.items() if k == kind), key=lambda p: p.server)


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
        self._tasks = MemoryTaskStore()
        self._pins = MemoryPinStore()

    @property
    def replica(self) -> str:
        return self._replica

    @property
    def events(self) -> None:
        """None: one process, no other replica to share run events with."""
        return None

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
    def tasks(self) -> MemoryTaskStore:
        return self._tasks

    @property
    def pins(self) -> MemoryPinStore:
        return self._pins

    @property
    def limits(self) -> StateLimits:
        return self._limits

    async def beat(self) -> None:
        self._runs.prune(full=True)
        self._approvals.prune()
        self._tasks.prune()

    async def recover(self) -> Recovery:
        return Recovery()

    async def aclose(self) -> None:
        pass


async def open_memory_state(
    url: str = "memory://", *, limits: StateLimits, replica: str | None = None
) -> MemoryState:
    """``memory://``: a new, empty MemoryState."""
    return MemoryState(limits, replica=replica)


TOMBSTONES = 4096
"""How many evicted handles are remembered, to answer "expired" rather than "unknown"."""

Key = tuple[str, str]
"""(scope, handle)"""


@dataclass(frozen=True)
class _Kept:
    info: PageInfo
    pages: tuple[str, ...]
    starts: tuple[int, ...]


class MemoryPageStore:
    """Paged results of many scopes, bounded by bytes, least recently used out first.

    Args:
        max_bytes: the most bytes kept in all (``paged_size``; 0 = no cap).
        live: whether a scope is a session that still exists (the memory state's sessions);
            None: every scope is (runs without a session).
    """

    def __init__(self, max_bytes: int = 64_000_000, *, live: Callable[[str], bool] | None = None) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._live = live
        self._kept: collections.OrderedDict[Key, _Kept] = (
            collections.OrderedDict()
        )  # least recently used first
        self._scopes: dict[
            str, collections.OrderedDict[str, None]
        ] = {}  # each scope's, least recently used first
        self._scope_bytes: dict[str, int] = {}
        self._gone: collections.OrderedDict[Key, None] = collections.OrderedDict()  # evicted, oldest first
        self._gone_of: dict[str, set[str]] = {}  # each scope's evicted handles

    def __len__(self) -> int:
        return len(self._kept)

    async def put(
        self, scope: str, tool: str, pages: Sequence[str], total_chars: int, *, max_scope_bytes: int = 0
    ) -> PageInfo | None:
        if self._live is not None and not self._live(scope):
            return None
        kept = tuple(pages)
        size = paged_size(kept)
        self._make_room(scope, size, max_scope_bytes)
        handle = self._new_handle(scope)
        starts, at = [], 0
        for page in kept:
            starts.append(at)
            at += len(page)
        info = PageInfo(handle, tool, len(kept), total_chars, at, size)
        self._kept[(scope, handle)] = _Kept(info, kept, tuple(starts))
        self._scopes.setdefault(scope, collections.OrderedDict())[handle] = None
        self._scope_bytes[scope] = self._scope_bytes.get(scope, 0) + size
        self.bytes += size
        return info

    async def read(self, scope: str, handle: str, number: int) -> Page | None:
        kept = self._kept.get((scope, handle))
        if kept is None:
            return Page(handle, number, None) if (scope, handle) in self._gone else None
        self._kept.move_to_end((scope, handle))
        self._scopes[scope].move_to_end(handle)
        if not 1 <= number <= kept.info.pages:
            return Page(handle, number, kept.info)
        return Page(handle, number, kept.info, kept.starts[number - 1], kept.pages[number - 1])

    async def entries(self, scope: str) -> list[PageInfo]:
        return [self._kept[(scope, handle)].info for handle in self._scopes.get(scope, ())]

    async def release(self, scope: str) -> None:
        self.forget(scope)

    def forget(self, scope: str) -> None:
        """Drop every result of ``scope``, and what is remembered of its evicted ones (the run
        ended, or the session is gone)."""
        for handle in list(self._scopes.get(scope, ())):
            self._drop((scope, handle), remember=False)
        self._scopes.pop(scope, None)
        self._scope_bytes.pop(scope, None)
        for handle in self._gone_of.pop(scope, ()):
            del self._gone[(scope, handle)]

    def _new_handle(self, scope: str) -> str:
        while True:
            handle = new_page_handle()
            if (scope, handle) not in self._kept and (scope, handle) not in self._gone:
                return handle

    def _make_room(self, scope: str, size: int, max_scope_bytes: int) -> None:
        if max_scope_bytes:
            owned = self._scopes.get(scope, collections.OrderedDict())
            while owned and self._scope_bytes.get(scope, 0) + size > max_scope_bytes:
                self._drop((scope, next(iter(owned))))
        while self.max_bytes and self._kept and self.bytes + size > self.max_bytes:
            self._drop(next(iter(self._kept)))

    def _drop(self, key: Key, *, remember: bool = True) -> None:
        scope, handle = key
        kept = self._kept.pop(key)
        self.bytes -= kept.info.size
        self._scope_bytes[scope] -= kept.info.size
        owned = self._scopes[scope]
        del owned[handle]
        if not owned:
            del self._scopes[scope]
            del self._scope_bytes[scope]
        if remember:
            logger.debug("paged result %s of %s evicted (%d bytes)", handle, scope, kept.info.size)
            self._gone[key] = None
            self._gone_of.setdefault(scope, set()).add(handle)
            while len(self._gone) > TOMBSTONES:
                (old_scope, old_handle), _ = self._gone.popitem(last=False)
                gone_of = self._gone_of[old_scope]
                gone_of.discard(old_handle)
                if not gone_of:
                    del self._gone_of[old_scope]


class KeyedLocks:
    """One ``anyio.Lock`` per key (a session id), for the tasks of this process; a lock is made when
    first wanted and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    def locked(self, key: str) -> bool:
        entry = self._locks.get(key)
        return entry is not None and entry[0].locked()

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
