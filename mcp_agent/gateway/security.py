"""The gateway's security rules: the bind check, the Host and Origin rules, and CORS.

One rule for every route (REST, the dashboard, ``/metrics``, MCP over SSE and Streamable HTTP):
``HostOriginMiddleware`` applies it in front of everything (421, 403), and the SDK's own DNS-rebinding
check is switched off so that no route answers by a second, different rule.

- A Host header is accepted when its name, compared case-insensitively, is exactly one of
  ``localhost``, ``127.0.0.1``, ``::1``, the bind host, or a name in ``gateway.allowedHosts``;
  the port may be any valid port. ``evil.localhost`` and ``127.0.0.2`` are not the names the
  gateway listens under, so they are refused (bind ``127.0.0.2`` to be reached as such).
- An Origin header is accepted when absent, when it is ``http(s)://`` one of the loopback
  names above (any port), or when it is listed in ``gateway.allowedOrigins`` (exactly).
  ``null`` is refused.
- Binding a non-loopback address without any token (``authToken`` or ``callers``) is refused.
  A bind name counts as loopback only when every address it resolves to is loopback: a name
  that merely ends in ``.localhost`` but resolves elsewhere does not.
- So is a gateway without any token whose ``allowedHosts`` names a host other than a loopback
  address or ``localhost``: accepting that Host means something (a reverse proxy, a tunnel, a
  port forward) brings requests from elsewhere to the loopback port, and everyone who reaches
  it would be the anonymous local caller, with every scope.

``CORSMiddleware`` runs after it, so every Origin it sees is allowed: it answers preflights and
names that origin (never a wildcard) in the response.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import GatewayConfig
from ..exceptions import ConfigError
from .middleware import send_error

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
_PORT = re.compile(r"[0-9]{1,5}")
_NAME = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]+")


def _address_is_loopback(text: str) -> bool | None:
    """True/False for an IP address (IPv4-mapped forms by their IPv4 address); None for a name."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def bind_is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves only this machine.

    An IP address by its value; ``localhost`` by definition; any other name only when every
    address it resolves to is loopback (``app.localhost`` resolving to 127.0.0.1 counts,
    ``evil.localhost`` resolving to a LAN address or not at all does not).
    """
    name = host.strip().strip("[]").lower()
    if not name or name in WILDCARD_BINDS:
        return False
    known = _address_is_loopback(name)
    if known is not None:
        return known
    if name == "localhost":
        return True
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]).split("%")[0] for info in infos}
    return bool(addresses) and all(_address_is_loopback(address) for address in addresses)


def check_bind(host: str, has_token: bool, allowed_hosts: Sequence[str] = ()) -> None:
    """Refuse to serve a non-loopback address, or non-loopback Host names, without a token.

    Raises:
        ConfigError: no caller token is configured and ``host`` is not loopback, or an entry of
            ``allowed_hosts`` names another host (see the module docstring).
    """
    if has_token:
        return
    fix = 'Set gateway.authToken (for example "authToken": "${MCP_AGENT_TOKEN}"), gateway.callers or gateway.oauth'
    if not bind_is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host!r} without gateway.authToken: anyone who can reach it could "
            f"run queries and approve tool calls. {fix}, or bind 127.0.0.1.",
            "gateway.authToken",
        )
    remote = [name for name in allowed_hosts if not _names_loopback(name)]
    if remote:
        raise ConfigError(
            f"refusing to serve gateway.allowedHosts {remote} without a token: a proxy or tunnel that "
            "forwards those names lets anyone who reaches it run queries and approve tool calls as "
            f"the local caller. {fix}, or remove them from gateway.allowedHosts.",
            "gateway.allowedHosts",
        )


def _names_loopback(allowed: str) -> bool:
    """Whether an ``allowedHosts`` entry names this machine only: a loopback address,
    ``localhost`` or a ``*.localhost`` name (RFC 6761); no name is looked up."""
    parts = split_host(allowed)
    if parts is None:
        return True  # never matches a Host header, so it admits nobody
    name = parts[0]
    known = _address_is_loopback(name)
    if known is not None:
        return known
    return name == "localhost" or name.endswith(".localhost")


def split_host(value: str) -> tuple[str, str | None] | None:
    """A Host header value as ``(name, port)``, the name lower-cased; None when malformed.

    ``[::1]:8765`` gives ``("::1", "8765")``; a value with a path, user info, spaces or a port
    that is not a number is malformed.
    """
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end == -1:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, port = value.split(":", 1)
    else:
        name, port = value, None
    if port is not None and not (_PORT.fullmatch(port) and int(port) <= 65535):
        return None
    if not name or not _NAME.fullmatch(name):
        return None
    return name, port


def normalise_origin(origin: str) -> str:
    """``scheme://host[:port]`` lower-cased, without a trailing slash or path."""
    parts = urlsplit(origin.strip())
    if not parts.scheme or not parts.netloc:
        return origin.strip().lower().rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


