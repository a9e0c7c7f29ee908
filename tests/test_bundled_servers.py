"""The bundled servers (servers/ports.py, system.py, web.py) and the default agent.json.

Each server runs as a real stdio subprocess driven by the SDK client; all of them start at
once and are shared by the whole module (an ``import mcp`` costs ~0.8 s per process). Pure
helpers are table-tested in-process on the imported scripts, and the web server's address
policy is exercised in-process with the environment set by monkeypatch.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError

from mcp_agent.config import load_config

from .bundled.harness import SERVERS_DIR, ServerSpec, call, load_server, open_clients
from .bundled.site import BIG_SIZE, Site, running_site

ROOT = Path(__file__).resolve().parents[1]
ports = load_server("ports")
system = load_server("system")
web = load_server("web")

CAN_DROP_PRIVILEGES = hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("setpriv") is not None
WEB_MAX_BYTES = 100_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with running_site() as running:
        yield running


@pytest.fixture(scope="module")
async def clients(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Client]]:
    specs = [
        ServerSpec("ports", "ports"),
        ServerSpec("system", "system"),
        ServerSpec(
            "web",
            "web",
            env={
                "MCP_WEB_ALLOW_PRIVATE": "1",
                "MCP_WEB_TIMEOUT_SECONDS": "2",
                "MCP_WEB_MAX_BYTES": str(WEB_MAX_BYTES),
            },
        ),
    ]
    if CAN_DROP_PRIVILEGES:
        # the same ports server as user "nobody": it may not see which process owns our sockets
        specs.append(
            ServerSpec(
                "ports_unprivileged",
                "ports",
                prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"),
                optional=True,  # nobody may not be able to read this interpreter
            )
        )
    errlog = tmp_path_factory.mktemp("bundled") / "servers.err"
    with errlog.open("w") as log:
        async with open_clients(specs, log) as opened:
            yield opened


async def tools_of(client: Client) -> dict[str, Any]:
    with anyio.fail_after(20):
        listed = await client.list_tools()
    return {tool.name: tool for tool in listed.tools}


# --------------------------------------------------------------------------------------------
# every server: narrow tools, sharp descriptions


@pytest.mark.parametrize(
    ("server", "names"),
    [
        ("ports", {"check_port", "list_listening_ports"}),
        ("system", {"disk_usage", "memory_usage", "top_processes"}),
        ("web", {"fetch_url"}),
    ],
)
async def test_tools_are_few_and_say_their_answer_is_complete(
    clients: dict[str, Client], server: str, names: set[str]
) -> None:
    tools = await tools_of(clients[server])
    assert set(tools) == names
    for tool in tools.values():
        description = tool.description or ""
        assert 80 < len(description) < 600, tool.name
        assert re.search(
            r"The (answer|list|table) is complete; do not call again for the same [A-Za-z ]+\.$", description
        ), description
        assert "\n" not in description
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is None  # plain text answers
        assert tool.annotations is not None and tool.annotations.read_only_hint is True


async def test_schemas_carry_bounds_and_choices(clients: dict[str, Client]) -> None:
    port = (await tools_of(clients["ports"]))["check_port"].input_schema
    assert port["required"] == ["port"]
    assert port["properties"]["port"].items() >= {"type": "integer", "minimum": 1, "maximum": 65535}.items()
    top = (await tools_of(clients["system"]))["top_processes"].input_schema
    assert (
        top["properties"]["n"].items()
        >= {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}.items()
    )
    assert top["properties"]["sort_by"]["enum"] == ["cpu", "memory"]
    assert top.get("required", []) == []
    disk = (await tools_of(clients["system"]))["disk_usage"].input_schema
    assert disk["properties"]["path"]["default"] == "/"
    fetch = (await tools_of(clients["web"]))["fetch_url"].input_schema
    assert fetch["required"] == ["url"]
    assert (
        fetch["properties"]["max_chars"].items()
        >= {"minimum": 1, "maximum": 100_000, "default": 8000}.items()
    )


# --------------------------------------------------------------------------------------------
# ports


@pytest.fixture
def tcp_listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_check_port_names_the_listening_process(clients: dict[str, Client], tcp_listener: int) -> None:
    text, is_error = await call(clients["ports"], "check_port", {"port": tcp_listener})
    assert not is_error
    assert f"TCP port {tcp_listener} is in use" in text
    assert f"127.0.0.1:{tcp_listener} (IPv4, loopback only): pid {os.getpid()} " in text
    assert psutil.Process().name() in text


async def test_check_port_says_free_for_a_closed_port(clients: dict[str, Client]) -> None:
    port = free_port()
    text, is_error = await call(clients["ports"], "check_port", {"port": port})
    assert not is_error
    assert f"TCP port {port} is free" in text
    assert "refused" in text  # the connect test ran too
    assert f"UDP port {port} is not bound" in text


async def test_check_port_sees_ipv6_and_udp(clients: dict[str, Client]) -> None:
    try:
        v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        v6.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with v6, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        v6.listen()
        port = v6.getsockname()[1]
        udp.bind(("127.0.0.1", port))
        text, _ = await call(clients["ports"], "check_port", {"port": port})
        assert f"[::1]:{port} (IPv6, loopback only): pid {os.getpid()}" in text
        assert f"UDP port {port} is bound:\n- 127.0.0.1:{port}" in text
        table, _ = await call(clients["ports"], "list_listening_ports")
        assert re.search(rf"^tcp6\s+\[::1\]:{port}\s+pid {os.getpid()} ", table, re.M)
        assert re.search(rf"^udp\s+127\.0\.0\.1:{port}\s+pid {os.getpid()} ", table, re.M)


@pytest.mark.parametrize(
    ("port", "message"), [(0, "greater than or equal to 1"), (70000, "less than or equal to 65535")]
)
async def test_check_port_rejects_out_of_range(clients: dict[str, Client], port: int, message: str) -> None:
    text, is_error = await call(clients["ports"], "check_port", {"port": port})
    assert is_error
    assert message in text


async def test_list_listening_ports_contains_our_port(clients: dict[str, Client], tcp_listener: int) -> None:
    text, is_error = await call(clients["ports"], "list_listening_ports")
    assert not is_error
    lines = text.splitlines()
    assert re.match(r"\d+ sockets \(TCP listening, UDP bound\), sorted by port:", lines[0])
    assert lines[1].split() == ["proto", "address", "process"]
    ours = [line for line in lines if f"127.0.0.1:{tcp_listener} " in line]
    assert len(ours) == 1 and ours[0].startswith("tcp ") and f"pid {os.getpid()} " in ours[0]
    found = [int(m.group(1)) for line in lines[2:] if (m := re.search(r":(\d+)\s", line))]
    assert found == sorted(found)


@pytest.mark.skipif(not CAN_DROP_PRIVILEGES, reason="needs root and setpriv to run the server as nobody")
async def test_check_port_without_privileges_says_process_unknown(
    clients: dict[str, Client], tcp_listener: int
) -> None:
    if "ports_unprivileged" not in clients:
        pytest.skip("the ports server could not be run as user nobody here")
    text, is_error = await call(clients["ports_unprivileged"], "check_port", {"port": tcp_listener})
    assert not is_error
    assert f"TCP port {tcp_listener} is in use" in text
    assert "process unknown (needs privileges" in text
    assert f"pid {os.getpid()}" not in text


def test_gather_listeners_falls_back_per_process_when_the_table_is_denied(tcp_listener: int) -> None:
    def denied(kind: str) -> list[Any]:
        raise psutil.AccessDenied()

    listeners, complete = ports.gather_listeners(denied)
    assert not complete
    assert ports.Listener("tcp", "127.0.0.1", tcp_listener, os.getpid()) in listeners
    text = ports.format_table(
        listeners, {None: "?", os.getpid(): "me"} | {p.pid: "x" for p in listeners}, complete=False
    )
    assert "sockets of other users may be missing" in text


@pytest.mark.parametrize(
    ("listeners", "accepted", "complete", "expected"),
    [
        ([], ["127.0.0.1"], True, "TCP port 80 is in use: a connection to 127.0.0.1 was accepted"),
        ([], [], True, "TCP port 80 is free: nothing listens on it, IPv4 or IPv6 (a connection"),
        ([("tcp", "0.0.0.0", 80, None)], None, True, "0.0.0.0:80 (IPv4, all interfaces): UNKNOWN"),
        ([("tcp", "::", 80, 7)], None, True, "[::]:80 (IPv6, all interfaces (usually IPv4 too)): seven"),
        ([("tcp", "10.1.2.3", 80, 7)], None, True, "10.1.2.3:80 (IPv4, one interface): seven"),
        (
            [("tcp", "0.0.0.0", 80, 7), ("tcp", "0.0.0.0", 80, 8), ("tcp", "0.0.0.0", 80, 9)],
            None,
            True,
            "seven (+2 more processes)",
        ),
        ([("tcp", "0.0.0.0", 80, 7)], None, False, "sockets of other users may be missing"),
        ([("tcp", "0.0.0.0", 81, 7)], [], True, "TCP port 80 is free"),
    ],
)
def test_format_check(
    listeners: list[tuple[str, str, int, int | None]],
    accepted: list[str] | None,
    complete: bool,
    expected: str,
) -> None:
    items = [ports.Listener(*item) for item in listeners]
    labels = {None: "UNKNOWN", 7: "seven", 8: "eight", 9: "nine"}
    assert expected in ports.format_check(80, items, labels, complete=complete, accepted=accepted)


@pytest.mark.parametrize(
    ("privileged", "expected"),
    [(True, "another container or PID namespace"), (False, "needs privileges: run this server as root")],
)
def test_unknown_process_says_why(privileged: bool, expected: str) -> None:
    assert expected in ports.unknown_process(privileged=privileged)
    assert expected in ports.process_label(None, privileged=privileged)


def test_process_label_of_this_process_and_an_exited_one() -> None:
    label = ports.process_label(os.getpid(), privileged=True)
    assert label.startswith(f"pid {os.getpid()} {psutil.Process().name()}: ")
    assert len(label.split(": ", 1)[1]) <= ports.CMDLINE_CHARS
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert ports.process_label(child.pid, privileged=True) == f"pid {child.pid} (exited)"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [("abc", 5, "abc"), ("abcdef", 5, "abcd…"), ("a   b\n c", 10, "a b c"), ("", 3, "")],
)
def test_shorten(text: str, limit: int, expected: str) -> None:
    assert ports.shorten(text, limit) == expected


def test_format_table_when_nothing_listens() -> None:
    assert (
        ports.format_table([], {None: "?"}, complete=True)
        == "No listening TCP ports and no bound UDP ports found."
    )


# --------------------------------------------------------------------------------------------
# system

_SIZE = r"\d+(?:\.\d)? (?:B|KiB|MiB|GiB|TiB|PiB|EiB)"


async def test_disk_usage_of_root(clients: dict[str, Client]) -> None:
    text, is_error = await call(clients["system"], "disk_usage")
    assert not is_error
    match = re.fullmatch(
        rf"/( \(.+\))?: total ({_SIZE}), used ({_SIZE}) \((\d+\.\d)%\), free ({_SIZE})\.", text
    )
    assert match, text
    assert 0 <= float(match.group(4)) <= 100
    assert match.group(2) == system.human_bytes(psutil.disk_usage("/").total)


async def test_disk_usage_of_a_folder_names_its_mount_point(
    clients: dict[str, Client], tmp_path: Path
) -> None:
    text, is_error = await call(clients["system"], "disk_usage", {"path": str(tmp_path)})
    assert not is_error
    mounts = [part.mountpoint for part in psutil.disk_partitions(all=True)]
    mount = system.containing_mount(str(tmp_path), mounts)
    assert os.path.ismount(mount)
    assert text.startswith(f"{tmp_path} is on the filesystem mounted at {mount}")


async def test_disk_usage_of_an_empty_path_is_an_error(clients: dict[str, Client]) -> None:
    text, is_error = await call(clients["system"], "disk_usage", {"path": "  "})
    assert is_error
    assert "path is empty" in text


async def test_memory_usage(clients: dict[str, Client]) -> None:
    text, is_error = await call(clients["system"], "memory_usage")
    assert not is_error
    ram, swap = text.splitlines()
    assert re.fullmatch(rf"RAM: total {_SIZE}, used {_SIZE}, available {_SIZE} \(\d+\.\d% in use\)\.", ram)
    assert swap == "Swap: none configured." or re.fullmatch(
        rf"Swap: total {_SIZE}, used .+% in use\)\.", swap
    )


def _rows(text: str) -> list[dict[str, Any]]:
    """The table's rows, parsed from both ends (a process name may contain spaces)."""
    factor = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
    rows = []
    for line in text.splitlines()[2:]:
        parts = line.split()
        rows.append(
            {
                "pid": int(parts[0]),
                "cpu": float(parts[-4]),
                "rss": float(parts[-3]) * factor[parts[-2]],
                "user": parts[-1],
            }
        )
    return rows


