"""Fixture: a remote MCP server that needs an OAuth login, with its own authorization server.

Built with the MCP SDK's server-side OAuth pieces (``MCPServer`` with an
``OAuthAuthorizationServerProvider``: protected resource metadata, authorization server metadata,
dynamic registration, ``/authorize`` with PKCE, ``/token``, bearer checks with
``WWW-Authenticate``). The provider (``AutoApprove``) approves every authorization request at
once (no person: ``/authorize`` redirects straight back with a code), keeps everything in memory,
counts what it does, and can expire or revoke the tokens it issued. ``/token`` also takes the
``client_credentials`` grant (``client_secret_basic``) for the client ``CC_CLIENT``, which the
SDK's token handler does not: ``ClientCredentials`` answers it in front of the app, and there
``/mcp`` answers 403 ``insufficient_scope`` to a token without the scope ``step_up`` names.

Run as ``oauth_protected.py PORT [TOKEN_SECONDS]`` (Streamable HTTP at ``/mcp``), or build it
in a test with ``build(port)``. Tools: ``add`` (two numbers) and ``hello``.
"""

from __future__ import annotations

import base64
import json
import secrets
import sys
import time
from typing import Any
from urllib.parse import parse_qs

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

SCOPES = ("files:read", "files:write")
"""The scopes every registered client may ask for (none is required until ``step_up``)."""
CC_CLIENT = ("cc-client", "cc-secret-0123456789")
"""The client id and secret the client-credentials grant accepts."""


class AutoApprove:
    """An in-memory authorization server that approves every request (the SDK's provider protocol)."""

    def __init__(self, token_seconds: int = 3600) -> None:
        self.token_seconds = token_seconds
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.issued: list[str] = []  # every access and refresh token, for the secret scan
        self.counts = {"authorize": 0, "code": 0, "refresh": 0, "client_credentials": 0, "register": 0}
        self.asked_scopes: list[str] = []  # the scopes of the last authorization request
        self.step_up: str | None = None  # a scope /mcp now requires (403 insufficient_scope without it)
        self.token_auth: list[str] | None = None  # token_endpoint_auth_methods_supported, if not the SDK's
        self.challenge_scope: str | None = None  # a scope /mcp's 401 names in its challenge
        self.cc_scopes: list[str] = []  # the scopes of the last client_credentials request

    def add_client(self, client_id: str, secret: str | None, method: str) -> None:
        """A client registered beforehand (``oauth.clientId``), for any loopback redirect."""
        self.clients[client_id] = _Preregistered(
            client_id=client_id,
            client_secret=secret,
            token_endpoint_auth_method=method,
            redirect_uris=["http://127.0.0.1/callback"],
            grant_types=["authorization_code", "refresh_token"],
            scope=" ".join(SCOPES),
        )

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.counts["register"] += 1
        client_info.scope = " ".join(SCOPES)  # RFC 7591 §3.2.1: the server decides what a client may ask for
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.counts["authorize"] += 1
        self.asked_scopes = list(params.scopes or [])
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(code)

    def issue(
        self, client_id: str, scopes: list[str], resource: str | None, *, refresh: bool = True
    ) -> OAuthToken:
        token = "at-" + secrets.token_urlsafe(24)
        self.access[token] = AccessToken(
            token=token,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.token_seconds,
            resource=resource,
        )
        self.issued.append(token)
        refresh_token = None
        if refresh:
            refresh_token = "rt-" + secrets.token_urlsafe(24)
            self.refresh[refresh_token] = RefreshToken(
                token=refresh_token, client_id=client_id, scopes=scopes, resource=resource
            )
            self.issued.append(refresh_token)
        return OAuthToken(
            access_token=token,
            expires_in=self.token_seconds,
            scope=" ".join(scopes) or None,
            refresh_token=refresh_token,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.counts["code"] += 1
        self.codes.pop(authorization_code.code, None)
        assert client.client_id is not None
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.counts["refresh"] += 1
        self.refresh.pop(refresh_token.token, None)
        assert client.client_id is not None
        return self.issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def expire_access(self) -> None:
        """Every access token issued so far stops working (the refresh tokens still do)."""
        self.access.clear()

    def revoke_all(self) -> None:
        """Every token issued so far stops working, refresh tokens too (a login is needed)."""
        self.access.clear()
        self.refresh.clear()


class _Preregistered(OAuthClientInformationFull):
    """A client registered beforehand: any loopback port is its redirect (RFC 8252 §7.3)."""

    def validate_redirect_uri(self, redirect_uri: Any) -> Any:
        if redirect_uri is not None and str(redirect_uri).startswith("http://127.0.0.1:"):
            return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


class ClientCredentials:
    """``POST /token`` with ``grant_type=client_credentials``, answered in front of the app."""

    def __init__(self, app: Any, provider: AutoApprove) -> None:
        self.app = app
        self.provider = provider

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/mcp" and self.provider.step_up:
            bearer = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
            token = self.provider.access.get(bearer)
            if token is not None and self.provider.step_up not in token.scopes:
                challenge = f'Bearer error="insufficient_scope", scope="{self.provider.step_up}"'
                await _json(
                    send, 403, {"error": "insufficient_scope"}, [(b"www-authenticate", challenge.encode())]
                )
                return
        if scope["type"] == "http" and scope["path"] == "/.well-known/oauth-authorization-server":
            await self.app(scope, receive, _EditedJson(send, self._metadata))
            return
        if scope["type"] == "http" and scope["path"] == "/mcp" and self.provider.challenge_scope:
            send = _Challenge(send, self.provider.challenge_scope)
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/token":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
        offered = self.provider.token_auth
        basic = dict(scope["headers"]).get(b"authorization", b"").startswith(b"Basic ")
        if offered is not None and (
            (basic and "client_secret_basic" not in offered)
            or ("client_secret" in form and "client_secret_post" not in offered)
        ):  # a strict server: only the client authentication it advertises
            await _json(send, 401, {"error": "invalid_client", "error_description": "method not offered"})
            return
        if form.get("grant_type") != "client_credentials":
            sent = False

            async def replay() -> Any:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, replay, send)
            return
        headers = dict(scope["headers"])
        basic = headers.get(b"authorization", b"").decode()
        expected = base64.b64encode(f"{CC_CLIENT[0]}:{CC_CLIENT[1]}".encode()).decode()
        offered = self.provider.token_auth or ["client_secret_basic"]
        by_basic = "client_secret_basic" in offered and basic == f"Basic {expected}"
        by_post = (
            "client_secret_post" in offered
            and not basic
            and (form.get("client_id"), form.get("client_secret")) == CC_CLIENT
        )
        if not (by_basic or by_post):
            await _json(send, 401, {"error": "invalid_client"})
            return
        self.provider.counts["client_credentials"] += 1
        self.provider.cc_scopes = (form.get("scope") or "").split()
        token = self.provider.issue(
            CC_CLIENT[0], (form.get("scope") or "").split(), form.get("resource"), refresh=False
        )
        await _json(send, 200, token.model_dump(exclude_none=True))

    def _metadata(self, data: dict[str, Any]) -> dict[str, Any]:
        if self.provider.token_auth is not None:
            data["token_endpoint_auth_methods_supported"] = self.provider.token_auth
        return data


