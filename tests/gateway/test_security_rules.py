"""The security rules as pure functions: loopback, Host and Origin rules, bind check, bearer."""

from __future__ import annotations

import pytest

from mcp_agent.config import GatewayConfig
from mcp_agent.exceptions import ConfigError
from mcp_agent.gateway.security import (
    bearer_ok,
    check_bind,
    host_rules,
    is_loopback,
    normalise_origin,
    sdk_allowed_hosts,
    sdk_allowed_origins,
    split_host,
)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("app.localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8765", "127.0.0.1"),
        ("LocalHost:80", "localhost"),
        ("localhost", "localhost"),
        ("[::1]:8765", "::1"),
        ("[::1]", "::1"),
        ("example.com", "example.com"),
    ],
)
def test_split_host(value: str, expected: str) -> None:
    assert split_host(value) == expected


@pytest.mark.parametrize(
    ("host", "token", "refused"),
    [
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
        ("0.0.0.0", None, True),
        ("192.168.1.20", None, True),
        ("0.0.0.0", "s3cret", False),
    ],
)
def test_check_bind(host: str, token: str | None, refused: bool) -> None:
    if refused:
        with pytest.raises(ConfigError, match="authToken"):
            check_bind(host, token)
    else:
        check_bind(host, token)


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
    ],
)
def test_origin_rules(origin: str | None, ok: bool) -> None:
    assert RULES.origin_ok(origin) is ok


def test_wildcard_bind_adds_no_host() -> None:
    rules = host_rules(GatewayConfig(host="0.0.0.0"))
    assert not rules.host_ok("0.0.0.0:8765")
    assert rules.host_ok("localhost:8765")


def test_sdk_settings_cover_the_same_names() -> None:
    hosts = sdk_allowed_hosts(RULES)
    assert "agent.lan:*" in hosts and "[::1]:*" in hosts and "127.0.0.1" in hosts
    origins = sdk_allowed_origins(RULES)
    assert "http://localhost:*" in origins and "https://ui.example.com" in origins
    assert "*" not in origins


@pytest.mark.parametrize("origin", ["https://UI.example.com/", "https://ui.example.com/path?x=1"])
def test_normalise_origin(origin: str) -> None:
    assert normalise_origin(origin) == "https://ui.example.com"


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("Bearer s3cret", True),
        ("bearer s3cret", True),
        ("Bearer  s3cret ", True),
        ("Bearer s3cre", False),
        ("Bearer s3cret2", False),
        ("Basic s3cret", False),
        ("s3cret", False),
        ("", False),
        (None, False),
    ],
)
def test_bearer(header: str | None, ok: bool) -> None:
    assert bearer_ok(header, "s3cret") is ok
