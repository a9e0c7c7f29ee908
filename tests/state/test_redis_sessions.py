"""The Redis session store's indexes (``_INDEX`` in ``state/redis/sessions.py``): they follow every way a session
comes and goes, the caps look at the oldest sessions instead of every one, and the sessions of a
build before the indexes are taken in. A real ``redis-server`` (skips without it, fails under
``CI=true``), read directly with redis-py to see the keys.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis

from tests.scale.infra import RedisServer

from .test_contract import TRANSCRIPT
from .test_redis import Replicas, replicas, server  # noqa: F401  (fixtures)

PREFIX = "mcp-agent:"


@pytest.fixture
async def raw(server: RedisServer) -> AsyncIterator[Any]:  # noqa: F811
    client = aioredis.Redis.from_url(server.url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


async def indexes(raw: Any) -> dict[str, Any]:
    """What the indexes say: ids in ``sessions``, owner of each, ids per owner, count per owner."""
    owners = await raw.hgetall(f"{PREFIX}sessions:owner")
    counts = {
        o: int(float(n)) for o, n in await raw.zrange(f"{PREFIX}sessions:owners", 0, -1, withscores=True)
    }
    of = {}
    for key in await raw.keys(f"{PREFIX}sessions:of:*"):
        of[key.removeprefix(f"{PREFIX}sessions:of:")] = set(await raw.zrange(key, 0, -1))
    return {
        "ids": set(await raw.zrange(f"{PREFIX}sessions", 0, -1)),
        "owner": owners,
        "of": of,
        "counts": counts,
    }


async def live(raw: Any) -> dict[str, Any]:
    """What the indexes should say, from the session hashes that exist."""
    owners = {}
    for key in await raw.keys(f"{PREFIX}session:*"):
        owners[key.removeprefix(f"{PREFIX}session:")] = await raw.hget(key, "owner")
    of: dict[str, set[str]] = {}
    for session_id, owner in owners.items():
        of.setdefault(owner, set()).add(session_id)
    return {"ids": set(owners), "owner": owners, "of": of, "counts": {o: len(i) for o, i in of.items()}}


async def test_the_indexes_follow_creates_saves_deletes_and_expiry(replicas: Replicas, raw: Any) -> None:  # noqa: F811
    state = await replicas.open(session_ttl_seconds=0.5, max_sessions=100, max_sessions_per_owner=10)
    a1 = await state.sessions.create(owner="a")
    a2 = await state.sessions.create(owner="a")
    await state.sessions.create(owner="b")
    await state.sessions.create(owner=None)
    async with state.sessions.hold(a1.id, owner="a") as session:
        assert await state.sessions.save(session, TRANSCRIPT)
    assert await state.sessions.delete(a2.id)
    async with state.sessions.hold("named", owner="b"):
        pass
    assert await indexes(raw) == await live(raw)
    assert (await indexes(raw))["counts"] == {json.dumps("a"): 1, json.dumps("b"): 2, "null": 1}

    await anyio.sleep(0.8)  # every session's hash expires
    assert await live(raw) == {"ids": set(), "owner": {}, "of": {}, "counts": {}}
    c1 = await state.sessions.create(owner="c")  # a new session forgets the expired ones
    assert await indexes(raw) == await live(raw)
    assert (await indexes(raw))["ids"] == {c1.id}

    async with state.sessions.hold("named", owner="d"):  # an expired id starts afresh, for d now
        pass
    assert await indexes(raw) == await live(raw)
    assert (await indexes(raw))["owner"]["named"] == json.dumps("d")


async def test_listing_forgets_the_expired_sessions_everywhere(replicas: Replicas, raw: Any) -> None:  # noqa: F811
    state = await replicas.open(session_ttl_seconds=0.3)
    for owner in ("a", "b", "a"):
        await state.sessions.create(owner=owner)
    await anyio.sleep(0.5)
    assert await state.sessions.list() == []
    assert await indexes(raw) == {"ids": set(), "owner": {}, "of": {}, "counts": {}}


async def commands(raw: Any) -> int:
    """How many key lookups Redis has run (EXISTS and HGET, also those inside scripts)."""
    stats = await raw.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("exists", "hget"))


async def test_making_room_looks_at_the_oldest_sessions_not_at_every_one(
    replicas: Replicas,  # noqa: F811  (the fixture, imported above)
    raw: Any,
) -> None:
    state = await replicas.open(max_sessions=400, max_sessions_per_owner=400)
    first = [await state.sessions.create(owner="a") for _ in range(21)]
    await anyio.sleep(0.05)  # last use is kept to the millisecond: the first 21 are older than the rest
    first += [await state.sessions.create(owner="a") for _ in range(379)]
    async with state.sessions.hold(first[0].id, owner="a"):  # busy: skipped, never dropped
        before = await commands(raw)
        for _ in range(20):  # each over both caps: one old session goes
            await state.sessions.create(owner="a")
        looked = await commands(raw) - before
        left = {i.id for i in await state.sessions.list()}
    assert len(left) == 400 and first[0].id in left
    assert not {s.id for s in first[1:21]} & left  # the 20 least recently used idle ones went
    assert looked < 20 * 20, looked  # a few lookups each; walking every session would be 20 × 800


async def test_sessions_of_an_earlier_build_are_taken_in_and_capped(replicas: Replicas, raw: Any) -> None:  # noqa: F811
    state = await replicas.open(max_sessions=5)
    older = [await state.sessions.create(owner="a") for _ in range(4)]
    # an earlier build kept only the ``sessions`` index
    await raw.delete(*await raw.keys(f"{PREFIX}sessions:o*"), f"{PREFIX}sessions:indexed")
    assert (await indexes(raw))["counts"] == {}
    await state.sessions.create(owner="b")
    await state.sessions.create(owner="b")  # six would be one over: a, holding the most, loses its oldest
    left = {i.id for i in await state.sessions.list()}
    assert len(left) == 5 and older[0].id not in left
    assert await indexes(raw) == await live(raw)


async def test_a_turn_with_a_last_save_takes_two_scripts_and_leaves_the_idle_ttl(
    replicas: Replicas,  # noqa: F811
    raw: Any,
) -> None:
    """Hold and ``save(release=True)``: two scripts (the hold's release rides on the save), and the
    session is left with its idle TTL, not the longer one of a held session."""
    state = await replicas.open(session_ttl_seconds=100, lease_seconds=30)
    session = await state.sessions.create(owner="a")
    for _ in range(2):  # the first loads the scripts into Redis (a NOSCRIPT each, then again)
        before = (await raw.info("commandstats"))["cmdstat_evalsha"]["calls"]
        async with state.sessions.hold(session.id, owner="a") as held:
            assert await state.sessions.save(held, TRANSCRIPT, release=True) is True
            assert not await raw.exists(f"{PREFIX}lock:{session.id}")
    assert (await raw.info("commandstats"))["cmdstat_evalsha"]["calls"] - before == 2
    assert 90_000 < await raw.pttl(f"{PREFIX}session:{session.id}") <= 100_000  # held: 130 s
    assert not (await state.sessions.list())[0].busy
