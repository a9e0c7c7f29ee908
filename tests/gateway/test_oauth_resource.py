"""The gateway as an OAuth protected resource (``gateway.oauth``), against a real authorization
server built in the test with authlib (``tests/auth/issuer.py``), both on real sockets.

Its metadata (RFC 9728), the challenge without a token, a matrix of bad tokens each refused with
its reason, a missing scope, key rotation (one refetch), callers kept apart per OAuth user, and
static tokens beside OAuth.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from joserfc.jwk import RSAKey

from mcp_agent.auth.resource import Grant
from mcp_agent.config import CallerConfig
from mcp_agent.config.sections import OAuthResourceConfig
from mcp_agent.gateway.serve import bind_socket

from ..auth.issuer import Issuer, serving
from .conftest import RuleModel, Running, make_config, running_gateway

STATIC = "static-token-" + "s" * 20
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def oauth_gateway(
    issuer: Issuer,
    *,
    static: bool = True,
    model: RuleModel | None = None,
    expose_tools: bool = False,
    **oauth: Any,
) -> AsyncIterator[Running]:
    """The gateway on a free port with ``gateway.oauth`` for ``issuer`` (and one static caller)."""
    sock = bind_socket("127.0.0.1", 0)
    resource = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    issuer.audience = resource
    settings = OAuthResourceConfig.model_validate(
        {"issuer": issuer.url, "resource": resource, **oauth}, by_alias=True, by_name=True
    )
    callers = {"ops": CallerConfig(token=STATIC, scopes=["query", "approve", "admin"])} if static else {}
    config = make_config(oauth=settings, callers=callers, expose_tools=expose_tools)
    async with running_gateway(config, model=model, sock=sock) as running:
        yield running


@pytest.fixture(scope="module")
async def issuer() -> AsyncIterator[Issuer]:
    async with serving(Issuer()) as served:
        yield served


@pytest.fixture(scope="module")
async def gateway(issuer: Issuer) -> AsyncIterator[Running]:
    async with oauth_gateway(issuer, requiredScopes=["mcp"], scopePrefix="agent:") as running:
        issuer.scope = "mcp agent:query"
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer k="v", ...`` header."""
    value = response.headers["www-authenticate"]
    scheme, _, rest = value.partition(" ")
    assert scheme == "Bearer", value
    params: dict[str, str] = {}
    for part in rest.split('", '):
        key, _, quoted = part.partition("=")
        params[key.strip()] = quoted.strip().strip('"')
    return params


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None = None) -> str:
    """A token made by hand: ``alg: none`` (no ``secret``) or an HMAC-SHA256 with ``secret``."""
    signing = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = b64(hmac.new(secret, signing.encode(), hashlib.sha256).digest()) if secret else ""
    return f"{signing}.{signature}"


async def post_mcp(running: Running, token: str | None) -> httpx.Response:
    headers = {**MCP_HEADERS, **(bearer(token) if token is not None else {})}
    async with running.client() as http:
        return await http.post("/mcp", json=INIT, headers=headers)


# ------------------------------------------------------------------ metadata and the challenge


async def test_the_resource_metadata_names_the_issuer_at_both_well_known_paths(
    gateway: Running, issuer: Issuer
) -> None:
    async with gateway.client() as http:
        root = await http.get("/.well-known/oauth-protected-resource")
        suffixed = await http.get("/.well-known/oauth-protected-resource/mcp")
    assert root.status_code == suffixed.status_code == 200
    document = suffixed.json()
    assert root.json() == document
    assert document["resource"] == f"{gateway.url}/mcp"
    assert document["authorization_servers"] == [issuer.url]
    assert document["bearer_methods_supported"] == ["header"]
    assert set(document["scopes_supported"]) == {"mcp", "agent:query", "agent:approve", "agent:admin"}


@pytest.mark.parametrize("path", ["/mcp", "/sse", "/api/v1/sessions", "/api/v1/runs"])
async def test_a_request_without_a_token_is_told_where_the_metadata_is(gateway: Running, path: str) -> None:
    async with gateway.client() as http:
        if path == "/mcp":
            answer = await http.post(path, json=INIT, headers=MCP_HEADERS)
        else:
            answer = await http.get(path)
    assert answer.status_code == 401
    params = challenge(answer)
    assert params == {
        "resource_metadata": f"{gateway.url}/.well-known/oauth-protected-resource/mcp",
        "scope": "mcp",
    }


