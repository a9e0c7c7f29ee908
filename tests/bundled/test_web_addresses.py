"""The web server's address policy (SSRF): which addresses are public, and a refusal end to end.

The classification is a pure function, tested on a table of addresses; the end-to-end tests
run the real server (under the default policy and under ``MCP_WEB_ALLOW_PRIVATE=loopback``)
against a local site reached through literal IPv6 URLs that carry 127.0.0.1.
"""

from __future__ import annotations

import re
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client

from .harness import ServerSpec, call, load_server, open_clients
from .site import Site, running_site

web = load_server("web")


@pytest.mark.parametrize(
    ("ip", "kind"),
    [
        # IPv4
        ("8.8.8.8", "public"),
        ("1.1.1.1", "public"),
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("0.0.0.0", "private"),
        ("0.1.2.3", "private"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("172.32.0.1", "public"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "private"),
        ("100.64.0.1", "private"),
        ("100.127.255.254", "private"),
        ("100.128.0.1", "public"),
        ("198.18.0.1", "private"),
        ("198.19.255.255", "private"),
        ("192.0.0.8", "private"),
        ("192.0.2.1", "private"),
        ("203.0.113.9", "private"),
        ("224.0.0.1", "private"),
        ("239.255.255.250", "private"),
        ("240.0.0.1", "private"),
        ("255.255.255.255", "private"),
        # plain IPv6
        ("2606:4700::1111", "public"),
        ("2a00:1450:4001::200e", "public"),
        ("::1", "loopback"),
        ("::", "private"),
        ("fe80::1%eth0", "private"),
        ("fe80::1", "private"),
        ("fec0::1", "private"),  # site-local (deprecated, still routed inside sites)
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("ff02::1", "private"),
        ("ff0e::1", "private"),  # global-scope multicast is not a web server either
        ("100::1", "private"),  # discard-only
        ("2001:db8::1", "private"),
        ("3fff::1", "private"),
        ("5f00::1", "private"),  # outside 2000::/3: reserved
        ("4000::1", "private"),
        # Teredo: never public (not decoded)
        ("2001::1", "private"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "private"),
        # IPv4-mapped: the IPv4 address itself
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "private"),
        ("::ffff:8.8.8.8", "public"),
        # IPv4-translated (SIIT), IPv4-compatible: judged by the carried address, loopback → private
        ("::ffff:0:127.0.0.1", "private"),
        ("::ffff:0:a00:1", "private"),
        ("::ffff:0:8.8.8.8", "public"),
        ("::127.0.0.1", "private"),
        ("::10.0.0.1", "private"),
        ("::169.254.169.254", "private"),
        ("::0.0.0.2", "private"),
        ("::8.8.8.8", "public"),
        # NAT64 well-known prefix: the last 32 bits
        ("64:ff9b::7f00:1", "private"),
        ("64:ff9b::10.1.2.3", "private"),
        ("64:ff9b::169.254.169.254", "private"),
        ("64:ff9b::100.64.0.1", "private"),
        ("64:ff9b::8.8.8.8", "public"),
        # NAT64 local-use prefix: the operator picks where the IPv4 address sits, so never public
        ("64:ff9b:1::8.8.8.8", "private"),
        ("64:ff9b:1:7f00:1::", "private"),
        # 6to4: bits 16..48
        ("2002:7f00:1::1", "private"),
        ("2002:a00:1::", "private"),
        ("2002:a9fe:a9fe::1", "private"),
        ("2002:c612:1::1", "private"),
        ("2002:808:808::1", "public"),
    ],
)
def test_address_kind(ip: str, kind: str) -> None:
    assert web.address_kind(ip) == kind


@pytest.mark.parametrize(
    ("ip", "policy", "allowed"),
    [
        ("8.8.8.8", "public", True),
        ("127.0.0.1", "public", False),
        ("127.0.0.1", "loopback", True),
        ("::ffff:127.0.0.1", "loopback", True),
        ("::ffff:127.0.0.1", "public", False),
        ("64:ff9b::7f00:1", "loopback", False),  # a translator's loopback is not ours
        ("2002:7f00:1::1", "loopback", False),
        ("10.0.0.1", "loopback", False),
        ("10.0.0.1", "all", True),
        ("169.254.169.254", "all", True),
    ],
)
def test_address_allowed(ip: str, policy: str, allowed: bool) -> None:
    assert web.address_allowed(ip, policy) is allowed


