"""The Redis backend's key names and its Lua scripts for approvals and runs (pure text: no I/O
here); those of conversations are in ``_redis_session_scripts.py``.

Every read-check-write that must not interleave with another replica's is one script, which
Redis runs atomically. Key layout, under a prefix (``mcp-agent:`` by default):

==============================  ================================================================
``session:<id>``                hash: ``owner`` (JSON), ``created``, ``updated``, ``runs``,
                                ``messages``, ``transcript`` (JSON); expires when idle (TTL;
                                while held, one lease later, renewed with the lock). Also its
                                paged results (``_redis_pages``), which so go with it:
                                ``pages`` (JSON: the results kept, least recently used first,
                                with their sizes; the handles evicted), ``p:<handle>`` (a
                                result: JSON; ``""`` once evicted), ``p:<handle>:<n>`` (page n:
                                ``<start>:`` and its UTF-8 text)
``sessions``                    sorted set: session id → last use (ms), for listing and eviction
``sessions:owner``              hash: session id → its owner (JSON), to find a session's entries
                                below once its hash has expired
``sessions:of:<owner>``         sorted set: the owner's (JSON) session ids → last use (ms)
``sessions:owners``             sorted set: owner (JSON) → how many sessions it holds
``sessions:indexed``            set once the three keys above cover every session (sessions of
                                a build before them are indexed by the first that needs them)
``lock:<id>``                   the session's lease: ``<replica>:<random>``, with a PX expiry
``locks:<replica>``             set: the session locks a replica holds (for ``recover``)
``approval:<id>``               hash: ``record`` (JSON), ``replica``, ``caller`` (when it has
                                one), ``decision`` (once decided)
``approvals:pending``           sorted set: pending approval id → created (its ZCARD is what
                                ``approvals.maxPending`` caps)
``approvals:decided``           sorted set: decided approval id → decided at (for retention)
``approvals:of:<replica>``      set: the pending approvals a replica's runs wait on
``approvals:caller:<name>``     set: a caller's pending approvals (what its share caps); added
                                to by ``ADD_APPROVAL``, removed from by ``DECIDE`` (the one
                                way out of pending: answers, timeouts, withdrawals, recovery)
``run:<id>``                    the run record (JSON)
``pages``                       sorted set: ``<handle> <size> <session id>`` → last use (the
                                logical clock below), for the total cap across sessions
``pages:totals``                hash: ``bytes`` (the sizes in ``pages`` summed), ``clock``
``runs``                        sorted set: run id → started
``runs:ended``                  sorted set: finished run id → ended (for retention by age)
``runs:live``                   set: runs in flight (never dropped by retention)
``runs:of:<replica>``           set: the runs in flight on a replica
``replica:<id>``                the replica's liveness lease (JSON: host, pid, started), PX expiry
``replicas``                    hash: replica → what process it is (JSON), kept beyond its lease
                                until it is recovered (or closed cleanly)
``recovering:<id>``             who recovers a dead replica now (so only one does)
``wake:lock:<id>``              channel: the session's lock was released
``wake:approval:<id>``          channel: the approval was decided
``events``                      channel: run events of every replica (``/api/v1/events`` fan-out)
``events:listeners``            channel: ``+<replica>`` (it has ``/api/v1/events`` listeners) and
                                ``?<replica>`` (it started: who listens?)
==============================  ================================================================

Scripts name only their main keys in ``KEYS``; the session indexes and eviction in the session
scripts (``_redis_session_scripts``) and the retention in ``RETAIN`` touch further keys under the prefix, which a single
Redis (not a Redis Cluster) allows.

A session's hash expires by itself (its TTL); the indexes learn it lazily: opening a new session
first forgets up to 100 sessions unused for longer than the TTL whose hash is gone, and the
eviction walks forget the gone ones they meet. So making room for a new session looks at the
owner's oldest sessions (and the owners holding the most), never at every session. A session
dropped or deleted by a script takes its paged results out of ``pages`` and ``pages:totals``;
one that expired leaves them there until the total cap reaches them (they are the least
recently used by then) and finds their session gone.
"""

from __future__ import annotations

DEFAULT_PREFIX = "mcp-agent:"


