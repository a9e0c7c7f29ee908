"""The gateway as an OAuth client of one remote MCP server, while it serves.

The flow itself is the MCP SDK's (``mcp.client.auth``): discovery from the server's 401
(protected resource metadata, RFC 8414 and OpenID Connect metadata, issuer checks), client
identity (a Client ID Metadata Document, dynamic registration, or ``oauth.clientId``), PKCE,
resource indicators, scope selection and step-up, refresh, and the client-credentials
extension (``client_secret_basic``, ``private_key_jwt``). ``build_provider`` makes the SDK's
provider from ``mcpServers.NAME.oauth``.

``UpstreamAuth`` is the ``httpx2.Auth`` on the server's HTTP client (``open_server_transport``;
the raw call path shares that client). It keeps the provider's flow for what needs no person:

- a stored, fresh access token is sent as it is, without the provider's lock (calls to one server
  run side by side);
- a token about to expire (``REFRESH_MARGIN``) is refreshed first, and a 401 is answered by one
  refresh and one retry;
- ``grant: client_credentials`` logs in by itself whenever the server asks;
- anything that needs a person (no tokens, a refresh that failed, a scope step-up: its scopes
  are kept for the next login) is not attempted: the server's own 401 goes back to the transport and ``needs_login`` says
  "needs login: `mcp-agent login NAME`", which the connection shows as the server's state and
  as the answer of its tools. A later ``mcp-agent login`` (another process) is picked up from
  the token store on the next request.

Each token request the provider builds passes ``token_requests.passing`` on its way out (client
authentication as the authorization server advertises, the scopes of client credentials), and
the server's metadata kept from the last login lets a refresh go to its token endpoint.

A server without an ``oauth`` key gets the same auth (with ``{}``): it is a pass-through until
the server answers 401 with a ``Bearer`` challenge. A server with a static ``Authorization``
header, or with credentials in its URL (``http://user:secret@host/mcp``, sent as HTTP Basic by
the client), and no ``oauth`` key gets none (``for_server``).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.utils import extract_scope_from_www_auth
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

from ..config import OAuthConfig, RemoteServerConfig
from ..exceptions import ConfigError
from .token_requests import passing, quiet_sdk_flow_errors
from .token_store import TokenStore, login_hint, tokens_folder

logger = logging.getLogger(__name__)

REFRESH_MARGIN = 30.0
"""Seconds before its expiry a token is refreshed (at most a tenth of its lifetime)."""
CLIENT_NAME = "mcp-agent"
PLACEHOLDER_REDIRECT = "http://127.0.0.1/callback"
"""The redirect URI of a provider that never sends a person to log in (while serving)."""


def configured_client(oauth: OAuthConfig) -> OAuthClientInformationFull | None:
    """The client registered beforehand (``oauth.clientId``), for the authorization-code grant."""
    if oauth.client_id is None or oauth.grant != "authorization_code":
        return None
    return OAuthClientInformationFull(
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        redirect_uris=None,
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_basic" if oauth.client_secret else "none",
    )


def open_store(name: str, config: RemoteServerConfig, folder: Path | None = None) -> TokenStore:
    """The token store of the server ``name`` (in the state folder's ``oauth/`` by default)."""
    oauth = config.oauth or OAuthConfig()
    return TokenStore(name, config.url, folder or tokens_folder(), client=configured_client(oauth))


def build_provider(
    config: RemoteServerConfig,
    store: TokenStore,
    *,
    redirect_uri: str = PLACEHOLDER_REDIRECT,
    redirect_handler: Callable[[str], Awaitable[None]] | None = None,
    callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
) -> OAuthClientProvider:
    """The SDK's OAuth provider for ``config.oauth`` (``{}`` when absent).

    Raises:
        ConfigError: ``privateKeyFile`` cannot be read.
    """
    oauth = config.oauth or OAuthConfig()
    scope = " ".join(oauth.scopes) if oauth.scopes else None
    if oauth.grant == "client_credentials":
        assert oauth.client_id is not None  # the config checks it
        with warnings.catch_warnings():
            # without ``issuer`` the SDK warns that it will be required; the config leaves it optional
            warnings.simplefilter("ignore")
            if oauth.private_key_file:
                try:
                    key = Path(oauth.private_key_file).expanduser().read_text(encoding="utf-8")
                except OSError as exc:
                    raise ConfigError(
                        f"oauth.privateKeyFile: cannot read {oauth.private_key_file}: {exc}"
                    ) from exc
                signer = SignedJWTParameters(
                    issuer=oauth.client_id,
                    subject=oauth.client_id,
                    signing_key=key,
                    signing_algorithm=oauth.private_key_algorithm,
                )
                return PrivateKeyJWTOAuthProvider(
                    config.url,
                    store,
                    oauth.client_id,
                    signer.create_assertion_provider(),
                    scope=scope,
                    issuer=oauth.issuer,
                )
            assert oauth.client_secret is not None
            return ClientCredentialsOAuthProvider(
                config.url, store, oauth.client_id, oauth.client_secret, scope=scope, issuer=oauth.issuer
            )
    metadata = OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic parses the URL
        client_name=CLIENT_NAME,
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_basic" if oauth.client_secret else "none",
        scope=scope,
    )
    return OAuthClientProvider(
        config.url,
        metadata,
        store,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=oauth.client_metadata_url,
    )


