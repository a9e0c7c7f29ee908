"""``redis://HOST:PORT/DB``: state shared by several gateway replicas (the optional ``[redis]``
extra: the ``redis`` package's asyncio client).

``open_redis_state(url, limits=…, replica=…)`` connects, checks that Redis answers (else a
``ConfigError`` naming ``state.url``), takes this replica's liveness lease and returns a
``RedisState``. This module is that store; its parts are beside it, each with the Lua scripts
it runs, on the client and key names of ``backend.py``:

- ``sessions`` (``sessions.py``): transcripts as hashes with an idle TTL; the per-session
  lock is a lease (``SET NX PX`` + a token, renewed while held, released by compare-and-delete),
  so a run on replica B waits for a run on the same session on replica A, and not longer than
  the lease if A dies;
- ``approvals`` and ``runs`` (``records.py``): visible from every replica; a decision written
  on B wakes the run waiting on A at once (pub/sub);
- ``pages`` (``pages.py``): the paged results of a session, in the session's hash, so a run
  on B reads the pages a run on A paged;
- ``tasks`` (``tasks.py``): the tasks of the MCP Tasks extension, each a key Redis drops when
  the task expires;
- ``events`` (``events.py``): the ``/api/v1/events`` fan-out, an ``EventSink`` plus a
  ``relay`` for the gateway's task group (not part of the ``State`` protocol: only a shared
  backend has it);
- ``beat()`` renews ``replica:<id>`` (``lease_seconds``) and applies run retention;
  ``recover()`` finds replicas whose lease lapsed, or whose process on this host is gone, and
  ends what they left: runs in flight become ``terminal_error`` (``INTERRUPTED``), pending
  approvals are denied (``by="recovery"``), session locks are released. One replica recovers a
  dead one (a short claim key), and every step is safe to repeat.

Timeouts: a URL without ``socket_timeout``/``socket_connect_timeout`` parameters gets 5 s for
each, so a Redis that stops answering fails an operation (``StateError``) instead of hanging it;
a closed connection is retried on a new one (``RETRIES``), so a restarted Redis is used again at
once.
The caveat of every lease: a replica stalled for longer than ``lease_seconds`` (a frozen VM) is
taken for dead; its runs are recorded interrupted and its session locks broken while it may
still finish them. Keep ``lease_seconds`` well above any pause you expect.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import anyio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from ..._plural import counted
from ..._redact import redact_url
from ...exceptions import ConfigError, StateError
from ..records import INTERRUPTED, Decision, Recovery, StateLimits, new_replica_id
from .backend import Backend, Keys, dumps, ms, text
from .events import RedisEvents
from .pages import RedisPageStore
from .pins import RedisPinStore
from .records import RedisApprovalStore, RedisRunStore
from .sessions import BREAK, RedisSessionStore
from .tasks import RedisTaskStore

__all__ = ["RedisState", "open_redis_state"]

logger = logging.getLogger(__name__)

CONNECT_BOUND = 10.0
"""Seconds ``open_redis_state`` waits for Redis's first answer."""
_DEFAULTS = {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}
RETRIES = 2
"""A command that finds its pooled connection closed (Redis restarted, a proxy dropped it) is
sent again, on a new connection, this many times; a timeout is not retried (the command may have
run)."""
DENIED_BY_RECOVERY = "the run waiting for this approval was interrupted by a gateway restart"


async def open_redis_state(url: str, *, limits: StateLimits, replica: str | None = None) -> RedisState:
    """Connect to the Redis at ``url`` and take this replica's liveness lease.

    Raises:
        ConfigError: the URL is malformed, or Redis does not answer (the message names
            ``state.url`` and says how to start one).
    """
    shown = redact_url(url)
    given = {name for name, _ in parse_qsl(urlsplit(url).query)}
    options: dict[str, Any] = {name: value for name, value in _DEFAULTS.items() if name not in given}
    try:
        client = aioredis.Redis.from_url(
            url,
            retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), RETRIES),
            retry_on_error=[RedisConnectionError],
            **options,
        )
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"state.url {shown}: not a usable Redis URL ({exc})", "state.url") from None
    try:
        with anyio.fail_after(CONNECT_BOUND):
            await client.ping()
    except (RedisError, OSError, TimeoutError) as exc:
        await client.aclose()
        raise ConfigError(
            f"state.url {shown}: Redis does not answer ({exc or type(exc).__name__}); start redis-server "
            "there (e.g. `sudo apt-get install -y redis-server`) or correct state.url",
            "state.url",
        ) from None
    state = RedisState(client, url, limits, replica or new_replica_id())
    try:
        await state.beat()
    except StateError as exc:
        await client.aclose()
        raise ConfigError(str(exc), "state.url") from None
    return state


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _start_ticks(pid: int | str) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from ``/proc``); None when there is
    no such process. Raises OSError where ``/proc`` cannot say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rpartition(b")")[2].split()
    except FileNotFoundError:
        return None
    return int(fields[19])  # field 22 of stat(5); the split starts at field 3