# ------------------------------------------------------------------ the tokens


async def test_a_good_token_opens_an_mcp_session(gateway: Running, issuer: Issuer) -> None:
    answer = await post_mcp(gateway, issuer.mint())
    assert answer.status_code == 200, answer.text
    assert "mcp-session-id" in answer.headers


def bad_tokens(issuer: Issuer, resource: str) -> dict[str, tuple[str, str]]:
    """Each bad token and the words its refusal must say."""
    other = RSAKey.generate_key(2048, parameters={"kid": issuer.signing.kid})
    public_pem = issuer.signing.as_pem(private=False)
    claims = {"iss": issuer.url, "aud": resource, "sub": "mallory", "scope": "mcp agent:query", "exp": 2**40}
    head = {"kid": issuer.signing.kid, "typ": "at+jwt"}
    return {
        "wrong audience": (issuer.mint(aud="http://127.0.0.1:1/mcp"), "audience is not this gateway"),
        "no audience": (issuer.mint(aud=None), "no 'aud' claim"),
        "wrong issuer": (issuer.mint(iss="http://127.0.0.1:1"), "issuer is not"),
        "bad signature": (issuer.mint(key=other), "signature does not verify"),
        "alg none": (unsigned({"alg": "none", **head}, claims), "algorithm 'none' is not allowed"),
        "HS256 with the public key": (
            unsigned({"alg": "HS256", **head}, claims, public_pem),
            "algorithm 'HS256' is not allowed",
        ),
        "expired": (issuer.mint(exp=1_000_000_000, iat=999_999_000), "has expired"),
        "no expiry": (issuer.mint(exp=None), "no 'exp' claim"),
        "not yet valid": (issuer.mint(nbf=2**33), "not valid yet"),
        "unknown key id": (issuer.mint(header={"kid": "no-such-key"}), "key id 'no-such-key' is not among"),
        "malformed": ("abc.def", "not a well-formed JWT"),
        "not a JWT": ("just-some-opaque-token", "not a well-formed JWT"),
        "no subject": (issuer.mint(sub=None), "no usable 'sub' claim"),
    }


async def test_every_bad_token_is_refused_with_its_reason(gateway: Running, issuer: Issuer) -> None:
    fetches = issuer.jwks_fetches
    for name, (token, reason) in bad_tokens(issuer, f"{gateway.url}/mcp").items():
        answer = await post_mcp(gateway, token)
        assert answer.status_code == 401, (name, answer.status_code, answer.text)
        params = challenge(answer)
        assert params["error"] == "invalid_token", name
        assert reason in params["error_description"], (name, params)
        assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
        assert answer.json()["error"]["type"] == "invalid_token"
        assert reason in answer.json()["error"]["message"], name
    # the made-up key id cost the issuer no request: the keys were fetched moments ago
    assert issuer.jwks_fetches - fetches <= 1


async def test_a_token_without_the_required_scope_is_a_403(gateway: Running, issuer: Issuer) -> None:
    answer = await post_mcp(gateway, issuer.mint(scope="agent:query"))
    assert answer.status_code == 403
    params = challenge(answer)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "mcp"
    assert "lacks the scope mcp" in params["error_description"]


async def test_a_token_without_the_routes_scope_is_a_403_naming_it(gateway: Running, issuer: Issuer) -> None:
    """The required scope but no caller scope: every MCP route needs ``query``."""
    answer = await post_mcp(gateway, issuer.mint(scope="mcp agent:approve"))
    assert answer.status_code == 403
    params = challenge(answer)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "agent:query mcp"
    # what approve alone allows, it does: the approvals list
    async with gateway.client() as http:
        approvals = await http.get(
            "/api/v1/approvals", headers=bearer(issuer.mint(scope="mcp agent:approve"))
        )
    assert approvals.status_code == 200


async def test_the_metadata_and_health_need_no_token_even_with_a_bad_one(gateway: Running) -> None:
    async with gateway.client() as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/api/v1/health", "/"):
            assert (await http.get(path, headers=bearer("abc.def"))).status_code == 200, path


# ------------------------------------------------------------------ callers per OAuth user