async def test_top_processes_by_cpu_measures_a_busy_process(clients: dict[str, Client]) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        text, is_error = await call(clients["system"], "top_processes", {"n": 50, "sort_by": "cpu"})
    finally:
        busy.kill()
        busy.wait()
    assert not is_error
    assert text.startswith("Top ") and " processes by cpu (CPU sampled over 0.3 s" in text
    rows = _rows(text)
    cpus = [row["cpu"] for row in rows]
    assert cpus == sorted(cpus, reverse=True)
    mine = [row for row in rows if row["pid"] == busy.pid]
    assert mine, text
    assert mine[0]["cpu"] > 10  # a busy loop: the two samples saw it run


async def test_top_processes_three_by_cpu(clients: dict[str, Client]) -> None:
    text, is_error = await call(clients["system"], "top_processes", {"n": 3, "sort_by": "cpu"})
    assert not is_error
    lines = text.splitlines()
    assert re.match(r"Top 3 of \d+ processes by cpu", lines[0])
    assert lines[1].split() == ["pid", "name", "cpu%", "rss", "user"]
    assert len(lines) == 5
    for line in lines[2:]:
        assert re.fullmatch(rf"\s*\d+  .+  \s*\d+\.\d  \s*{_SIZE}  \S+", line), line


async def test_top_processes_by_memory_is_sorted_by_rss(clients: dict[str, Client]) -> None:
    text, _ = await call(clients["system"], "top_processes", {"n": 5})
    assert re.match(r"Top 5 of \d+ processes by memory", text)
    sizes = [row["rss"] for row in _rows(text)]
    assert len(sizes) == 5
    assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"n": 0}, "greater than or equal to 1"),
        ({"n": 51}, "less than or equal to 50"),
        ({"sort_by": "disk"}, "'cpu' or 'memory'"),
    ],
)
async def test_top_processes_rejects_bad_input(
    clients: dict[str, Client], args: dict[str, Any], message: str
) -> None:
    text, is_error = await call(clients["system"], "top_processes", args)
    assert is_error
    assert message in text


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (5 * 2**30, "5.0 GiB"),
        (3 * 2**60, "3.0 EiB"),
        (2**70, "1024.0 EiB"),
    ],
)
def test_human_bytes(count: int, expected: str) -> None:
    assert system.human_bytes(count) == expected