class Keys:
    """Key and channel names under one prefix."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix
        self.sessions = f"{prefix}sessions"
        self.pending = f"{prefix}approvals:pending"
        self.decided_index = f"{prefix}approvals:decided"
        self.runs = f"{prefix}runs"
        self.ended = f"{prefix}runs:ended"
        self.live = f"{prefix}runs:live"
        self.replicas = f"{prefix}replicas"
        self.pages = f"{prefix}pages"
        self.page_totals = f"{prefix}pages:totals"
        self.events = f"{prefix}events"
        self.listeners = f"{prefix}events:listeners"

    def session(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    def lock(self, session_id: str) -> str:
        return f"{self.prefix}lock:{session_id}"

    def locks_of(self, replica: str) -> str:
        return f"{self.prefix}locks:{replica}"

    def approval(self, approval_id: str) -> str:
        return f"{self.prefix}approval:{approval_id}"

    def approvals_of(self, replica: str) -> str:
        return f"{self.prefix}approvals:of:{replica}"

    def approvals_of_caller(self, caller: str) -> str:
        return f"{self.prefix}approvals:caller:{caller}"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}"

    def runs_of(self, replica: str) -> str:
        return f"{self.prefix}runs:of:{replica}"

    def replica(self, replica: str) -> str:
        return f"{self.prefix}replica:{replica}"

    def recovering(self, replica: str) -> str:
        return f"{self.prefix}recovering:{replica}"

    def lock_released(self, session_id: str) -> str:
        return f"{self.prefix}wake:lock:{session_id}"

    def decided(self, approval_id: str) -> str:
        return f"{self.prefix}wake:approval:{approval_id}"


ADD_APPROVAL = """
-- KEYS: approval key, pending index, approvals of its replica[, its caller's pending set]
-- ARGV: record (JSON), replica, id, created (s), caller ("" when none), max pending, max per
--       caller (0 = no cap)
-- Adds a pending approval when there is room, in the step that counts: {1, 0}. Else nothing
-- is stored, and the reply names the cap that is full: {0, pending in all} or {-1, the caller's}.
-- Before it refuses a caller, it drops from the caller's set what is no longer pending (a
-- decision written by a version without these sets), so that a share never fills with ghosts.
local pending, mine = KEYS[2], KEYS[4]
local max_pending, max_mine = tonumber(ARGV[6]), tonumber(ARGV[7])
if max_pending > 0 then
  local waiting = redis.call('ZCARD', pending)
  if waiting >= max_pending then return {0, waiting} end
end
if mine and max_mine > 0 and redis.call('SCARD', mine) >= max_mine then
  for _, id in ipairs(redis.call('SMEMBERS', mine)) do
    if not redis.call('ZSCORE', pending, id) then redis.call('SREM', mine, id) end
  end
  local count = redis.call('SCARD', mine)
  if count >= max_mine then return {-1, count} end
end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'replica', ARGV[2])
redis.call('ZADD', pending, ARGV[4], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[3])
if mine then
  redis.call('HSET', KEYS[1], 'caller', ARGV[5])
  redis.call('SADD', mine, ARGV[3])
end
return {1, 0}
"""

DECIDE = """
-- KEYS: approval key, pending index, decided index
-- ARGV: decision (JSON), decided at (s), id, wake channel, approvals-of prefix, caller's set prefix
-- Exactly one decider wins: 0 for an unknown or already decided approval. The approval leaves
-- the pending index and its replica's and caller's sets in the same step.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[1], 'decision') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'decision', ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[3])
local replica, caller = unpack(redis.call('HMGET', KEYS[1], 'replica', 'caller'))
if replica then redis.call('SREM', ARGV[5] .. replica, ARGV[3]) end
if caller then redis.call('SREM', ARGV[6] .. caller, ARGV[3]) end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], '1')
return 1
"""

BEGIN_RUN = """
-- KEYS: run key, runs index, live set, runs of the replica
-- ARGV: record (JSON), started (s), id
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[3])
redis.call('SADD', KEYS[4], ARGV[3])
return 1
"""

END_RUN = """
-- KEYS: run key, runs index, ended index, live set, runs of the replica
-- ARGV: record (JSON), started (s), ended (s), id
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
redis.call('SREM', KEYS[4], ARGV[4])
redis.call('SREM', KEYS[5], ARGV[4])
return 1
"""

RETAIN = """
-- KEYS: runs index, live set, ended index, decided approvals index
-- ARGV: prefix, max runs (0 = no cap), cutoff (s; -1 = no age limit)
-- Drops finished run records that ended before the cutoff and the oldest finished ones beyond
-- the cap (runs in flight are never dropped, nor counted), and approvals decided before the
-- cutoff; at most 1000 of each a call, so that one call stays short. Returns how many runs went.
local runs, live, ended, decided, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local max_runs, cutoff, removed = tonumber(ARGV[2]), tonumber(ARGV[3]), 0
local function drop(id)
  redis.call('DEL', prefix .. 'run:' .. id)
  redis.call('ZREM', runs, id)
  redis.call('ZREM', ended, id)
  removed = removed + 1
end
if cutoff >= 0 then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', ended, '-inf', '(' .. ARGV[3], 'LIMIT', 0, 1000)) do
    if redis.call('SISMEMBER', live, id) == 0 then drop(id) end
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', decided, '-inf', '(' .. ARGV[3], 'LIMIT', 0, 1000)) do
    redis.call('DEL', prefix .. 'approval:' .. id)
    redis.call('ZREM', decided, id)
  end
end
if max_runs > 0 then
  local excess = redis.call('ZCARD', runs) - redis.call('SCARD', live) - max_runs
  if excess > 0 then
    local span = math.min(excess + redis.call('SCARD', live), 1000)
    for _, id in ipairs(redis.call('ZRANGE', runs, 0, span - 1)) do
      if excess <= 0 then break end
      if redis.call('SISMEMBER', live, id) == 0 then
        drop(id)
        excess = excess - 1
      end
    end
  end
end
return removed
"""
