"""A lean HTTP/1.1 transport for plain-``http://`` requests, for either flavour of httpx.

Through ``AsyncClient``'s default transport a request crosses httpcore's pool, its h11
connection (which writes the head and the body in two sends) and an anyio stream with httpcore's
own exception maps around every read; on a 2-core machine that costs a few hundred microseconds of
CPU per request more than the HTTP work itself (``bench/bench_passthrough.py``'s ``floor`` paths,
``bench/bench_query_http.py``). ``LeanTransport`` does the same work itself: a few kept-alive
connections per origin, each an ``h11`` connection over an anyio socket stream, the request's head
and body written in one send, the response handed back as the flavour's ``Response`` whose body
is read from the connection as it is iterated. Everything above a transport (the client's hooks,
timeouts, streaming bodies, the caller's error handling) stays as it is.

``send(client, request)`` is the short way past the client's own layers for a request the client
built (``build_request``: its headers, cookies and timeouts): the client's hooks, this transport,
and what the client's ``send`` does with the answer (the cookies kept, a failure naming its
request), a redirect handed back unfollowed. It saves the client's auth, redirect and cookie-jar
passes, 70–100 µs of CPU per request. A client's auth runs its flow around it as the client
would run it (the raw tool calls' client has the OAuth client of ``auth/upstream.py``, a
pass-through until a server asks for a login); credentials in the URL and requests to other
schemes are the client's to send.

Two flavours use it, each with a few lines that name its classes (``flavour``, ``body``):
``providers/http/lean.py`` (``httpx``, the model calls) and ``tools/server/lean_http.py``
(``httpx2``, the raw tool calls). Both use it only for ``http://`` URLs with no proxy in the way
(``env_proxy``): TLS, proxies and HTTP/2 keep the flavour's default transport.

Connections: one is taken per request (an idle one to the same origin that the server has not
closed and that has not idled past ``keepalive_expiry``, else a new one), given back when its
response was read to its end and both sides may keep it, closed when the response is closed before
its end (a cancelled or abandoned call) or when anything fails on it. A request is never sent
twice: a server that closed a kept connection is seen before the request is written (the socket
is readable), and one that closes it while the request is on its way is the caller's failure, as
with httpcore. At most ``max_connections`` are open at once (more requests wait up to the pool
timeout), ``max_idle`` are kept per origin.

Failures are the flavour's, as its default transport raises them: ``ConnectError`` (the
``OSError`` as its cause, so a refusal can be told) / ``ConnectTimeout``, ``WriteError`` /
``WriteTimeout``, ``ReadError`` / ``ReadTimeout``, ``RemoteProtocolError`` (a server that closed
without an answer: "Server disconnected without sending a response.", as httpcore says it),
``PoolTimeout``; the timeouts are the request's own (``request.extensions["timeout"]``, which the
client fills in from its ``Timeout`` and the call's), else the transport's.
"""

from __future__ import annotations

import select
import socket
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import suppress
from types import ModuleType
from typing import Any, ClassVar, Generic, TypeVar

import anyio
import anyio.abc
import h11

__all__ = ["LeanBody", "LeanTransportBase", "env_proxy"]

READ_SIZE = 64 * 1024
MAX_HEAD_BYTES = 256 * 1024
"""The largest response head h11 accepts (its own default is 16 KiB)."""
NO_ANSWER = "Server disconnected without sending a response."
_NETWORK_ERRORS = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


def env_proxy() -> bool:
    """Whether the environment names an HTTP proxy (even one ``NO_PROXY`` bypasses: such a request
    goes the client's way)."""
    proxies = urllib.request.getproxies_environment()
    return "http" in proxies or "all" in proxies


class _Connection:
    """One kept-alive HTTP/1.1 connection: an h11 state machine over a socket stream."""

    def __init__(self, stream: anyio.abc.SocketStream, flavour: ModuleType, origin: tuple[str, int]) -> None:
        self.stream = stream
        self.flavour = flavour
        self.origin = origin
        self.socket: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_since = 0.0

    def reusable(self, now: float, expiry: float | None) -> bool:
        """Whether the idle connection may take a request: not idle for too long, and the server
        has not closed it (nothing, not even an end of stream, is waiting to be read)."""
        if self.socket.fileno() < 0 or (expiry is not None and now - self.idle_since > expiry):
            return False
        readable, _, _ = select.select([self.socket], [], [], 0)
        return not readable

    async def next_event(self, timeout: float | None) -> Any:
        """The next h11 event, reading from the socket as long as h11 needs data."""
        flavour = self.flavour
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise flavour.RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                return event
            try:
                with anyio.fail_after(timeout):
                    data = await self.stream.receive(READ_SIZE)
            except TimeoutError as exc:
                raise flavour.ReadTimeout("timed out reading the response") from exc
            except anyio.EndOfStream:
                data = b""
            except _NETWORK_ERRORS as exc:
                raise flavour.ReadError(str(exc) or repr(exc)) from exc
            if not data and self.h11.their_state is h11.SEND_RESPONSE:
                raise flavour.RemoteProtocolError(NO_ANSWER)
            try:
                self.h11.receive_data(data)
            except h11.RemoteProtocolError as exc:
                raise flavour.RemoteProtocolError(str(exc)) from exc

    async def aclose(self) -> None:
        with suppress(Exception):
            await self.stream.aclose()


