"""The floor of ``bench_passthrough.py``: a bare relay, with no gateway logic at all.

``python bench/_relay.py MODE PORT UPSTREAM`` serves a tiny ASGI app on uvicorn (the gateway's
HTTP server, with its h11 protocol) that forwards each POST's body and MCP headers to
``UPSTREAM`` on one kept-alive connection and answers with the upstream's status, content type
and body. ``MODE`` is the client of that hop: ``httpx`` (an ``httpx2.AsyncClient``, what the
gateway's raw calls used before ``lean_http.py``) or ``h11`` (one h11 connection over asyncio
streams, head and body in one write: about the least any Python relay can do). Anything but a
POST is forwarded with ``httpx`` (a 2026-07-28 client sends only POSTs). What such a relay costs
over a direct call is what any Python hop on this machine costs; the gateway's own logic comes on
top of it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any
from urllib.parse import urlsplit

import h11
import httpx2
import uvicorn

FORWARDED = (b"accept", b"content-type", b"mcp-protocol-version", b"mcp-method", b"mcp-name")
ANSWERED = (b"content-type",)


class H11Hop:
    """One kept-alive HTTP/1.1 connection to the upstream (requests one at a time)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.lock = asyncio.Lock()

    async def post(self, headers: list[tuple[bytes, bytes]], body: bytes) -> tuple[int, list[Any], bytes]:
        async with self.lock:
            if self.streams is None:
                self.streams = await asyncio.open_connection(self.host, self.port)
                self.h11 = h11.Connection(h11.CLIENT)
            reader, writer = self.streams
            head = [
                (b"host", f"{self.host}:{self.port}".encode()),
                (b"content-length", str(len(body)).encode()),
            ]
            request = h11.Request(method="POST", target=self.path, headers=head + headers)
            writer.write(
                (self.h11.send(request) or b"")
                + (self.h11.send(h11.Data(data=body)) or b"")
                + (self.h11.send(h11.EndOfMessage()) or b"")
            )
            status, answered, chunks = 0, [], []
            while True:
                event = self.h11.next_event()
                if event is h11.NEED_DATA:
                    self.h11.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    answered = [(k, v) for k, v in event.headers if k in ANSWERED]
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
            self.h11.start_next_cycle()
            return status, answered, b"".join(chunks)


def relay(mode: str, upstream: str) -> Any:
    client = httpx2.AsyncClient(timeout=60)
    hop = H11Hop(upstream)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k in FORWARDED]
        if mode == "h11" and scope["method"] == "POST":
            status, answered, data = await hop.post(headers, body)
        else:
            response = await client.request(scope["method"], upstream, content=body, headers=headers)
            status, data = response.status_code, response.content
            answered = [(k, v) for k, v in response.headers.raw if k.lower() in ANSWERED]
        length = [(b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": answered + length})
        await send({"type": "http.response.body", "body": data})

    return app


if __name__ == "__main__":
    mode, port, upstream = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    uvicorn.run(
        relay(mode, upstream), host="127.0.0.1", port=port, log_level="warning", ws="none", http="h11"
    )
