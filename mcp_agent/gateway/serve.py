"""``serve(config, ...)``: run the gateway over HTTP (uvicorn) or over stdio, until told to stop.

HTTP: the socket is bound before anything starts (a port in use is a clear error, not a
half-started gateway); a non-loopback address without a caller token is refused. uvicorn serves
with the guarded h11 protocol of ``connections.py`` (read deadlines, a connection cap below the
file-descriptor limit, accept errors logged once a minute). SIGTERM or
SIGINT (or the ``stop`` event) starts a graceful shutdown: stop accepting work, cancel running
queries so each caller gets a ``cancelled`` result where its transport still allows, end the
long-lived streams, close the Agent (the ToolHub reaps every child), and return, so the process
exits 0 well within 10 s. A second signal forces the exit.

A gateway that can no longer serve (its service ended on an error, its state store failed past
``state.maxOutageSeconds``: ``GatewayService.give_up``) shuts down the same way and then raises
``GatewayFailed``, so that ``mcp-agent serve`` exits 1 and a supervisor restarts it: never a
process left alive answering 503. Over stdio it exits 1 itself (``exit_for_a_restart`` says why).

stdio: the same MCP server over stdin/stdout. The SDK's ``stdio_server`` points fd 1 at stderr
while serving, so a stray print (ours, a library's, a child's) can never corrupt the protocol;
logs go to stderr.

State: conversations, approvals and run records live where ``state.url`` says; without it in
SQLite at ``$MCP_AGENT_STATE_DIR/state.db`` (memory with ``--stateless``). The state is opened
before the socket is bound, so a store that cannot be used is a clear start-up error; so is a
state folder or a ``gateway.recordDir`` that another user owns or may write into
(``_paths.private_folder``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

import anyio
import uvicorn
from mcp.server.stdio import stdio_server

from ..config import AgentConfig
from ..exceptions import ConfigError, GatewayFailed
from ..state import open_agent_state
from ..state.base import State
from ..state.folder import private_folder, private_state_dir
from .app import GatewayApp, create_app
from .connections import default_max_connections, open_file_limit, protocol_class, quiet_accept_errors
from .lifespan import open_service
from .mcp.quiet_logs import quiet_client_errors
from .mcp.server import create_mcp_server
from .security import check_bind
from .service import AgentFactory, GatewayService, describe

logger = logging.getLogger(__name__)

GRACEFUL_SECONDS = 5
"""uvicorn's own deadline for open connections after our drain (a backstop; drain ends them)."""
QUERY_CANCEL_SECONDS = 4.0
"""How long running queries get to end as ``cancelled`` and send their result."""
DRAIN_SECONDS = 30.0
"""The most uvicorn waits for our drain before its own backstop starts (see ``_Server``)."""
_OTHER_RECORD_DIR = "set gateway.recordDir to a folder of your own"


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers (``serve`` handles signals and exits 0), whose
    backstop waits for the app's drain.

    uvicorn's ``timeout_graceful_shutdown`` starts counting when it stops accepting connections.
    Our drain (``GatewayApp.shutdown``) runs from the same moment and may rightly take longer
    (running queries get ``QUERY_CANCEL_SECONDS`` to send their results), and on a busy machine
    ending thousands of streams takes a while. So this server stops listening at once, waits for
    the drain to be done (``drained``; at most ``DRAIN_SECONDS``, not at all after a forced stop),
    and only then gives what is still open uvicorn's ``GRACEFUL_SECONDS``.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.draining = False
        self.drained = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # stop listening now; uvicorn's own shutdown closes them again, harmlessly
        if self.draining:
            with anyio.move_on_after(DRAIN_SECONDS):
                while not self.drained.is_set() and not self.force_exit:
                    await anyio.sleep(0.05)
        await super().shutdown(sockets)


