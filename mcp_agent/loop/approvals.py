"""The approval gate and its queue: which tool calls need a human's yes before they run.

Before a turn is dispatched the loop asks a ``Gate`` about every call it would run, telling it
whether tool output is already in the context (``tainted``: data from outside the program, which
may carry instructions an attacker wrote). The verdict is one of:

- ``allow``: the call runs;
- ``deny(reason)``: it does not run; the model reads ``[DENIED: <reason>] Do NOT retry this tool``
  and the loop goes on;
- ``need_approval``: the call waits on the ``ApprovalQueue`` until someone resolves it (the
  gateway offers ``pending()`` and ``resolve()`` over REST) or the queue's timeout passes, which
  denies it.

``GlobGate`` is the built-in gate: ``approvals.require`` globs (fnmatch, case-sensitive) on
exposed tool names, and with ``approvals.requireDestructive`` every tool whose MCP annotations
say ``destructiveHint: true`` and not ``readOnlyHint: true`` (it reads them from the tool source's
current specs, so a tool that appears later is gated too). Approval ids come from ``secrets.token_urlsafe``, so they cannot be guessed,
and exactly one resolver wins (a second ``resolve`` of the same id, or an unknown id, is False).

The queue is bounded: at most ``max_pending`` approvals wait at once, and at most
``max_per_caller`` of them for one caller (the gateway sets it to each caller's share). A call
beyond either is denied at once (``submit`` raises ``ApprovalsFull``), so a flood of gated calls
neither grows without bound nor crowds out other callers' approvals.
"""

from __future__ import annotations

import fnmatch
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio

from .._globs import unmatched_globs
from .._types import JSONObject
from ..messages import ToolCall, ToolSpec
from ..tools.base import ToolSource


@dataclass(frozen=True)
class Verdict:
    """A gate's decision about one call.

    Attributes:
        kind: ``allow``, ``deny`` or ``need_approval``.
        reason: why, for ``deny`` (the model reads it).
    """

    kind: Literal["allow", "deny", "need_approval"]
    reason: str = ""

    @classmethod
    def allow(cls) -> Verdict:
        return _ALLOW

    @classmethod
    def deny(cls, reason: str) -> Verdict:
        return cls("deny", reason)

    @classmethod
    def need_approval(cls) -> Verdict:
        return _NEED_APPROVAL


_ALLOW = Verdict("allow")
_NEED_APPROVAL = Verdict("need_approval")


def denied_text(reason: str) -> str:
    """The tool result the model reads for a denied call."""
    return f"[DENIED: {reason}] Do NOT retry this tool"


class Gate(Protocol):
    """Decides, before dispatch, whether a tool call may run.

    ``check`` is called once per call the loop would run, in call order, with the call's
    exposed name and its validated, coerced arguments. ``tainted`` is True once any tool output
    is in the conversation. It must not raise; a gate that cannot decide should deny.
    """

    async def check(self, call: ToolCall, *, tainted: bool) -> Verdict: ...


def is_destructive(annotations: Mapping[str, Any]) -> bool:
    """Whether MCP tool annotations (wire spelling) say the tool may destroy something.

    Only an explicit ``destructiveHint: true`` counts (the spec's default of true for tools
    without annotations would gate nearly every tool), and ``readOnlyHint: true`` overrides it,
    as the spec says the destructive hint is meaningful only for tools that are not read-only.
    """
    return annotations.get("destructiveHint") is True and annotations.get("readOnlyHint") is not True


class GlobGate:
    """Calls that match ``require`` (or, with ``require_destructive``, call a destructive tool)
    need approval; the rest are allowed.

    Args:
        require: fnmatch globs on exposed names (``"*__write_*"``), matched case-sensitively.
        require_destructive: also gate every tool whose annotations say ``destructiveHint:
            true`` and not ``readOnlyHint: true`` (see ``is_destructive``).
        tools: where the tool specs (and their annotations) are read, at each check; needed
            for ``require_destructive``.
    """

    def __init__(
        self, require: Iterable[str], *, require_destructive: bool = False, tools: ToolSource | None = None
    ) -> None:
        self.require = tuple(require)
        self.require_destructive = require_destructive
        self._tools = tools
        self._index: tuple[Sequence[ToolSpec] | None, dict[str, ToolSpec]] = (None, {})

    def needs_approval(self, name: str) -> bool:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in self.require):
            return True
        if not self.require_destructive or self._tools is None:
            return False
        spec = self._spec(name)
        return spec is not None and is_destructive(spec.annotations)

    def _spec(self, name: str) -> ToolSpec | None:
        assert self._tools is not None
        specs = self._tools.list_tools()
        if self._index[0] is not specs:  # a hub hands out the same tuple until its tools change
            self._index = (specs, {spec.name: spec for spec in specs})
        return self._index[1].get(name)

    async def check(self, call: ToolCall, *, tainted: bool) -> Verdict:
        return Verdict.need_approval() if self.needs_approval(call.name) else Verdict.allow()