async def ask(
    http: httpx.AsyncClient, token: str, query: str, session_id: str | None = None
) -> httpx.Response:
    body: dict[str, Any] = {"query": query}
    if session_id is not None:
        body["session_id"] = session_id
    return await http.post("/api/v1/query", json=body, headers=bearer(token))


async def test_each_oauth_user_sees_only_its_own_conversations(gateway: Running, issuer: Issuer) -> None:
    alice, bob = issuer.mint(sub="alice"), issuer.mint(sub="bob")
    async with gateway.client() as http:
        first = await ask(http, alice, "history")
        assert first.status_code == 200, first.text
        mine = first.json()["session_id"]
        assert (await ask(http, alice, "history", mine)).json()["answer"] == "seen: history | history"
        stolen = await ask(http, bob, "history", mine)
        assert stolen.status_code == 404 and stolen.json()["error"]["type"] == "unknown_session"

        def listed(token: str) -> Any:
            return http.get("/api/v1/sessions", headers=bearer(token))

        assert mine in {s["id"] for s in (await listed(alice)).json()["sessions"]}
        assert mine not in {s["id"] for s in (await listed(bob)).json()["sessions"]}
        # a static admin caller beside OAuth sees every conversation
        assert mine in {s["id"] for s in (await listed(STATIC)).json()["sessions"]}
        # an OAuth user named like a static caller is another caller: it cannot reach ops's own
        theirs = (await ask(http, STATIC, "history")).json()["session_id"]
        impostor = issuer.mint(sub="ops")
        assert theirs not in {s["id"] for s in (await listed(impostor)).json()["sessions"]}
        assert (await ask(http, impostor, "history", theirs)).status_code == 404


async def test_an_mcp_session_is_bound_to_the_oauth_user_that_opened_it(
    gateway: Running, issuer: Issuer
) -> None:
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    alice, bob = issuer.mint(sub="alice"), issuer.mint(sub="bob")
    async with gateway.client() as http:
        opened = await http.post("/mcp", json=INIT, headers={**MCP_HEADERS, **bearer(alice)})
        session = opened.headers["mcp-session-id"]
        as_bob = await http.post(
            "/mcp", json=ping, headers={**MCP_HEADERS, **bearer(bob), "mcp-session-id": session}
        )
        again = issuer.mint(sub="alice")  # another token of the same user
        as_alice = await http.post(
            "/mcp", json=ping, headers={**MCP_HEADERS, **bearer(again), "mcp-session-id": session}
        )
        assert as_bob.status_code == 404
        assert as_alice.status_code == 200
        await http.delete("/mcp", headers={**bearer(alice), "mcp-session-id": session})


async def test_an_sse_connection_is_bound_to_the_oauth_user_that_opened_it(
    gateway: Running, issuer: Issuer
) -> None:
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    alice, bob = issuer.mint(sub="alice"), issuer.mint(sub="bob")
    async with gateway.client() as http, http.stream("GET", "/sse", headers=bearer(alice)) as stream:
        assert stream.status_code == 200
        endpoint = ""
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                endpoint = line[6:]
                break
        as_bob = await http.post(endpoint, json=ping, headers=bearer(bob))
        as_alice = await http.post(endpoint, json=ping, headers=bearer(issuer.mint(sub="alice")))
    assert as_bob.status_code == 404
    assert as_alice.status_code == 202


async def test_static_tokens_keep_working_beside_oauth(gateway: Running) -> None:
    async with gateway.client() as http:
        assert (await ask(http, STATIC, "hello")).json()["answer"] == "answer: hello"
        assert (await http.get("/metrics", headers=bearer(STATIC))).status_code == 200
        wrong = await http.get("/api/v1/sessions", headers=bearer(STATIC + "x"))
    assert wrong.status_code == 401 and challenge(wrong)["error"] == "invalid_token"


async def test_oauth_callers_share_capacity_even_with_one_static_caller(gateway: Running) -> None:
    """OAuth callers appear at run time: the shares hold though the book has one token."""
    book = gateway.app.service.callers
    assert book.share_of(100) == 75
    assert not book.open


