"""The Redis store's paged results: ``RedisPageStore``, and its scripts.

A session's results are fields of the session's own hash (``backend.py`` draws them), so they
expire with it, go when it is deleted or evicted, and need no TTL of their own: ``p:<handle>`` (the
result), ``p:<handle>:<n>`` (page n, its start offset and its UTF-8 text: a read moves that page
only), and ``pages`` (the session's results in least recently used order, with their sizes, and
the last ``EXPIRED_KEPT`` handles evicted). Across sessions, the sorted set ``pages`` orders every
result by its last use (a logical clock in ``pages:totals``, which also keeps the sizes' sum), so
the total cap evicts from its head: what is evicted, never a walk over every result. A session
that expired by its TTL leaves its entries there until the head reaches them; they are dropped
then (their session is gone).

Each operation is one script, one round trip (a put whose random handle is taken in its session,
one time in four billion, tries again).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...exceptions import StateError
from ..records import EXPIRED_KEPT, Page, PageInfo, StateLimits, new_page_handle, paged_size
from .backend import Backend, text
from .sessions import _PAGES

_EVICT = (
    _PAGES
    + """
local function delete_fields(key, fields)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
  end
end

-- evict the result at ``position`` of the session's ``index`` (session ``id``, hash ``key``):
-- its pages go, its field becomes a tombstone (the last ``keep_gone`` are kept), it leaves the
-- global order and the sum; the caller saves ``index``
local function evict(prefix, key, id, index, position, keep_gone)
  local handle, bytes = index.live[position][1], index.live[position][2]
  table.remove(index.live, position)
  index.bytes = index.bytes - bytes
  local info = redis.call('HGET', key, 'p:' .. handle)
  if info and info ~= '' then
    local fields = {}
    for n = 1, cjson.decode(info).pages do fields[n] = 'p:' .. handle .. ':' .. n end
    delete_fields(key, fields)
    redis.call('HSET', key, 'p:' .. handle, '')
  end
  table.insert(index.gone, handle)
  while #index.gone > keep_gone do redis.call('HDEL', key, 'p:' .. table.remove(index.gone, 1)) end
  redis.call('ZREM', prefix .. 'pages', page_member(handle, bytes, id))
  redis.call('HINCRBY', prefix .. 'pages:totals', 'bytes', -bytes)
end

local function find(live, handle)
  for i, entry in ipairs(live) do
    if entry[1] == handle then return i end
  end
  return nil
end
"""
)

PUT_PAGES = (
    _EVICT
    + """