def _this_process() -> dict[str, Any]:
    try:
        started = _start_ticks("self")
    except (OSError, IndexError, ValueError):
        started = None
    return {"host": socket.gethostname(), "pidns": _pid_namespace(), "pid": os.getpid(), "started": started}


def _runs_here(info: dict[str, Any], here: dict[str, Any]) -> bool | None:
    """Whether the process ``info`` names still runs, when it is one of this host (``here``: the
    same host name and PID namespace, on Linux); None when that cannot be told."""
    if here["started"] is None or info.get("started") is None:
        return None
    if info.get("host") != here["host"] or info.get("pidns") != here["pidns"]:
        return None
    try:
        return bool(_start_ticks(int(info["pid"])) == info["started"])
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return None


def _loads(data: Any) -> dict[str, Any] | None:
    try:
        value = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class RedisState:
    """The Redis backend's ``State`` (see the module docstring)."""

    def __init__(self, client: aioredis.Redis, url: str, limits: StateLimits, replica: str) -> None:
        self._backend = backend = Backend(client, url, Keys())
        self._limits = limits
        self._replica = replica
        self._here = _this_process()
        self._info = dumps(self._here)
        self._sessions = RedisSessionStore(
            backend, limits, replica, holder_alive=self.alive, keepalive=self._keepalive
        )
        self._approvals = RedisApprovalStore(backend, limits, replica)
        self._runs = RedisRunStore(backend, limits, replica)
        self._pages = RedisPageStore(backend, limits)
        self._tasks = RedisTaskStore(backend)
        self._pins = RedisPinStore(backend)
        self._break_script = client.register_script(BREAK)
        self.events = RedisEvents(backend, replica)
        """Run events shared with the other replicas (``emit``; ``relay`` in the gateway)."""
        self._beaten = False
        self._closed = False
        self._connected_since: float | None = None
        """When this replica's beats began to succeed again (monotonic; None: the last failed)."""

    @property
    def replica(self) -> str:
        return self._replica

    @property
    def sessions(self) -> RedisSessionStore:
        return self._sessions

    @property
    def approvals(self) -> RedisApprovalStore:
        return self._approvals

    @property
    def runs(self) -> RedisRunStore:
        return self._runs

    @property
    def pages(self) -> RedisPageStore:
        return self._pages

    @property
    def tasks(self) -> RedisTaskStore:
        return self._tasks

    @property
    def pins(self) -> RedisPinStore:
        return self._pins

    @property
    def limits(self) -> StateLimits:
        return self._limits

    @property
    def client(self) -> aioredis.Redis:
        return self._backend.client

    # ---------------------------------------------------------------- liveness

    async def beat(self) -> None:
        keys = self._backend.keys
        try:
            with self._backend.failures("renewing this replica's liveness lease"):
                pipe = self._backend.client.pipeline(transaction=True)
                pipe.set(keys.replica(self._replica), self._info, px=ms(self._limits.lease_seconds), get=True)
                pipe.hset(keys.replicas, self._replica, self._info)
                previous, _ = await pipe.execute()
        except StateError:
            self._connected_since = None
            raise
        if self._connected_since is None:
            self._connected_since = time.monotonic()
        if previous is None and self._beaten:
            logger.warning(
                "this replica's liveness lease had lapsed (a pause longer than state.leaseSeconds, or Redis "
                "lost its data); other replicas may have recorded its runs as interrupted"
            )
        self._beaten = True
        await self._runs.flush()
        await self._runs.retain()

    async def _keepalive(self) -> None:
        """Renew the liveness lease alone (a run holding a lock does, whoever calls ``beat``)."""
        with self._backend.failures("renewing this replica's liveness lease"):
            await self._backend.client.set(
                self._backend.keys.replica(self._replica), self._info, px=ms(self._limits.lease_seconds)
            )

    async def alive(self, replica: str) -> bool:
        """Whether ``replica`` is to be taken as alive.

        A replica on this host is alive while its process runs, whatever its lease. One on
        another host is alive while its lease holds; after that, only until this replica has
        itself beaten for a whole lease (after Redis was away, nobody's lease could be renewed:
        each gets one lease to come back). A replica Redis knows nothing of, or that closed, is not.
        """
        if replica == self._replica:
            return True
        keys = self._backend.keys
        with self._backend.failures("reading a replica's liveness lease"):
            pipe = self._backend.client.pipeline(transaction=False)
            pipe.get(keys.replica(replica))
            pipe.hget(keys.replicas, replica)
            lease, known = await pipe.execute()
        info = _loads(lease) or _loads(known)
        if info is None or info.get("closed"):
            return False
        here = _runs_here(info, self._here)
        if here is not None:
            return here
        return lease is not None or not self._settled()

    def _settled(self) -> bool:
        """Whether this replica has beaten without a failure for at least one lease."""
        since = self._connected_since
        return since is not None and time.monotonic() - since >= self._limits.lease_seconds

    # ---------------------------------------------------------------- recovery

    async def recover(self) -> Recovery:
        keys, client = self._backend.keys, self._backend.client
        found = Recovery()
        with self._backend.failures("looking for dead replicas"):
            members = [text(m) or "" for m in await client.hkeys(keys.replicas)]
        for replica in sorted(members):
            if replica == self._replica or await self.alive(replica):
                continue
            with self._backend.failures("claiming a dead replica's recovery"):
                claimed = await client.set(
                    keys.recovering(replica),
                    self._replica,
                    nx=True,
                    px=ms(max(self._limits.lease_seconds, 10)),
                )
            if not claimed:
                continue  # another replica recovers it now
            try:
                part = await self._recover(replica)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await client.delete(keys.recovering(replica))
            found = Recovery(
                found.runs + part.runs, found.approvals + part.approvals, found.locks + part.locks
            )
            if part != Recovery():
                logger.warning(
                    "replica %s is gone: %s recorded as interrupted, %s expired, %s released",
                    replica,
                    counted(part.runs, "run"),
                    counted(part.approvals, "approval"),
                    counted(part.locks, "session lock"),
                )
        return found

    async def _recover(self, replica: str) -> Recovery:
        keys, client = self._backend.keys, self._backend.client
        runs = approvals = locks = 0
        with self._backend.failures(f"recovering what replica {replica} left"):
            now = time.time()
            for run_id in sorted(text(i) or "" for i in await client.smembers(keys.runs_of(replica))):
                record = await self._runs.get(run_id)
                if record is not None and record.in_flight:
                    await self._runs.end(
                        replace(
                            record,
                            termination_reason="terminal_error",
                            detail=INTERRUPTED,
                            ended=now,
                            elapsed_ms=max(now - record.started, 0.0) * 1000,
                            replica=replica,
                        )
                    )
                    runs += 1
            denied = Decision(False, DENIED_BY_RECOVERY, by="recovery")
            for approval_id in sorted(
                text(i) or "" for i in await client.smembers(keys.approvals_of(replica))
            ):
                approvals += await self._approvals.decide(approval_id, denied)
            for session_id in sorted(text(i) or "" for i in await client.smembers(keys.locks_of(replica))):
                locks += await self._break_script(
                    keys=[keys.lock(session_id)], args=[f"{replica}:", keys.lock_released(session_id)]
                )
            pipe = client.pipeline(transaction=True)
            pipe.delete(keys.runs_of(replica), keys.approvals_of(replica), keys.locks_of(replica))
            pipe.hdel(keys.replicas, replica)
            await pipe.execute()
        return Recovery(runs, approvals, locks)

    # ---------------------------------------------------------------- closing

    async def aclose(self) -> None:
        """Give up the liveness lease (what this process left is then recovered at once) and
        close the client. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        self.events.close()
        keys, client = self._backend.keys, self._backend.client
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            try:
                pipe = client.pipeline(transaction=False)
                pipe.delete(keys.replica(self._replica))
                for key in (
                    keys.runs_of(self._replica),
                    keys.approvals_of(self._replica),
                    keys.locks_of(self._replica),
                ):
                    pipe.scard(key)
                _, *left = await pipe.execute()
                if any(left):  # recovered at once by the others: a closed replica is not alive
                    await client.hset(keys.replicas, self._replica, dumps({**self._here, "closed": True}))
                else:
                    await client.hdel(keys.replicas, self._replica)
            except (RedisError, OSError) as exc:
                logger.warning(
                    "could not give up this replica's lease in Redis (%s); it lapses by itself", exc
                )
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()
