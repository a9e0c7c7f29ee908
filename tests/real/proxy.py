"""A recording proxy in front of a real model server: what the project sent, what came back, when.

    with recording_proxy(server.url) as proxy:        # a background thread; sync or async tests
        ... point llm.endpoint at proxy.base_url ...
        proxy.exchanges[0].request_json                # the body the agent sent
        proxy.exchanges[0].body                        # the server's answer, byte for byte
        proxy.exchanges[0].server_ms                   # from request in to last byte out

Raw HTTP/1.1 on 127.0.0.1 (the request reader of ``tests/fakes/model_server.py``); each request
goes upstream through httpx and its answer comes back as it arrives: a streamed answer chunk by
chunk (so a stream's timing and its empty bodies are what the server did), a whole one with its
length. When the client goes away mid-answer the upstream request is closed too, as the server
would have seen without the proxy.

``rewrite`` may change a request body before it goes upstream (``prefill_when_required`` makes a
required call certain for a 135M model); the exchange records both bodies. ``anonymous``
hides which server answers.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx
from anyio.from_thread import start_blocking_portal

from tests.fakes.model_server import RecordedRequest, _read_request

__all__ = [
    "PREFILL",
    "Exchange",
    "RecordingProxy",
    "empty_stream",
    "name_the_tool_when_plain",
    "prefill_when_required",
    "recording_proxy",
]

logger = logging.getLogger(__name__)

_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "accept-encoding",
    "te",
    "upgrade",
}

Rewrite = Callable[[int, RecordedRequest, dict[str, Any]], dict[str, Any] | None]
"""``(index of the chat request, the request, its JSON body) -> a new body or None``."""


@dataclass
class Exchange:
    """One request through the proxy and the server's answer."""

    method: str
    path: str
    request_body: bytes
    sent_body: bytes
    """What went upstream (``request_body`` unless ``rewrite`` changed it)."""
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    t_start: float = 0.0
    t_headers: float = 0.0
    t_first_byte: float | None = None
    t_end: float = 0.0
    client_gone: bool = False
    error: str = ""
    upstream_retries: int = 0
    """Times the request went upstream again because a kept-alive connection had closed."""

    @property
    def request_json(self) -> Any:
        return json.loads(self.request_body) if self.request_body else None

    @property
    def sent_json(self) -> Any:
        return json.loads(self.sent_body) if self.sent_body else None

    @property
    def is_chat(self) -> bool:
        return self.path.endswith("/chat/completions")

    @property
    def streamed(self) -> bool:
        return "event-stream" in self.headers.get("content-type", "")

    @property
    def server_ms(self) -> float:
        """From the whole request in to the last byte of the answer out."""
        return (self.t_end - self.t_start) * 1000

    def json(self) -> Any:
        """The answer as JSON (a whole answer), or None."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def sse_data(self) -> list[Any]:
        """The ``data:`` payloads of a streamed answer, parsed (``[DONE]`` left out)."""
        out = []
        for line in self.body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    try:
                        out.append(json.loads(data))
                    except ValueError:
                        out.append(data)
        return out

    def reported_usage(self) -> dict[str, Any] | None:
        """The usage the server reported (whole answer or any stream chunk), else what llama-server's
        ``timings`` count (``prompt_n`` + ``cache_n``, ``predicted_n``), else None."""
        payloads = [self.json()] if not self.streamed else self.sse_data()
        usage = None
        for payload in payloads:
            if isinstance(payload, dict) and isinstance(payload.get("usage"), dict):
                usage = payload["usage"]
        timings = self.timings()
        if usage is None and timings is not None:
            prompt = int(timings.get("prompt_n", 0)) + int(timings.get("cache_n", 0))
            completion = int(timings.get("predicted_n", 0))
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return usage

    def timings(self) -> dict[str, Any] | None:
        """llama-server's own ``timings`` (prompt_ms, predicted_ms...), when it sent them."""
        payloads = [self.json()] if not self.streamed else self.sse_data()
        found = None
        for payload in payloads:
            if isinstance(payload, dict) and isinstance(payload.get("timings"), dict):
                found = payload["timings"]
        return found

    def to_sample(self, note: str = "") -> dict[str, Any]:
        """A wire sample for the fast tier (``tests/fakes/real_samples/``)."""
        try:
            request: Any = json.loads(self.sent_body)
        except ValueError:
            request = self.sent_body.decode("utf-8", "replace")
        return {
            "note": note,
            "request": {"method": self.method, "path": self.path, "body": request},
            "response": {
                "status": self.status,
                "headers": {k: v for k, v in self.headers.items() if k in ("content-type", "server")},
                "body": self.body.decode("utf-8", "replace"),
            },
            "ms": round(self.server_ms, 1),
        }