-- KEYS: session key
-- ARGV: prefix, session id, handle, tool, total chars, kept chars, size, max session bytes
--       (0 = none), max total bytes (0 = none), tombstones kept, then the pages ("<start>:<text>")
-- Returns 'kept', 'taken' (the handle is the session's already) or 'gone' (no such session).
local key, prefix, id, handle = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if redis.call('EXISTS', key) == 0 then return 'gone' end
if redis.call('HEXISTS', key, 'p:' .. handle) == 1 then return 'taken' end
local size, scope_cap, total_cap = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local keep_gone, totals = tonumber(ARGV[10]), prefix .. 'pages:totals'
local index = pages_index(key)
while scope_cap > 0 and #index.live > 0 and index.bytes + size > scope_cap do
  evict(prefix, key, id, index, 1, keep_gone)
end
while total_cap > 0 and tonumber(redis.call('HGET', totals, 'bytes') or '0') + size > total_cap do
  local oldest = redis.call('ZRANGE', prefix .. 'pages', 0, 0)[1]
  if not oldest then break end
  local victim, bytes, owner = string.match(oldest, '^(%S+) (%d+) (.+)$')
  local other, other_index = prefix .. 'session:' .. owner, index
  if owner ~= id then other_index = pages_index(other) end
  local position = find(other_index.live, victim)
  if position then
    evict(prefix, other, owner, other_index, position, keep_gone)
    if owner ~= id then redis.call('HSET', other, 'pages', cjson.encode(other_index)) end
  else  -- its session went by its TTL
    redis.call('ZREM', prefix .. 'pages', oldest)
    redis.call('HINCRBY', totals, 'bytes', -tonumber(bytes))
  end
end
local fields = {}
for i = 11, #ARGV do
  table.insert(fields, 'p:' .. handle .. ':' .. (i - 10))
  table.insert(fields, ARGV[i])
end
for i = 1, #fields, 1000 do
  redis.call('HSET', key, unpack(fields, i, math.min(i + 999, #fields)))
end
redis.call('HSET', key, 'p:' .. handle, cjson.encode(
  {tool = ARGV[4], pages = #ARGV - 10, total = tonumber(ARGV[5]), kept = tonumber(ARGV[6]), bytes = size}))
table.insert(index.live, {handle, size})
index.bytes = index.bytes + size
redis.call('HSET', key, 'pages', cjson.encode(index))
local clock = redis.call('HINCRBY', totals, 'clock', 1)
redis.call('ZADD', prefix .. 'pages', clock, page_member(handle, size, id))
redis.call('HINCRBY', totals, 'bytes', size)
return 'kept'
"""
)

READ_PAGE = (
    _EVICT
    + """
-- KEYS: session key. ARGV: prefix, session id, handle, page number
-- Returns {} for a handle the session never had, {""} for one evicted, else {the result (JSON),
-- the page or nil}; the result is used now.
local key, prefix, id, handle, n = KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local info = redis.call('HGET', key, 'p:' .. handle)
if not info then return {} end
if info == '' then return {''} end
local result = cjson.decode(info)
local page = false
if n >= 1 and n <= result.pages then page = redis.call('HGET', key, 'p:' .. handle .. ':' .. n) end
local index = pages_index(key)
local position = find(index.live, handle)
if position then
  table.insert(index.live, table.remove(index.live, position))
  redis.call('HSET', key, 'pages', cjson.encode(index))
end
local clock = redis.call('HINCRBY', prefix .. 'pages:totals', 'clock', 1)
redis.call('ZADD', prefix .. 'pages', clock, page_member(handle, result.bytes, id))
return {info, page}
"""
)

PAGE_ENTRIES = (
    _PAGES
    + """
-- KEYS: session key. Returns handle, result (JSON), ... of the results kept, least recently used first.
local out = {}
for _, entry in ipairs(pages_index(KEYS[1]).live) do
  table.insert(out, entry[1])
  table.insert(out, redis.call('HGET', KEYS[1], 'p:' .. entry[1]))
end
return out
"""
)

RELEASE_PAGES = (
    _EVICT
    + """
-- KEYS: session key. ARGV: prefix, session id
-- Forgets every paged result of the session, and its tombstones.
local index = pages_index(KEYS[1])
while #index.live > 0 do evict(ARGV[1], KEYS[1], ARGV[2], index, 1, 0) end
for _, handle in ipairs(index.gone) do redis.call('HDEL', KEYS[1], 'p:' .. handle) end
redis.call('HDEL', KEYS[1], 'pages')
return 1
"""
)


def _info(handle: str, raw: Any) -> PageInfo:
    data = json.loads(raw)
    return PageInfo(
        handle,
        str(data["tool"]),
        int(data["pages"]),
        int(data["total"]),
        int(data["kept"]),
        int(data["bytes"]),
    )


class RedisPageStore:
    """The ``PageStore`` of the Redis backend (see the module docstring)."""

    def __init__(self, backend: Backend, limits: StateLimits) -> None:
        self._backend = backend
        self._keys = backend.keys
        self.max_bytes = limits.max_paged_bytes_total
        client = backend.client
        self._put_script = client.register_script(PUT_PAGES)
        self._read_script = client.register_script(READ_PAGE)
        self._entries_script = client.register_script(PAGE_ENTRIES)
        self._release_script = client.register_script(RELEASE_PAGES)

    async def put(
        self, scope: str, tool: str, pages: Sequence[str], total_chars: int, *, max_scope_bytes: int = 0
    ) -> PageInfo | None:
        kept = tuple(pages)
        size = paged_size(kept)
        values, at = [], 0
        for page in kept:
            values.append(f"{at}:".encode() + page.encode("utf-8", "surrogatepass"))
            at += len(page)
        for _ in range(8):
            handle = new_page_handle()
            with self._backend.failures(f"keeping a paged result of session {scope!r}"):
                reply = text(
                    await self._put_script(
                        keys=[self._keys.session(scope)],
                        args=[
                            self._keys.prefix,
                            scope,
                            handle,
                            tool,
                            total_chars,
                            at,
                            size,
                            max_scope_bytes,
                            self.max_bytes,
                            EXPIRED_KEPT,
                            *values,
                        ],
                    )
                )
            if reply == "kept":
                return PageInfo(handle, tool, len(kept), total_chars, at, size)
            if reply == "gone":
                return None
        raise StateError(
            f"state.url {self._backend.shown_url}: no free handle for a paged result"
        )  # pragma: no cover

    async def read(self, scope: str, handle: str, number: int) -> Page | None:
        with self._backend.failures(f"reading a page of session {scope!r}"):
            reply = await self._read_script(
                keys=[self._keys.session(scope)], args=[self._keys.prefix, scope, handle, number]
            )
        if not reply:
            return None
        if not reply[0]:
            return Page(handle, number, None)
        info = _info(handle, reply[0])
        if reply[1] is None:
            return Page(handle, number, info)
        start, _, body = bytes(reply[1]).partition(b":")
        return Page(handle, number, info, int(start), body.decode("utf-8", "surrogatepass"))

    async def entries(self, scope: str) -> list[PageInfo]:
        with self._backend.failures(f"listing the paged results of session {scope!r}"):
            reply = await self._entries_script(keys=[self._keys.session(scope)])
        return [_info(text(reply[i]) or "", reply[i + 1]) for i in range(0, len(reply), 2)]

    async def release(self, scope: str) -> None:
        with self._backend.failures(f"releasing the paged results of session {scope!r}"):
            await self._release_script(keys=[self._keys.session(scope)], args=[self._keys.prefix, scope])
