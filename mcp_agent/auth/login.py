"""``mcp-agent login NAME``: a person logs the gateway in to one remote server, once.

``log_in`` forgets the server's stored tokens (its client registration stays), listens on a free
loopback port (``127.0.0.1``, RFC 8252; the port a stored registration names when it is free, so
the registered redirect URI still matches) and sends one request to the server with the SDK's
OAuth provider (``upstream.build_provider``) on it. The server's 401 starts the SDK's flow; when
it reaches the authorization URL, ``open_browser`` prints it and opens it (the command in
``$MCP_AGENT_BROWSER``, given the URL as its one argument, else Python's ``webbrowser``); the
authorization server sends the browser back to the loopback receiver with the code, and the SDK
exchanges it for tokens, which land in the token store (``token_store.py``). The wait for the
browser is bounded (``timeout``); ``LoginFailed`` says what went wrong. ``grant:
client_credentials`` runs the same request and needs no browser.

``log_out`` forgets everything stored for the server.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import webbrowser
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import anyio.abc
import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult
from mcp_types import LATEST_PROTOCOL_VERSION
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._redact import redact_url
from ..config import OAuthConfig, RemoteServerConfig
from ..exceptions import LoginFailed
from .token_requests import AdjustedAuth
from .token_store import TokenStore
from .upstream import build_provider, open_store

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
MAX_REQUEST_BYTES = 16 * 1024
"""The most of the browser's request the receiver reads."""
MODERN = max(MODERN_PROTOCOL_VERSIONS)
"""The protocol version of the ``server/discover`` probe."""
DEFAULT_TIMEOUT = 300.0
"""Seconds ``mcp-agent login`` waits for the person to finish in the browser."""
PAGE = (
    b"<!doctype html><meta charset=utf-8><title>mcp-agent</title><p>%s</p><p>You can close this window.</p>"
)


@dataclass
class Outcome:
    """What the loopback receiver got: the code and state, or the server's error."""

    code: str | None = None
    state: str | None = None
    iss: str | None = None
    error: str | None = None


class LoopbackReceiver:
    """Takes the authorization server's redirect on ``http://127.0.0.1:PORT/callback``."""

    def __init__(self, listener: anyio.abc.SocketListener) -> None:
        self.listener = listener
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.redirect_uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        self._send, self._receive = anyio.create_memory_object_stream[Outcome](1)

    async def serve(self) -> None:
        """Answer requests until the one with the code (or an error) has come."""
        async with self._send:
            while True:
                async with await self.listener.accept() as stream:
                    outcome = await self._answer(stream)
                if outcome is not None:
                    await self._send.send(outcome)
                    return

    async def _answer(self, stream: anyio.abc.SocketStream) -> Outcome | None:
        head = b""
        with anyio.move_on_after(10):
            while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_BYTES:
                try:
                    head += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        target = urlsplit(line[1]) if len(line) >= 2 and line[0] == "GET" else None
        if target is None or target.path != CALLBACK_PATH:
            await _reply(stream, b"404 Not Found", b"Not the login callback.")
            return None
        query = {key: values[0] for key, values in parse_qs(target.query).items()}
        if "error" in query:
            described = query.get("error_description")
            outcome = Outcome(error=query["error"] + (f": {described}" if described else ""))
            await _reply(stream, b"200 OK", b"The login was refused.")
            return outcome
        if not query.get("code"):
            await _reply(stream, b"400 Bad Request", b"No authorization code.")
            return None
        await _reply(stream, b"200 OK", b"Logged in.")
        return Outcome(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def result(self, timeout: float, name: str) -> AuthorizationCodeResult:
        """The code (the SDK's ``callback_handler``, within ``timeout`` seconds); raises
        ``LoginFailed`` on the server's error or when the time is up."""
        outcome: Outcome | None = None
        async with self._receive:
            with anyio.move_on_after(timeout):
                outcome = await self._receive.receive()
        if outcome is None:
            raise LoginFailed(
                f"no login within {timeout:g} s: open the URL above in a browser and finish there, "
                f"or run `mcp-agent login {name}` again"
            )
        if outcome.error is not None or outcome.code is None:
            raise LoginFailed(f"the authorization server refused the login: {outcome.error}")
        return AuthorizationCodeResult(code=outcome.code, state=outcome.state, iss=outcome.iss)


async def _reply(stream: anyio.abc.SocketStream, status: bytes, text: bytes) -> None:
    body = PAGE % text
    head = b"HTTP/1.1 %s\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n" % (
        status,
        len(body),
    )
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head + b"Connection: close\r\n\r\n" + body)