def bind_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket for ``host:port`` (port 0: any free port).

    Raises:
        ConfigError: the address cannot be bound (in use, not an address of this machine).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", "gateway.host") from None
    family, kind, proto, _, address = infos[0]
    # the protocol must say TCP: asyncio sets TCP_NODELAY only on sockets whose proto is
    # IPPROTO_TCP, and without it every small SSE write waits ~40 ms for a delayed ACK
    sock = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", "gateway.port") from None
    sock.set_inheritable(True)
    return sock


async def _signals_or(
    stop: anyio.Event | None, handle_signals: bool, on_stop: Callable[[bool], None]
) -> None:
    """Call ``on_stop(force)`` on each SIGTERM/SIGINT (and once when ``stop`` is set)."""
    async with anyio.create_task_group() as tg:
        if stop is not None:

            async def wait_stop() -> None:
                await stop.wait()
                on_stop(False)

            tg.start_soon(wait_stop)
        if handle_signals:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                count = 0
                async for signum in signals:
                    count += 1
                    logger.info("received %s", signal.Signals(signum).name)
                    on_stop(count > 1)


async def serve(
    config: AgentConfig,
    *,
    host: str | None = None,
    port: int | None = None,
    stdio: bool = False,
    stateless: bool = False,
    factory: AgentFactory | None = None,
    stop: anyio.Event | None = None,
    handle_signals: bool = True,
    on_ready: Callable[[str, int], None] | None = None,
) -> None:
    """Serve the gateway until a signal (or ``stop``) and a graceful shutdown.

    Args:
        config: the whole configuration.
        host: bind address (default ``gateway.host``).
        port: port (default ``gateway.port``; 0 picks a free one, reported to ``on_ready``).
        stdio: serve MCP over stdin/stdout instead of HTTP.
        stateless: stateless Streamable HTTP (for replicas behind a load balancer).
        factory: builds the Agent (default ``assembly.open_agent``).
        stop: set it to shut down as on SIGTERM.
        handle_signals: install SIGTERM/SIGINT handlers (main thread only).
        on_ready: called with the bound host and port once the server accepts connections.

    Raises:
        ConfigError: a non-loopback bind without a token, or an address that cannot be bound.
        GatewayFailed: the gateway could not serve any more and stopped (see the module docstring).
    """
    quiet_client_errors()
    # conversations survive a restart: SQLite in the state folder unless state.url says otherwise;
    # --stateless (replicas behind a balancer) keeps them in memory unless state.url is shared
    stateless = stateless or config.gateway.stateless
    default = None if stateless else private_state_dir() / "state.db"
    if config.gateway.record_dir:  # recordings hold whole runs: refused where another user could read them
        private_folder(
            config.base_dir / config.gateway.record_dir, what="gateway.recordDir", other=_OTHER_RECORD_DIR
        )
    if stdio:
        async with contextlib.aclosing(await open_agent_state(config, default=default)) as state:
            await serve_stdio(config, factory=factory, stop=stop, handle_signals=handle_signals, state=state)
        return
    gateway = config.gateway
    host = host or gateway.host
    port = gateway.port if port is None else port
    check_bind(host, gateway.has_tokens, gateway.allowed_hosts)
    async with contextlib.aclosing(await open_agent_state(config, default=default)) as state:
        sock = bind_socket(host, port)
        app = create_app(config, factory=factory, bind_host=host, stateless=stateless or None, state=state)
        await serve_app(app, sock, stop=stop, handle_signals=handle_signals, on_ready=on_ready)


