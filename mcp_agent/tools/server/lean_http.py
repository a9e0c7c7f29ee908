"""A lean HTTP/1.1 transport for the raw tool calls to one plain-``http://`` server.

``raw_call.py`` sends each ``tools/call`` as one POST. Through ``httpx2.AsyncClient.send`` such a
POST crosses the client's auth, redirect and cookie layers, httpcore's pool, its h11 connection
(which writes the head and the body in two sends) and an anyio stream, and on a 2-core machine
this costs about half a millisecond of CPU per call more than the HTTP work itself (the note in
``bench/bench_passthrough.py``'s ``floor`` paths measures both). ``LeanTransport`` is an
``httpx2.AsyncBaseTransport`` of its own: a few kept-alive connections to one origin, each an
``h11`` connection over an anyio socket stream, the request's head and body written in one send,
and the response handed back as an ``httpx2.Response`` whose body is read from the connection as
it is iterated. So everything above it (``RawCaller``: JSON or SSE answers, error statuses, the
``maxMessageBytes`` cap, decoding) stays as it is.

``RawCaller`` uses it only where the client's layers have nothing to do (``usable``): an
``http://`` URL, no ``auth`` on the client, no proxy in the environment, no cookie kept; and it
runs the client's own event hooks around it (the trace headers, the body cap, the SSE drain) as
``send`` would. Everything else (TLS, auth, proxies, cookies, redirects: the answer of a redirect
is handed back as such) keeps going through the client.

Connections: one is taken per request (an idle one that the server has not closed, else a new
one), given back when its response was read to its end and both sides may keep it, closed when
the response is closed before its end (a cancelled or abandoned call) or when anything fails on
it. At most ``max_connections`` are open at once (more requests wait), ``max_idle`` are kept.
Failures are httpx's: ``ConnectError``/``ConnectTimeout``, ``WriteError``, ``ReadError``/
``ReadTimeout``, ``RemoteProtocolError``, with the client's timeouts.
"""

from __future__ import annotations

import select
import socket
import urllib.request
from collections.abc import AsyncIterator
from contextlib import suppress

import anyio
import anyio.abc
import h11
import httpx2

READ_SIZE = 64 * 1024
MAX_HEAD_BYTES = 256 * 1024
"""The largest response head h11 accepts (its own default is 16 KiB)."""


def usable(http: httpx2.AsyncClient, url: str, *, proxied: bool | None = None) -> bool:
    """Whether a POST to ``url`` on ``http`` can go through a ``LeanTransport`` unchanged: a plain
    ``http://`` URL, and nothing for the client's auth, proxy or cookie layers to do (pure but
    for the environment's proxy variables; ``proxied``: what ``env_proxy`` said, read once)."""
    if http.auth is not None or len(http.cookies) or not url.startswith("http://"):
        return False
    if http.trust_env:
        return not (env_proxy() if proxied is None else proxied)
    return True


def env_proxy() -> bool:
    """Whether the environment names an HTTP proxy (even one ``NO_PROXY`` bypasses: such a request
    goes the client's way)."""
    proxies = urllib.request.getproxies_environment()
    return "http" in proxies or "all" in proxies


