"""The gateway's security rules as functions: the bind check and the Host and Origin rules.

One rule for every route (REST, the dashboard, ``/metrics``, MCP over SSE and Streamable HTTP):
``middleware/hosts.py`` applies it in front of everything, and the SDK's own DNS-rebinding
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
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..config import GatewayConfig
from ..exceptions import ConfigError

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
    fix = 'Set gateway.authToken (for example "authToken": "${MCP_AGENT_TOKEN}") or gateway.callers'
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