def test_format_processes_aligns_columns() -> None:
    rows = [
        system.ProcessRow(1, "init", 0.5, 2**20, "root"),
        system.ProcessRow(4242, "a-longer-name", 150.0, 512, "bob"),
    ]
    text = system.format_processes(rows, total=9, sort_by="cpu", sample=0.3)
    assert text.splitlines()[0].startswith("Top 2 of 9 processes by cpu (CPU sampled over 0.3 s")
    assert text.splitlines()[2].split() == ["1", "init", "0.5", "1.0", "MiB", "root"]
    assert text.splitlines()[3].split() == ["4242", "a-longer-name", "150.0", "512", "B", "bob"]
    # columns line up: everything but the last (user) column has the same width
    assert len({len(line) - len(line.split()[-1]) for line in text.splitlines()[1:]}) == 1


# --------------------------------------------------------------------------------------------
# web: over MCP against the local site


async def fetch(clients: dict[str, Client], url: str, **args: Any) -> tuple[str, bool]:
    return await call(clients["web"], "fetch_url", {"url": url, **args})


async def test_fetch_article_gives_title_and_text_without_tags(
    clients: dict[str, Client], site: Site
) -> None:
    text, is_error = await fetch(clients, f"{site.url}/article")
    assert not is_error
    assert text.startswith(f"Title: Rust 2.0 released | Example News\nURL: {site.url}/article\n\n")
    assert "native async closures, a reworked borrow checker called Polonius" in text
    assert "| 1.0 | 2015 |" in text  # tables kept
    for junk in ("<p>", "</", "SCRIPT_SHOULD_NOT_APPEAR", "color: red", "Contact us", "All rights reserved"):
        assert junk not in text


