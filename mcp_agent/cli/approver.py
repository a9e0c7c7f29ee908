"""Approvals for ``mcp-agent query``: asked on the terminal, or denied at once with how to allow them.

``TerminalApprover`` is an EventSink that answers the Agent's approval requests
(``ApprovalRequested``) through its ``ApprovalQueue``:

- a call whose exposed name matches an ``--approve`` glob is approved at once;
- on a terminal (stdin and stderr are TTYs) every other one is asked on stderr,
  ``Allow fs__write_file {"path": "notes.txt", "text": "Dear…"}? [y/N]``, one question at a time
  even when several calls wait, in the order they came; ``y`` or ``yes`` approves, anything else
  (Enter too) denies. A call whose approval ends meanwhile (``approvals.timeoutSeconds``) is not
  asked, or its question is abandoned;
- without a terminal it is denied at once, and the reason (which the model reads too) says how
  to allow it, so a script never waits silently for the timeout.

Every other event goes on to the progress printer. ``describe_call`` is the pure formatting of a
call for the question: arguments as compact JSON (control characters escaped), long values cut.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any, Protocol, TextIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..events import ApprovalRequested, ApprovalResolved, Event, EventSink
from ..loop.approvals import ApprovalQueue
from ..loop.provenance import describe_source
from ..messages import JSONObject

VALUE_CHARS = 60
"""A string argument longer than this is cut in the question."""
CALL_CHARS = 300
"""The arguments shown take at most this many characters."""


def describe_call(
    name: str, arguments: JSONObject, *, value_chars: int = VALUE_CHARS, total: int = CALL_CHARS
) -> str:
    """``name {"key": "value", ...}`` on one line: compact JSON, strings cut to ``value_chars``,
    the whole cut to ``total`` characters (a cut is marked ``…``)."""

    def shorten(value: Any) -> Any:
        if isinstance(value, str) and len(value) > value_chars:
            return value[: value_chars - 1] + "…"
        if isinstance(value, dict):
            return {key: shorten(item) for key, item in value.items()}
        if isinstance(value, list):
            return [shorten(item) for item in value]
        return value

    text = json.dumps(shorten(arguments), ensure_ascii=False, separators=(", ", ": "), default=str)
    if len(text) > total:
        text = text[: total - 1] + "…"
    return f"{name} {text}"


def is_yes(answer: str) -> bool:
    """Whether a typed answer approves: ``y`` or ``yes``, any case, spaces ignored."""
    return answer.strip().lower() in ("y", "yes")


class LineReader(Protocol):
    """Reads one typed line; None at end of input. Cancellable."""

    async def readline(self) -> str | None: ...


class TerminalReader:
    """Lines from a terminal's file descriptor (stdin), read without blocking the event loop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    async def readline(self) -> str | None:
        while b"\n" not in self._buffer:
            await anyio.wait_readable(self.fd)
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")


def on_a_terminal() -> bool:
    """Whether approvals can be asked: stdin and stderr are both TTYs (POSIX only: the answer
    is awaited with ``anyio.wait_readable`` on stdin, which Windows offers for sockets only)."""
    if os.name != "posix":
        return False
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