class RecordingProxy:
    """The proxy; run it with ``recording_proxy`` (or ``serve`` in a task group of your own)."""

    def __init__(self, upstream: str, rewrite: Rewrite | None = None, *, anonymous: bool = False) -> None:
        self.upstream = upstream.rstrip("/")
        self.rewrite = rewrite
        self.anonymous = anonymous
        """Hide what the server is: every path but ``/chat/completions`` answers a bare 404 and no
        ``server`` header goes back, so the agent meets a server it cannot identify and must learn
        from what its chat requests get."""
        self.exchanges: list[Exchange] = []
        self.port = 0
        self.on_request: Callable[[Exchange], None] | None = None
        """Called (in the proxy's thread) when a request has come in, before it goes upstream."""
        self._lock = threading.Lock()
        self._chats = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def chats(self) -> list[Exchange]:
        """The ``/chat/completions`` exchanges, in order."""
        with self._lock:
            return [e for e in self.exchanges if e.is_chat]

    def clear(self) -> None:
        with self._lock:
            self.exchanges.clear()
            self._chats = 0

    async def serve(self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        timeout = httpx.Timeout(None, connect=10.0)
        async with listener, httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            self._client = client
            task_status.started(self.port)
            await listener.serve(self._connection)

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        buffer = bytearray()
        try:
            async with stream:
                while True:
                    request = await _read_request(stream, buffer)
                    if request is None:
                        return
                    if not await self._forward(stream, request):
                        return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass
        except Exception:
            logger.exception("recording proxy: error while forwarding")

    def _body_for(self, request: RecordedRequest) -> bytes:
        if self.rewrite is None or not request.path.endswith("/chat/completions") or not request.body:
            return request.body
        with self._lock:
            index = self._chats
            self._chats += 1
        new = self.rewrite(index, request, json.loads(request.body))
        return request.body if new is None else json.dumps(new).encode()

    async def _forward(self, stream: anyio.abc.SocketStream, request: RecordedRequest) -> bool:
        sent = self._body_for(request)
        exchange = Exchange(request.method, request.path, request.body, sent, t_start=time.perf_counter())
        with self._lock:
            self.exchanges.append(exchange)
        if self.on_request is not None:
            self.on_request(exchange)
        if self.anonymous and not request.path.endswith("/chat/completions"):
            exchange.status, exchange.body = 404, b"not found"
            exchange.t_end = time.perf_counter()
            await stream.send(
                b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 9\r\n\r\nnot found"
            )
            return True
        headers = {k: v for k, v in request.headers.items() if k not in _HOP}
        headers["accept-encoding"] = "identity"
        url = self.upstream + request.path + (f"?{request.query}" if request.query else "")
        for attempt in (1, 2):
            try:
                return await self._relay(stream, exchange, request.method, url, sent, headers)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                # a kept-alive upstream connection the server had closed (llama-cpp-python closes it
                # after a stream that failed): asked again once on a new one, as a browser would
                if attempt == 2 or exchange.status:
                    exchange.error = repr(exc)
                    exchange.t_end = time.perf_counter()
                    return False
                exchange.upstream_retries += 1
            except httpx.HTTPError as exc:  # the server died or refused: the client sees a dropped connection
                exchange.error = repr(exc)
                exchange.t_end = time.perf_counter()
                return False
        return False

    async def _relay(
        self,
        stream: anyio.abc.SocketStream,
        exchange: Exchange,
        method: str,
        url: str,
        sent: bytes,
        headers: dict[str, str],
    ) -> bool:
        async with self._client.stream(method, url, content=sent, headers=headers) as response:
            exchange.t_headers = time.perf_counter()
            exchange.status = response.status_code
            exchange.headers = {k.lower(): v for k, v in response.headers.items()}
            hidden = _HOP | {"server"} if self.anonymous else _HOP
            kept = {k: v for k, v in exchange.headers.items() if k not in hidden}
            head = f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n"
            if "content-length" in exchange.headers and "event-stream" not in exchange.headers.get(
                "content-type", ""
            ):
                body = await response.aread()
                exchange.t_first_byte = time.perf_counter()
                exchange.body = body
                lines = [f"{k}: {v}" for k, v in kept.items()] + [f"content-length: {len(body)}"]
                await stream.send((head + "\r\n".join(lines) + "\r\n\r\n").encode() + body)
                exchange.t_end = time.perf_counter()
                return True
            lines = [f"{k}: {v}" for k, v in kept.items()] + ["transfer-encoding: chunked"]
            await stream.send((head + "\r\n".join(lines) + "\r\n\r\n").encode())
            parts = bytearray()
            try:
                async for chunk in response.aiter_raw():
                    if not chunk:
                        continue
                    if exchange.t_first_byte is None:
                        exchange.t_first_byte = time.perf_counter()
                    parts += chunk
                    await stream.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await stream.send(b"0\r\n\r\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
                exchange.client_gone = True  # leaving the block closes the upstream request too
                return False
            finally:
                exchange.body = bytes(parts)
                exchange.t_end = time.perf_counter()
            return True


PREFILL = {"role": "assistant", "content": "{"}
"""An assistant message to continue: llama-server runs the prefill through the grammar, so with
``tool_choice: "required"`` the answer is a call from its first token (without it, llama.cpp's
grammar lets the model write text first, and a 135M model may write text until the cap)."""


def prefill_when_required(
    index: int, request: RecordedRequest, body: dict[str, Any]
) -> dict[str, Any] | None:
    """A ``rewrite`` for llama-server: the prefill ``{`` on requests that say ``tool_choice: "required"``."""
    if body.get("tool_choice") == "required":
        return {**body, "messages": [*body["messages"], PREFILL]}
    return None


def name_the_tool_when_plain(
    index: int, request: RecordedRequest, body: dict[str, Any]
) -> dict[str, Any] | None:
    """A ``rewrite``: a request with tools that is not streamed names the first tool in ``tool_choice``."""
    if body.get("tools") and not body.get("stream") and body.get("tool_choice", "auto") == "auto":
        name = body["tools"][0]["function"]["name"]
        return {**body, "tool_choice": {"type": "function", "function": {"name": name}}}
    return None


def empty_stream(exchange: Exchange) -> bool:
    """A streamed request with tools that came back 200 with no data (only ``: ping`` at most)."""
    return (
        bool(exchange.sent_json.get("stream") and exchange.sent_json.get("tools")) and not exchange.sse_data()
    )


@contextmanager
def recording_proxy(
    upstream: str, rewrite: Rewrite | None = None, *, anonymous: bool = False
) -> Iterator[RecordingProxy]:
    """Run a ``RecordingProxy`` to ``upstream`` in a background thread for the block."""
    proxy = RecordingProxy(upstream, rewrite, anonymous=anonymous)
    with start_blocking_portal() as portal:
        future, _ = portal.start_task(proxy.serve)
        try:
            yield proxy
        finally:
            future.cancel()
