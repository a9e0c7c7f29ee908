"""An OAuth authorization server for the tests of the gateway as a protected resource.

``Issuer`` holds RSA signing keys (joserfc, authlib's JOSE library) and serves, on a real
127.0.0.1 socket (``serving``):

- ``/.well-known/oauth-authorization-server``: its RFC 8414 metadata;
- ``/jwks``: its public keys (each fetch counted in ``jwks_fetches``);
- ``/authorize``, ``/token``, ``/register``: authorization code with PKCE and dynamic client
  registration, run by authlib's OAuth 2 core (``authserver.py``); the authorization endpoint
  approves at once for the user ``user`` (nobody is asked), redirecting to the client.

``mint(...)`` signs a token with any claims and header, for the tests' bad tokens; ``rotate()``
publishes a new key and signs with it from then on.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn
from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class Issuer:
    """Keys, tokens and the served endpoints (module docstring).

    Args:
        audience: the resource its tokens are for (the gateway's ``/mcp`` URL).
        scope: the scopes of a token minted without ``scope``.
    """

    def __init__(self, audience: str = "", scope: str = "query") -> None:
        self.audience = audience
        self.scope = scope
        self.url = ""
        self.keys: list[RSAKey] = []
        self.rotations = 0
        self.jwks_fetches = 0
        self.user = "alice"
        """Who the authorization endpoint logs in (nobody is asked)."""
        self.resources_asked: list[str] = []
        """The RFC 8707 ``resource`` of every authorization and token request."""
        self.rotate()

    @property
    def signing(self) -> RSAKey:
        return self.keys[0]

    def rotate(self) -> str:
        """A new signing key, published beside the old ones; its key id."""
        self.rotations += 1
        kid = f"key-{self.rotations}"
        self.keys.insert(0, RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"}))
        return kid

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.as_dict(private=False) for key in self.keys]}

    def mint(self, *, header: dict[str, Any] | None = None, key: RSAKey | None = None, **claims: Any) -> str:
        """A token signed with ``key`` (default the signing key); claims given as None are left out."""
        key = key or self.signing
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.url,
            "aud": self.audience,
            "sub": self.user,
            "scope": self.scope,
            "iat": now,
            "exp": now + 300,
            **claims,
        }
        head = {"alg": "RS256", "kid": key.kid, "typ": "at+jwt", **(header or {})}
        return jwt.encode(
            head, {k: v for k, v in body.items() if v is not None}, key, algorithms=[head["alg"]]
        )

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks",
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "registration_endpoint": f"{self.url}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        }

    def app(self) -> Starlette:
        async def metadata(request: Request) -> Response:
            return JSONResponse(self.metadata())

        async def jwks(request: Request) -> Response:
            self.jwks_fetches += 1
            return JSONResponse(self.jwks())

        routes = [
            Route("/.well-known/oauth-authorization-server", metadata, methods=["GET"]),
            Route("/jwks", jwks, methods=["GET"]),
        ]
        from .authserver import flow_routes

        routes.extend(flow_routes(self))
        return Starlette(routes=routes)


@asynccontextmanager
async def serve_asgi(app: Any) -> AsyncIterator[str]:
    """``app`` under uvicorn on a free 127.0.0.1 port in this event loop; its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", ws="none"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        with anyio.fail_after(20):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
    sock.close()


@asynccontextmanager
async def serving(issuer: Issuer) -> AsyncIterator[Issuer]:
    """``issuer`` served; its ``url`` set."""
    async with serve_asgi(issuer.app()) as url:
        issuer.url = url
        yield issuer
