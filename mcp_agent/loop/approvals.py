"""The approval gate and its queue: which tool calls need a human's yes before they run.

Before a turn is dispatched the loop asks a ``Gate`` about every call it would run, telling it
whether tool output is already in the context (``tainted``: data from outside the program, which
may carry instructions an attacker wrote). The verdict is one of:

- ``allow``: the call runs;
- ``deny(reason)``: it does not run; the model reads ``[DENIED: <reason>] Do NOT retry this tool``
  and the loop goes on;
- ``need_approval``: the call waits on the ``ApprovalQueue`` until someone resolves it (the
  gateway offers ``pending()`` and ``resolve()`` over REST) or the queue's timeout passes, which
  denies it. The queue keeps its requests and decisions in an ``ApprovalStore``
  (``mcp_agent.state``): in memory by default, in SQLite or Redis when the state is, so a
  decision written by another gateway process wakes the run here.

``GlobGate`` is the built-in gate: ``approvals.require`` globs (fnmatch, case-sensitive) on
exposed tool names, and with ``approvals.requireDestructive`` every tool whose MCP annotations
say ``destructiveHint: true`` and not ``readOnlyHint: true`` (it reads them from the tool source's
current specs, so a tool that appears later is gated too). Approval ids come from ``secrets.token_urlsafe``, so they cannot be guessed,
and exactly one resolver wins (a second ``resolve`` of the same id, or an unknown id, is False).

The queue is bounded: at most ``max_pending`` approvals wait at once, and at most
``max_per_caller`` of them for one caller (the gateway sets it to each caller's share). A call
beyond either is denied at once (``submit`` raises ``ApprovalsFull``), so a flood of gated calls
neither grows without bound nor crowds out other callers' approvals. The store checks the caps
and adds in one atomic step (``ApprovalStore.add``): with a shared store the counts are of every
replica's pending approvals, and replicas submitting at the same instant never both take the
last place.
"""

from __future__ import annotations

import fnmatch
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio

from .._redact import mask_secrets_in
from ..config.globs import unmatched_globs
from ..exceptions import ApprovalsFull
from ..messages import JSONObject, ToolCall, ToolSpec
from ..state.base import ApprovalStore
from ..state.memory import MemoryApprovalStore
from ..state.records import Approval, Decision
from ..tools.base import ToolSource

PendingApproval = Approval
"""The name this value had before approvals were stored (``mcp_agent.state.Approval``)."""

__all__ = [
    "ApprovalQueue",
    "ApprovalsFull",
    "Decision",
    "Gate",
    "GlobGate",
    "PendingApproval",
    "Verdict",
    "denied_text",
    "is_destructive",
    "require_warnings",
]


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


class ApprovalQueue:
    """Calls waiting for approval, shared by every run of an Agent (and, with a shared store,
    every replica's).

    Args:
        timeout_seconds: how long a call waits before it is denied (0 = until the run's own
            deadline or cancellation).
        max_pending: at most this many approvals wait at once (0 = no cap).
        max_per_caller: at most this many of them for one caller (0 = no cap of its own).
        store: where requests and decisions are kept (a new in-memory one when None).
        replica: this process's replica id, recorded with each request (``State.replica``).
    """

    def __init__(
        self,
        timeout_seconds: float = 60.0,
        *,
        max_pending: int = 0,
        max_per_caller: int = 0,
        store: ApprovalStore | None = None,
        replica: str = "",
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.max_pending = max_pending
        self.max_per_caller = max_per_caller
        self.store: ApprovalStore = store if store is not None else MemoryApprovalStore()
        self.replica = replica

    async def submit(
        self,
        call: ToolCall,
        *,
        run_id: str,
        session_id: str | None = None,
        caller: str | None = None,
        provenance: JSONObject | None = None,
    ) -> Approval:
        """Put ``call`` in the queue; the caller then awaits ``wait(id)``.

        ``provenance``: the untrusted result before a call the provenance policy holds
        (``loop/provenance.py``), shown to whoever decides.

        The approval keeps the call's arguments with their known secrets masked (the store may
        write it to disk); the call, once approved, runs with its own.

        Raises:
            ApprovalsFull: ``max_pending`` approvals wait already, or ``max_per_caller`` of this
                caller's (nothing is stored).
            StateError: the store failed.
        """
        approval = Approval(
            id=secrets.token_urlsafe(16),
            run_id=run_id,
            session_id=session_id,
            call_id=call.id,
            name=call.name,
            arguments=mask_secrets_in(dict(call.arguments)),  # kept, maybe on disk: no known secret
            caller=caller,
            replica=self.replica,
            provenance=provenance,
        )
        await self.store.add(approval, max_pending=self.max_pending, max_per_caller=self.max_per_caller)
        return approval

    async def wait(self, approval_id: str) -> Decision:
        """Wait for the decision on ``approval_id``; a timeout denies the call.

        Cancellation withdraws the request (it is decided denied, ``by="run"``, so nobody can
        approve it later) and propagates.
        """
        try:
            with anyio.move_on_after(self.timeout_seconds or None):
                return await self.store.wait(approval_id)
            timed_out = Decision(False, f"approval timed out after {self.timeout_seconds:g} s", by="timeout")
            if await self.store.decide(approval_id, timed_out):
                return timed_out
            return await self.store.wait(approval_id)  # decided just now, by someone else
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.store.decide(
                    approval_id, Decision(False, "the run ended while waiting for approval", by="run")
                )
            raise

    async def pending(self) -> list[Approval]:
        """The calls waiting now, oldest first."""
        return await self.store.pending()

    async def resolve(
        self, approval_id: str, approved: bool, reason: str = "", *, by: str | None = None
    ) -> bool:
        """Approve or deny a waiting call. False for an unknown or already resolved id.

        Args:
            approval_id: the approval.
            approved: the decision.
            reason: why (a default when empty).
            by: who decided (the caller's name), recorded with the decision.
        """
        if not reason:
            reason = "approved by operator" if approved else "operator did not approve this call"
        return await self.store.decide(approval_id, Decision(approved, reason, by=by))
