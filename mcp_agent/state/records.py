"""The values of the state seam (``base.py`` has its protocols): ids, limits, sessions,
approvals and their decisions, run records, tasks, paged results, and what ``State.recover`` found.

They are frozen dataclasses (``Session`` is the one mutable value: the store updates the object
a ``hold`` yielded when it saves it) with their wire forms (``to_dict``/``from_dict``) for the
backends that store JSON, and ``to_json``, the text those backends write: a tool's output decoded
from JSON may hold a lone surrogate (``"\\ud800"``), which UTF-8 cannot encode, and ``to_json``
keeps such text exact (escaped, as plain JSON does) instead of failing the save. This module
imports nothing above ``messages``/``exceptions``.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ApprovalsFull
from ..messages import JSONObject, Message, Usage

__all__ = [
    "EXPIRED_KEPT",
    "INTERRUPTED",
    "PAGE_OVERHEAD",
    "SESSION_ID_PATTERN",
    "TASK_STATUSES",
    "TERMINAL_TASK_STATUSES",
    "Approval",
    "Decision",
    "Page",
    "PageInfo",
    "Recovery",
    "RunRecord",
    "Session",
    "SessionInfo",
    "StateLimits",
    "TaskRecord",
    "check_room",
    "new_page_handle",
    "new_replica_id",
    "new_session_id",
    "paged_size",
    "to_json",
    "valid_session_id",
]


SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
"""What a session id may look like: 1-128 characters of letters, digits and ``. _ : @ -``,
starting with a letter or digit. Always matched whole (``fullmatch``: no trailing newline)."""
_ID_ALPHABET = string.ascii_letters + string.digits
_ID_LENGTH = 24

INTERRUPTED = "interrupted by a gateway restart"
"""The ``detail`` of a run that was in flight on a replica that died (``State.recover``)."""


_ID_BYTES_KEPT = 256 - 256 % len(_ID_ALPHABET)
"""Random bytes below this map onto the alphabet evenly (``byte % 62``); the rest are drawn again."""


def new_session_id() -> str:
    """A new, unguessable session id: 24 random letters and digits (about 142 bits), each
    uniform over the alphabet, from one read of the system's random source (not 24 draws)."""
    chosen: list[str] = []
    while len(chosen) < _ID_LENGTH:
        chosen.extend(
            _ID_ALPHABET[byte % len(_ID_ALPHABET)]
            for byte in secrets.token_bytes(32)
            if byte < _ID_BYTES_KEPT
        )
    return "".join(chosen[:_ID_LENGTH])


def valid_session_id(value: str) -> bool:
    """Whether ``value`` is a well-formed session id (see ``SESSION_ID_PATTERN``)."""
    return SESSION_ID_PATTERN.fullmatch(value) is not None


def new_page_handle() -> str:
    """A new handle for a paged result: ``r`` and eight random hex digits. A handle is read only
    within its run or session, so it need not be unique beyond them (the stores check there)."""
    return "r" + secrets.token_hex(4)


def new_replica_id() -> str:
    """A new id for one gateway process (one incarnation: a restart gets a new one)."""
    return secrets.token_hex(6)


def to_json(value: Any) -> str:
    """Compact JSON, UTF-8 as is; ``\\uXXXX`` escapes only when the text has lone surrogates."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


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
        max_paged_bytes_total: the paged results of every session together (``paged_size``);
            beyond, the least recently used go first (``limits.maxPagedBytesTotal``; 0 = no cap).
    """

    session_ttl_seconds: float = 1800
    max_sessions: int = 1000
    max_sessions_per_owner: int = 0
    max_session_bytes: int = 16 * 1024 * 1024
    max_runs: int = 10_000
    max_run_age_days: float = 30
    lease_seconds: float = 30
    max_paged_bytes_total: int = 64_000_000


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
        return cls(
            bool(data["approved"]), str(data.get("reason", "")), data.get("by"), float(data.get("at", 0.0))
        )


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
        provenance: when ``policy.mode`` enforce holds the call, the untrusted result before it
            (server, tool, call_id, trusted, why, excerpt); None otherwise.
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
    provenance: JSONObject | None = None

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
        if self.provenance:
            data["provenance"] = self.provenance
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
            provenance=dict(data["provenance"]) if data.get("provenance") else None,
        )