class _Connection:
    """One kept-alive HTTP/1.1 connection: an h11 state machine over a socket stream."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.socket: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)

    def reusable(self) -> bool:
        """Whether the idle connection may take a request: the server has not closed it (nothing,
        not even an end of stream, is waiting to be read)."""
        if self.socket.fileno() < 0:
            return False
        readable, _, _ = select.select([self.socket], [], [], 0)
        return not readable

    async def next_event(self, timeout: float | None) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx2.RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                return event
            try:
                with anyio.fail_after(timeout):
                    data = await self.stream.receive(READ_SIZE)
            except TimeoutError as exc:
                raise httpx2.ReadTimeout("timed out reading the response") from exc
            except anyio.EndOfStream:
                data = b""
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise httpx2.ReadError(str(exc) or repr(exc)) from exc
            try:
                self.h11.receive_data(data)
            except h11.RemoteProtocolError as exc:
                raise httpx2.RemoteProtocolError(str(exc)) from exc

    async def aclose(self) -> None:
        with suppress(Exception):
            await self.stream.aclose()


class LeanTransport(httpx2.AsyncBaseTransport):
    """Requests to one origin over kept-alive HTTP/1.1 connections (see the module docstring).

    Args:
        timeout: the client's timeouts (connect, write, read; ``pool`` bounds a wait for a slot).
        max_connections: connections open at once.
        max_idle: idle connections kept.
    """

    def __init__(self, timeout: httpx2.Timeout, *, max_connections: int = 100, max_idle: int = 20) -> None:
        self.timeout = timeout
        self.max_idle = max_idle
        self._slots = anyio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._closed:
            raise httpx2.ConnectError("the transport is closed")
        body = request.content  # a request built with json= or content= is already whole
        try:
            self._slots.acquire_nowait()
        except anyio.WouldBlock:
            try:
                with anyio.fail_after(self.timeout.pool):
                    await self._slots.acquire()
            except TimeoutError as exc:
                raise httpx2.PoolTimeout("timed out waiting for a connection") from exc
        connection: _Connection | None = None
        try:
            connection = await self._connection(request.url)
            head = [(b"host", request.url.netloc)] if "host" not in request.headers else []
            head.extend(request.headers.raw)
            if "content-length" not in request.headers and "transfer-encoding" not in request.headers:
                head.append((b"content-length", str(len(body)).encode()))
            data = connection.h11.send(
                h11.Request(method=request.method, target=request.url.raw_path, headers=head)
            )
            if body:
                data = (data or b"") + (connection.h11.send(h11.Data(data=body)) or b"")
            data = (data or b"") + (connection.h11.send(h11.EndOfMessage()) or b"")
            try:
                with anyio.fail_after(self.timeout.write):
                    await connection.stream.send(data)
            except TimeoutError as exc:
                raise httpx2.WriteTimeout("timed out writing the request") from exc
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise httpx2.WriteError(str(exc) or repr(exc)) from exc
            event = await connection.next_event(self.timeout.read)
            while isinstance(event, h11.InformationalResponse):
                event = await connection.next_event(self.timeout.read)
            if not isinstance(event, h11.Response):
                raise httpx2.RemoteProtocolError(f"expected a response, got {event!r}")
        except BaseException:  # cancelled too: the slot is given back, the connection closed
            self._slots.release()
            if connection is not None:
                with anyio.CancelScope(shield=True):
                    await connection.aclose()
            raise
        return httpx2.Response(
            event.status_code,
            headers=event.headers.raw_items(),
            stream=_Body(self, connection),
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": event.reason},
        )

    async def _connection(self, url: httpx2.URL) -> _Connection:
        """An idle connection the server kept, else a new one."""
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable():
                return connection
            await connection.aclose()
        port = url.port or 80
        try:
            with anyio.fail_after(self.timeout.connect):
                stream = await anyio.connect_tcp(url.host, port)
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"timed out connecting to {url.host}:{port}") from exc
        except OSError as exc:
            raise httpx2.ConnectError(str(exc) or repr(exc)) from exc
        return _Connection(stream)

    async def _done(self, connection: _Connection, complete: bool) -> None:
        """The response on ``connection`` is over: keep the connection if both sides may."""
        self._slots.release()
        state = connection.h11
        if (
            complete
            and not self._closed
            and len(self._idle) < self.max_idle
            and state.our_state is h11.DONE
            and state.their_state is h11.DONE
        ):
            state.start_next_cycle()
            self._idle.append(connection)
            return
        await connection.aclose()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()


class _Body(httpx2.AsyncByteStream):
    """A response body read from its connection as it is iterated; the connection goes back to
    the transport at its end, or is closed when the body is closed first."""

    def __init__(self, transport: LeanTransport, connection: _Connection) -> None:
        self._transport = transport
        self._connection: _Connection | None = connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx2.StreamClosed()
        try:
            while True:
                event = await connection.next_event(self._transport.timeout.read)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    raise httpx2.RemoteProtocolError(f"unexpected {event!r} in a response body")
        except BaseException:
            await self._end(complete=False)
            raise
        await self._end(complete=True)

    async def _end(self, *, complete: bool) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with anyio.CancelScope(shield=True):
                await self._transport._done(connection, complete)

    async def aclose(self) -> None:
        await self._end(complete=False)