@asynccontextmanager
async def open_receiver(port: int = 0) -> AsyncIterator[LoopbackReceiver]:
    """A receiver on ``port`` of 127.0.0.1 (any free one if 0, or if ``port`` is taken)."""
    try:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    except OSError:
        if not port:
            raise
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener:
        yield LoopbackReceiver(cast(anyio.abc.SocketListener, listener.listeners[0]))  # one address


def with_scopes(url: str, scopes: list[str] | None) -> str:
    """The authorization URL with the configured ``scopes`` added to the ones the SDK chose."""
    if not scopes:
        return url
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    chosen = next((value.split() for key, value in query if key == "scope"), [])
    merged = " ".join(dict.fromkeys([*chosen, *scopes]))
    query = [(key, value) for key, value in query if key != "scope"] + [("scope", merged)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def registered_port(store: TokenStore) -> int:
    """The loopback port of the stored registration's redirect URI (0: none)."""
    client = store.load_client()
    for uri in (client.redirect_uris or []) if client is not None else []:
        parts = urlsplit(str(uri))
        if parts.hostname == "127.0.0.1" and parts.port:
            return parts.port
    return 0


async def open_browser(url: str, tg: anyio.abc.TaskGroup, say: Callable[[str], None]) -> None:
    """Print ``url`` and open it: ``$MCP_AGENT_BROWSER URL`` when set, else ``webbrowser``."""
    say(f"Open this URL in a browser to log in:\n  {url}")
    command = os.environ.get("MCP_AGENT_BROWSER")
    if command:

        async def run() -> None:
            result = await anyio.run_process([*shlex.split(command), url], check=False)
            if result.returncode:
                say(f"$MCP_AGENT_BROWSER exited with {result.returncode}; open the URL above yourself")

        tg.start_soon(run)
    else:
        await anyio.to_thread.run_sync(webbrowser.open, url)


Probe = tuple[str, dict[str, str], bytes | None]


def _probes(config: RemoteServerConfig) -> list[Probe]:
    """The requests that make the server ask for a login, tried in turn until one does: an SSE
    server's GET; else ``initialize`` (a server may let it through unauthenticated), then
    ``server/discover`` (the 2026-07-28 era's first request)."""
    if config.transport == "sse":
        return [("GET", {"Accept": "text/event-stream"}, None)]
    json_headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"%s",'
        b'"capabilities":{},"clientInfo":{"name":"mcp-agent","version":"login"}}}'
    ) % LATEST_PROTOCOL_VERSION.encode()
    discover = b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}'
    modern = {**json_headers, "MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"}
    return [("POST", json_headers, initialize), ("POST", modern, discover)]


async def log_in(
    name: str,
    config: RemoteServerConfig,
    *,
    folder: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
) -> TokenStore:
    """Log in to the server ``name`` and store its tokens; returns the store.

    Raises:
        LoginFailed: the server or its authorization server refused, the flow failed, or the
            person did not finish within ``timeout`` seconds.
    """
    oauth = config.oauth or OAuthConfig()
    store = open_store(name, config, folder)
    store.forget_tokens()
    scopes = [*(oauth.scopes or []), *store.wanted_scopes()]  # and what a step-up asked for
    port = registered_port(store)
    failure: LoginFailed | None = None
    status = 0
    async with open_receiver(port) as receiver, anyio.create_task_group() as tg:
        if port and not receiver.redirect_uri.endswith(f":{port}{CALLBACK_PATH}"):
            store.forget()  # the registered port is taken: register again with this one

        async def redirect(url: str) -> None:
            await open_browser(with_scopes(url, scopes), tg, say)

        provider = build_provider(
            config,
            store,
            redirect_uri=receiver.redirect_uri,
            redirect_handler=redirect,
            callback_handler=lambda: receiver.result(timeout, name),
        )
        tg.start_soon(receiver.serve)
        try:
            auth = AdjustedAuth(provider, oauth, store)  # client authentication as advertised
            async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0)) as http:
                for method, headers, body in _probes(config):
                    async with http.stream(
                        method, config.url, headers={**config.headers, **headers}, content=body
                    ) as response:
                        status = response.status_code
                    if store.has_tokens():
                        break
        except LoginFailed as exc:
            failure = exc
        except (OAuthFlowError, httpx2.HTTPError, ValueError) as exc:
            failure = LoginFailed(f"login to {name} failed: {exc}")
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    tokens, _ = store.load_tokens()
    if tokens is None:
        if status < 400:
            raise LoginFailed(f"{name} ({redact_url(config.url)}) answered without asking for a login")
        raise LoginFailed(f"{name} answered {status} and no login took place")
    if status in (401, 403):
        raise LoginFailed(f"{name} still answers {status} with the new token")
    store.forget_wanted_scopes()
    return store


def log_out(name: str, config: RemoteServerConfig, *, folder: Path | None = None) -> bool:
    """Forget the tokens and registration of ``name``; whether anything was stored."""
    return open_store(name, config, folder).forget()
