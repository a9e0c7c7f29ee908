"""An issuer's keys: discovery, the cache, the bound on refetches, and answers refused for size.

The bounds are about time, so these tests drive ``IssuerKeys`` with their own clock and an httpx
``MockTransport`` that counts requests (the gateway's tests use a real server: test_oauth_resource).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcp_agent.auth.jwks import MAX_BYTES, MAX_KEYS, IssuerKeys, KeyMissing, KeysUnavailable, metadata_urls

ISSUER = "https://id.example.com"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeIssuer:
    """Answers metadata and a JWKS; counts requests by path."""

    def __init__(self, keys: list[dict[str, Any]] | None = None) -> None:
        self.keys = keys if keys is not None else [{"kty": "RSA", "kid": "a", "n": "x", "e": "AQAB"}]
        self.hits: dict[str, int] = {}
        self.metadata: dict[str, dict[str, Any]] = {
            "/.well-known/oauth-authorization-server": {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/keys"}
        }
        self.down = False
        self.body: bytes | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.hits[path] = self.hits.get(path, 0) + 1
        if self.down:
            return httpx.Response(500)
        if path == "/keys":
            if self.body is not None:
                return httpx.Response(200, content=self.body)
            return httpx.Response(200, json={"keys": self.keys})
        if path in self.metadata:
            return httpx.Response(200, json=self.metadata[path])
        return httpx.Response(404)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def keys_of(fake: FakeIssuer, clock: Clock, **kwargs: Any) -> IssuerKeys:
    return IssuerKeys(ISSUER, clock=clock, transport=fake.transport(), **kwargs)


def test_metadata_is_looked_for_where_rfc_8414_and_openid_connect_say() -> None:
    assert metadata_urls("https://id.example.com") == [
        "https://id.example.com/.well-known/oauth-authorization-server",
        "https://id.example.com/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://id.example.com/tenant/") == [
        "https://id.example.com/.well-known/oauth-authorization-server/tenant",
        "https://id.example.com/tenant/.well-known/openid-configuration",
        "https://id.example.com/.well-known/openid-configuration/tenant",
    ]


@pytest.mark.anyio
async def test_keys_are_found_by_discovery_and_then_served_from_the_cache() -> None:
    fake, clock = FakeIssuer(), Clock()
    keys = keys_of(fake, clock)
    for _ in range(3):
        found = await keys.key_for("a")
        assert isinstance(found, dict) and found["kid"] == "a"
    assert fake.hits == {"/.well-known/oauth-authorization-server": 1, "/keys": 1}


@pytest.mark.anyio
async def test_openid_connect_discovery_is_the_fallback() -> None:
    fake, clock = FakeIssuer(), Clock()
    fake.metadata = {"/.well-known/openid-configuration": {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/keys"}}
    assert isinstance(await keys_of(fake, clock).key_for("a"), dict)


@pytest.mark.anyio
async def test_metadata_of_another_issuer_is_not_believed() -> None:
    fake, clock = FakeIssuer(), Clock()
    fake.metadata = {
        "/.well-known/oauth-authorization-server": {
            "issuer": "https://evil.example",
            "jwks_uri": f"{ISSUER}/keys",
        }
    }
    found = await keys_of(fake, clock).key_for("a")
    assert isinstance(found, KeysUnavailable) and "names another issuer" in found.reason


@pytest.mark.anyio
async def test_an_unknown_key_id_refetches_at_most_once_per_interval() -> None:
    fake, clock = FakeIssuer(), Clock()
    keys = keys_of(fake, clock, jwks_url=f"{ISSUER}/keys", refetch_interval=30)
    assert isinstance(await keys.key_for("a"), dict)
    for n in range(10):
        assert isinstance(await keys.key_for(f"made-up-{n}"), KeyMissing)
    assert fake.hits["/keys"] == 1  # fetched moments ago: no request for made-up ids
    clock.now += 31
    fake.keys.append({"kty": "RSA", "kid": "b", "n": "y", "e": "AQAB"})
    assert isinstance(await keys.key_for("b"), dict)  # the interval passed: one refetch finds it
    assert isinstance(await keys.key_for("c"), KeyMissing)
    assert fake.hits["/keys"] == 2


@pytest.mark.anyio
async def test_keys_older_than_max_age_are_fetched_again() -> None:
    fake, clock = FakeIssuer(), Clock()
    keys = keys_of(fake, clock, jwks_url=f"{ISSUER}/keys", max_age=60)
    await keys.key_for("a")
    clock.now += 61
    await keys.key_for("a")
    assert fake.hits["/keys"] == 2


@pytest.mark.anyio
async def test_a_down_issuer_is_unavailable_asked_once_per_interval_and_old_keys_stay() -> None:
    fake, clock = FakeIssuer(), Clock()
    fake.down = True
    keys = keys_of(fake, clock, jwks_url=f"{ISSUER}/keys", refetch_interval=30, max_age=60)
    for _ in range(3):
        found = await keys.key_for("a")
        assert isinstance(found, KeysUnavailable) and "answered 500" in found.reason
    assert fake.hits["/keys"] == 1
    clock.now += 31
    fake.down = False
    assert isinstance(await keys.key_for("a"), dict)
    # once known, keys outlive a later outage: stale keys beat no keys
    clock.now += 61
    fake.down = True
    assert isinstance(await keys.key_for("a"), dict)


@pytest.mark.anyio
async def test_answers_too_big_or_with_too_many_keys_are_refused() -> None:
    fake, clock = FakeIssuer(), Clock()
    fake.body = b" " * (MAX_BYTES + 1)
    found = await keys_of(fake, clock, jwks_url=f"{ISSUER}/keys").key_for("a")
    assert isinstance(found, KeysUnavailable) and "more than" in found.reason
    fake = FakeIssuer([{"kty": "RSA", "kid": str(n)} for n in range(MAX_KEYS + 1)])
    found = await keys_of(fake, clock, jwks_url=f"{ISSUER}/keys").key_for("1")
    assert isinstance(found, KeysUnavailable) and f"at most {MAX_KEYS}" in found.reason
    fake = FakeIssuer()
    fake.body = b"not json"
    found = await keys_of(fake, clock, jwks_url=f"{ISSUER}/keys").key_for("a")
    assert isinstance(found, KeysUnavailable) and "not JSON" in found.reason


@pytest.mark.anyio
async def test_without_a_key_id_only_a_single_key_is_used() -> None:
    fake, clock = FakeIssuer(), Clock()
    assert isinstance(await keys_of(fake, clock).key_for(None), dict)
    fake = FakeIssuer([{"kty": "RSA", "kid": "a"}, {"kty": "RSA", "kid": "b"}])
    assert isinstance(await keys_of(fake, clock).key_for(None), KeyMissing)


@pytest.mark.anyio
async def test_encryption_keys_are_not_signing_keys() -> None:
    fake, clock = FakeIssuer([{"kty": "RSA", "kid": "a", "use": "enc"}]), Clock()
    assert isinstance(await keys_of(fake, clock).key_for("a"), KeyMissing)


@pytest.mark.anyio
async def test_concurrent_misses_share_one_fetch() -> None:
    import anyio

    fake, clock = FakeIssuer(), Clock()
    keys = keys_of(fake, clock, jwks_url=f"{ISSUER}/keys")
    found: list[object] = []

    async def one() -> None:
        found.append(await keys.key_for("a"))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    assert all(isinstance(item, dict) for item in found) and len(found) == 5
    assert fake.hits["/keys"] == 1
