"""Paged results in this process's memory: ``MemoryPageStore``, the memory backend's ``PageStore``
and the store an Agent keeps for runs without a session.

Results sit in one ``OrderedDict`` in least recently used order (the total cap evicts from its
head) and, per scope, in another (the scope's cap evicts from its head), so making room costs
what is evicted, never a walk over every result. An evicted handle is remembered (the last
``TOMBSTONES``) so that reading it answers that it expired. Nothing here awaits: concurrent runs
on one event loop need no lock.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .records import Page, PageInfo, new_page_handle, paged_size

logger = logging.getLogger(__name__)

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