def check_room(waiting: int, mine: int, *, max_pending: int, max_per_caller: int, caller: str | None) -> None:
    """Refuse one more pending approval beyond a cap (``ApprovalStore.add`` calls it, in the
    step that then adds): ``waiting`` approvals are pending in all, ``mine`` of them
    ``caller``'s. A cap of 0 is none; a caller of None has no share of its own.

    Raises:
        ApprovalsFull: ``waiting`` reached ``max_pending``, or ``mine`` reached ``max_per_caller``.
    """
    if max_pending and waiting >= max_pending:
        raise ApprovalsFull(waiting, max_pending)
    if max_per_caller and caller is not None and mine >= max_per_caller:
        raise ApprovalsFull(mine, max_per_caller, caller)


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
        tool_calls: one ``{"name", "ok", "ms", ...}`` per call (``ToolCallRecord.to_dict``, with
            ``verdict`` for a call that did not run: ``skipped``, ``denied``, ...).
        rounds: model rounds.
        elapsed_ms: the run's wall time.
        model: the model that answered.
        replica: the gateway process that ran it (``State.replica``).
        timeline: its model and tool calls as spans (start offset, duration, tokens, arguments,
            a result preview), in start order; bounded (``loop/_records.py``). Empty in flight
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

    def matches(
        self, *, caller: str | None, reason: str | None, text: str | None, before: float | None
    ) -> bool:
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


TASK_STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
TERMINAL_TASK_STATUSES = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class TaskRecord:
    """One task of the MCP Tasks extension (``gateway/mcp/tasks.py``): a run started detached,
    polled with ``tasks/get``. Its owner (``replica``) rewrites it whole as the run goes on;
    other replicas only read it, and ask for its cancellation (``TaskStore.request_cancel``).

    Attributes:
        id: the task id (unguessable; the client's handle).
        caller: who created it; nobody else sees it.
        status: one of ``TASK_STATUSES``.
        status_message: what the status means now (optional).
        created: wall time of the creation.
        updated: wall time of the last change.
        ttl_ms: how long after ``created`` the task is kept (then forgotten).
        poll_ms: the suggested polling interval.
        replica: the gateway process that runs it (``State.replica``).
        alive_until: wall time until which the owner's lease on a task not yet ended holds; the
            owner renews it while the run goes on, so a task still working past it died with
            its replica.
        result: the ``CallToolResult`` (wire form), once ``completed``.
        error: the JSON-RPC error (``{code, message}``), once ``failed``.
        input_requests: the questions waiting for the caller (key -> request, wire form), while
            ``input_required``.
        cancel_requested: a ``tasks/cancel`` came (from any replica); its owner acts on it.
        upstream: a task a tool server runs, relayed (``gateway/mcp/task_relay.py``):
            ``{"server": name, "taskId": the server's id, "tool": the exposed name}``; None for
            the gateway's own.
    """

    id: str
    caller: str
    status: str = "working"
    status_message: str = ""
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    ttl_ms: int = 3_600_000
    poll_ms: int = 1000
    replica: str = ""
    alive_until: float = 0.0
    result: JSONObject | None = None
    error: JSONObject | None = None
    input_requests: JSONObject | None = None
    cancel_requested: bool = False
    upstream: JSONObject | None = None

    @property
    def expires(self) -> float:
        """Wall time after which the task is forgotten."""
        return self.created + self.ttl_ms / 1000

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_TASK_STATUSES

    def to_dict(self) -> JSONObject:
        return {
            "id": self.id,
            "caller": self.caller,
            "status": self.status,
            "status_message": self.status_message,
            "created": self.created,
            "updated": self.updated,
            "ttl_ms": self.ttl_ms,
            "poll_ms": self.poll_ms,
            "replica": self.replica,
            "alive_until": self.alive_until,
            "result": self.result,
            "error": self.error,
            "input_requests": self.input_requests,
            "upstream": self.upstream,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, cancel_requested: bool = False) -> TaskRecord:
        return cls(
            id=str(data["id"]),
            caller=str(data.get("caller", "")),
            status=str(data.get("status", "working")),
            status_message=str(data.get("status_message", "")),
            created=float(data.get("created", 0.0)),
            updated=float(data.get("updated", 0.0)),
            ttl_ms=int(data.get("ttl_ms", 0)),
            poll_ms=int(data.get("poll_ms", 1000)),
            replica=str(data.get("replica", "")),
            alive_until=float(data.get("alive_until", 0.0)),
            result=data.get("result"),
            error=data.get("error"),
            input_requests=data.get("input_requests"),
            cancel_requested=cancel_requested or bool(data.get("cancel_requested", False)),
            upstream=data.get("upstream"),
        )