async def test_fetch_app_page_keeps_its_visible_text(clients: dict[str, Client], site: Site) -> None:
    text, is_error = await fetch(clients, f"{site.url}/app")
    assert not is_error
    assert "Title: Dashboard" in text
    for visible in ("Service status", "queue: degraded", "api: up"):
        assert visible in text
    assert "SCRIPT_SHOULD_NOT_APPEAR" not in text


async def test_fetch_json_is_returned_as_is(clients: dict[str, Client], site: Site) -> None:
    text, is_error = await fetch(clients, f"{site.url}/data.json")
    assert not is_error
    assert text == f'URL: {site.url}/data.json\n\n{{"name": "demo", "items": [1, 2, 3]}}'


async def test_fetch_follows_a_redirect_and_says_so(clients: dict[str, Client], site: Site) -> None:
    text, is_error = await fetch(clients, f"{site.url}/redirect")
    assert not is_error
    assert f"URL: {site.url}/article (redirected from {site.url}/redirect)" in text
    assert "Polonius" in text


async def test_fetch_decodes_the_declared_charset(clients: dict[str, Client], site: Site) -> None:
    text, _ = await fetch(clients, f"{site.url}/latin1")
    assert "Title: Café" in text and "Crème brûlée au café." in text


async def test_fetch_over_the_size_cap_is_cut_with_notes(clients: dict[str, Client], site: Site) -> None:
    text, is_error = await fetch(clients, f"{site.url}/big.txt", max_chars=100_000)
    assert not is_error
    assert BIG_SIZE > WEB_MAX_BYTES
    body = text.split("\n\n")[1]
    assert body == ("0123456789" * (BIG_SIZE // 10))[:WEB_MAX_BYTES]
    assert (
        f"[Download stopped at {WEB_MAX_BYTES} bytes: the page is larger; only its start was read.]" in text
    )
    short, _ = await fetch(clients, f"{site.url}/big.txt", max_chars=50)
    assert "\n\n01234567890123456789012345678901234567890123456789\n\n" in short
    assert short.endswith(f"[Text cut: showing the first 50 of {WEB_MAX_BYTES} characters.]")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/missing", "HTTP 404 Not Found from http://"),
        ("/image.png", "unsupported content type 'image/png'"),
        ("/loop", "too many redirects (more than 5)"),
        ("/to-ftp", "only http:// and https:// URLs can be fetched, got ftp:"),
        ("/garbage", "failed: RemoteProtocolError"),
    ],
)
async def test_fetch_failures_are_errors_naming_the_cause(
    clients: dict[str, Client], site: Site, path: str, message: str
) -> None:
    text, is_error = await fetch(clients, f"{site.url}{path}")
    assert is_error
    assert message in text


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http:// and https:// URLs can be fetched, got file:"),
        ("ftp://example.com/x", "got ftp:"),
        ("example.com/page", "got no scheme"),
        ("http://", "the URL has no host"),
        ("http://host:notaport/", "not a valid URL"),
    ],
)
async def test_fetch_refuses_non_http_urls(clients: dict[str, Client], url: str, message: str) -> None:
    text, is_error = await fetch(clients, url)
    assert is_error
    assert message in text


