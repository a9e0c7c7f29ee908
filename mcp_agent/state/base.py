"""The state seam: what the loop and the gateway keep outside a run, as small async Protocols.

Five stores and the bundle that owns them:

- ``SessionStore``: conversations (a transcript, its owner) and the lock that serialises runs on
  one conversation: in one process, and across processes for the shared backends, with a lease
  that lapses when its holder dies;
- ``ApprovalStore``: tool calls waiting for a human, and the decisions on them (who, when, why);
  writing a decision wakes the run waiting on it, in any process of the shared backends;
- ``RunStore``: one ``RunRecord`` per run, written at its start (in flight) and at its end, kept
  within ``StateLimits.max_runs`` and ``max_run_age_days``;
- ``PageStore``: the pages of long tool results a session's runs paged (``loop/pages.py``), kept
  beside the session (readable from every process sharing the backend) and gone with it;
- ``TaskStore``: the tasks of the MCP Tasks extension (``TaskRecord``), each kept until its TTL
  ends, readable from every process sharing the backend;
- ``PinStore``: each server's tool definitions as pinned (approved) and as last seen
  (``ToolPin``, ``tools/pins.py``), readable from every process sharing the backend, kept until
  replaced;
- ``State``: the six, the process's ``replica`` id, ``beat()`` (its liveness lease) and
  ``recover()`` (what dead replicas left behind: runs become ``terminal_error`` "interrupted by a
  gateway restart", their pending approvals are expired, their session locks are released).

Backends: ``memory.py`` (``memory://``), ``sqlite/`` (``sqlite:///PATH``) and ``redis/``
(``redis://HOST:PORT/DB``). ``mcp_agent.state.open_state(url, limits=…)`` picks one; a backend
module offers ``async def open_<name>_state(url: str, *, limits: StateLimits, replica: str | None
= None) -> State`` (``open_redis_state`` in ``redis/__init__.py``). Every store is also checked by one
contract suite (``tests/state/test_contract.py``), parametrised over the backends.

Contracts every backend keeps:

- Operations are async and raise ``StateError`` (never a driver's own exception) when the
  backend fails; ``SessionTooLarge`` when a transcript is over ``max_session_bytes``;
  ``ApprovalsFull`` when an approval is beyond the caps ``add`` was given.
- A transcript is saved whole or not at all, and a deleted session stays deleted.
- Values are the frozen dataclasses of ``records.py`` (``Session`` is the one mutable value: the
  store updates the object a ``hold`` yielded when it saves it).

This module imports nothing above ``messages``, ``events`` and ``exceptions`` (the loop imports
state, never the reverse).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import anyio
import anyio.abc

from ..events import Event, EventSink
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
)

__all__ = ["ApprovalStore", "PageStore", "PinStore", "RunStore", "SessionStore", "State", "TaskStore"]


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
    lock's token fences the save), and ``StateError`` when the backend fails. With
    ``release=True`` the save is the hold's last: on a shared backend the lock goes in the same
    write (one round trip instead of two), so another replica's run may start on the session
    before the block is left, and a later save through that session raises ``LeaseLost``.

    ``create(owner)`` stores a new empty session under a new, unguessable id. ``get`` reads one
    (None when unknown or expired), ``list`` describes all, ``delete`` removes one (False when
    unknown; a run holding it finishes, and its save then returns False).
    """

    max_per_owner: int
    """How many sessions one owner may hold (0: no cap); the gateway sets each caller's share."""

    def hold(self, session_id: str, *, owner: str | None = None) -> AbstractAsyncContextManager[Session]: ...

    async def create(self, owner: str | None = None) -> Session: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def save(
        self, session: Session, transcript: Sequence[Message], *, release: bool = False
    ) -> bool: ...

    async def list(self) -> list[SessionInfo]: ...

    async def delete(self, session_id: str) -> bool: ...


class ApprovalStore(Protocol):
    """Approvals asked and decided, and the wake-up of the run waiting on one.

    ``add`` records a pending approval, unless as many as ``max_pending`` are pending already
    (in all, in every process sharing the store), or ``max_per_caller`` of ``approval.caller``'s
    (0: no cap; a caller of None has no share): it then raises ``ApprovalsFull`` and stores
    nothing. The count and the add are one atomic step for every process sharing the store, so
    replicas adding at the same instant never overshoot a cap. (An approval added decided
    already is neither counted nor refused.) ``decide`` writes the decision on a *pending* one and
    wakes its waiter wherever it is: exactly one decider wins, in every process (False for an
    unknown or already decided id, and nothing changes). ``wait`` returns the decision once
    there is one (at once when decided already); it has no timeout of its own (the caller sets
    one around it) and is cancellable. ``get`` reads one, pending or decided; ``pending`` lists
    the pending ones, oldest first. Decided approvals are kept for a while (with the run
    records' age limit) and then dropped.
    """

    async def add(self, approval: Approval, *, max_pending: int = 0, max_per_caller: int = 0) -> None: ...

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


