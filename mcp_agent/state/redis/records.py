"""Approvals and run records in Redis, visible to every replica.

An approval is a hash (its record, the replica whose run waits on it, its caller, and once
decided the decision); the pending ones are also in a sorted set by creation time and in a set
per caller. ``add`` is one script that counts those (ZCARD, SCARD: no record is read) and adds,
so replicas adding at once never overshoot ``approvals.maxPending`` or a caller's share of it.
``decide`` is one script (exactly one decider wins, in every process) that takes the approval
out of the pending index and both sets, and publishes a wake-up on the approval's channel, so
``wait`` returns at once wherever the run waits. A decision is the only way out of pending (an
answer, a timeout, a withdrawal, recovery), so the counts do not drift; and before ``add``
refuses a caller it drops from the caller's set whatever is no longer pending (left there by a
version without these sets, during a rolling upgrade). Decided approvals are dropped with the
run records' age limit (by when they were decided), on retention.

A run record is one JSON string; a sorted set by start time lists them newest first, a set holds
those in flight (retention never drops them) and one per replica says which runs a dead replica
left unfinished (``State.recover``). Retention is one script, applied on ``State.beat`` and
after every ``RETAIN_EVERY`` ends of this process. An end that could not be written (Redis away)
raises ``StateError`` as any failure does, and is also kept (up to ``MAX_UNWRITTEN``) and written
on a later ``beat`` (``flush``): a run must not stay "in flight" in the records of a replica that
lives on.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...exceptions import ApprovalsFull, StateError
from ..records import Approval, Decision, RunRecord, StateLimits
from .backend import Backend, dumps
from .backend import text as as_text

MAX_UNWRITTEN = 1000
"""Ends kept for a later ``flush`` while Redis is away; beyond, the oldest are given up."""
RETAIN_EVERY = 50
"""Retention runs after this many ``end`` calls of one process (and on every ``beat``)."""
_PAGE = 200


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


class RedisApprovalStore:
    """The ``ApprovalStore`` of the Redis backend (see the module docstring)."""

    def __init__(self, backend: Backend, limits: StateLimits, replica: str) -> None:
        self._backend = backend
        self._keys = backend.keys
        self.limits = limits
        self.replica = replica
        self._add_script = backend.client.register_script(ADD_APPROVAL)
        self._decide_script = backend.client.register_script(DECIDE)

    async def add(self, approval: Approval, *, max_pending: int = 0, max_per_caller: int = 0) -> None:
        keys = self._keys
        replica = approval.replica or self.replica
        record = dumps({k: v for k, v in approval.to_record().items() if k not in ("decision", "replica")})
        if approval.decision is not None:  # on record only: never counted, never refused
            with self._backend.failures(f"recording approval {approval.id!r}"):
                pipe = self._backend.client.pipeline(transaction=True)
                pipe.hset(keys.approval(approval.id), mapping={"record": record, "replica": replica})
                pipe.hset(keys.approval(approval.id), "decision", dumps(approval.decision.to_dict()))
                pipe.zadd(keys.decided_index, {approval.id: approval.decision.at})
                await pipe.execute()
            return
        caller = approval.caller
        mine = [keys.approvals_of_caller(caller)] if caller is not None else []
        with self._backend.failures(f"recording approval {approval.id!r}"):
            added, waiting = await self._add_script(
                keys=[keys.approval(approval.id), keys.pending, keys.approvals_of(replica), *mine],
                args=[
                    record,
                    replica,
                    approval.id,
                    repr(approval.created),
                    caller or "",
                    max_pending,
                    max_per_caller,
                ],
            )
        if added == 0:
            raise ApprovalsFull(int(waiting), max_pending)
        if added == -1:
            raise ApprovalsFull(int(waiting), max_per_caller, caller)

    async def decide(self, approval_id: str, decision: Decision) -> bool:
        keys = self._keys
        with self._backend.failures(f"deciding approval {approval_id!r}"):
            won = await self._decide_script(
                keys=[keys.approval(approval_id), keys.pending, keys.decided_index],
                args=[
                    dumps(decision.to_dict()),
                    repr(decision.at),
                    approval_id,
                    keys.decided(approval_id),
                    keys.approvals_of(""),
                    keys.approvals_of_caller(""),
                ],
            )
        return bool(won == 1)

    async def _decision(self, approval_id: str) -> Decision | None:
        with self._backend.failures(f"reading approval {approval_id!r}"):
            known, decision = await self._backend.client.hmget(
                self._keys.approval(approval_id), ["record", "decision"]
            )
        if known is None:
            raise KeyError(f"unknown approval {approval_id!r}")
        return Decision.from_dict(json.loads(decision)) if decision is not None else None

    async def wait(self, approval_id: str) -> Decision:
        decision = await self._decision(approval_id)
        if decision is not None:
            return decision
        return await self._backend.wait_until(
            self._keys.decided(approval_id),
            lambda: self._decision(approval_id),
            what=f"waiting for approval {approval_id!r}",
        )

    async def get(self, approval_id: str) -> Approval | None:
        with self._backend.failures(f"reading approval {approval_id!r}"):
            fields = await self._backend.client.hmget(
                self._keys.approval(approval_id), ["record", "replica", "decision"]
            )
        return _approval(*fields)

    async def pending(self) -> list[Approval]:
        keys, client = self._keys, self._backend.client
        with self._backend.failures("listing pending approvals"):
            ids = [as_text(i) or "" for i in await client.zrange(keys.pending, 0, -1)]
            pipe = client.pipeline(transaction=False)
            for approval_id in ids:
                pipe.hmget(keys.approval(approval_id), ["record", "replica", "decision"])
            replies = await pipe.execute()
        found = [_approval(*fields) for fields in replies]
        return [approval for approval in found if approval is not None and approval.pending]


def _approval(record: Any, replica: Any, decision: Any) -> Approval | None:
    if record is None:
        return None
    data = json.loads(record)
    data["replica"] = as_text(replica) or ""
    if decision is not None:
        data["decision"] = json.loads(decision)
    return Approval.from_record(data)


class RedisRunStore:
    """The ``RunStore`` of the Redis backend (see the module docstring)."""

    def __init__(self, backend: Backend, limits: StateLimits, replica: str) -> None:
        self._backend = backend
        self._keys = backend.keys
        self.limits = limits
        self.replica = replica
        self._retain_script = backend.client.register_script(RETAIN)
        self._begin_script = backend.client.register_script(BEGIN_RUN)
        self._end_script = backend.client.register_script(END_RUN)
        self._ends = 0
        self._unwritten: dict[str, RunRecord] = {}

    async def begin(self, record: RunRecord) -> None:
        keys = self._keys
        with self._backend.failures(f"recording run {record.id!r}"):
            await self._begin_script(  # one script: one round trip, one reply
                keys=[
                    keys.run(record.id),
                    keys.runs,
                    keys.live,
                    keys.runs_of(record.replica or self.replica),
                ],
                args=[dumps(record.to_dict()), repr(record.started), record.id],
            )

    async def end(self, record: RunRecord) -> None:
        try:
            await self._end(record)
        except StateError:
            self._unwritten.pop(record.id, None)
            self._unwritten[record.id] = record
            while len(self._unwritten) > MAX_UNWRITTEN:
                del self._unwritten[next(iter(self._unwritten))]
            raise
        self._unwritten.pop(record.id, None)
        self._ends += 1
        if self._ends % RETAIN_EVERY == 0:
            await self.retain()

    async def flush(self) -> int:
        """Write the ends that could not be written before; how many were."""
        written = 0
        for record in list(self._unwritten.values()):
            await self._end(record)
            del self._unwritten[record.id]
            written += 1
        return written

    async def _end(self, record: RunRecord) -> None:
        keys = self._keys
        with self._backend.failures(f"recording the end of run {record.id!r}"):
            await self._end_script(
                keys=[
                    keys.run(record.id),
                    keys.runs,
                    keys.ended,
                    keys.live,
                    keys.runs_of(record.replica or self.replica),
                ],
                args=[
                    dumps(record.to_dict()),
                    repr(record.started),
                    repr(record.ended or record.started),
                    record.id,
                ],
            )

    async def retain(self) -> int:
        """Apply ``max_runs`` and ``max_run_age_days``; how many records went."""
        age = self.limits.max_run_age_days
        cutoff = time.time() - age * 86400 if age else -1
        with self._backend.failures("dropping old run records"):
            removed = await self._retain_script(
                keys=[self._keys.runs, self._keys.live, self._keys.ended, self._keys.decided_index],
                args=[self._keys.prefix, self.limits.max_runs, repr(cutoff)],
            )
        return int(removed)

    async def get(self, run_id: str) -> RunRecord | None:
        with self._backend.failures(f"reading run {run_id!r}"):
            data = await self._backend.client.get(self._keys.run(run_id))
        return RunRecord.from_dict(json.loads(data)) if data is not None else None

    async def list(
        self,
        *,
        caller: str | None = None,
        reason: str | None = None,
        text: str | None = None,
        limit: int = 50,
        before: float | None = None,
    ) -> list[RunRecord]:
        client, keys = self._backend.client, self._keys
        found: list[RunRecord] = []
        top = f"({before!r}" if before is not None else "+inf"
        offset = 0
        with self._backend.failures("listing runs"):
            while len(found) < limit:
                ids = await client.zrevrangebyscore(keys.runs, top, "-inf", start=offset, num=_PAGE)
                if not ids:
                    break
                offset += len(ids)
                for data in await client.mget([keys.run(as_text(i) or "") for i in ids]):
                    if data is None:
                        continue
                    record = RunRecord.from_dict(json.loads(data))
                    if record.matches(caller=caller, reason=reason, text=text, before=before):
                        found.append(record)
                        if len(found) >= limit:
                            break
        return found
