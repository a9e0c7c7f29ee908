"""A small web site on 127.0.0.1 for the web server's tests (stdlib HTTP server in a thread).

Routes: an article, an app-shell page, JSON, a big text page, a Latin-1 page, an image, a 404,
redirects (one hop, an endless loop, one to a link-local address, one to ftp:), a page echoing
the Host header, a reply that is not HTTP, and a page that trickles its body forever (until the
site stops), for the time cap. It can also be served over TLS.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARTICLE = """<!doctype html><html><head><title>Rust 2.0 released | Example News</title>
<meta charset="utf-8"><style>body { color: red }</style>
<script>var tracker = "SCRIPT_SHOULD_NOT_APPEAR";</script></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a> <a href="/contact">Contact us</a></nav>
<main><article><h1>Rust 2.0 released</h1>
<p>The Rust team announced version 2.0 of the language today. The release focuses on async
ergonomics, faster compile times and a new edition that cleans up long-standing warts.</p>
<p>Among the highlights are native async closures, a reworked borrow checker called Polonius,
and a stable ABI for dynamic libraries, which many users had asked for over the years.</p>
<p>Upgrading is expected to be smooth: cargo fix migrates most code automatically, and the old
edition remains supported indefinitely for existing crates.</p>
<table><tr><th>Version</th><th>Year</th></tr><tr><td>1.0</td><td>2015</td></tr></table>
</article></main>
<footer>Copyright 2024 Example News. All rights reserved. Privacy policy.</footer></body></html>"""

APP = """<!doctype html><html><head><title>Dashboard</title></head><body>
<div id="app"><h2>Service status</h2><div>api: up</div><div>db: up</div><div>queue: degraded</div>
<a href="/logs">logs</a> <button>Restart</button></div>
<script>window.__STATE__ = {"hidden": "SCRIPT_SHOULD_NOT_APPEAR"}</script></body></html>"""

JSON = '{"name": "demo", "items": [1, 2, 3]}'
BIG_SIZE = 300_000
LATIN1 = "<html><head><title>Caf\u00e9</title></head><body><p>Cr\u00e8me br\u00fbl\u00e9e au caf\u00e9.</p></body></html>"


class Site:
    """The running site: its base URL and a stop flag for the trickling page."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.stopping = threading.Event()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"


def _handler(site_ref: list[Site]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def handle(self) -> None:
            with contextlib.suppress(ConnectionError):  # the client stopped reading (a capped download)
                super().handle()

        def _send(
            self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            site = site_ref[0]
            path = self.path
            if path == "/article":
                self._send(200, ARTICLE.encode(), "text/html; charset=utf-8")
            elif path == "/app":
                self._send(200, APP.encode(), "text/html")
            elif path == "/data.json":
                self._send(200, JSON.encode(), "application/json")
            elif path == "/big.txt":
                self._send(200, ("0123456789" * (BIG_SIZE // 10)).encode(), "text/plain")
            elif path == "/latin1":
                self._send(200, LATIN1.encode("latin-1"), "text/html; charset=iso-8859-1")
            elif path == "/image.png":
                self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
            elif path == "/redirect":
                self._send(302, b"", "text/plain", {"Location": "/article"})
            elif path == "/loop":
                self._send(302, b"", "text/plain", {"Location": "/loop"})
            elif path == "/to-metadata":
                self._send(302, b"", "text/plain", {"Location": "http://169.254.169.254/latest/meta-data/"})
            elif path == "/to-ftp":
                self._send(302, b"", "text/plain", {"Location": "ftp://example.com/file"})
            elif path == "/echo-host":
                self._send(200, f"Host: {self.headers.get('Host')}".encode(), "text/plain")
            elif path == "/garbage":
                self.wfile.write(b"NOT HTTP AT ALL\r\n\r\n")
                self.close_connection = True
            elif path == "/slow":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                try:
                    while not site.stopping.wait(0.05):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                except OSError:
                    pass
                self.close_connection = True
            else:
                self._send(404, b"not here", "text/plain")

    return Handler


@contextmanager
def running_site(tls: ssl.SSLContext | None = None) -> Iterator[Site]:
    """Serve the site on a free port of 127.0.0.1 until the block ends (over TLS with ``tls``)."""
    ref: list[Site] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    site = Site(server)
    if tls is not None:
        site.url = site.url.replace("http://", "https://")
    ref.append(site)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