@pytest.mark.parametrize(
    ("max_chars", "message"), [(0, "greater than or equal to 1"), (100_001, "less than or equal to 100000")]
)
async def test_fetch_bounds_max_chars(
    clients: dict[str, Client], site: Site, max_chars: int, message: str
) -> None:
    text, is_error = await fetch(clients, f"{site.url}/article", max_chars=max_chars)
    assert is_error
    assert message in text


async def test_fetch_of_a_slow_page_hits_the_time_cap(clients: dict[str, Client], site: Site) -> None:
    with anyio.fail_after(20):
        text, is_error = await fetch(clients, f"{site.url}/slow")
    assert is_error
    assert f"timed out after 2 s fetching {site.url}/slow" in text


async def test_fetch_of_a_closed_port_cannot_connect(clients: dict[str, Client]) -> None:
    port = free_port()
    text, is_error = await fetch(clients, f"http://127.0.0.1:{port}/")
    assert is_error
    assert f"cannot connect to 127.0.0.1 port {port}" in text


# --------------------------------------------------------------------------------------------
# web: the address policy, in-process (the environment is read per call)


@pytest.mark.parametrize(
    ("policy", "path", "message"),
    [
        (None, "/article", "refused: 127.0.0.1 is a loopback address"),
        ("0", "/article", "refused: 127.0.0.1 is a loopback address"),
        ("loopback", "/to-metadata", "refused: 169.254.169.254 is a private address"),
    ],
)
async def test_fetch_refuses_addresses_outside_the_policy(
    monkeypatch: pytest.MonkeyPatch, site: Site, policy: str | None, path: str, message: str
) -> None:
    if policy is None:
        monkeypatch.delenv(web.ALLOW_PRIVATE_ENV, raising=False)
    else:
        monkeypatch.setenv(web.ALLOW_PRIVATE_ENV, policy)
    with pytest.raises(ToolError, match=re.escape(message)):
        await web.fetch_url(f"{site.url}{path}")