class TerminalApprover:
    """Answers a query's approval requests; see the module docstring.

    Args:
        approvals: the Agent's queue, where each answer is resolved.
        approve: ``--approve`` globs: matching calls are approved without asking.
        reader: where answers are read (a terminal); None denies at once what is not approved.
        out: where questions and notices are written (stderr).
        then: the sink every other event goes on to (the progress printer), if any.
        quiet: no notice for calls approved by ``--approve`` (denials are always said).
    """

    def __init__(
        self,
        approvals: ApprovalQueue,
        *,
        approve: Sequence[str] = (),
        reader: LineReader | None = None,
        out: TextIO = sys.stderr,
        then: EventSink | None = None,
        quiet: bool = False,
    ) -> None:
        self.approvals = approvals
        self.approve = tuple(approve)
        self.reader = reader
        self.out = out
        self.then = then
        self.quiet = quiet
        self._send: MemoryObjectSendStream[ApprovalRequested]
        self._receive: MemoryObjectReceiveStream[ApprovalRequested]
        self._send, self._receive = anyio.create_memory_object_stream[ApprovalRequested](math.inf)
        self._ended: set[str] = set()  # approvals that ended before (or while) being asked
        self._asking: tuple[str, anyio.CancelScope] | None = None
        self._closed = False  # the terminal reached end of input: deny the rest

    # ---------------------------------------------------------------- EventSink

    def emit(self, event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            self._send.send_nowait(event)  # answered by serve(), in the order they came
        elif isinstance(event, ApprovalResolved):
            self._ended.add(event.approval_id)
            if self._asking is not None and self._asking[0] == event.approval_id:
                self._asking[1].cancel()  # said at once, before the run's next events
                self._say(f"\n(no answer in time: the call was not approved: {event.reason})")
        elif self.then is not None:
            self.then.emit(event)

    async def _answer_at_once(self, event: ApprovalRequested) -> bool:
        """Approve a call ``--approve`` allows, deny one nobody can be asked about; False when
        the question must be asked."""
        glob = next((g for g in self.approve if fnmatch.fnmatchcase(event.name, g)), None)
        if glob is not None:
            self._say(
                f"· approved {describe_call(event.name, event.arguments)} (--approve {glob!r})", always=False
            )
            await self.approvals.resolve(
                event.approval_id, True, f"approved by --approve {glob!r}", by="--approve"
            )
            return True
        if self.reader is None or self._closed:
            why = "no terminal to ask on" if self.reader is None else "the terminal's input is closed"
            reason = (
                f"{why}; to allow this tool, run the query again with --approve '{event.name}' "
                "(a glob on exposed tool names, repeatable)"
            )
            held = f" ({describe_source(event.provenance)})" if event.provenance else ""
            self._say(f"mcp-agent: denied {describe_call(event.name, event.arguments)}{held}: {reason}")
            await self.approvals.resolve(event.approval_id, False, reason, by="terminal")
            return True
        return False

    # ---------------------------------------------------------------- the questions

    async def serve(self) -> None:
        """Answer the waiting approvals one at a time, until cancelled (run it in a task group)."""
        async for event in self._receive:
            if event.approval_id in self._ended:
                continue
            if await self._answer_at_once(event):
                continue
            assert self.reader is not None
            await self._ask(event, self.reader)

    async def _ask(self, event: ApprovalRequested, reader: LineReader) -> None:
        if event.provenance:  # held by policy.mode enforce: what the agent read before it
            self._say(f"{event.name} is a call with side effects {describe_source(event.provenance)}")
        self._say(f"Allow {describe_call(event.name, event.arguments)}? [y/N] ", end="")
        answer: str | None = ""
        with anyio.CancelScope() as scope:
            self._asking = (event.approval_id, scope)
            try:
                answer = await reader.readline()
            finally:
                self._asking = None
        if scope.cancelled_caught:  # the approval ended meanwhile (its timeout, the run's end)
            return
        if answer is None:
            self._closed = True
            self._say("")
            await self.approvals.resolve(
                event.approval_id, False, "the terminal's input is closed (no answer)", by="terminal"
            )
            return
        if is_yes(answer):
            await self.approvals.resolve(event.approval_id, True, "approved at the terminal", by="terminal")
        else:
            await self.approvals.resolve(
                event.approval_id, False, "the user did not approve this call", by="terminal"
            )

    def _say(self, text: str, *, end: str = "\n", always: bool = True) -> None:
        if self.quiet and not always:
            return
        with contextlib.suppress(OSError, ValueError):  # a closed stderr must not break the run
            print(text, end=end, file=self.out, flush=True)