async def test_a_gateway_with_oauth_alone_is_not_open_to_anonymous_callers() -> None:
    async with serving(Issuer()) as issuer, oauth_gateway(issuer, static=False) as gateway:
        assert not gateway.app.service.callers.open
        for path in ("/api/v1/sessions", "/metrics", "/api/v1/runs"):
            async with gateway.client() as http:
                answer = await http.get(path)
            assert answer.status_code == 401 and "resource_metadata" in challenge(answer), path
        assert (await post_mcp(gateway, None)).status_code == 401
        assert (await post_mcp(gateway, issuer.mint())).status_code == 200
        async with gateway.client() as http:  # health without a token says only status and version
            health = (await http.get("/api/v1/health")).json()
        assert set(health) <= {"status", "version"}


# ------------------------------------------------------------------ the issuer's keys


async def test_a_rotated_key_is_fetched_once_then_served_from_the_cache() -> None:
    async with serving(Issuer()) as issuer, oauth_gateway(issuer, jwksRefetchSeconds=0) as gateway:
        assert (await post_mcp(gateway, issuer.mint())).status_code == 200
        assert issuer.jwks_fetches == 1
        issuer.rotate()
        for _ in range(3):
            assert (await post_mcp(gateway, issuer.mint())).status_code == 200
        assert issuer.jwks_fetches == 2  # one refetch for the new key id, then the cache
        # the old key's tokens still pass (the issuer publishes both)
        assert (await post_mcp(gateway, issuer.mint(key=issuer.keys[1]))).status_code == 200
        assert issuer.jwks_fetches == 2


async def test_made_up_key_ids_cost_at_most_one_fetch_per_interval() -> None:
    async with serving(Issuer()) as issuer, oauth_gateway(issuer) as gateway:
        assert (await post_mcp(gateway, issuer.mint())).status_code == 200
        for n in range(5):
            answer = await post_mcp(gateway, issuer.mint(header={"kid": f"made-up-{n}"}))
            assert answer.status_code == 401 and "is not among" in challenge(answer)["error_description"]
        assert issuer.jwks_fetches == 1


async def test_the_keys_are_found_through_the_issuers_metadata_and_a_down_issuer_is_a_503() -> None:
    async with serving(Issuer()) as issuer:
        async with oauth_gateway(issuer, jwksUrl=f"{issuer.url}/no-such-jwks") as gateway:
            answer = await post_mcp(gateway, issuer.mint())
            assert answer.status_code == 503
            assert "cannot fetch the signing keys" in answer.json()["error"]["message"]
            assert f"GET {issuer.url}/no-such-jwks answered 404" in answer.json()["error"]["message"]
            # no challenge: RFC 6750 and the MCP spec define them for 400/401/403 only, and one
            # could tell the client that its (unchecked) token failed; Retry-After instead
            assert "www-authenticate" not in answer.headers
            assert answer.headers["retry-after"] == "5"
        async with oauth_gateway(issuer) as gateway:  # no jwksUrl: RFC 8414 metadata names it
            assert (await post_mcp(gateway, issuer.mint())).status_code == 200


# ------------------------------------------------------------------ a hosted-style client


async def test_the_typescript_sdk_client_logs_in_and_calls_agent_query() -> None:
    """The TypeScript SDK's own OAuth flow, end to end: 401 -> resource metadata -> the issuer's
    metadata -> dynamic registration -> authorization with PKCE (approved without a person) ->
    token (for the gateway as the RFC 8707 resource) -> ``agent_query`` as ``oauth:alice``."""
    from .mcp.test_typescript_client import NPM, node

    async with serving(Issuer(scope="query")) as issuer, oauth_gateway(issuer) as gateway:
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [node(), str(NPM / "ts_oauth_client.mjs"), gateway.url, "history"], check=False
            )
        assert done.returncode == 0, done.stderr.decode()
        result = json.loads(done.stdout.decode().strip().splitlines()[-1])
        assert result["error"] is None, result["error"]
        assert result["unauthorized"] and result["ok"], result
        assert result["text"].startswith("seen: history")
        # the SDK asked for a token for this gateway (RFC 8707), and the token names alice
        assert set(issuer.resources_asked) == {f"{gateway.url}/mcp"}
        resource = gateway.app.service.resource
        assert resource is not None
        grant = await resource.check(result["token"])
        assert isinstance(grant, Grant) and grant.name == "oauth:alice" and grant.scopes == {"query"}
        async with gateway.client() as http:
            sessions = (await http.get("/api/v1/sessions", headers=bearer(result["token"]))).json()[
                "sessions"
            ]
        assert len(sessions) == 1  # alice's conversation, seen with the SDK's token
