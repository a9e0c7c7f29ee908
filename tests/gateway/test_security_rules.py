"""The security rules as pure functions: loopback, Host and Origin rules, bind check, bearer."""

from __future__ import annotations

import socket

import pytest

from mcp_agent.config import GatewayConfig
from mcp_agent.exceptions import ConfigError
from mcp_agent.gateway.security import (
    bind_is_loopback,
    check_bind,
    host_rules,
    normalise_origin,
    split_host,
)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("::ffff:192.168.1.20", False),
        ("", False),
    ],
)
def test_bind_is_loopback_for_addresses(host: str, expected: bool) -> None:
    assert bind_is_loopback(host) is expected


@pytest.mark.parametrize(
    ("name", "addresses", "expected"),
    [
        ("app.localhost", ["127.0.0.1", "::1"], True),  # resolves to loopback: counts
        ("evil.localhost", ["10.0.0.5"], False),  # merely ends in .localhost
        ("mixed.localhost", ["127.0.0.1", "10.0.0.5"], False),
        ("myhost", ["127.0.1.1"], True),  # Debian's own-hostname convention
        ("nowhere.localhost", None, False),  # does not resolve
        ("example.com", ["93.184.216.34"], False),
    ],
)
def test_bind_names_count_as_loopback_only_when_they_resolve_to_it(
    name: str, addresses: list[str] | None, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_getaddrinfo(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        assert host == name
        if addresses is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0)) for address in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    assert bind_is_loopback(name) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", "8765")),
        ("LocalHost:80", ("localhost", "80")),
        ("localhost", ("localhost", None)),
        ("[::1]:8765", ("::1", "8765")),
        ("[::1]", ("::1", None)),
        ("example.com", ("example.com", None)),
        ("localhost:abc", None),
        ("localhost:99999", None),
        ("user@localhost", None),
        ("localhost/evil", None),
        ("local host", None),
        ("[::1", None),
        ("[::1]x", None),
        (":8765", None),
    ],
)
def test_split_host(value: str, expected: tuple[str, str | None] | None) -> None:
    assert split_host(value) == expected


@pytest.mark.parametrize(
    ("host", "has_token", "refused"),
    [
        ("127.0.0.1", False, False),
        ("localhost", False, False),
        ("::1", False, False),
        ("0.0.0.0", False, True),
        ("192.168.1.20", False, True),
        ("0.0.0.0", True, False),
    ],
)
def test_check_bind(host: str, has_token: bool, refused: bool) -> None:
    if refused:
        with pytest.raises(ConfigError, match="authToken"):
            check_bind(host, has_token)
    else:
        check_bind(host, has_token)


@pytest.mark.parametrize(
    ("allowed", "has_token", "refused"),
    [
        (["agent.example.com"], False, True),  # a proxy forwards the public name to loopback
        (["agent.example.com:443", "localhost"], False, True),
        (["10.0.0.5"], False, True),
        (["agent.example.com"], True, False),  # callers need a token: nobody is anonymous
        (["localhost:8765", "127.0.0.1", "[::1]", "app.localhost"], False, False),
        ([], False, False),
    ],
)
def test_allowed_hosts_that_bring_requests_from_elsewhere_need_a_token(
    allowed: list[str], has_token: bool, refused: bool
) -> None:
    """An anonymous gateway whose allowedHosts named a public proxy host served everyone, unasked."""
    if refused:
        with pytest.raises(ConfigError, match="allowedHosts") as caught:
            check_bind("127.0.0.1", has_token, allowed)
        assert caught.value.path == "gateway.allowedHosts"
    else:
        check_bind("127.0.0.1", has_token, allowed)


RULES = host_rules(
    GatewayConfig(
        host="10.0.0.5", allowed_hosts=["agent.lan:8765"], allowed_origins=["https://ui.example.com/"]
    ),
)


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1:8765", True),
        ("localhost:1", True),
        ("[::1]:8765", True),
        ("10.0.0.5:8765", True),  # the bind host
        ("agent.lan:9999", True),  # allowedHosts match any port
        ("agent.lan", True),
        ("evil.example.com:8765", False),
        ("10.0.0.6:8765", False),
        ("LOCALHOST:1", True),  # names are case-insensitive, on every route alike
        ("evil.localhost", False),  # not a name the gateway listens under
        ("127.0.0.2:8765", False),  # neither is another loopback address
        ("localhost:abc", False),
        ("localhost:8765/x", False),
        ("", False),
        (None, False),
    ],
)
def test_host_rules(host: str | None, ok: bool) -> None:
    assert RULES.host_ok(host) is ok


@pytest.mark.parametrize(
    ("origin", "ok"),
    [
        (None, True),
        ("http://localhost:3000", True),
        ("https://127.0.0.1", True),
        ("http://[::1]:5173", True),
        ("https://ui.example.com", True),
        ("HTTPS://UI.example.com", True),
        ("https://ui.example.com:444", False),
        ("http://ui.example.com", False),
        ("https://evil.example.com", False),
        ("null", False),
        ("", False),
        ("file://", False),
        ("http://evil.localhost:3000", False),
        ("http://127.0.0.2", False),
        ("http://localhost:abc", False),
    ],
)
def test_origin_rules(origin: str | None, ok: bool) -> None:
    assert RULES.origin_ok(origin) is ok


def test_wildcard_bind_adds_no_host() -> None:
    rules = host_rules(GatewayConfig(host="0.0.0.0"))
    assert not rules.host_ok("0.0.0.0:8765")
    assert rules.host_ok("localhost:8765")


@pytest.mark.parametrize("origin", ["https://UI.example.com/", "https://ui.example.com/path?x=1"])
def test_normalise_origin(origin: str) -> None:
    assert normalise_origin(origin) == "https://ui.example.com"