async def test_fetch_by_host_name_is_pinned_to_a_vetted_address(
    monkeypatch: pytest.MonkeyPatch, site: Site
) -> None:
    monkeypatch.setenv(web.ALLOW_PRIVATE_ENV, "loopback")
    port = site.url.rsplit(":", 1)[1]
    text = await web.fetch_url(f"http://localhost:{port}/article", max_chars=200)
    assert text.startswith(f"Title: Rust 2.0 released | Example News\nURL: http://localhost:{port}/article\n")
    monkeypatch.delenv(web.ALLOW_PRIVATE_ENV)
    with pytest.raises(ToolError, match=r"refused: localhost resolves to .*a loopback address"):
        await web.fetch_url(f"http://localhost:{port}/article")


async def test_a_pinned_request_keeps_the_host_header(monkeypatch: pytest.MonkeyPatch, site: Site) -> None:
    monkeypatch.setenv(web.ALLOW_PRIVATE_ENV, "loopback")
    port = site.url.rsplit(":", 1)[1]
    text = await web.fetch_url(f"http://localhost:{port}/echo-host")
    assert text.endswith(f"\n\nHost: localhost:{port}")


@pytest.fixture(scope="module")
def tls_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, Path]]:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)  # valid for the name only, not for 127.0.0.1
    ca_file = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with running_site(tls=context) as running:
        yield running, ca_file