class _EditedJson:
    """A ``send`` that passes a JSON answer through ``edit`` (one body message, as the SDK sends)."""

    def __init__(self, send: Any, edit: Any) -> None:
        self.send = send
        self.edit = edit
        self.start: dict[str, Any] = {}

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.start = message
            return
        body = json.dumps(self.edit(json.loads(message["body"]))).encode()
        headers = [(k, v) for k, v in self.start["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await self.send({**self.start, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})


class _Challenge:
    """A ``send`` that names ``scope`` in a 401's ``WWW-Authenticate``."""

    def __init__(self, send: Any, scope: str) -> None:
        self.send = send
        self.scope = scope

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and message["status"] == 401:
            headers = [
                (k, v + f', scope="{self.scope}"'.encode()) if k.lower() == b"www-authenticate" else (k, v)
                for k, v in message["headers"]
            ]
            message = {**message, "headers": headers}
        await self.send(message)


async def _json(
    send: Any, status: int, data: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()
) -> None:  # type: ignore[assignment]
    body = json.dumps(data).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


def build(port: int, provider: AutoApprove | None = None) -> tuple[Any, AutoApprove]:
    """The ASGI app of the server on ``port`` (Streamable HTTP at ``/mcp``) and its provider."""
    provider = provider or AutoApprove()
    base = f"http://127.0.0.1:{port}"
    mcp = MCPServer(
        "oauth_protected",
        version="0.0.1",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=False,
        ),
    )

    @mcp.tool()
    def add(a: float, b: float) -> str:
        """Add two numbers."""
        return str(a + b)

    @mcp.tool()
    def hello() -> str:
        """Say hello."""
        return "hello from the protected server"

    return ClientCredentials(mcp.streamable_http_app(), provider), provider


if __name__ == "__main__":
    import uvicorn

    port = int(sys.argv[1])
    app, _ = build(port, AutoApprove(int(sys.argv[2]) if len(sys.argv) > 2 else 3600))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
