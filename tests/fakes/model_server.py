"""A fake model server: real HTTP/1.1 on a real 127.0.0.1 socket, replaying scripted replies.

It is a raw anyio TCP server (no framework), so a reply can do what real servers do wrong:
pause between stream chunks, end a stream without ``[DONE]``, or drop the connection in the
middle of a chunked body. It knows no API: a reply is a status, headers and a body — JSON, raw
bytes, or a list of SSE events — so the same server fakes OpenAI-compatible, Anthropic and
Gemini endpoints (shape builders live in ``openai_shapes.py`` and friends).

    with running_model_server() as server:          # in a background thread; sync or async tests
        server.enqueue(Reply.sse([chunk1, chunk2]), Reply.json({"error": ...}, status=429))
        ... point a client at server.base_url ("http://127.0.0.1:PORT/v1") ...
        server.requests[0].json                     # what the client sent

Replies are served in order, whatever the path; ``server.handler`` (a function of the
``RecordedRequest``) answers when the queue is empty. With neither, the answer is a 500.

The paths a client asks to learn what the server is (``PROBE_PATHS``: llama.cpp's ``/props``,
Ollama's ``/api/version``, tokenizer endpoints...) are never served from the queue: ``routes``
answers them by path (a ``Reply``, or a function of the request), else a plain 404, as a server
that is none of those would. They are recorded in ``server.probes``, not ``server.requests``, so
a test of the API sees only the API's requests.

    server.routes["/props"] = Reply.json({"default_generation_settings": {"n_ctx": 4096}})
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from anyio.from_thread import start_blocking_portal

__all__ = [
    "PROBE_PATHS",
    "Delay",
    "FakeModelServer",
    "RecordedRequest",
    "Reply",
    "running_model_server",
    "sse_event",
]

logger = logging.getLogger(__name__)

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


PROBE_PATHS = frozenset(
    {
        "/props",
        "/api/version",
        "/api/ps",
        "/api/show",
        "/api/v0/models",
        "/version",
        "/openapi.json",
        "/tokenize",
        "/apply-template",
        "/extras/tokenize",
        "/extras/tokenize/count",
    }
)
"""Paths that identify a server or count tokens: answered by ``routes`` or 404, never the queue."""


@dataclass(frozen=True)
class Delay:
    """An item of an SSE list: pause this long before the next item."""

    seconds: float


def sse_event(data: Any, event: str | None = None, *, newline: str = "\n") -> str:
    """One SSE event as text: ``event:`` (optional) and ``data:`` lines, then a blank line.

    ``data`` that is not a string is JSON-encoded; a multi-line string becomes several ``data:``
    lines.
    """
    text = data if isinstance(data, str) else json.dumps(data)
    lines = ([f"event: {event}"] if event else []) + [f"data: {line}" for line in text.split("\n")]
    return newline.join(lines) + newline + newline


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        status: the HTTP status.
        headers: extra headers (a ``content-type`` here wins over the default).
        body: the whole body (JSON bodies: use ``Reply.json``).
        events: a streamed body instead: each item is a dict (sent as ``data: <json>``), a str or
            bytes (sent as is, e.g. from ``sse_event``), or a ``Delay``. Sent chunked.
        done: append ``data: [DONE]`` after the events.
        chunk_delay: pause before each event.
        abort_after: drop the connection after this many events, mid-body (0 = right after the
            headers), without ending the chunked body: the client sees a broken stream.
        delay: pause before anything is sent (for timeouts and cancellation).
        drop: close the connection without answering at all.
        close: close the connection after the whole answer (sent without ``connection: close``,
            as a server whose idle timeout runs out between two requests).
        repeat: after the events, send this item (like an event) again and again until the client
            hangs up: a stream without end (no ``[DONE]``).
        body_repeat: send ``body`` this many times over, with a ``Content-Length`` that counts
            them all: a huge body that is never held whole.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: Sequence[Any] | None = None
    done: bool = True
    chunk_delay: float = 0.0
    abort_after: int | None = None
    delay: float = 0.0
    drop: bool = False
    close: bool = False
    repeat: Any = None
    body_repeat: int = 1

    @classmethod
    def json(cls, data: Any, status: int = 200, headers: Mapping[str, str] | None = None, **kw: Any) -> Reply:
        """A JSON body."""
        merged = {"content-type": "application/json", **(headers or {})}
        return cls(status=status, headers=merged, body=json.dumps(data).encode(), **kw)

    @classmethod
    def sse(cls, events: Sequence[Any], *, headers: Mapping[str, str] | None = None, **kw: Any) -> Reply:
        """A streamed body of SSE events (see ``events``)."""
        return cls(headers=dict(headers or {}), events=list(events), **kw)

    @classmethod
    def endless(
        cls, item: Any, *, headers: Mapping[str, str] | None = None, events: Sequence[Any] = ()
    ) -> Reply:
        """A chunked body that never ends: ``events``, then ``item`` over and over."""
        return cls(headers=dict(headers or {}), events=list(events), repeat=item, done=False)


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it (header names lower-cased)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class FakeModelServer:
    """The server; start it with ``running_model_server()`` (or ``serve`` in your own task group)."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self._only: dict[int, str] = {}  # id(reply) -> the path suffix it answers
        self.requests: list[RecordedRequest] = []
        self.handler: Callable[[RecordedRequest], Reply] | None = None
        self.routes: dict[str, Reply | Callable[[RecordedRequest], Reply]] = {}
        """Answers by path, before the queue (identification probes, tokenizers, /v1/models...)."""
        self.probes: list[RecordedRequest] = []
        """The requests answered from ``routes`` or as ``PROBE_PATHS`` (not in ``requests``)."""
        self.port = 0
        self.disconnects = 0
        """Connections the client closed while a reply was still being sent."""
        self.connections = 0
        self.closed = 0
        """Connections the server has closed (its side of them), for a test to wait on."""
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def enqueue(self, *replies: Reply, only: str | None = None) -> None:
        """Queue replies, served in order; with ``only``, to requests whose path ends so (others,
        like a gateway's periodic model-server probe, go to the handler meanwhile)."""
        with self._lock:
            for reply in replies:
                if only is not None:
                    self._only[id(reply)] = only
                self.replies.append(reply)

    @property
    def last(self) -> RecordedRequest:
        return self.requests[-1]

    async def serve(self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen on a free 127.0.0.1 port until cancelled; reports the port when ready."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener:
            task_status.started(self.port)
            await listener.serve(self._connection)

    # ------------------------------------------------------------------------------ protocol

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        buffer = bytearray()
        try:
            async with stream:
                while True:
                    request = await _read_request(stream, buffer)
                    if request is None:
                        return
                    reply = self._route(request)
                    if reply is None:
                        with self._lock:
                            self.requests.append(request)
                        reply = self._next(request)
                    if not await self._answer(stream, reply, buffer):
                        return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            self.disconnects += 1
        except Exception:  # a bug in a test's handler must not kill the listener
            logger.exception("fake model server: error while answering")
        finally:
            self.closed += 1

    def _route(self, request: RecordedRequest) -> Reply | None:
        """The answer from ``routes`` (or a 404 for a probe path); None: not routed."""
        route = self.routes.get(request.path)
        if route is None and request.path not in PROBE_PATHS:
            return None
        with self._lock:
            self.probes.append(request)
        if route is None:
            return Reply(status=404, body=b"404 page not found")
        return route(request) if callable(route) else route

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            for reply in self.replies:
                only = self._only.get(id(reply))
                if only is None or request.path.endswith(only):
                    self.replies.remove(reply)
                    self._only.pop(id(reply), None)
                    return reply
        if self.handler is not None:
            return self.handler(request)
        return Reply.json({"error": {"message": "fake model server: no reply scripted"}}, status=500)

    async def _answer(self, stream: anyio.abc.SocketStream, reply: Reply, buffer: bytearray) -> bool:
        """Send one reply; False when the connection must close afterwards."""
        if reply.delay:
            await anyio.sleep(reply.delay)
        if reply.drop:
            return False
        headers = {k.lower(): v for k, v in reply.headers.items()}
        head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
        if reply.events is None:
            headers.setdefault("content-type", "text/plain")
            headers["content-length"] = str(len(reply.body) * reply.body_repeat)
            head += [f"{k}: {v}" for k, v in headers.items()]
            await stream.send(("\r\n".join(head) + "\r\n\r\n").encode() + reply.body)
            for _ in range(reply.body_repeat - 1):
                await stream.send(reply.body)
            return not reply.close
        headers.setdefault("content-type", "text/event-stream")
        headers["transfer-encoding"] = "chunked"
        headers.setdefault("cache-control", "no-cache")
        head += [f"{k}: {v}" for k, v in headers.items()]
        await stream.send(("\r\n".join(head) + "\r\n\r\n").encode())
        items = list(reply.events)
        if reply.done:
            items.append("data: [DONE]\n\n")
        sent = 0
        for item in items:
            if isinstance(item, Delay):
                await _pause(stream, item.seconds, buffer)
                continue
            if reply.abort_after is not None and sent >= reply.abort_after:
                return False
            if reply.chunk_delay:
                await anyio.sleep(reply.chunk_delay)
            data = _encode(item)
            await stream.send(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            sent += 1
        if reply.abort_after is not None and sent >= reply.abort_after:
            return False
        if reply.repeat is not None:
            data = _encode(reply.repeat)
            chunk = f"{len(data):x}\r\n".encode() + data + b"\r\n"
            while True:  # until the client hangs up (BrokenResourceError: counted as a disconnect)
                await stream.send(chunk)
        await stream.send(b"0\r\n\r\n")
        return not reply.close


async def _pause(stream: anyio.abc.SocketStream, seconds: float, buffer: bytearray) -> None:
    """Wait, but notice at once when the client goes away (raises BrokenResourceError)."""
    with anyio.move_on_after(seconds):
        while True:
            try:
                data = await stream.receive()
            except (anyio.EndOfStream, ConnectionError) as exc:
                raise anyio.BrokenResourceError from exc
            buffer += data


def _encode(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode()
    return sse_event(item).encode()


async def _read_request(stream: anyio.abc.SocketStream, buffer: bytearray) -> RecordedRequest | None:
    while b"\r\n\r\n" not in buffer:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            return None
    end = buffer.index(b"\r\n\r\n")
    head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    method, target, _ = head[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    while len(buffer) < length:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            return None
    body = bytes(buffer[:length])
    del buffer[:length]
    path, _, query = target.partition("?")
    return RecordedRequest(method=method, path=path, query=query, headers=headers, body=body)


@contextmanager
def running_model_server() -> Iterator[FakeModelServer]:
    """Run a ``FakeModelServer`` in a background thread for the duration of the block."""
    server = FakeModelServer()
    with start_blocking_portal() as portal:
        future, _ = portal.start_task(server.serve)
        try:
            yield server
        finally:
            future.cancel()