PAGE_OVERHEAD = 16
"""Bytes counted for each stored page besides its text (its number, its offset, the key)."""
EXPIRED_KEPT = 256
"""How many evicted handles a shared store remembers per session, to answer "expired"."""


def paged_size(pages: Sequence[str]) -> int:
    """What a paged result counts against the caps: its pages' UTF-8 bytes (a lone surrogate
    counts three, as it is stored) plus ``PAGE_OVERHEAD`` a page. The same on every backend."""
    return sum(len(page.encode("utf-8", "surrogatepass")) for page in pages) + PAGE_OVERHEAD * len(pages)


@dataclass(frozen=True)
class PageInfo:
    """A paged result as a ``PageStore`` keeps it (``base.py``).

    Attributes:
        handle: its handle (``new_page_handle``), unique within its scope.
        tool: the tool that produced it.
        pages: how many pages are kept.
        total_chars: the whole result's length, as the tool returned it.
        kept_chars: the characters kept (fewer than ``total_chars`` when a cap cut the tail).
        size: what it counts against the caps (``paged_size``).
    """

    handle: str
    tool: str
    pages: int
    total_chars: int
    kept_chars: int
    size: int


@dataclass(frozen=True)
class Page:
    """What ``PageStore.read`` found for a handle it knows.

    Attributes:
        handle: the handle asked for.
        number: the page asked for (1-based).
        result: the paged result; None when it expired (evicted: only its handle is remembered).
        start: where the page starts in the result, in characters.
        text: the page; None when the result expired or has no such page.
    """

    handle: str
    number: int
    result: PageInfo | None
    start: int = 0
    text: str | None = None

    @property
    def expired(self) -> bool:
        return self.result is None

    @property
    def end(self) -> int:
        """Where the page ends (exclusive), in characters."""
        return self.start + len(self.text or "")


@dataclass(frozen=True)
class Recovery:
    """What ``State.recover`` found of dead replicas: runs marked interrupted, approvals
    expired, session locks released."""

    runs: int = 0
    approvals: int = 0
    locks: int = 0


PIN_KINDS = ("pinned", "seen")
"""What a ``ToolPin`` holds: the definitions approved (``pinned``), or the last ones a server
listed (``seen``), which ``mcp-agent tools --diff`` compares and ``--accept`` pins."""


@dataclass(frozen=True)
class ToolPin:
    """One server's tool definitions as pinned (approved) or as last seen (``tools/pins.py``).

    Attributes:
        server: the server's name in agent.json.
        kind: ``pinned`` or ``seen`` (``PIN_KINDS``).
        tools: each tool's definition by its MCP name: ``{"description", "inputSchema",
            "outputSchema", "annotations", "title"}`` as the server sent them.
        at: wall time it was written.
        by: who wrote it: ``first sight``, a replica id, ``cli``, a caller's name.
    """

    server: str
    kind: str
    tools: Mapping[str, JSONObject]
    at: float = field(default_factory=time.time)
    by: str = ""

    def to_dict(self) -> JSONObject:
        return {
            "server": self.server,
            "kind": self.kind,
            "tools": dict(self.tools),
            "at": self.at,
            "by": self.by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolPin:
        return cls(
            server=str(data["server"]),
            kind=str(data["kind"]),
            tools=dict(data.get("tools") or {}),
            at=float(data.get("at") or 0.0),
            by=str(data.get("by") or ""),
        )