@pytest.mark.parametrize(
    ("host", "trusted", "error"),
    [
        ("localhost", True, None),
        ("localhost", False, "CERTIFICATE_VERIFY_FAILED"),
        ("127.0.0.1", True, "CERTIFICATE_VERIFY_FAILED"),  # the certificate names localhost only
    ],
)
async def test_https_through_a_pinned_address_verifies_the_url_host(
    monkeypatch: pytest.MonkeyPatch, tls_site: tuple[Site, Path], host: str, trusted: bool, error: str | None
) -> None:
    site, ca_file = tls_site
    monkeypatch.setenv(web.ALLOW_PRIVATE_ENV, "loopback")
    if trusted:
        monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    else:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    url = f"https://{host}:{site.url.rsplit(':', 1)[1]}/echo-host"
    if error is None:
        assert (await web.fetch_url(url)).endswith(f"Host: {host}:{site.url.rsplit(':', 1)[1]}")
    else:
        with pytest.raises(ToolError, match=f"cannot connect to {host} port .*{error}"):
            await web.fetch_url(url)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://no-such-host.invalid/", "no-such-host.invalid"),
        ("https://bücher.invalid/", "xn--bcher-kva.invalid"),
    ],
)
async def test_unresolvable_host_is_an_error(monkeypatch: pytest.MonkeyPatch, url: str, host: str) -> None:
    monkeypatch.setenv(web.ALLOW_PRIVATE_ENV, "1")
    with pytest.raises(ToolError, match=re.escape(f"cannot resolve host '{host}'")):
        await web.fetch_url(url)


# --------------------------------------------------------------------------------------------
# web: pure helpers


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ("public", 15.0, 2_000_000)),
        ({"MCP_WEB_ALLOW_PRIVATE": "1"}, ("all", 15.0, 2_000_000)),
        ({"MCP_WEB_ALLOW_PRIVATE": "TRUE"}, ("all", 15.0, 2_000_000)),
        ({"MCP_WEB_ALLOW_PRIVATE": "loopback"}, ("loopback", 15.0, 2_000_000)),
        ({"MCP_WEB_ALLOW_PRIVATE": "0"}, ("public", 15.0, 2_000_000)),
        ({"MCP_WEB_TIMEOUT_SECONDS": "2.5", "MCP_WEB_MAX_BYTES": "1000"}, ("public", 2.5, 1000)),
        ({"MCP_WEB_TIMEOUT_SECONDS": "soon", "MCP_WEB_MAX_BYTES": "-5"}, ("public", 15.0, 2_000_000)),
    ],
)
def test_settings_from_env(environ: dict[str, str], expected: tuple[str, float, int]) -> None:
    settings = web.Settings.from_env(environ)
    assert (settings.allow, settings.timeout, settings.max_bytes) == expected


@pytest.mark.parametrize(
    ("header", "start", "expected"),
    [
        ("text/html; charset=UTF-8", b"", ("html", "UTF-8")),
        ("application/xhtml+xml", b"", ("html", None)),
        ('text/plain; charset="latin-1"', b"", ("text", "latin-1")),
        ("application/json", b"", ("text", None)),
        ("application/ld+json", b"", ("text", None)),
        ("application/rss+xml", b"", ("text", None)),
        ("image/png", b"", ("binary", None)),
        ("application/pdf", b"", ("binary", None)),
        (None, b"  <!DOCTYPE html><html>", ("html", None)),
        (None, b"hello", ("text", None)),
        (None, b"\x89PNG\x00\x00", ("binary", None)),
    ],
)
def test_content_kind(header: str | None, start: bytes, expected: tuple[str, str | None]) -> None:
    media, charset = web.parse_content_type(header)
    assert (web.content_kind(media, start), charset) == expected


