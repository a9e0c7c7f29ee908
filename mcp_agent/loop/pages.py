"""Paged tool results: a result longer than ``maxResultChars`` is kept and read page by page.

Instead of cutting a long result (and losing the rest), the dispatcher hands it to ``RunPages``:
the model gets the first page, the total size, the page count and a handle, with a note that
says how to read on; the ``read_result(handle, page)`` tool returns page N. The tool is offered
only while the run can read a handle (one it paged, or one its history mentions, so an expired
one is answered "expired" rather than "unknown tool").

- **Pages** (``page_starts``, pure) hold at most ``maxResultChars`` characters each. A page ends
  after the last line break in the second half of its window, else at the window's end, stepped
  back so that a combining mark, a variation selector or a zero-width joiner stays with its base
  character. Python strings index code points, so a page never splits one. Only the result's
  text is paged (the text the model reads: text parts joined, media summarised); images a tool
  returned ride along whole on the first page's message.
- **Where they live.** The pages go to a ``PageStore`` (``state/base.py``) under a scope. A run
  with a session keeps them in the state, beside the session (``State.pages``: SQLite, Redis or
  memory): the next query on the session reads pages its history refers to, in this process or
  in any other sharing the store, and after a restart with a durable one; they go when the
  session is deleted or expires. A run without a session keeps them in the Agent's own
  in-memory store (no round trips) and releases them when it ends. Storing a page costs one
  round trip, reading one another (one script on Redis, one transaction on SQLite); a store that
  fails, or a session deleted meanwhile, makes the result cut instead, as ``pageResults: false``
  would.
- **Bounds.** ``limits.maxPagedBytes`` caps what one run (or session) holds: its least recently
  read results go first, and a single result bigger than the cap is kept up to the cap
  (``kept_pages``: whole pages, then part of one; the note says how much was dropped).
  ``limits.maxPagedBytesTotal`` caps each store (the configured value, read when the Agent and
  the state start): least recently used first, across runs or sessions. Sizes are the pages'
  UTF-8 bytes plus 16 a page (``state.records.paged_size``), on every backend. An evicted handle
  is remembered (a bounded number) so that reading it says it expired; any failure to read is an
  error *result* that lists the results and pages that can be read, never an exception.
- **Naming.** The tool is ``read_result``; when a server tool has that exposed name (possible
  with ``toolPrefix: ""``), the paging tool takes the first free name of ``read_result_page``,
  ``read_result_2``, ... and a warning is logged, so neither shadows the other silently.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._plural import counted
from .._redact import mask_secrets
from ..exceptions import StateError
from ..messages import Message, ToolResult, ToolSpec
from ..state.base import PageStore
from ..state.records import PAGE_OVERHEAD, paged_size

logger = logging.getLogger(__name__)

PAGE_TOOL = "read_result"
"""The paging tool's name, unless a server tool already has it."""
_HANDLE = re.compile(r"paged result (r[0-9a-f]{8})\b")
_HANDLE_ALONE = re.compile(r"r[0-9a-f]{8}")
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


def split_pages(text: str, page_chars: int) -> list[str]:
    """``text`` in pages (``page_starts``)."""
    starts = page_starts(text, page_chars)
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def kept_pages(pages: Sequence[str], max_bytes: int) -> list[str]:
    """The pages that fit in ``max_bytes`` (``paged_size``; 0 = no cap): whole pages from the
    first, then the part of the next one that fits. The first page is always kept (the model
    reads it at once)."""
    if not max_bytes or paged_size(pages) <= max_bytes:
        return list(pages)
    kept = [pages[0]]
    room = max_bytes - paged_size(kept)
    for page in pages[1:]:
        size = paged_size([page])
        if size > room:
            part = _prefix_within(page, room - PAGE_OVERHEAD)
            if part:
                kept.append(part)
            break
        kept.append(page)
        room -= size
    return kept


