"""Paged tool results: a result longer than ``maxResultChars`` is kept and read page by page.

Instead of cutting a long result (and losing the rest), the dispatcher hands it to ``RunPages``:
the model gets the first page, the total size, the page count and a handle, with a note that
says how to read on; the ``read_result(handle, page)`` tool returns page N. The tool is offered
only while the run can read a handle (one of its own, one of its session's, or one its history
mentions, so an expired one is answered "expired" rather than "unknown tool").

- **Pages** (``page_starts``) hold at most ``maxResultChars`` characters each. A page ends after
  the last line break in the second half of its window, else at the window's end, stepped back
  so that a combining mark, a variation selector or a zero-width joiner stays with its base
  character. Python strings index code points, so a page never splits one. Only the result's
  text is paged (the text the model reads: text parts joined, media summarised); images a tool
  returned ride along whole on the first page's message, as before.
- **Lifetime.** A handle belongs to its run or, when the run has a session, to the session (the
  next query on the session can read pages its history refers to). A run without a session
  releases its handles when it ends. Everything lives in one ``PageStore`` per ``Agent``, in
  memory: pages do not outlive the process, nor a session store written to disk.
- **Bounds.** ``limits.maxPagedBytes`` caps what one run (or session) holds: its least recently
  read results go first, and a single result bigger than the cap is kept up to the cap (the
  note says how much was dropped). ``limits.maxPagedBytesTotal`` caps the store (the
  configured value, read when the Agent starts): least recently used first, across runs and
  sessions. Sizes are the strings' memory (``sys.getsizeof``). An evicted handle is remembered
  (the last ``TOMBSTONES``) so that reading it says it expired; any failure to read is an
  error *result* that lists the results and pages that can be read, never an exception.
- **Naming.** The tool is ``read_result``; when a server tool has that exposed name (possible
  with ``toolPrefix: ""``), the paging tool takes the first free name of ``read_result_page``,
  ``read_result_2``, ... and a warning is logged, so neither shadows the other silently.
"""

from __future__ import annotations

import logging
import re
import secrets
import sys
import unicodedata
from array import array
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import Message, ToolResult, ToolSpec

logger = logging.getLogger(__name__)

PAGE_TOOL = "read_result"
"""The paging tool's name, unless a server tool already has it."""
TOMBSTONES = 4096
"""How many evicted handles are remembered, to answer "expired" rather than "unknown"."""
_HANDLE = re.compile(r"paged result (r[0-9a-f]{8})\b")
_JOINERS = frozenset("\u200c\u200d\ufe0e\ufe0f")
_MAX_STEP_BACK = 16


# --------------------------------------------------------------------------------------------
# pages: pure