async def serve_app(
    app: GatewayApp,
    sock: socket.socket,
    *,
    stop: anyio.Event | None = None,
    handle_signals: bool = True,
    on_ready: Callable[[str, int], None] | None = None,
) -> None:
    """Serve ``app`` on the bound socket ``sock`` with uvicorn until a signal (or ``stop``).

    The first stop request drains the app (``GatewayApp.shutdown``) while uvicorn stops
    accepting connections; a second one forces the exit. The app giving up
    (``GatewayService.give_up``) is a stop request too.

    Raises:
        GatewayFailed: the app gave up: it could not serve any more.
    """
    host, bound_port = sock.getsockname()[:2]
    gateway = app.config.gateway
    max_connections = gateway.max_connections or default_max_connections(open_file_limit())
    server = _Server(
        uvicorn.Config(
            app,
            http=protocol_class(gateway.read_timeout_seconds, max_connections),
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SECONDS,
            ws="none",
        )
    )
    quiet_accept_errors(asyncio.get_running_loop())
    draining: list[bool] = []

    def on_stop(force: bool) -> None:
        if force or draining:
            logger.warning("forcing exit")
            server.force_exit = True
            server.should_exit = True
            return
        draining.append(True)
        server.draining = True
        server.should_exit = True
        tg.start_soon(drain)

    async def drain() -> None:
        try:
            await app.shutdown(query_timeout=QUERY_CANCEL_SECONDS)
        finally:
            server.drained.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(_signals_or, stop, handle_signals, on_stop)
        tg.start_soon(_signals_or, app.service.gave_up, False, on_stop)

        async def announce() -> None:
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(0.01)
            shown = f"[{host}]" if ":" in host else host
            logger.info("mcp_agent gateway on http://%s:%d (MCP: /mcp and /sse)", shown, bound_port)
            if on_ready is not None:
                on_ready(host, bound_port)

        tg.start_soon(announce)
        try:
            await server.serve(sockets=[sock])
        finally:
            sock.close()
            tg.cancel_scope.cancel()
    if app.service.fatal is not None:
        raise GatewayFailed(app.service.fatal)
    logger.info("gateway stopped")


async def serve_stdio(
    config: AgentConfig,
    *,
    factory: AgentFactory | None = None,
    stop: anyio.Event | None = None,
    handle_signals: bool = True,
    state: State | None = None,
) -> None:
    """Serve MCP over this process's stdin/stdout until stdin closes, a signal, or ``stop``.

    What goes out on stdout has the known secrets masked, as the HTTP responses have
    (``SecretsMiddleware`` in ``middleware.py``). A service that gives up (``GatewayService.give_up``) or ends on
    an error is shut down, and then the process exits 1 (``exit_for_a_restart``) for its client
    to start it again.
    """
    from .mcp.stdio import AnsweringReadStream, MaskedWriteStream  # stdio alone needs them

    async with stdio_server() as (read, write):
        service = GatewayService(config)
        server, _ = create_mcp_server(service)
        try:
            async with open_service(service, factory, state=state), anyio.create_task_group() as tg:

                async def shut_down() -> None:
                    running = service.begin_shutdown()
                    if running:
                        await service.wait_idle(QUERY_CANCEL_SECONDS)
                        await anyio.sleep(0.2)  # lets the cancelled results reach stdout
                    tg.cancel_scope.cancel()

                def on_stop(force: bool) -> None:
                    if force:
                        tg.cancel_scope.cancel()
                    else:
                        tg.start_soon(shut_down)

                tg.start_soon(_signals_or, stop, handle_signals, on_stop)
                tg.start_soon(_signals_or, service.gave_up, False, on_stop)
                out = MaskedWriteStream(write)
                await server.run(AnsweringReadStream(read, out), out, server.create_initialization_options())
                tg.cancel_scope.cancel()
        except Exception as exc:  # its service ended on an error (over HTTP: GatewayApp._lifespan)
            service.give_up(f"its service ended: {describe(exc)}")
        if service.fatal is not None:
            await exit_for_a_restart(service.fatal, state)
    logger.info("stdio gateway stopped")


async def exit_for_a_restart(reason: str, state: State | None) -> NoReturn:
    """End a stdio gateway that gave up: close its state, say why, exit 1 (its service is shut
    down already: runs cancelled, tool servers reaped).

    Why not raise ``GatewayFailed`` as over HTTP: on its way out the SDK's ``stdio_server``
    waits for its stdin reader, a worker thread blocked in ``read()`` until the client writes a
    line or closes stdin, which nothing can cancel; the client would face a server that neither
    answers nor exits.
    """
    if state is not None:
        with anyio.CancelScope(shield=True):
            await state.aclose()
    logger.critical("the gateway stopped: %s; exiting 1, for its client to start it again", reason)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(1)
