"""web: fetch a web page and return its readable text (an MCP server over stdio).

Run it as ``python servers/web.py``. One tool, ``fetch_url(url, max_chars)``: it downloads an
http(s) page with httpx and returns its title and main text, extracted by trafilatura (as
Markdown-ish text, without navigation, scripts or tags). A page where trafilatura finds no
main content falls back to all of the page's visible text; plain text, JSON and XML are
returned as they are; other content types (images, PDF, archives) are refused.

Caps: 5 redirects, ``MCP_WEB_MAX_BYTES`` downloaded bytes (default 2 MB: the download is
streamed and stopped there, and the answer says so), ``MCP_WEB_TIMEOUT_SECONDS`` for the whole
fetch including redirects (default 15 s; connect at most 5 s), and ``max_chars`` (1..100000) of
returned text, with a note when cut.

Private addresses (SSRF): **refused by default.** A fetched page is untrusted text that can
steer the model, and the classic abuse is a prompt-injected fetch of a cloud metadata service
(169.254.169.254), a router's admin page or a service on the local network. So every host name
is resolved first, each address is classified, and the connection is pinned to a vetted address
(the original host still goes in the Host header and in TLS SNI and certificate checks), which
also defeats DNS rebinding and covers every redirect hop. Public means globally routable:
refused are loopback, RFC 1918, link-local, CGNAT (100.64/10), 0/8, benchmarking (198.18/15),
documentation, multicast and reserved IPv4 ranges, and for IPv6 everything outside global
unicast 2000::/3 (``::1``, ``::``, link-local, site-local ``fec0::/10``, unique-local
``fc00::/7``, multicast, local-use NAT64 ``64:ff9b:1::/48``) plus Teredo ``2001::/32`` and the
documentation ranges. IPv6 forms that carry an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``,
IPv4-translated ``::ffff:0:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::/96``,
6to4 ``2002::/16``) are judged by the address they carry (see ``address_kind``). Set ``MCP_WEB_ALLOW_PRIVATE`` in this
server's environment to change it: ``loopback`` allows 127.0.0.0/8 and ::1 (a local agent asking
about a local web app), ``1`` (or ``true``/``yes``) allows every address. Mind that a server
found in ``serversDir`` gets a clean environment; declare it in ``mcpServers`` with an ``env``
entry to set these variables.
"""

from __future__ import annotations

import codecs
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

import anyio
import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

logger = logging.getLogger("servers.web")

ALLOW_PRIVATE_ENV = "MCP_WEB_ALLOW_PRIVATE"
TIMEOUT_ENV = "MCP_WEB_TIMEOUT_SECONDS"
MAX_BYTES_ENV = "MCP_WEB_MAX_BYTES"
DEFAULT_TIMEOUT = 15.0
DEFAULT_MAX_BYTES = 2_000_000
CONNECT_TIMEOUT = 5.0
MAX_REDIRECTS = 5
MAX_ADDRESSES = 3
"""How many vetted addresses of one host are tried before giving up on connecting."""
USER_AGENT = "Mozilla/5.0 (compatible; mcp-agent-web/1.0)"
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5"

Policy = Literal["public", "loopback", "all"]
Kind = Literal["html", "text", "binary"]

mcp = MCPServer(
    "web",
    version="1.0.0",
    instructions="Fetches a web page and returns its readable text.",
    log_level="WARNING",
)


# --------------------------------------------------------------------------------------------
# settings and pure helpers


