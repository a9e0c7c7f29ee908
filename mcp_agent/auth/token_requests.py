"""The token requests of the SDK's OAuth client, adjusted before they leave, and its logs.

The MCP SDK (``mcp.client.auth``) builds every token request itself. Two choices its public API
does not leave to the caller are made here, on the request, as it passes through the auth flow
that drives the SDK's (``UpstreamAuth`` while serving, ``AdjustedAuth`` for ``mcp-agent login``).
A token request also keeps the authorization server's metadata in the token store, so that a
refresh in a later process goes to its token endpoint, authenticated as it advertises:

- **client authentication as advertised.** A client registered beforehand (``oauth.clientId``
  with ``clientSecret``) authenticates the way the authorization server's metadata offers
  (``token_endpoint_auth_methods_supported``, RFC 8414): ``client_secret_basic`` when offered or
  when nothing is said (the RFC's default), else ``client_secret_post``, else ``none`` (the
  secret is not sent: a public client). The SDK alone always sends ``client_secret_basic``.
  A registration the server made (dynamic registration, a Client ID Metadata Document) carries
  the method the server chose and is left alone, as is ``private_key_jwt``.
- **the scopes of ``client_credentials``.** Configured ``oauth.scopes`` are what a machine
  client asks for (an authorization server such as Entra ID refuses anything beside them); the
  SDK would replace them with the server's challenge or its ``scopes_supported``. Scopes a 403
  ``insufficient_scope`` named since are added (SEP-2350's union). Without ``oauth.scopes`` the
  SDK's choice stays, with those step-up scopes added.

``quiet_sdk_flow_errors`` drops the SDK's traceback of a failed flow (logged at each retry):
the gateway logs one line of its own instead (``UpstreamAuth``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from urllib.parse import parse_qsl

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthMetadata

from ..config import OAuthConfig
from .token_store import TokenStore

TOKEN_GRANTS = frozenset({"authorization_code", "refresh_token", "client_credentials"})
FORM = "application/x-www-form-urlencoded"
SDK_FLOW_LOGGER = "mcp.client.auth.oauth2"


def auth_method(supported: Sequence[str] | None, *, grant: str) -> str:
    """How a client with a secret authenticates at a token endpoint that offers ``supported``."""
    if not supported or "client_secret_basic" in supported:
        return "client_secret_basic"
    if "client_secret_post" in supported:
        return "client_secret_post"
    if "none" in supported and grant != "client_credentials":
        return "none"
    return "client_secret_basic"  # nothing we can do is offered: the server's refusal says so


def passing(
    request: httpx2.Request,
    provider: OAuthClientProvider,
    oauth: OAuthConfig,
    store: TokenStore,
    stepped: Sequence[str] = (),
) -> httpx2.Request:
    """``request`` adjusted; a token request also keeps the server's metadata in ``store``."""
    metadata = provider.context.oauth_metadata
    if metadata is not None and token_form(request) is not None:
        store.save_metadata(metadata)
    return adjusted(request, oauth, metadata, stepped)


def token_form(request: httpx2.Request) -> dict[str, str] | None:
    """The form of a token request (a POST with a ``grant_type`` we know), else None."""
    if request.method != "POST" or FORM not in request.headers.get("content-type", ""):
        return None
    form = dict(parse_qsl(request.content.decode(errors="replace"), keep_blank_values=True))
    return form if form.get("grant_type") in TOKEN_GRANTS else None


def adjusted(
    request: httpx2.Request,
    oauth: OAuthConfig,
    metadata: OAuthMetadata | None,
    stepped: Sequence[str] = (),
) -> httpx2.Request:
    """``request`` as it should leave (see the module docstring); itself when it needs nothing."""
    form = token_form(request)
    if form is None:
        return request
    headers = {
        key: value
        for key, value in request.headers.items()
        if key.lower() not in ("content-length", "content-type")
    }
    grant = form["grant_type"]
    changed = False
    if oauth.client_id and oauth.client_secret and not oauth.private_key_file and metadata is not None:
        method = auth_method(metadata.token_endpoint_auth_methods_supported, grant=grant)
        if method != "client_secret_basic":
            headers = {key: value for key, value in headers.items() if key.lower() != "authorization"}
            form.pop("client_secret", None)
            form["client_id"] = oauth.client_id
            if method == "client_secret_post":
                form["client_secret"] = oauth.client_secret
            changed = True
    if grant == "client_credentials" and (oauth.scopes or stepped):
        base = list(oauth.scopes) if oauth.scopes else form.get("scope", "").split()
        scope = " ".join(dict.fromkeys([*base, *stepped]))
        if scope != form.get("scope", ""):
            if scope:
                form["scope"] = scope
            else:
                form.pop("scope", None)
            changed = True
    if not changed:
        return request
    return httpx2.Request(request.method, request.url, headers=headers, data=form)


class AdjustedAuth(httpx2.Auth):
    """The SDK's ``provider`` with its token requests adjusted (for ``mcp-agent login``)."""

    requires_response_body = True

    def __init__(self, provider: OAuthClientProvider, oauth: OAuthConfig, store: TokenStore) -> None:
        self.provider = provider
        self.oauth = oauth
        self.store = store

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self.provider.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield passing(outgoing, self.provider, self.oauth, self.store)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


class _DropFlowTraceback(logging.Filter):
    """Drops the SDK's ``OAuth flow error`` traceback (the gateway logs one line instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "OAuth flow error" and record.exc_info)


def quiet_sdk_flow_errors() -> None:
    """Install the filter on the SDK's OAuth logger (idempotent)."""
    logger = logging.getLogger(SDK_FLOW_LOGGER)
    if not any(isinstance(existing, _DropFlowTraceback) for existing in logger.filters):
        logger.addFilter(_DropFlowTraceback())
