"""The Redis backend's Lua scripts for conversations: their locks, their indexes and eviction, and
the paged results kept beside them (pure text, no I/O). The key layout is the table at the top
of ``_redis_scripts.py``; ``_INDEX`` keeps the session indexes there, ``_PAGES`` a session's
pages (``_redis_pages.py``).
"""

from __future__ import annotations

_READ = """
-- A session's fields, the transcript only when it is not the version the caller has parsed:
-- {owner, created, updated, runs, messages, transcript or nil}
local function read(key, known_created, known_runs)
  local f = redis.call('HMGET', key, 'owner', 'created', 'updated', 'runs', 'messages')
  if f[2] == known_created and f[4] == known_runs then
    f[6] = false
  else
    f[6] = redis.call('HGET', key, 'transcript')
  end
  return f
end
"""

_PAGES = """
-- A session's paged results live in its hash (see the key table); ``pages`` and
-- ``pages:totals`` follow them across sessions.
local function pages_index(key)
  local raw = redis.call('HGET', key, 'pages')
  if raw then return cjson.decode(raw) end
  return {live = {}, gone = {}, bytes = 0}
end

local function page_member(handle, bytes, id)
  return handle .. ' ' .. bytes .. ' ' .. id
end

-- the session ``id`` (its hash ``key``) goes: its results leave ``pages`` and the sum
local function forget_pages(prefix, key, id)
  local raw = redis.call('HGET', key, 'pages')
  if not raw then return end
  for _, entry in ipairs(cjson.decode(raw).live) do
    redis.call('ZREM', prefix .. 'pages', page_member(entry[1], entry[2], id))
    redis.call('HINCRBY', prefix .. 'pages:totals', 'bytes', -entry[2])
  end
end
"""