class PageStore(Protocol):
    """Paged tool results, by scope: a session id (the state's store), or a run of its own (the
    in-memory store an Agent keeps for runs without a session).

    ``put`` keeps the pages of one result (already split, and cut to ``max_scope_bytes``) under
    a new handle and returns its ``PageInfo``; to make room it first evicts the scope's least
    recently read results beyond ``max_scope_bytes`` (0 = no cap), then the store's least recently
    used ones beyond its total cap (``StateLimits.max_paged_bytes_total``); a result bigger than
    the room there is is kept anyway (the caller cut it to its caps). None when the scope is a
    session that is gone (deleted, expired). ``read`` answers one page and marks the result used:
    a ``Page`` (``expired`` when it was evicted; ``text`` None when it has no such page), or None
    for a handle the scope never had (or whose memory was dropped). ``entries`` lists the scope's
    results kept now, least recently used first. ``release`` forgets a scope's results (no
    tombstones). A session deleted or expired takes its results with it.

    Sizes are ``paged_size`` on every backend. Each call is one round trip to a shared backend;
    failures raise ``StateError``.
    """

    async def put(
        self, scope: str, tool: str, pages: Sequence[str], total_chars: int, *, max_scope_bytes: int = 0
    ) -> PageInfo | None: ...

    async def read(self, scope: str, handle: str, number: int) -> Page | None: ...

    async def entries(self, scope: str) -> list[PageInfo]: ...

    async def release(self, scope: str) -> None: ...


class TaskStore(Protocol):
    """Tasks (``TaskRecord``), by id.

    ``put`` stores a record whole (a new task, or its owner's next version of it), kept until
    ``record.expires``; a cancellation asked meanwhile (``request_cancel``) stays asked. ``get``
    reads one: None when unknown or past ``expires``. ``request_cancel`` marks a live task's
    cancellation as asked (False when unknown or expired); its owner reads the mark on its next
    look (``get``). Expired tasks are dropped by the backend (on ``State.beat``, or by itself).
    """

    async def put(self, record: TaskRecord) -> None: ...

    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def request_cancel(self, task_id: str) -> bool: ...


class PinStore(Protocol):
    """Tool definitions pinned per server, and the ones last seen (``ToolPin``, by ``kind``).

    ``put`` replaces the server's record of ``pin.kind`` whole; ``get`` reads one (None: none
    yet); ``list`` answers every server's record of ``kind``, by server name. Records are kept
    until replaced (a server removed from agent.json leaves its pin, harmless and small).
    """

    async def put(self, pin: ToolPin) -> None: ...

    async def get(self, server: str, kind: str = "pinned") -> ToolPin | None: ...

    async def list(self, kind: str = "pinned") -> builtins.list[ToolPin]: ...


class SharedEvents(Protocol):
    """A shared state backend's channel between replicas (``state.redis``'s ``RedisEvents``; None
    for a backend of one process).

    ``emit`` sends this replica's event to the others that listen (never blocks, never raises);
    ``listening`` tells the others at once that this replica has a new listener of its own (so
    they start sending; never raises, bounded); ``relay`` runs for the gateway's lifetime,
    handing the other replicas' events to ``sink`` (skipping them unread while ``wanted()`` is
    False).
    """

    def emit(self, event: Event) -> None: ...

    async def listening(self) -> None: ...

    async def relay(
        self,
        sink: EventSink,
        *,
        wanted: Callable[[], bool] | None = None,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None: ...


class State(Protocol):
    """The six stores of one backend, for one process (``replica``).

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
    def pages(self) -> PageStore: ...

    @property
    def tasks(self) -> TaskStore: ...

    @property
    def pins(self) -> PinStore: ...

    @property
    def limits(self) -> StateLimits: ...

    @property
    def events(self) -> SharedEvents | None:
        """The channel between replicas of a shared backend; None for one process."""

    async def beat(self) -> None: ...

    async def recover(self) -> Recovery: ...

    async def aclose(self) -> None: ...