@dataclass(frozen=True)
class Settings:
    """This server's caps and address policy, read from the environment once per call."""

    allow: Policy = "public"
    timeout: float = DEFAULT_TIMEOUT
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read ``MCP_WEB_ALLOW_PRIVATE``, ``MCP_WEB_TIMEOUT_SECONDS`` and ``MCP_WEB_MAX_BYTES``."""
        flag = environ.get(ALLOW_PRIVATE_ENV, "").strip().lower()
        allow: Policy = (
            "all" if flag in ("1", "true", "yes", "all") else "loopback" if flag == "loopback" else "public"
        )
        return cls(
            allow=allow,
            timeout=_positive(environ.get(TIMEOUT_ENV), DEFAULT_TIMEOUT),
            max_bytes=int(_positive(environ.get(MAX_BYTES_ENV), DEFAULT_MAX_BYTES)),
        )


def _positive(raw: str | None, default: float) -> float:
    try:
        value = float(raw) if raw else default
    except ValueError:
        logger.warning("ignoring a bad number in the environment: %r", raw)
        return default
    return value if value > 0 else default


_NOT_PUBLIC_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network"; 0.0.0.0 itself reaches this host
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "169.254.0.0/16",  # link-local: cloud metadata at 169.254.169.254
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
    )
)
"""IPv4 ranges that are never fetched as "public" (IANA's special-purpose registry, and 127/8)."""

_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_NOT_PUBLIC_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "2001::/23",  # IETF protocol assignments, Teredo 2001::/32 included
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
    )
)
"""Ranges inside global unicast (2000::/3) that are not public. Outside 2000::/3 nothing is."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.IPv6Network("2002::/16")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")


def embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address that an IPv6 address stands for on its way out, if it has one.

    NAT64 well-known prefix ``64:ff9b::/96`` and IPv4-translated ``::ffff:0:a.b.c.d``: the last
    32 bits. 6to4 ``2002::/16``: bits 16..48. IPv4-compatible ``::a.b.c.d``: the last 32 bits.
    (IPv4-mapped ``::ffff:a.b.c.d`` is the IPv4 address itself; ``address_kind`` unwraps it.)
    The local-use NAT64 prefix ``64:ff9b:1::/48`` and Teredo are not decoded: where their
    IPv4 address sits is up to a network operator, so they are simply never public.
    """
    if addr in _NAT64 or addr in _TRANSLATED or addr in _COMPATIBLE:
        return ipaddress.IPv4Address(int(addr) & 0xFFFF_FFFF)
    if addr in _SIXTOFOUR:
        return addr.sixtofour
    return None


def _ipv4_kind(addr: ipaddress.IPv4Address) -> Literal["public", "loopback", "private"]:
    if addr.is_loopback:
        return "loopback"
    return "private" if any(addr in net for net in _NOT_PUBLIC_V4) else "public"


def address_kind(ip: str) -> Literal["public", "loopback", "private"]:
    """Classify an IP address: globally routable, this host's loopback, or anything else ("private").

    IPv4: 127/8 is loopback; the special-purpose ranges of ``_NOT_PUBLIC_V4`` (RFC 1918,
    link-local with cloud metadata, CGNAT, 0/8, benchmarking, documentation, multicast,
    reserved) are private. IPv4-mapped IPv6 (``::ffff:a.b.c.d``) is its IPv4 address: the kernel
    connects to that very address. The other IPv6 forms that carry an IPv4 address (NAT64,
    6to4, IPv4-translated, IPv4-compatible) are public only when the address they carry is; they
    go through a translator or tunnel, so even a carried 127.0.0.1 is "private", never this
    host's loopback. Any other IPv6 address is public only inside global unicast 2000::/3 and
    outside ``_NOT_PUBLIC_V6`` (Teredo, documentation): ``::1`` is loopback, and link-local,
    site-local ``fec0::/10``, unique-local ``fc00::/7``, multicast, ``::``, local-use NAT64 and
    every reserved range are private. A ``%zone`` suffix is ignored.
    """
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv4Address):
        return _ipv4_kind(addr)
    if addr.ipv4_mapped is not None:
        return _ipv4_kind(addr.ipv4_mapped)
    if addr.is_loopback:
        return "loopback"
    if addr.is_unspecified:
        return "private"
    carried = embedded_ipv4(addr)
    if carried is not None:
        return "public" if _ipv4_kind(carried) == "public" else "private"
    if addr in _GLOBAL_UNICAST_V6 and not any(addr in net for net in _NOT_PUBLIC_V6):
        return "public"
    return "private"


def describe(ip: str) -> str:
    """``ip`` and the IPv4 address it carries, for messages: ``2002:a00:1:: (6to4 of 10.0.0.1)``."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if not isinstance(addr, ipaddress.IPv6Address) or addr.is_loopback or addr.is_unspecified:
        return ip
    if addr.ipv4_mapped is not None:
        return f"{ip} (IPv4-mapped {addr.ipv4_mapped})"
    carried = embedded_ipv4(addr)
    if carried is None:
        return ip
    form = (
        "NAT64"
        if addr in _NAT64
        else "6to4"
        if addr in _SIXTOFOUR
        else "IPv4-translated"
        if addr in _TRANSLATED
        else "IPv4-compatible"
    )
    return f"{ip} ({form} of {carried})"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def address_allowed(ip: str, policy: Policy) -> bool:
    """Whether ``policy`` lets us connect to ``ip``."""
    kind = address_kind(ip)
    return kind == "public" or policy == "all" or (policy == "loopback" and kind == "loopback")


def check_url(url: str) -> httpx.URL:
    """Parse a URL the tool may fetch: http or https, with a host.

    Raises:
        ToolError: the URL is malformed, has another scheme, or has no host.
    """
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError) as exc:
        raise ToolError(f"not a valid URL: {url!r} ({exc})") from None
    if parsed.scheme not in ("http", "https"):
        shown = f"{parsed.scheme}:" if parsed.scheme else "no scheme"
        raise ToolError(f"only http:// and https:// URLs can be fetched, got {shown} in {url!r}")
    if not parsed.host:
        raise ToolError(f"the URL has no host: {url!r}")
    return parsed


def port_of(url: httpx.URL) -> int:
    """The URL's port, explicit or the scheme's default."""
    return url.port or (443 if url.scheme == "https" else 80)


def ascii_host(url: httpx.URL) -> str:
    """The URL's host as DNS and TLS see it: IDNA-encoded (``bücher.de`` → ``xn--bcher-kva.de``)."""
    return url.raw_host.decode("ascii")