def _prefix_within(text: str, budget: int) -> str:
    """The longest start of ``text`` whose stored form (UTF-8, surrogates passed) fits ``budget``."""
    data = text.encode("utf-8", "surrogatepass")[: max(budget, 0)]
    for cut in range(len(data), max(len(data) - 4, -1), -1):  # a code point is at most 4 bytes
        try:
            return data[:cut].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            continue
    return ""  # pragma: no cover (a cut within 4 bytes of the end always decodes)


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
        store: where the pages go: the state's ``PageStore`` for a run with a session, the
            Agent's in-memory one for a run without.
        scope: the session id, or ``run:<id>`` for a run without a session.
        page_chars: the page size (``maxResultChars``).
        max_scope_bytes: ``limits.maxPagedBytes``.
        max_total_bytes: ``limits.maxPagedBytesTotal`` (a result is cut to fit it too).
        history: the messages before this run; handles its tool results mention can be asked for.
        release: forget the scope's results when the run ends (a run without a session).
    """

    def __init__(
        self,
        store: PageStore,
        scope: str,
        page_chars: int,
        max_scope_bytes: int = 0,
        history: Sequence[Message] = (),
        *,
        max_total_bytes: int = 0,
        release: bool = False,
    ) -> None:
        self.store = store
        self.scope = scope
        self.page_chars = page_chars
        self.max_scope_bytes = max_scope_bytes
        self.max_result_bytes = min((cap for cap in (max_scope_bytes, max_total_bytes) if cap), default=0)
        self.release = release
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
        max_total_bytes: int = 0,
        history: Sequence[Message] = (),
    ) -> RunPages:
        scope = session_id if session_id else f"run:{run_id}"
        return cls(
            store,
            scope,
            page_chars,
            max_scope_bytes,
            history,
            max_total_bytes=max_total_bytes,
            release=not session_id,
        )

    async def close(self) -> None:
        """The run ended: a run without a session frees its pages (never raises)."""
        if self.release:
            try:
                await self.store.release(self.scope)
            except StateError as exc:
                logger.warning("could not release the paged results of %s: %s", self.scope, exc)

    # offering the tool

    def spec(self, taken: Collection[str]) -> ToolSpec | None:
        """The paging tool's spec while there is something to read, else None.

        ``taken``: the names of the other tools on offer; the paging tool avoids them.
        """
        name = free_name(taken)  # chosen every round, before any result is paged with its name
        if name != self.name:
            logger.warning("a tool named %r is on offer: paged results are read with %r", PAGE_TOOL, name)
            self.name = name
        if not self.mentioned:
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

    async def page(self, tool: str, text: str) -> Paged | None:
        """Keep ``text`` (longer than a page) and return its first page with the note; None when
        it cannot be kept (the store failed, or the session is gone: the caller cuts it). The
        known secrets in ``text`` are masked first: the pages may be written to disk (the first
        page, which the model reads now, is masked as the rest)."""
        text = mask_secrets(text)
        kept = kept_pages(split_pages(text, self.page_chars), self.max_result_bytes)
        try:
            info = await self.store.put(
                self.scope, tool, kept, len(text), max_scope_bytes=self.max_scope_bytes
            )
        except StateError as exc:
            logger.warning("a long result of %s could not be kept for paging, so it is cut: %s", tool, exc)
            return None
        if info is None:
            logger.warning("a long result of %s is cut: its conversation %s is gone", tool, self.scope)
            return None
        self.mentioned.add(info.handle)
        note = (
            f"[... paged result {info.handle}: {counted(info.total_chars, 'character')} in "
            f"{counted(info.pages, 'page')}; this is page 1"
        )
        if info.pages > 1:
            note += f'. Read on with {self.name}(handle="{info.handle}", page=2), up to page {info.pages}'
        dropped = info.total_chars - info.kept_chars
        if dropped:
            note += f". The last {counted(dropped, 'character')} were not kept (limits.maxPagedBytes)"
        return Paged(f"{kept[0]}\n{note}]", info.handle, info.total_chars, info.pages)

    # reading

    async def read(self, arguments: Mapping[str, Any]) -> ToolResult:
        """Answer one ``read_result`` call: the page, or an error that says what can be read."""
        handle = str(arguments.get("handle", "")).strip().strip("\"'")
        page = arguments.get("page")
        if isinstance(page, float) and page.is_integer():
            page = int(page)
        number = page if isinstance(page, int) and not isinstance(page, bool) else 0
        try:
            found = (
                await self.store.read(self.scope, handle, number) if _HANDLE_ALONE.fullmatch(handle) else None
            )
        except StateError as exc:
            return ToolResult(f"error: paged result {handle} could not be read now ({exc}).", is_error=True)
        if found is None or found.result is None:
            if found is not None or handle in self.mentioned:
                why = (
                    f"error: paged result {handle} has expired (paged results are kept within "
                    "limits.maxPagedBytes and limits.maxPagedBytesTotal, a run's until it ends and a "
                    "conversation's while it lasts). Call the tool that produced it again if you still need it."
                )
            else:
                why = f"error: there is no paged result {handle!r} in this conversation."
            return ToolResult(f"{why} {await self.readable()}", is_error=True)
        result = found.result
        if found.text is None:
            return ToolResult(
                f"error: paged result {handle} has {counted(result.pages, 'page')}; there is no page {page!r}. "
                f"Read pages 1-{result.pages}.",
                is_error=True,
            )
        head = f"[paged result {handle} ({result.tool}), page {number} of {result.pages}: "
        head += f"characters {found.start}-{found.end - 1} of {result.total_chars}]"
        body = f"{head}\n{found.text}"
        if number < result.pages:
            body += f'\n[... read on with {self.name}(handle="{handle}", page={number + 1})]'
        elif result.kept_chars < result.total_chars:
            body += f"\n[... the last {counted(result.total_chars - result.kept_chars, 'character')} were not kept]"
        return ToolResult(body)

    async def readable(self) -> str:
        """The results this run can read, as a sentence."""
        try:
            entries = await self.store.entries(self.scope)
        except StateError as exc:
            return f"The results that can be read could not be listed ({exc})."
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