@pytest.mark.parametrize(
    ("ip", "shown"),
    [
        ("8.8.8.8", "8.8.8.8"),
        ("::1", "::1"),
        ("fd00::1", "fd00::1"),
        ("::ffff:127.0.0.1", "::ffff:127.0.0.1 (IPv4-mapped 127.0.0.1)"),
        ("64:ff9b::a00:1", "64:ff9b::a00:1 (NAT64 of 10.0.0.1)"),
        ("2002:a00:1::", "2002:a00:1:: (6to4 of 10.0.0.1)"),
        ("::ffff:0:a00:1", "::ffff:0:a00:1 (IPv4-translated of 10.0.0.1)"),
        ("::a00:1", "::a00:1 (IPv4-compatible of 10.0.0.1)"),
    ],
)
def test_describe_names_the_carried_ipv4_address(ip: str, shown: str) -> None:
    assert web.describe(ip) == shown


# --------------------------------------------------------------------------------------------
# end to end: the real server, literal IPv6 URLs


def _ipv6_reaches_ipv4_loopback(port: int) -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(("::ffff:127.0.0.1", port))
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with running_site() as running:
        yield running


@pytest.fixture(scope="module")
async def servers() -> AsyncIterator[dict[str, Client]]:
    """The web server under the default policy ("public") and under "loopback"."""
    specs = [
        ServerSpec("public", "web", env={"MCP_WEB_TIMEOUT_SECONDS": "2"}),
        ServerSpec(
            "loopback", "web", env={"MCP_WEB_ALLOW_PRIVATE": "loopback", "MCP_WEB_TIMEOUT_SECONDS": "2"}
        ),
    ]
    with tempfile.TemporaryDirectory() as folder, (Path(folder) / "servers.err").open("w") as log:
        async with open_clients(specs, log) as clients:
            yield clients


async def test_an_ipv4_mapped_loopback_url_is_refused_by_default_and_fetched_under_loopback(
    servers: dict[str, Client], site: Site
) -> None:
    port = int(site.url.rsplit(":", 1)[1])
    if not _ipv6_reaches_ipv4_loopback(port):
        pytest.skip("no dual-stack IPv6 socket here: ::ffff:127.0.0.1 does not reach 127.0.0.1")
    url = f"http://[::ffff:127.0.0.1]:{port}/article"
    text, is_error = await call(servers["public"], "fetch_url", {"url": url})
    assert is_error
    assert "refused: ::ffff:127.0.0.1 (IPv4-mapped 127.0.0.1) is a loopback address" in text
    text, is_error = await call(servers["loopback"], "fetch_url", {"url": url})
    assert not is_error, text
    assert text.startswith(f"Title: Rust 2.0 released | Example News\nURL: {url}\n")


@pytest.mark.parametrize(
    ("host", "carried"),
    [
        ("::127.0.0.1", " (IPv4-compatible of 127.0.0.1)"),
        ("::ffff:0:127.0.0.1", " (IPv4-translated of 127.0.0.1)"),
        ("64:ff9b::127.0.0.1", " (NAT64 of 127.0.0.1)"),
        ("2002:7f00:1::1", " (6to4 of 127.0.0.1)"),
        ("64:ff9b::169.254.169.254", " (NAT64 of 169.254.169.254)"),
        ("64:ff9b:1::7f00:1", ""),
        ("fec0::1", ""),
    ],
)
@pytest.mark.parametrize("policy", ["public", "loopback"])
async def test_ipv6_forms_that_carry_an_internal_address_are_refused(
    servers: dict[str, Client], site: Site, host: str, carried: str, policy: str
) -> None:
    port = site.url.rsplit(":", 1)[1]
    text, is_error = await call(servers[policy], "fetch_url", {"url": f"http://[{host}]:{port}/article"})
    assert is_error
    # the address as the resolver spells it (::127.0.0.1 or ::7f00:1), then the carried IPv4
    assert re.search(rf"refused: [0-9a-f:.]+{re.escape(carried)} is a private address;", text), text