def parse_content_type(header: str | None) -> tuple[str, str | None]:
    """``"text/html; charset=UTF-8"`` → ``("text/html", "UTF-8")``; a missing header → ``("", None)``."""
    if not header:
        return "", None
    media, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
    return media.strip().lower(), charset


def content_kind(media: str, start: bytes = b"") -> Kind:
    """What to do with a body of media type ``media``: read it as ``html``, as ``text``, or refuse.

    An empty media type (no Content-Type header) is sniffed from the body's first bytes.
    """
    if not media:
        head = start[:1024].lstrip().lower()
        if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
            return "html"
        return "binary" if b"\x00" in head else "text"
    if media in ("text/html", "application/xhtml+xml"):
        return "html"
    if media.startswith("text/") or media in (
        "application/json",
        "application/xml",
        "application/javascript",
    ):
        return "text"
    if media.endswith(("+json", "+xml")):
        return "text"
    return "binary"


def decode(body: bytes, charset: str | None, *, truncated: bool) -> str:
    """Bytes to text: the declared charset, else UTF-8, else a guess (trafilatura's detector).

    A body cut mid-way may end inside a UTF-8 sequence; that tail is dropped, not guessed at.
    """
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except LookupError:
            logger.info("unknown charset %r; guessing", charset)
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(body, final=not truncated)
    except UnicodeDecodeError:
        from trafilatura.utils import decode_file  # imported late: it costs 0.3 s at start-up

        return decode_file(body)


def html_to_text(html: str) -> tuple[str | None, str]:
    """The title and the readable text of an HTML page.

    The main text comes from trafilatura (tables kept, boilerplate dropped). When it finds
    nothing, or only a scrap of a much larger page (an app shell, a portal), all of the
    page's visible text is returned instead.
    """
    import trafilatura  # imported late: it costs 0.3 s at start-up, most of this server's own

    tree = trafilatura.load_html(html)
    if tree is None:  # a fragment or bare text served as HTML: make it a document
        tree = trafilatura.load_html(f"<html><body><div>{html}</div></body></html>")
    if tree is None:
        return None, " ".join(html.split())
    title = tree.findtext(".//title")
    title = " ".join(title.split()) if title and title.strip() else None
    full = trafilatura.html2txt(tree)
    main = trafilatura.extract(
        tree,
        output_format="markdown",
        include_tables=True,
        include_comments=False,
        include_links=False,
        favor_recall=True,
    )
    if not main or not main.strip() or (len(main) < 250 and len(full) > 2 * len(main)):
        return title, full
    return title, main.strip()


def cut(text: str, max_chars: int) -> tuple[str, str | None]:
    """``text`` cut to ``max_chars`` characters, and the note saying so (None when not cut)."""
    if len(text) <= max_chars:
        return text, None
    return text[:max_chars], f"[Text cut: showing the first {max_chars} of {len(text)} characters.]"


def _megabytes(count: int) -> str:
    return f"{count / 1_000_000:g} MB" if count >= 1_000_000 else f"{count} bytes"


# --------------------------------------------------------------------------------------------
# fetching (I/O)


@dataclass(frozen=True)
class Page:
    """A fetched body, capped, with where it finally came from."""

    url: str
    content_type: str | None
    body: bytes
    truncated: bool
    redirected_from: str | None


async def vetted_addresses(url: httpx.URL, policy: Policy) -> list[str]:
    """The addresses of ``url``'s host we may connect to, in resolver order.

    Raises:
        ToolError: the host does not resolve, or resolves only to refused addresses.
    """
    host = ascii_host(url)
    try:
        infos = await anyio.getaddrinfo(host, port_of(url), type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"cannot resolve host {host!r}: {exc.strerror or exc}") from None
    found = list(dict.fromkeys(str(info[4][0]) for info in infos))
    allowed = [ip for ip in found if address_allowed(ip, policy)]
    if not allowed:
        shown = ", ".join(describe(ip) for ip in found)
        what = f"{shown} is" if _is_ip(host) else f"{host} resolves to {shown},"
        raise ToolError(
            f"refused: {what} a {address_kind(found[0])} address; this server only fetches public "
            f"addresses unless {ALLOW_PRIVATE_ENV} is set in its environment"
        )
    return allowed[:MAX_ADDRESSES]