def _challenged(response: httpx2.Response) -> bool:
    """The server wants (other) credentials: a 401, or a 403 ``insufficient_scope``."""
    if response.status_code == 401:
        return True
    challenge = response.headers.get("www-authenticate", "")
    return response.status_code == 403 and "insufficient_scope" in challenge


def _step_up(response: httpx2.Response) -> str | None:
    """The scopes a 403 ``insufficient_scope`` asks for ("" when it names none), else None."""
    if response.status_code != 403 or "insufficient_scope" not in response.headers.get(
        "www-authenticate", ""
    ):
        return None
    return extract_scope_from_www_auth(response) or ""


def _bearer_challenge(response: httpx2.Response) -> bool:
    """An OAuth challenge (RFC 6750 ``Bearer``), which a server without ``oauth`` may send."""
    return response.headers.get("www-authenticate", "").lstrip().lower().startswith("bearer")


class UpstreamAuth(httpx2.Auth):
    """The OAuth client of one server on its HTTP client (see the module docstring).

    Attributes:
        name: the server's name.
        needs_login: why the server cannot be reached without a person (None: it can).
        store: its token store.
        provider: the SDK's provider.
    """

    def __init__(self, name: str, config: RemoteServerConfig, store: TokenStore) -> None:
        self.name = name
        self.store = store
        self.configured = config.oauth is not None
        self.headless = config.oauth is not None and config.oauth.grant == "client_credentials"
        self.oauth = config.oauth or OAuthConfig()
        self.provider = build_provider(config, store)
        self.needs_login: str | None = None
        self.stepped: list[str] = []  # scopes a 403 insufficient_scope asked for (client credentials)
        quiet_sdk_flow_errors()
        self._stamp: float | None = None
        self._load()

    @classmethod
    def for_server(
        cls, name: str, config: RemoteServerConfig, folder: Path | None = None
    ) -> UpstreamAuth | None:
        """The auth of a remote server, or None when it sends its own credentials: an
        ``Authorization`` header, or a user and password in its URL (which the HTTP client sends
        as HTTP Basic only when it has no auth of its own)."""
        if config.oauth is None and (
            any(key.lower() == "authorization" for key in config.headers)
            or "@" in urlsplit(config.url).netloc
        ):
            return None
        return cls(name, config, open_store(name, config, folder))

    def _load(self) -> None:
        """Take what the store holds now (at start, and after a login in another process)."""
        self._stamp = self.store.stamp()
        tokens, expires_at = self.store.load_tokens()
        context = self.provider.context
        held = context.current_tokens.access_token if context.current_tokens is not None else None
        context.current_tokens = tokens
        context.token_expiry_time = expires_at
        if not self.headless:
            context.client_info = self.store.load_client()
        if context.oauth_metadata is None:  # what a login in this or another process discovered
            context.oauth_metadata = self.store.load_metadata()
        if tokens is not None and tokens.access_token != held:  # a new login (not our own write)
            self.needs_login = None

    def _fresh_token(self) -> str | None:
        """The access token to send as it is: held, and not within ``REFRESH_MARGIN`` of expiry."""
        context = self.provider.context
        tokens = context.current_tokens
        if tokens is None or not tokens.access_token:
            return None
        expiry = context.token_expiry_time
        if expiry is not None:
            margin = min(REFRESH_MARGIN, (tokens.expires_in or 0) / 10)
            if time.time() >= expiry - margin:
                return None
        return tokens.access_token

    def _expire(self, token: str | None) -> None:
        """Make the provider refresh ``token`` on its next request (unless it was replaced)."""
        context = self.provider.context
        if context.current_tokens is not None and context.current_tokens.access_token == token:
            context.token_expiry_time = 1.0  # in the past (0 would mean "never expires" to the SDK)

    def _adjusted(self, outgoing: httpx2.Request) -> httpx2.Request:
        return passing(outgoing, self.provider, self.oauth, self.store, self.stepped)

    def _what_to_do(self) -> str:
        """The advice that ends the failure's log line."""
        if not self.headless:
            return ""
        credential = "privateKeyFile" if self.oauth.private_key_file else "clientSecret"
        return (
            f"; check mcpServers.{self.name}.oauth.clientId and {credential} in agent.json,"
            " and that the authorization server grants this client client_credentials"
        )

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.store.stamp() != self._stamp:
            self._load()
        token = self._fresh_token()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
            response = yield request
            if not _challenged(response):
                return
            wanted = _step_up(response)
            if wanted is not None and not self.headless:  # more scopes: a person must consent
                if wanted:
                    self.store.want_scopes(wanted)  # the next `mcp-agent login` asks for them too
                self.needs_login = login_hint(self.name)
                return
            if wanted:  # client credentials: the next token request asks for them too
                self.stepped = list(dict.fromkeys([*self.stepped, *wanted.split()]))
            self._expire(token)  # one refresh, then one retry, below
        elif self.provider.context.current_tokens is not None:
            self._expire(self.provider.context.current_tokens.access_token)  # about to expire
        if not self.headless and not self.provider.context.can_refresh_token():
            request.headers.pop("Authorization", None)
            response = yield request
            if _challenged(response) and (self.configured or _bearer_challenge(response)):
                self.needs_login = login_hint(self.name)
            return
        flow = self.provider.async_auth_flow(request)
        answered: httpx2.Response | None = None
        try:
            outgoing = self._adjusted(await flow.__anext__())
            while True:
                response = yield outgoing
                if outgoing is request:
                    answered = response
                    if _challenged(response) and not self.headless:
                        self.needs_login = login_hint(self.name)  # the refresh failed or did not help
                        return
                outgoing = self._adjusted(await flow.asend(response))
        except StopAsyncIteration:
            refused = answered is not None and _challenged(answered)
            self.needs_login = (
                f"login failed: the server refused the token ({answered.status_code})"
                if (refused and answered is not None)
                else None
            )
        except (OAuthFlowError, httpx2.HTTPError, ValueError) as exc:
            self.needs_login = (
                f"login failed: {exc}{self._what_to_do()}" if self.headless else login_hint(self.name)
            )
            logger.debug("tool server %s: %s", self.name, self.needs_login)  # the connection logs it once
            request.headers.pop("Authorization", None)
            yield request  # the server's own answer goes back to the transport
        finally:
            await flow.aclose()