def _seconds(timeouts: dict[str, Any], name: str) -> float | None:
    value = timeouts.get(name)
    return float(value) if isinstance(value, int | float) else None


class LeanTransportBase(Generic[RequestT, ResponseT]):
    """Requests over kept-alive HTTP/1.1 connections (see the module docstring). A flavour's
    transport is this (of the flavour's ``Request`` and ``Response``) and the flavour's
    ``AsyncBaseTransport``, naming its module (``flavour``: ``httpx`` or ``httpx2``, whose
    exceptions and ``Response`` it makes) and its body class.

    Args:
        timeout: the flavour's ``Timeout``, for a request that carries none of its own.
        max_connections: connections open at once.
        max_idle: idle connections kept per origin.
        keepalive_expiry: seconds an idle connection is kept (None: as long as the server keeps it).
    """

    flavour: ClassVar[ModuleType]
    body: ClassVar[type[LeanBody]]

    def __init__(
        self,
        timeout: Any,
        *,
        max_connections: int = 100,
        max_idle: int = 20,
        keepalive_expiry: float | None = None,
    ) -> None:
        self.timeouts: dict[str, Any] = timeout.as_dict()
        self.max_idle = max_idle
        self.keepalive_expiry = keepalive_expiry
        self._slots = anyio.Semaphore(max_connections)
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: RequestT) -> ResponseT:
        sent: Any = request
        flavour = self.flavour
        if self._closed:
            raise flavour.ConnectError("the transport is closed")
        timeouts = sent.extensions.get("timeout") or self.timeouts
        body = await sent.aread()  # a request built with json= or content= is already whole
        try:
            self._slots.acquire_nowait()
        except anyio.WouldBlock:
            try:
                with anyio.fail_after(_seconds(timeouts, "pool")):
                    await self._slots.acquire()
            except TimeoutError as exc:
                raise flavour.PoolTimeout("timed out waiting for a connection") from exc
        connection: _Connection | None = None
        try:
            connection = await self._connection(sent.url, _seconds(timeouts, "connect"))
            headers = sent.headers
            head = [] if "host" in headers else [(b"host", sent.url.netloc)]
            head.extend(headers.raw)
            if body and "content-length" not in headers and "transfer-encoding" not in headers:
                head.append((b"content-length", str(len(body)).encode()))
            state = connection.h11
            data = state.send(h11.Request(method=sent.method, target=sent.url.raw_path, headers=head))
            if body:
                data = (data or b"") + (state.send(h11.Data(data=body)) or b"")
            data = (data or b"") + (state.send(h11.EndOfMessage()) or b"")
            try:
                with anyio.fail_after(_seconds(timeouts, "write")):
                    await connection.stream.send(data)
            except TimeoutError as exc:
                raise flavour.WriteTimeout("timed out writing the request") from exc
            except _NETWORK_ERRORS as exc:
                raise flavour.WriteError(str(exc) or repr(exc)) from exc
            read = _seconds(timeouts, "read")
            event = await connection.next_event(read)
            while isinstance(event, h11.InformationalResponse):
                event = await connection.next_event(read)
            if not isinstance(event, h11.Response):
                raise flavour.RemoteProtocolError(f"expected a response, got {event!r}")
        except BaseException:  # cancelled too: the slot is given back, the connection closed
            self._slots.release()
            if connection is not None:
                with anyio.CancelScope(shield=True):
                    await connection.aclose()
            raise
        response: ResponseT = flavour.Response(
            event.status_code,
            headers=event.headers.raw_items(),
            stream=self.body(self, connection, read),
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": event.reason},
        )
        return response

    async def send(self, client: Any, request: RequestT) -> ResponseT:
        """``client.send(request, stream=True, follow_redirects=False)``, past the client's own
        layers (see the module docstring). The client's auth, when it has one, runs its flow as
        the client's ``send`` runs it: each request the flow yields is sent (``_send_one``) and its
        response handed back to the flow, read to its end when the flow goes on. The caller closes
        the response."""
        auth = client.auth
        if auth is None:
            return await self._send_one(client, request)  # type: ignore[no-any-return]
        flow = auth.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            history: list[Any] = []
            while True:
                response: Any = await self._send_one(client, outgoing)
                try:
                    try:
                        outgoing = await flow.asend(response)
                    except StopAsyncIteration:
                        return response  # type: ignore[no-any-return]
                    response.history = list(history)
                    await response.aread()
                    history.append(response)
                except BaseException:
                    await response.aclose()
                    raise
        finally:
            await flow.aclose()

    async def _send_one(self, client: Any, request: Any) -> Any:
        """One request, no auth: the client's request hooks, this transport, its response hooks; a
        redirect handed back unfollowed, marked as the client marks one it does not follow, and
        the cookies of the answer kept in the client's jar (later requests carry them). A request
        this transport does not take (not ``http://``: an authorization server's, say) or a URL
        with credentials in it (``http://user:secret@host/``, which the client's auth pass sends
        as HTTP Basic) goes the client's own way."""
        url = request.url
        if url.userinfo or url.scheme != "http":
            # within the client's own auth flow (``send`` runs it) a no-op auth, so that nothing
            # is added twice; without one, the client's auth pass sends the URL's credentials
            auth = None if client.auth is None else self.flavour.Auth()
            return await client.send(request, stream=True, auth=auth, follow_redirects=False)
        hooks = client.event_hooks
        for hook in hooks["request"]:
            await hook(request)
        try:
            response: Any = await self.handle_async_request(request)
        except self.flavour.RequestError as exc:  # as the client's send does: the failure names its request
            _name_request(exc, request)
            raise
        try:
            for hook in hooks["response"]:
                await hook(response)
        except BaseException:
            await response.aclose()
            raise
        if response.is_redirect:
            response.next_request = client.build_request(
                request.method, url.join(response.headers["location"])
            )
        if "set-cookie" in response.headers:
            client.cookies.extract_cookies(response)
        return response

    async def _connection(self, url: Any, timeout: float | None) -> _Connection:
        """An idle connection to the origin that the server kept, else a new one."""
        host: str = url.host
        port: int = url.port or 80
        idle = self._idle.get((host, port))
        if idle:
            now = time.monotonic()
            while idle:
                connection = idle.pop()
                if connection.reusable(now, self.keepalive_expiry):
                    return connection
                await connection.aclose()
        flavour = self.flavour
        try:
            with anyio.fail_after(timeout):
                stream = await anyio.connect_tcp(host, port)
        except TimeoutError as exc:
            raise flavour.ConnectTimeout(f"timed out connecting to {host}:{port}") from exc
        except OSError as exc:
            raise flavour.ConnectError(str(exc) or repr(exc)) from exc
        return _Connection(stream, flavour, (host, port))

    async def _done(self, connection: _Connection, complete: bool) -> None:
        """The response on ``connection`` is over: keep the connection if both sides may."""
        self._slots.release()
        state = connection.h11
        if complete and not self._closed and state.our_state is h11.DONE and state.their_state is h11.DONE:
            idle = self._idle.setdefault(connection.origin, [])
            if len(idle) < self.max_idle:
                state.start_next_cycle()
                connection.idle_since = time.monotonic()
                idle.append(connection)
                return
        await connection.aclose()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.aclose()


def _name_request(exc: Any, request: Any) -> None:
    """Attach ``request`` to a failure that has none (``exc.request`` raises until one is set), as
    the client's ``send`` does: the provider reads a read timeout's limit from it."""
    try:
        exc.request  # noqa: B018 - a property that raises when unset
    except RuntimeError:
        exc.request = request


class LeanBody:
    """A response body read from its connection as it is iterated; the connection goes back to
    the transport at its end, or is closed when the body is closed first. A flavour's body is this
    and the flavour's ``AsyncByteStream``."""

    def __init__(
        self, transport: LeanTransportBase[Any, Any], connection: _Connection, timeout: float | None
    ) -> None:
        self._transport = transport
        self._connection: _Connection | None = connection
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise self._transport.flavour.StreamClosed()
        try:
            while True:
                event = await connection.next_event(self._timeout)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    raise self._transport.flavour.RemoteProtocolError(
                        f"unexpected {event!r} in a response body"
                    )
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