async def _open(client: httpx.AsyncClient, url: httpx.URL, policy: Policy) -> httpx.Response:
    """Send a GET for ``url`` to one of its vetted addresses; the response is left streaming."""
    last: Exception | None = None
    for ip in await vetted_addresses(url, policy):
        pinned = url.copy_with(host=ip)
        request = client.build_request(
            "GET",
            pinned,
            headers={"Host": url.netloc.decode("ascii")},
            extensions={"sni_hostname": ascii_host(url)},
        )
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            last = exc
    raise ToolError(f"cannot connect to {url.host} port {port_of(url)}: {last}")


async def _read(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


async def fetch(url: httpx.URL, settings: Settings) -> Page:
    """GET ``url`` following up to ``MAX_REDIRECTS`` redirects, each hop vetted.

    Raises:
        ToolError: for every failure, with a message for the model (status, timeout, refusal).
    """
    timeout = httpx.Timeout(settings.timeout, connect=min(CONNECT_TIMEOUT, settings.timeout))
    headers = {"User-Agent": USER_AGENT, "Accept": ACCEPT}
    start = url
    async with httpx.AsyncClient(timeout=timeout, headers=headers, follow_redirects=False) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            response = await _open(client, url, settings.allow)
            try:
                location = response.headers.get("location")
                if response.is_redirect and location:
                    url = check_url(str(url.join(location)))
                    continue
                if response.status_code >= 400:
                    reason = f" {response.reason_phrase}" if response.reason_phrase else ""
                    raise ToolError(f"HTTP {response.status_code}{reason} from {url}")
                content_type = response.headers.get("content-type")
                media, _ = parse_content_type(content_type)
                if media and content_kind(media) == "binary":
                    raise ToolError(
                        f"unsupported content type {content_type!r} at {url}; this tool reads HTML, "
                        "text and JSON pages only"
                    )
                body, truncated = await _read(response, settings.max_bytes)
            finally:
                await response.aclose()
            return Page(
                url=str(url),
                content_type=content_type,
                body=body,
                truncated=truncated,
                redirected_from=str(start) if url != start else None,
            )
    raise ToolError(f"too many redirects (more than {MAX_REDIRECTS}) starting at {start}")


def render(page: Page, max_chars: int, max_bytes: int) -> str:
    """The tool's answer for a fetched page: title, URL, text, and notes on what was cut."""
    media, charset = parse_content_type(page.content_type)
    kind = content_kind(media, page.body)
    if kind == "binary":
        raise ToolError(
            f"{page.url} is not text (binary content); this tool reads HTML, text and JSON pages only"
        )
    text = decode(page.body, charset, truncated=page.truncated)
    title = None
    if kind == "html":
        title, text = html_to_text(text)
    text = text.strip() or "(the page has no readable text)"
    text, note = cut(text, max_chars)
    lines = []
    if title:
        lines.append(f"Title: {title}")
    source = f" (redirected from {page.redirected_from})" if page.redirected_from else ""
    lines += [f"URL: {page.url}{source}", "", text]
    if page.truncated:
        lines += [
            "",
            f"[Download stopped at {_megabytes(max_bytes)}: the page is larger; only its start was read.]",
        ]
    if note:
        lines += ["", note]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the tool


@mcp.tool(
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True),
    structured_output=False,
    description=(
        "Fetch a web page (http or https URL) and return its title and readable main text, without HTML "
        "tags, menus or scripts; plain text and JSON are returned as they are. At most max_chars "
        "characters are returned, with a note when the text was cut. The answer is complete; "
        "do not call again for the same URL."
    ),
)
async def fetch_url(
    url: Annotated[str, Field(description="The page's full address, starting with http:// or https://.")],
    max_chars: Annotated[
        int, Field(ge=1, le=100_000, description="The most characters of text to return (1-100000).")
    ] = 8000,
) -> str:
    settings = Settings.from_env(os.environ)
    target = check_url(url)
    try:
        with anyio.fail_after(settings.timeout):
            page = await fetch(target, settings)
    except (TimeoutError, httpx.TimeoutException):
        raise ToolError(f"timed out after {settings.timeout:g} s fetching {url}") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
    return await anyio.to_thread.run_sync(render, page, max_chars, settings.max_bytes)


def main() -> None:
    """Serve the tool over stdio."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)  # it logs bad pages as errors
    logging.getLogger("httpx").setLevel(logging.WARNING)
    mcp.run()


if __name__ == "__main__":
    main()