def page_starts(text: str, page_chars: int) -> tuple[int, ...]:
    """The offsets where the pages of ``text`` start (the first is 0); each page has at most
    ``page_chars`` characters (``page_chars`` > 0)."""
    if page_chars <= 0:
        raise ValueError("page_chars must be positive")
    starts = [0]
    start, size = 0, len(text)
    while size - start > page_chars:
        end = start + page_chars
        newline = text.rfind("\n", start + page_chars // 2, end)
        end = newline + 1 if newline >= 0 else _clean_cut(text, start, end)
        starts.append(end)
        start = end
    return tuple(starts)


def _clean_cut(text: str, start: int, end: int) -> int:
    """``end`` stepped back (a little, never to ``start``) so that the next page does not begin
    with a combining mark, a variation selector or a zero-width joiner."""
    cut = end
    while _clings(text[cut], text[cut - 1]):
        cut -= 1
        if cut <= start + 1 or end - cut >= _MAX_STEP_BACK:
            return end  # no clean place nearby: cut at the window's end (still between code points)
    return cut


def _clings(char: str, before: str) -> bool:
    """Whether ``char`` belongs to the character before it (or ``before`` joins the next)."""
    return char in _JOINERS or before in _JOINERS or unicodedata.combining(char) != 0


# --------------------------------------------------------------------------------------------
# the store: process-wide, bounded


@dataclass
class PagedText:
    """One paged result in the store.

    Attributes:
        handle: its handle (``r`` and eight hex digits).
        scope: the run or session that may read it.
        tool: the tool that produced it.
        text: the text kept (all of it, unless a byte cap cut its tail).
        starts: where each page starts in ``text`` (8 bytes a page).
        total_chars: the length of the whole result, as the tool returned it.
        size: the memory ``text`` and ``starts`` take, in bytes.
    """

    handle: str
    scope: str
    tool: str
    text: str
    starts: array[int]
    total_chars: int
    size: int

    @property
    def pages(self) -> int:
        return len(self.starts)

    def page(self, number: int) -> str:
        """Page ``number`` (1-based, valid)."""
        end = self.starts[number] if number < len(self.starts) else len(self.text)
        return self.text[self.starts[number - 1] : end]

    def span(self, number: int) -> tuple[int, int]:
        end = self.starts[number] if number < len(self.starts) else len(self.text)
        return self.starts[number - 1], end


class PageStore:
    """Paged results of many runs and sessions, bounded by bytes, least recently used out first.

    Synchronous and never awaiting, so concurrent runs on one event loop need no lock.

    Args:
        max_bytes: the most bytes kept in all (0 = no cap): ``limits.maxPagedBytesTotal``.
    """

    def __init__(self, max_bytes: int = 64_000_000) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, PagedText] = OrderedDict()  # least recently used first
        self._scope_bytes: dict[str, int] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()  # handle -> its scope

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, scope: str, tool: str, text: str, page_chars: int, max_scope_bytes: int = 0) -> PagedText:
        """Keep ``text`` for ``scope`` and return its entry; older entries go to make room."""
        total = len(text)
        caps = [cap for cap in (max_scope_bytes, self.max_bytes) if cap]
        if caps and sys.getsizeof(text) + 16 * (total // page_chars + 1) > min(caps):  # keep what fits
            overhead = sys.getsizeof(text[:0]) + sys.getsizeof(array("q")) + 8
            width = max(1, (sys.getsizeof(text) - sys.getsizeof(text[:0])) // max(1, total))  # uniform
            # pages are at least half a page long: at most 16 bytes of page offsets per page_chars
            text = text[: max(0, int((min(caps) - overhead) / (width + 16 / page_chars)))]
        handle = self._new_handle()
        starts = array("q", page_starts(text, page_chars))
        size = sys.getsizeof(text) + sys.getsizeof(starts)
        entry = PagedText(handle, scope, tool, text, starts, total, size)
        self._make_room(scope, entry.size, max_scope_bytes)
        self._entries[handle] = entry
        self.bytes += entry.size
        self._scope_bytes[scope] = self._scope_bytes.get(scope, 0) + entry.size
        return entry

    def get(self, handle: str, scope: str) -> PagedText | None:
        """The entry of ``handle`` if ``scope`` may read it (and it is still kept); marks it used."""
        entry = self._entries.get(handle)
        if entry is None or entry.scope != scope:
            return None
        self._entries.move_to_end(handle)
        return entry

    def expired(self, handle: str, scope: str) -> bool:
        """Whether ``handle`` was ``scope``'s and has been evicted."""
        return self._gone.get(handle) == scope

    def entries(self, scope: str) -> list[PagedText]:
        """``scope``'s entries, oldest first."""
        return [entry for entry in self._entries.values() if entry.scope == scope]

    def release(self, scope: str) -> None:
        """Forget every entry of ``scope`` (a run without a session, at its end)."""
        for entry in self.entries(scope):
            self._drop(entry.handle, remember=False)
        self._scope_bytes.pop(scope, None)

    def _new_handle(self) -> str:
        while True:
            handle = "r" + secrets.token_hex(4)
            if handle not in self._entries and handle not in self._gone:
                return handle

    def _make_room(self, scope: str, size: int, max_scope_bytes: int) -> None:
        if max_scope_bytes:
            for entry in self.entries(scope):
                if self._scope_bytes.get(scope, 0) + size <= max_scope_bytes:
                    break
                self._drop(entry.handle)
        while self.max_bytes and self._entries and self.bytes + size > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, handle: str, *, remember: bool = True) -> None:
        entry = self._entries.pop(handle)
        self.bytes -= entry.size
        self._scope_bytes[entry.scope] = self._scope_bytes.get(entry.scope, 0) - entry.size
        if remember:
            logger.debug("paged result %s of %s evicted (%d bytes)", handle, entry.scope, entry.size)
            self._gone[handle] = entry.scope
            while len(self._gone) > TOMBSTONES:
                self._gone.popitem(last=False)


# --------------------------------------------------------------------------------------------
# one run's view


@dataclass(frozen=True)
class Paged:
    """A long result as the model first sees it.

    Attributes:
        text: the first page and the note.
        handle: the handle to read on with.
        total_chars: the whole result's length.
        pages: how many pages can be read.
    """

    text: str
    handle: str
    total_chars: int
    pages: int


class RunPages:
    """What one run can page and read: its own results and its session's.

    Args:
        store: the store shared by the Agent's runs.
        scope: ``session:<id>`` for a run with a session, else ``run:<id>``.
        page_chars: the page size (``maxResultChars``).
        max_scope_bytes: ``limits.maxPagedBytes``.
        history: the messages before this run; handles its tool results mention can be asked for.
    """

    def __init__(
        self,
        store: PageStore,
        scope: str,
        page_chars: int,
        max_scope_bytes: int = 0,
        history: Sequence[Message] = (),
    ) -> None:
        self.store = store
        self.scope = scope
        self.page_chars = page_chars
        self.max_scope_bytes = max_scope_bytes
        self.mentioned = set(mentioned_handles(history))
        self.name = PAGE_TOOL

    @classmethod
    def for_run(
        cls,
        store: PageStore,
        *,
        run_id: str,
        session_id: str | None,
        page_chars: int,
        max_scope_bytes: int = 0,
        history: Sequence[Message] = (),
    ) -> RunPages:
        scope = f"session:{session_id}" if session_id else f"run:{run_id}"
        return cls(store, scope, page_chars, max_scope_bytes, history)

    def close(self) -> None:
        """The run ended: a run without a session frees its pages."""
        if self.scope.startswith("run:"):
            self.store.release(self.scope)

    # offering the tool

    def spec(self, taken: Collection[str]) -> ToolSpec | None:
        """The paging tool's spec while there is something to read, else None.

        ``taken``: the names of the other tools on offer; the paging tool avoids them.
        """
        name = free_name(taken)  # chosen every round, before any result is paged with its name
        if name != self.name:
            logger.warning("a tool named %r is on offer: paged results are read with %r", PAGE_TOOL, name)
            self.name = name
        if not (self.mentioned or self.store.entries(self.scope)):
            return None
        return ToolSpec(
            name=name,
            description=(
                "Read one page of a long tool result that was paged. Give the result's handle "
                "and the page number (1 is the first page), as the result's note says."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "handle": {"type": "string", "description": "the handle the note gave, like r1a2b3c4d"},
                    "page": {"type": "integer", "description": "the page number, from 1"},
                },
                "required": ["handle", "page"],
            },
            annotations={"readOnlyHint": True},
        )

    def is_tool(self, name: str) -> bool:
        return name == self.name

    # paging

    def page(self, tool: str, text: str) -> Paged:
        """Keep ``text`` (longer than a page) and return its first page with the note."""
        entry = self.store.put(self.scope, tool, text, self.page_chars, self.max_scope_bytes)
        self.mentioned.add(entry.handle)
        first = entry.page(1)
        note = (
            f"[... paged result {entry.handle}: {entry.total_chars} characters in {entry.pages} "
            f"pages; this is page 1"
        )
        if entry.pages > 1:
            note += f". Read on with {self.name}(handle=\"{entry.handle}\", page=2), up to page {entry.pages}"
        dropped = entry.total_chars - len(entry.text)
        if dropped:
            note += f". The last {dropped} characters were not kept (limits.maxPagedBytes)"
        return Paged(f"{first}\n{note}]", entry.handle, entry.total_chars, entry.pages)

    # reading

    def read(self, arguments: Mapping[str, Any]) -> ToolResult:
        """Answer one ``read_result`` call: the page, or an error that says what can be read."""
        handle = str(arguments.get("handle", "")).strip().strip("\"'")
        page = arguments.get("page")
        if isinstance(page, float) and page.is_integer():
            page = int(page)
        entry = self.store.get(handle, self.scope)
        if entry is None:
            if self.store.expired(handle, self.scope) or handle in self.mentioned:
                why = (
                    f"error: paged result {handle} has expired (paged results are kept in memory within "
                    "limits.maxPagedBytes and limits.maxPagedBytesTotal, and not across restarts). "
                    "Call the tool that produced it again if you still need it."
                )
            else:
                why = f"error: there is no paged result {handle!r} in this conversation."
            return ToolResult(f"{why} {self.readable()}", is_error=True)
        if not isinstance(page, int) or isinstance(page, bool) or not 1 <= page <= entry.pages:
            return ToolResult(
                f"error: paged result {handle} has {entry.pages} pages; there is no page {page!r}. "
                f"Read pages 1-{entry.pages}.",
                is_error=True,
            )
        start, end = entry.span(page)
        head = f"[paged result {handle} ({entry.tool}), page {page} of {entry.pages}: characters {start}-{end - 1}"
        head += f" of {entry.total_chars}]"
        body = f"{head}\n{entry.page(page)}"
        if page < entry.pages:
            body += f"\n[... read on with {self.name}(handle=\"{handle}\", page={page + 1})]"
        elif len(entry.text) < entry.total_chars:
            body += f"\n[... the last {entry.total_chars - len(entry.text)} characters were not kept]"
        return ToolResult(body)

    def readable(self) -> str:
        """The results this run can read, as a sentence."""
        entries = self.store.entries(self.scope)
        if not entries:
            return "No paged results can be read now."
        listed = ", ".join(f"{e.handle} from {e.tool} (pages 1-{e.pages})" for e in entries[-10:])
        return f"Results you can read: {listed}."


def free_name(taken: Collection[str]) -> str:
    """``read_result``, or the first of ``read_result_page``, ``read_result_2``, ... not taken."""
    for name in _candidates():
        if name not in taken:
            return name
    raise AssertionError("unreachable")  # pragma: no cover


def _candidates() -> Iterable[str]:
    yield PAGE_TOOL
    yield f"{PAGE_TOOL}_page"
    n = 2
    while True:
        yield f"{PAGE_TOOL}_{n}"
        n += 1


def mentioned_handles(messages: Iterable[Message]) -> list[str]:
    """The handles that paged results in ``messages`` (tool messages) announce."""
    found: list[str] = []
    for message in messages:
        if message.role == "tool" and "paged result r" in message.content:
            found.extend(_HANDLE.findall(message.content))
    return found
