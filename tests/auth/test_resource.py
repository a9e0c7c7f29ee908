"""The check of one token and the words around it, without a server: the issuer's keys come
through an httpx ``MockTransport``; ``tests/gateway/test_oauth_resource.py`` runs it all for real."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from joserfc.jwk import ECKey, RSAKey

from mcp_agent.auth.jwks import IssuerKeys
from mcp_agent.auth.resource import Grant, ProtectedResource, Refusal, metadata_url
from mcp_agent.config.sections import OAuthResourceConfig

from .issuer import Issuer

RESOURCE = "https://agent.example.com/mcp"
ISSUER = "https://id.example.com"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def guard(issuer: Issuer, **settings: Any) -> ProtectedResource:
    issuer.url, issuer.audience = ISSUER, RESOURCE
    config = OAuthResourceConfig.model_validate({"issuer": ISSUER, "jwksUrl": f"{ISSUER}/jwks", **settings})
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=issuer.jwks()))
    keys = IssuerKeys(ISSUER, f"{ISSUER}/jwks", transport=transport)
    return ProtectedResource(config, RESOURCE, keys=keys)


def test_the_metadata_url_puts_the_well_known_part_before_the_path() -> None:
    assert metadata_url(RESOURCE) == "https://agent.example.com/.well-known/oauth-protected-resource/mcp"
    assert metadata_url("https://a.example/") == "https://a.example/.well-known/oauth-protected-resource"


@pytest.mark.anyio
async def test_scopes_map_through_a_prefix_or_a_map() -> None:
    issuer = Issuer()
    prefixed = guard(issuer, scopePrefix="agent:")
    grant = await prefixed.check(issuer.mint(scope="agent:query agent:admin query other"))
    assert isinstance(grant, Grant) and grant.scopes == {"query", "admin"} and grant.name == "oauth:alice"
    mapped = guard(issuer, scopeMap={"mcp.user": ["query"], "mcp.ops": ["approve", "admin"]})
    grant = await mapped.check(issuer.mint(scope=["mcp.ops", "mcp.user"]))
    assert isinstance(grant, Grant) and grant.scopes == {"query", "approve", "admin"}
    assert mapped.token_scope_for("approve") == "mcp.ops"


@pytest.mark.anyio
async def test_the_caller_claim_and_the_scopes_claim_are_configurable() -> None:
    issuer = Issuer()
    resource = guard(issuer, callerClaim="email", scopesClaim="scp")
    grant = await resource.check(issuer.mint(email="a@example.com", scp=["query"], scope="admin"))
    assert isinstance(grant, Grant) and grant.name == "oauth:a@example.com" and grant.scopes == {"query"}


@pytest.mark.anyio
async def test_a_key_of_another_type_or_algorithm_never_verifies() -> None:
    issuer = Issuer()
    resource = guard(issuer)
    # the token says RS384, the issuer's key says RS256: refused before any verification
    same = {k: v for k, v in issuer.signing.as_dict(private=True).items() if k != "alg"}
    refused = await resource.check(issuer.mint(key=RSAKey.import_key(same), header={"alg": "RS384"}))
    assert isinstance(refused, Refusal) and "is not for algorithm RS384" in refused.description
    # an EC token naming the RSA key's id
    ec = ECKey.generate_key("P-256", parameters={"kid": issuer.signing.kid})
    refused = await resource.check(issuer.mint(key=ec, header={"alg": "ES256"}))  # type: ignore[arg-type]
    assert isinstance(refused, Refusal) and "is not for algorithm ES256" in refused.description


@pytest.mark.anyio
async def test_algorithms_can_be_narrowed() -> None:
    issuer = Issuer()
    resource = guard(issuer, algorithms=["ES256"])
    refused = await resource.check(issuer.mint())
    assert isinstance(refused, Refusal) and "algorithm 'RS256' is not allowed" in refused.description


@pytest.mark.anyio
async def test_the_clock_skew_lets_a_token_just_expired_pass() -> None:
    import time

    issuer = Issuer()
    now = int(time.time())
    assert isinstance(await guard(issuer, clockSkewSeconds=120).check(issuer.mint(exp=now - 60)), Grant)
    assert isinstance(await guard(issuer, clockSkewSeconds=0).check(issuer.mint(exp=now - 60)), Refusal)


@pytest.mark.anyio
async def test_an_overlong_token_or_caller_name_is_refused() -> None:
    issuer = Issuer()
    resource = guard(issuer)
    refused = await resource.check("a" * 20_000)
    assert isinstance(refused, Refusal) and "longer than" in refused.description
    refused = await resource.check(issuer.mint(sub="x" * 300))
    assert isinstance(refused, Refusal) and "no usable 'sub' claim" in refused.description


def test_the_challenge_quotes_nothing_that_would_break_the_header() -> None:
    resource = guard(Issuer(), requiredScopes=["mcp"])
    header = resource.challenge(Refusal(401, "invalid_token", 'say "hi"\\ \r\nX-Evil: 1'))
    assert header.startswith('Bearer error="invalid_token", error_description="say hi X-Evil: 1"')
    assert header.endswith(
        'resource_metadata="https://agent.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp"'
    )


@pytest.mark.anyio
async def test_a_token_that_passed_is_kept_only_until_it_expires() -> None:
    """Kept: the next check needs no key (the key is gone); past ``exp`` it is checked again."""
    import time

    issuer = Issuer()
    now = [time.time()]
    resource = guard(issuer, clockSkewSeconds=0)
    resource.clock = lambda: now[0]
    resource.keys.refetch_interval = resource.keys.max_age = 0  # every check that looks fetches
    token = issuer.mint(exp=int(now[0]) + 100)
    assert isinstance(await resource.check(token), Grant)
    issuer.keys = []  # the issuer drops every key: only a token kept can pass now
    issuer.rotate()
    assert isinstance(await resource.check(token), Grant)
    now[0] += 101
    refused = await resource.check(token)
    assert isinstance(refused, Refusal) and "is not among the issuer's keys" in refused.description
    # a refused token is never kept
    bad = issuer.mint(aud="https://elsewhere.example/mcp")
    assert isinstance(await resource.check(bad), Refusal)
    assert isinstance(await resource.check(bad), Refusal)


@pytest.mark.anyio
async def test_the_tokens_kept_are_bounded() -> None:
    from mcp_agent.auth import resource as module

    issuer = Issuer()
    resource = guard(issuer)
    for n in range(module.PASSED_KEPT + 5):
        assert isinstance(await resource.check(issuer.mint(jti=str(n))), Grant)
    assert len(resource._passed) == module.PASSED_KEPT