def require_warnings(require: Iterable[str], tools: ToolSource, *, down: Sequence[str] = ()) -> list[str]:
    """One line per ``approvals.require`` glob that matches none of the tools offered now.

    Such a glob gates nothing, so the calls it was meant for run without approval: worth a
    warning at start-up and a failure in ``doctor``. ``down`` names the servers that are not up
    (their tools are unknown, so a glob meant for them is reported too).
    """
    unmatched = unmatched_globs(require, [spec.name for spec in tools.list_tools()])
    note = f" (servers not up: {', '.join(down)})" if down else ""
    return [
        f"{glob.describe('approvals.require')}; the calls it was meant to gate would run without approval{note}"
        for glob in unmatched
    ]


class ApprovalsFull(Exception):
    """Too many approvals are waiting (in all, or for this caller): the call is denied at once."""


@dataclass(frozen=True)
class PendingApproval:
    """A call waiting for a human's decision, as the gateway lists it."""

    id: str
    run_id: str
    session_id: str | None
    call_id: str
    name: str
    arguments: JSONObject
    created: float = field(default_factory=time.time)
    caller: str | None = None
    """Who asked for the run that made the call (the gateway's caller name)."""

    def to_dict(self) -> JSONObject:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "caller": self.caller,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "created": self.created,
        }


@dataclass(frozen=True)
class Decision:
    """How an approval ended: approved or not, and why."""

    approved: bool
    reason: str = ""


@dataclass
class _Entry:
    pending: PendingApproval
    done: anyio.Event
    decision: Decision | None = None


class ApprovalQueue:
    """Calls waiting for approval, shared by every run of an Agent.

    Args:
        timeout_seconds: how long a call waits before it is denied (0 = until the run's own
            deadline or cancellation).
        max_pending: at most this many approvals wait at once (0 = no cap).
        max_per_caller: at most this many of them for one caller (0 = no cap of its own).
    """

    def __init__(self, timeout_seconds: float = 60.0, *, max_pending: int = 0, max_per_caller: int = 0) -> None:
        self.timeout_seconds = timeout_seconds
        self.max_pending = max_pending
        self.max_per_caller = max_per_caller
        self._pending: dict[str, _Entry] = {}  # waiting for a resolver
        self._entries: dict[str, _Entry] = {}  # submitted and not yet collected by wait()

    def submit(
        self, call: ToolCall, *, run_id: str, session_id: str | None = None, caller: str | None = None
    ) -> PendingApproval:
        """Put ``call`` in the queue; the caller then awaits ``wait(id)``.

        Raises:
            ApprovalsFull: ``max_pending`` approvals wait already, or ``max_per_caller`` of this
                caller's.
        """
        if self.max_pending and len(self._pending) >= self.max_pending:
            raise ApprovalsFull(
                f"too many approvals are waiting ({len(self._pending)}, approvals.maxPending); "
                "try again once some are answered"
            )
        if self.max_per_caller and caller is not None:
            mine = sum(1 for entry in self._pending.values() if entry.pending.caller == caller)
            if mine >= self.max_per_caller:
                raise ApprovalsFull(
                    f"too many approvals of caller {caller!r} are waiting ({mine}, its share of "
                    "approvals.maxPending); try again once some are answered"
                )
        pending = PendingApproval(
            id=secrets.token_urlsafe(16),
            run_id=run_id,
            session_id=session_id,
            call_id=call.id,
            name=call.name,
            arguments=dict(call.arguments),
            caller=caller,
        )
        entry = _Entry(pending, anyio.Event())
        self._pending[pending.id] = entry
        self._entries[pending.id] = entry
        return pending

    async def wait(self, approval_id: str) -> Decision:
        """Wait for the decision on ``approval_id``; a timeout denies the call.

        Cancellation withdraws the request and propagates.
        """
        entry = self._entries[approval_id]
        try:
            with anyio.move_on_after(self.timeout_seconds or None):
                await entry.done.wait()
            if entry.decision is None and self._pending.pop(approval_id, None) is not None:
                entry.decision = Decision(False, f"approval timed out after {self.timeout_seconds:g} s")
            assert entry.decision is not None
            return entry.decision
        finally:
            self._pending.pop(approval_id, None)
            self._entries.pop(approval_id, None)

    def pending(self) -> list[PendingApproval]:
        """The calls waiting now, oldest first."""
        return [entry.pending for entry in self._pending.values()]

    def resolve(self, approval_id: str, approved: bool, reason: str = "") -> bool:
        """Approve or deny a waiting call. False for an unknown or already resolved id."""
        entry = self._pending.pop(approval_id, None)
        if entry is None:
            return False
        if not reason:
            reason = "approved by operator" if approved else "operator did not approve this call"
        entry.decision = Decision(approved, reason)
        entry.done.set()
        return True