_INDEX = (
    _PAGES
    + """
-- The session indexes (see the key table): every session id is in ``sessions`` and, with its
-- owner, in ``sessions:owner``, ``sessions:of:<owner>`` and the owner's count in
-- ``sessions:owners``.
local function forget(prefix, id)
  redis.call('ZREM', prefix .. 'sessions', id)
  local owner = redis.call('HGET', prefix .. 'sessions:owner', id)
  if owner then
    redis.call('HDEL', prefix .. 'sessions:owner', id)
    if redis.call('ZREM', prefix .. 'sessions:of:' .. owner, id) == 1 then
      if tonumber(redis.call('ZINCRBY', prefix .. 'sessions:owners', -1, owner)) <= 0 then
        redis.call('ZREM', prefix .. 'sessions:owners', owner)
      end
    end
  end
end

-- the session was used now (a session of an earlier build, not indexed yet, is taken in)
local function touch(prefix, id, owner, now_ms)
  redis.call('ZADD', prefix .. 'sessions', now_ms, id)
  if redis.call('HSETNX', prefix .. 'sessions:owner', id, owner) == 1 then
    redis.call('ZINCRBY', prefix .. 'sessions:owners', 1, owner)
  else
    owner = redis.call('HGET', prefix .. 'sessions:owner', id)
  end
  redis.call('ZADD', prefix .. 'sessions:of:' .. owner, now_ms, id)
end

-- once: index the sessions of a build that kept only ``sessions``
local function indexed(prefix)
  if redis.call('EXISTS', prefix .. 'sessions:indexed') == 1 then return end
  local all = redis.call('ZRANGE', prefix .. 'sessions', 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local owner = redis.call('HGET', prefix .. 'session:' .. all[i], 'owner')
    if owner then touch(prefix, all[i], owner, all[i + 1]) else forget(prefix, all[i]) end
  end
  redis.call('SET', prefix .. 'sessions:indexed', '1')
end

-- forget sessions unused for longer than ``ttl`` whose hash has expired (100 at most a call)
local function sweep(prefix, now_ms, ttl)
  if ttl <= 0 then return end
  local old = redis.call('ZRANGEBYSCORE', prefix .. 'sessions', '-inf', now_ms - ttl, 'LIMIT', 0, 100)
  for _, id in ipairs(old) do
    if redis.call('EXISTS', prefix .. 'session:' .. id) == 0 then forget(prefix, id) end
  end
end

-- the owner's least recently used idle session and its last use, or nil; gone ones met on the
-- way are forgotten
local function oldest_idle(prefix, owner)
  local of, start = prefix .. 'sessions:of:' .. owner, 0
  while true do
    local page = redis.call('ZRANGE', of, start, start + 15, 'WITHSCORES')
    if #page == 0 then return nil end
    local kept = 0
    for i = 1, #page, 2 do
      local id = page[i]
      if redis.call('EXISTS', prefix .. 'session:' .. id) == 0 then
        forget(prefix, id)
      elseif redis.call('EXISTS', prefix .. 'lock:' .. id) == 0 then
        return id, tonumber(page[i + 1])
      else
        kept = kept + 1
      end
    end
    start = start + kept
  end
end

local function drop(prefix, id)
  forget_pages(prefix, prefix .. 'session:' .. id, id)
  redis.call('DEL', prefix .. 'session:' .. id)
  forget(prefix, id)
end

-- room for one more session of ``owner``: first the owner's own least recently used idle ones
-- beyond its cap, then, beyond the total cap, the least recently used idle session of the owner
-- holding the most (between owners holding as many, the least recently used of all)
local function make_room(prefix, owner, max_owner, max_total)
  if max_owner > 0 then
    while redis.call('ZCARD', prefix .. 'sessions:of:' .. owner) > max_owner - 1 do
      local id = oldest_idle(prefix, owner)
      if not id then break end
      drop(prefix, id)
    end
  end
  if max_total > 0 then
    while redis.call('ZCARD', prefix .. 'sessions') > max_total - 1 do
      local best, most, since, start = nil, nil, nil, 0
      while true do
        local page = redis.call('ZREVRANGE', prefix .. 'sessions:owners', start, start + 15, 'WITHSCORES')
        if #page == 0 then break end
        local done = false
        for i = 1, #page, 2 do
          local count = tonumber(page[i + 1])
          if most and count < most then done = true break end
          local id, used = oldest_idle(prefix, page[i])
          if id and (not best or used < since) then best, most, since = id, count, used end
        end
        if done then break end
        start = start + 16
      end
      if not best then break end
      drop(prefix, best)
    end
  end
end
"""
)

_LET_GO = """
-- let_go(lock, locks of the holder's replica, session key, token, id, wake channel, idle ttl):
-- deletes the lock only when it holds the token (and gives the session its idle TTL again, 0 =
-- none), and tells the waiters; 1 when it did.
local function let_go(lock, locks, key, token, id, channel, ttl)
  redis.call('SREM', locks, id)
  if token ~= '' and redis.call('GET', lock) == token then
    redis.call('DEL', lock)
    if tonumber(ttl) > 0 then redis.call('PEXPIRE', key, ttl) end
    redis.call('PUBLISH', channel, '1')
    return 1
  end
  return 0
end
"""

_OPEN = (
    _READ
    + _INDEX
    + """
-- KEYS: session key, sessions index
-- ARGV: prefix, id, owner (JSON), now (s), now (ms), ttl (ms, 0 = none), max sessions,
--       max per owner, create (1: create when missing; 0: only open an existing one),
--       the created and runs of the transcript the caller has parsed ("" when none)
-- open() returns the session (``read``), touched; or an empty list when missing and not created.
local function open()
  local key, prefix, id, owner = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
  local ttl, max_total, max_owner = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  if redis.call('EXISTS', key) == 1 then
    if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
    touch(prefix, id, redis.call('HGET', key, 'owner'), ARGV[5])
    return read(key, ARGV[10], ARGV[11])
  end
  if ARGV[9] ~= '1' then return {} end
  indexed(prefix)
  forget(prefix, id)  -- an id whose session expired starts afresh, maybe for another owner
  sweep(prefix, tonumber(ARGV[5]), ttl)
  make_room(prefix, owner, max_owner, max_total)
  redis.call('HSET', key, 'owner', owner, 'created', ARGV[4], 'updated', ARGV[4], 'runs', 0,
             'messages', 0, 'transcript', '[]')
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  touch(prefix, id, owner, ARGV[5])
  return read(key, '', '')
end
"""
)

