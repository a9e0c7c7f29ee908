"""The gateway's security rules as pure functions: bind checks, Host and Origin rules, tokens.

The same rules guard every route. The MCP routes also get them as the SDK's
``TransportSecuritySettings`` (DNS-rebinding protection); the REST routes, the dashboard and
``/metrics`` get them from ``middleware/hosts.py``.

- A Host header is accepted when its name is a loopback name (``localhost``, ``127.0.0.1``,
  ``::1``), the bind host, or listed in ``gateway.allowedHosts`` (any port).
- An Origin header is accepted when absent, when its host is a loopback name (http or https,
  any port) or when it is listed in ``gateway.allowedOrigins`` (exactly). ``null`` is refused.
- A non-loopback bind without ``authToken`` is refused at start.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..config import GatewayConfig
from ..exceptions import ConfigError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``*.localhost``, 127.0.0.0/8 and ``::1`` (brackets allowed)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, auth_token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token.

    Raises:
        ConfigError: ``host`` is not loopback and no ``authToken`` is set.
    """
    if not is_loopback(host) and not auth_token:
        raise ConfigError(
            f"refusing to listen on {host!r} without gateway.authToken: anyone who can reach it could "
            "run queries and approve tool calls. Set gateway.authToken (for example "
            '"authToken": "${MCP_AGENT_TOKEN}") or bind 127.0.0.1.',
            "gateway.authToken",
        )


def split_host(value: str) -> str:
    """The name part of a Host header value, lower-cased, without port or IPv6 brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end != -1 else value[1:]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def normalise_origin(origin: str) -> str:
    """``scheme://host[:port]`` lower-cased, without a trailing slash or path."""
    parts = urlsplit(origin.strip())
    if not parts.scheme or not parts.netloc:
        return origin.strip().lower().rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


@dataclass(frozen=True)
class HostRules:
    """Which Host and Origin headers the gateway accepts."""

    hosts: frozenset[str]
    """Accepted host names (no port), lower-case."""
    origins: frozenset[str]
    """Accepted non-loopback origins, normalised."""

    def host_ok(self, host: str | None) -> bool:
        if not host:
            return False
        name = split_host(host)
        return name in self.hosts or is_loopback(name)

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True
        origin = origin.strip()
        if not origin or origin.lower() == "null":
            return False
        parts = urlsplit(origin)
        if parts.scheme in ("http", "https") and parts.hostname and is_loopback(parts.hostname):
            return True
        return normalise_origin(origin) in self.origins


def host_rules(config: GatewayConfig, bind_host: str | None = None) -> HostRules:
    """The rules for a gateway bound to ``bind_host`` (default: ``config.host``)."""
    bind = (bind_host if bind_host is not None else config.host).strip("[]").lower()
    hosts = set(LOOPBACK_NAMES)
    if bind not in WILDCARD_BINDS:
        hosts.add(bind)
    hosts.update(split_host(host) for host in config.allowed_hosts)
    origins = frozenset(normalise_origin(origin) for origin in config.allowed_origins)
    return HostRules(frozenset(hosts), origins)


def sdk_allowed_hosts(rules: HostRules) -> list[str]:
    """The ``allowed_hosts`` list of the SDK's TransportSecuritySettings for these rules."""
    out: list[str] = []
    for name in sorted(rules.hosts):
        shown = f"[{name}]" if ":" in name else name
        out.extend([shown, f"{shown}:*"])
    return out


def sdk_allowed_origins(rules: HostRules) -> list[str]:
    """The ``allowed_origins`` list of the SDK's TransportSecuritySettings for these rules."""
    out: list[str] = []
    for name in sorted(LOOPBACK_NAMES):
        shown = f"[{name}]" if ":" in name else name
        for scheme in ("http", "https"):
            out.extend([f"{scheme}://{shown}", f"{scheme}://{shown}:*"])
    out.extend(sorted(rules.origins))
    return out


def bearer_ok(header: str | None, token: str) -> bool:
    """True when ``header`` is ``Bearer <token>`` (constant-time comparison)."""
    if not header:
        return False
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8"))