@pytest.mark.parametrize(
    ("body", "charset", "truncated", "expected"),
    [
        ("café".encode(), None, False, "café"),
        ("café".encode("latin-1"), "iso-8859-1", False, "café"),
        ("café".encode()[:-1], None, True, "caf"),  # cut inside é: the partial tail is dropped
        ("café".encode(), "no-such-charset", False, "café"),
    ],
)
def test_decode(body: bytes, charset: str | None, truncated: bool, expected: str) -> None:
    assert web.decode(body, charset, truncated=truncated) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://example.com/a?b=1", None),
        ("  http://example.com  ", None),
        ("javascript:alert(1)", "got javascript:"),
        ("data:text/plain,hi", "got data:"),
        ("https:///path", "no host"),
    ],
)
def test_check_url(url: str, message: str | None) -> None:
    if message is None:
        assert web.check_url(url).scheme in ("http", "https")
    else:
        with pytest.raises(ToolError, match=re.escape(message)):
            web.check_url(url)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("abcdef", 10, ("abcdef", None)),
        ("abcdef", 3, ("abc", "[Text cut: showing the first 3 of 6 characters.]")),
    ],
)
def test_cut(text: str, limit: int, expected: tuple[str, str | None]) -> None:
    assert web.cut(text, limit) == expected


def test_html_to_text_falls_back_to_all_visible_text() -> None:
    # trafilatura finds no main text in a page that is all comments (it drops comment sections)
    posts = "".join(
        f"<div class='comment'><p>User {i} says: port {8000 + i} is down again.</p></div>" for i in range(8)
    )
    page = (
        f"<html><head><title> A \n forum </title></head><body><div id='comments'>{posts}</div></body></html>"
    )
    title, text = web.html_to_text(page)
    assert title == "A forum"
    assert "User 0 says: port 8000 is down again." in text and "User 7 says: port 8007" in text


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ("<html><head></head><body><script>x = 1</script></body></html>", ""),
        ("<p>Hello <b>world</b></p>", "Hello **world**"),  # a fragment (Markdown output)
        ("Hello world", "Hello world"),  # bare text served as HTML
        ("   ", ""),
    ],
)
def test_html_to_text_of_odd_pages(html: str, expected: str) -> None:
    title, text = web.html_to_text(html)
    assert title is None
    assert " ".join(text.split()) == expected


def test_render_refuses_binary_bodies() -> None:
    page = web.Page(
        url="http://x/", content_type=None, body=b"\x00\x01\x02", truncated=False, redirected_from=None
    )
    with pytest.raises(ToolError, match="is not text"):
        web.render(page, 100, 1000)


def test_render_empty_page() -> None:
    page = web.Page(
        url="http://x/", content_type="text/plain", body=b"  ", truncated=False, redirected_from=None
    )
    assert web.render(page, 100, 1000) == "URL: http://x/\n\n(the page has no readable text)"


# --------------------------------------------------------------------------------------------
# agent.json


def test_default_config_loads_and_discovers_the_bundled_servers() -> None:
    config = load_config(ROOT / "agent.json", environ={})
    assert config.llm.endpoint == "http://localhost:11434/v1"
    assert config.llm.model == "qwen3:8b"
    assert config.llm.provider == "auto"
    assert config.warnings == ()
    assert config.gateway.auth_token is None  # ${MCP_AGENT_TOKEN:-} unset means no token
    assert config.gateway.host == "127.0.0.1"
    for topic in ("port", "disk", "memory", "process", "web page"):
        assert topic in config.gateway.description
    servers = config.servers()
    assert set(servers) == {"ports", "system", "web"}
    for name, server in servers.items():
        assert server.command == sys.executable  # type: ignore[union-attr]
        assert server.args == [str(SERVERS_DIR / f"{name}.py")]  # type: ignore[union-attr]
    limits = config.limits
    assert (
        limits.max_rounds and limits.max_tool_calls and limits.timeout_seconds and limits.tool_timeout_seconds
    )
    assert limits.tool_timeout_seconds > web.DEFAULT_TIMEOUT  # a fetch ends by its own cap first
    assert limits.max_result_chars >= 8000 + 500  # fetch_url's default answer fits


def test_default_config_takes_the_token_from_the_environment() -> None:
    config = load_config(ROOT / "agent.json", environ={"MCP_AGENT_TOKEN": "s3cret"})
    assert config.gateway.auth_token == "s3cret"