OPEN_SESSION = _OPEN + "return open()\n"

HOLD_SESSION = (
    _OPEN
    + """
-- KEYS: session key, sessions index, lock, locks of this replica
-- ARGV: open()'s, then the lock's token and lease (ms)
-- Takes the session's lock when it is free (or ours already: a retried call whose first answer
-- was lost) and opens the session in the same step: {1, the session (``read``)}; {0} when
-- another holds the lock.
if redis.call('SET', KEYS[3], ARGV[12], 'NX', 'PX', ARGV[13]) or redis.call('GET', KEYS[3]) == ARGV[12] then
  redis.call('SADD', KEYS[4], ARGV[2])
  local found, out = open(), {1}
  for i = 1, 6 do out[i + 1] = found[i] end
  return out
end
return {0}
"""
)

READ_SESSION = (
    _READ
    + """
-- KEYS: session key. ARGV: the created and runs of the transcript the caller has parsed
-- Returns the session (``read``), or an empty list when there is none.
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
return read(KEYS[1], ARGV[1], ARGV[2])
"""
)

SAVE_SESSION = (
    _INDEX
    + _LET_GO
    + """
-- KEYS: session key, sessions index, the session's lock, locks of this replica
-- ARGV: transcript (JSON), messages, now (s), now (ms), ttl (ms), id, lock token ("" = none), prefix,
--       release (1: the hold's last write, the lock goes with it), wake channel, idle ttl (ms)
-- Returns the new run count, nil when the session is gone (deleted or expired), or -1 when the
-- lock is no longer the token's (it lapsed: another run may have written; nothing is written).
local function done(reply)  -- whatever the save did, a last save lets the lock go
  if ARGV[9] == '1' then let_go(KEYS[3], KEYS[4], KEYS[1], ARGV[7], ARGV[6], ARGV[10], ARGV[11]) end
  return reply
end
if redis.call('EXISTS', KEYS[1]) == 0 then return done(false) end
if ARGV[7] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[7] then return done(-1) end
redis.call('HSET', KEYS[1], 'transcript', ARGV[1], 'messages', ARGV[2], 'updated', ARGV[3])
local runs = redis.call('HINCRBY', KEYS[1], 'runs', 1)
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
touch(ARGV[8], ARGV[6], redis.call('HGET', KEYS[1], 'owner'), ARGV[4])
return done(runs)
"""
)

DELETE_SESSION = (
    _INDEX
    + """
-- KEYS: session key. ARGV: prefix, id
-- Deletes the session (its paged results too) and its index entries: 1 when it was there.
forget_pages(ARGV[1], KEYS[1], ARGV[2])
local deleted = redis.call('DEL', KEYS[1])
forget(ARGV[1], ARGV[2])
return deleted
"""
)

FORGET_SESSIONS = (
    _INDEX
    + """
-- ARGV: prefix, then session ids whose hash has expired
-- Forgets their index entries (each only if its hash is still gone).
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. 'session:' .. ARGV[i]) == 0 then forget(ARGV[1], ARGV[i]) end
end
return 1
"""
)

RENEW = """
-- KEYS: lock, session key. ARGV: token, lease (ms), session ttl (ms, 0 = none)
-- Returns 1 while the lock is still ours (renewed), 0 when it was lost.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return 1
"""

RELEASE = _LET_GO + "return let_go(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4])\n"
"""KEYS: lock, locks of the holder's replica, session key. ARGV: token, session id, wake channel,
the session's idle TTL (ms, 0 = none)."""

BREAK = """
-- KEYS: lock. ARGV: the dead replica's token prefix ("<replica>:"), wake channel
-- Deletes the lock only when a run of that replica holds it (recovery, or a waiter that found
-- the holder dead), and tells the waiters.
local token = redis.call('GET', KEYS[1])
if token and string.sub(token, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
"""