@dataclass(frozen=True)
class HostRules:
    """Which Host and Origin headers the gateway accepts (the same for every route)."""

    hosts: frozenset[str]
    """Accepted host names (no port), lower-case."""
    origins: frozenset[str]
    """Accepted non-loopback origins, normalised."""

    def host_ok(self, host: str | None) -> bool:
        if not host:
            return False
        parts = split_host(host)
        return parts is not None and parts[0] in self.hosts

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True
        origin = origin.strip()
        if not origin or origin.lower() == "null":
            return False
        try:
            parts = urlsplit(origin)
            hostname, _ = parts.hostname, parts.port  # .port raises for a port that is not a number
        except ValueError:
            return False
        if parts.scheme in ("http", "https") and hostname in LOOPBACK_NAMES and not parts.path.strip("/"):
            return True
        return normalise_origin(origin) in self.origins


def host_rules(config: GatewayConfig, bind_host: str | None = None) -> HostRules:
    """The rules for a gateway bound to ``bind_host`` (default: ``config.host``)."""
    bind = (bind_host if bind_host is not None else config.host).strip().strip("[]").lower()
    hosts = set(LOOPBACK_NAMES)
    if bind not in WILDCARD_BINDS:
        hosts.add(bind)
    for allowed in config.allowed_hosts:
        parts = split_host(allowed)
        if parts is not None:
            hosts.add(parts[0])
    origins = frozenset(normalise_origin(origin) for origin in config.allowed_origins)
    return HostRules(frozenset(hosts), origins)


# Host and Origin checks on every request (DNS rebinding, cross-site calls): 421 and 403.
logger = logging.getLogger(__name__)


class HostOriginMiddleware:
    """Refuses a request whose Host (421) or Origin (403) the rules do not accept."""

    def __init__(self, app: ASGIApp, rules: HostRules) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.rules.host_ok(host):
            logger.warning("refused a request with Host %r", host)
            await send_error(
                send, 421, f"Host {host!r} is not allowed (gateway.allowedHosts)", "misdirected_request"
            )
            return
        origin = headers.get("origin")
        if not self.rules.origin_ok(origin):
            logger.warning("refused a request with Origin %r", origin)
            await send_error(
                send, 403, f"Origin {origin!r} is not allowed (gateway.allowedOrigins)", "forbidden_origin"
            )
            return
        await self.app(scope, receive, send)


# CORS for allowed origins only: never a wildcard, and only when the request names its Origin.
#
# Runs after ``HostOriginMiddleware``, so any Origin that reaches it is allowed; it answers
# preflights and adds ``Access-Control-Allow-Origin: <that origin>`` to the response.
ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"
ALLOW_HEADERS = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version"
EXPOSE_HEADERS = "Mcp-Session-Id, Mcp-Protocol-Version, Retry-After, WWW-Authenticate"


class CORSMiddleware:
    """Echoes an (already vetted) Origin back; answers preflight requests with 204."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [
                        (b"access-control-allow-origin", origin.encode("latin-1")),
                        (b"access-control-allow-methods", ALLOW_METHODS.encode()),
                        (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
                        (b"access-control-max-age", b"600"),
                        (b"vary", b"Origin"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                out["Access-Control-Allow-Origin"] = origin
                out["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
                out.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, send_with_cors)
