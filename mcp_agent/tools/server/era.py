"""Which protocol era a tool server speaks, and the handshake that settles it.

MCP has two eras (``mcp-2026-07-28.md`` B1): the handshake era (``initialize``, up to
2025-11-25) and the stateless 2026-07-28 era (``server/discover``, then a ``_meta`` envelope and,
over HTTP, the ``Mcp-Method``/``Mcp-Name`` headers on every request). ``handshake`` settles it for
one session with the SDK's public API (``ClientSession.send_discover``, ``adopt``,
``initialize``), after ``mcpServers.NAME.protocol``:

- ``"legacy"``: ``initialize``, as before this module existed.
- ``"2026-07-28"``: ``server/discover`` only; a server that does not answer it fails its start.
- ``"auto"`` (the default): a ``server/discover`` probe, then ``adopt`` its result, or fall back to
  ``initialize``. The rules are the SDK's own (``mcp/client/_probe.py``, private, restated here):
  every JSON-RPC error falls back except ``-32022`` naming only modern versions we lack (a real
  incompatibility); a result that does not parse or names no modern version we speak falls back;
  an ``initialize`` answered with ``-32022`` (a slow server that took the late probe and locked
  itself modern) re-probes once at the version it names. Unlike the SDK, whose probe waits 10 s,
  the probe waits ``discoverTimeoutSeconds`` (2 s) and then falls back, on stdio and HTTP alike:
  a server that ignores unknown requests before ``initialize`` costs that much once, not 10 s.

Once a server's era is known (``known``: from its last start in this process, or from the tool
cache, ``cache.py``), a handshake-era server is sent ``initialize`` at once, with no probe. A
2026-07-28 server is still sent ``server/discover`` (its answer carries the capabilities), and
still falls back if it no longer answers it. A restart after a crash forgets the era and probes.

Once 2026-07-28 is settled, a server announces list changes only on a ``subscriptions/listen``
stream (``follow_list_changes``), announces the updates of the resources subscribed to only on
another one (``follow_resource_updates``: that era has no ``resources/subscribe``), sends logs only when asked for a level (``upstream_log_level``),
and can no longer send requests to the client (a call it needs input for answers
``input_required``: ``session.call_tool_on``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp_types import CONNECTION_CLOSED, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ...exceptions import ToolServerStartError
from .lists import CatalogKind

logger = logging.getLogger(__name__)

ProtocolChoice = Literal["auto", "legacy", "2026-07-28"]
"""``mcpServers.NAME.protocol``: probe, always ``initialize``, or always ``server/discover``."""


def is_modern(version: str | None) -> bool:
    """Whether ``version`` is a 2026-07-28-era (stateless) protocol version."""
    return version in MODERN_PROTOCOL_VERSIONS


@dataclass(frozen=True)
class Handshake:
    """What the handshake of one session settled, whichever era it is.

    Attributes:
        protocol_version: the version the session speaks (``2026-07-28``, ``2025-11-25``...).
        capabilities: what the server declared (in its discover or initialize result).
        server_info: its name and version (on 2026-07-28: its optional ``serverInfo`` stamp).
        instructions: its instructions, if any.
        how: how the era was settled, for the log: ``initialize``, ``discover``, or the
            fallback and its reason (``initialize after server/discover: -32601 ...``).
    """

    protocol_version: str
    capabilities: types.ServerCapabilities
    server_info: types.Implementation | None = None
    instructions: str | None = None
    how: str = "initialize"

    @property
    def modern(self) -> bool:
        """Whether the session speaks the 2026-07-28 era."""
        return is_modern(self.protocol_version)


def _settled(session: ClientSession, how: str) -> Handshake:
    version = session.protocol_version
    capabilities = session.server_capabilities
    assert version is not None and capabilities is not None  # adopt() or initialize() ran
    return Handshake(version, capabilities, session.server_info, session.instructions, how)


def _supported(error: MCPError) -> list[str] | None:
    """The ``supported`` versions a ``-32022`` error names (None: it names none)."""
    try:
        return types.UnsupportedProtocolVersionErrorData.model_validate(error.error.data).supported
    except ValidationError:
        return None


def _mutual(supported: list[str] | None) -> list[str]:
    return [version for version in MODERN_PROTOCOL_VERSIONS if version in (supported or ())]


async def _discover_at(
    session: ClientSession, version: str, timeout: float | None
) -> types.DiscoverResult | str:
    """Send one ``server/discover``: its result, or why it is no evidence of a modern server.

    Raises:
        MCPError: ``-32022`` naming only modern versions we do not speak (no fallback helps).
    """
    try:
        with anyio.fail_after(timeout):
            raw = await session.send_discover(version)
    except TimeoutError:
        return f"server/discover unanswered within {timeout:g} s"
    except MCPError as exc:
        if exc.code == UNSUPPORTED_PROTOCOL_VERSION:
            supported = _supported(exc)
            if _mutual(supported) and version == LATEST_MODERN_VERSION:
                return await _discover_at(session, _mutual(supported)[-1], timeout)
            if supported is not None and not any(v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported):
                raise
        return f"server/discover: {exc.message} ({exc.code})"
    try:
        result = types.DiscoverResult.model_validate(raw)
    except ValidationError:
        return "server/discover: an invalid result"
    if not _mutual(result.supported_versions):
        return f"server/discover: no version we speak in {result.supported_versions}"
    return result


async def _initialize(session: ClientSession, why: str) -> Handshake:
    """``initialize``; answered ``-32022`` (the server took a late probe and is modern now):
    one more ``server/discover`` at a version it names."""
    try:
        await session.initialize()
    except MCPError as exc:
        mutual = _mutual(_supported(exc)) if exc.code == UNSUPPORTED_PROTOCOL_VERSION else []
        if not mutual:
            raise
        found = await _discover_at(session, mutual[-1], None)
        if isinstance(found, str):
            raise
        session.adopt(found)
        return _settled(session, f"discover after initialize was refused ({why})")
    return _settled(session, f"initialize after {why}" if why else "initialize")


async def handshake(
    session: ClientSession,
    *,
    server: str,
    protocol: ProtocolChoice,
    known: str | None,
    probe_timeout: float,
) -> Handshake:
    """Settle the era of ``session`` (see the module docstring) and return what it settled.

    Args:
        session: an entered session on which nothing was sent yet.
        server: the server's name, for errors.
        protocol: its ``protocol`` setting.
        known: the protocol version it spoke at its last start (None: not known).
        probe_timeout: how long the ``auto`` probe waits for the answer to ``server/discover``.

    Raises:
        ToolServerStartError: ``protocol`` is ``2026-07-28`` and the server does not speak it.
        MCPError: the handshake itself failed (the server's error, or connection closed).
    """
    if protocol == "legacy" or (protocol == "auto" and known in HANDSHAKE_PROTOCOL_VERSIONS):
        return await _initialize(session, "")
    if protocol == "2026-07-28":
        try:
            found = await _discover_at(session, LATEST_MODERN_VERSION, None)
        except MCPError as exc:
            found = f"server/discover: {exc.message} ({exc.code})"
        if isinstance(found, str):
            raise ToolServerStartError(
                f'does not speak 2026-07-28 ({found}); set mcpServers.{server}.protocol to "auto" or "legacy"',
                server=server,
            )
        session.adopt(found)
        return _settled(session, "discover")
    # a server known to be modern may take its time to start: only the SDK's own timeout then
    timeout = None if is_modern(known) else probe_timeout or None
    found = await _discover_at(session, LATEST_MODERN_VERSION, timeout)
    if isinstance(found, str):
        logger.debug("%s: %s; falling back to initialize", server, found)
        return await _initialize(session, found)
    session.adopt(found)
    return _settled(session, "discover")


MAX_LISTEN_DELAY = 30.0
"""The longest wait before a ``subscriptions/listen`` stream that ended is opened again."""


async def follow_list_changes(
    session: ClientSession,
    capabilities: types.ServerCapabilities,
    server: str,
    on_tools: Callable[[], None],
    on_catalog: Callable[[CatalogKind], None],
) -> None:
    """Hold a ``subscriptions/listen`` stream open on a 2026-07-28 ``session`` for the lists the
    server says change (its ``listChanged`` capabilities), and call ``on_tools`` or
    ``on_catalog`` for each change it reports: the same refresh the handshake era's
    ``list_changed`` notifications feed.

    A stream that ends (the server closed it, or it dropped) is opened again after 1, 2, 4...
    ``MAX_LISTEN_DELAY`` seconds, and every list it follows is refreshed then: changes may have
    been missed meanwhile. A server that refuses ``subscriptions/listen`` is not asked again.
    Runs until cancelled (the session's end).
    """
    tools = bool(capabilities.tools and capabilities.tools.list_changed)
    prompts = bool(capabilities.prompts and capabilities.prompts.list_changed)
    resources = bool(capabilities.resources and capabilities.resources.list_changed)
    if not (tools or prompts or resources):
        return
    ended = 0
    while True:
        try:
            async with listen(
                session,
                tools_list_changed=tools,
                prompts_list_changed=prompts,
                resources_list_changed=resources,
            ) as subscription:
                if ended:  # what changed while no stream was open is unknown: list it all again
                    if tools:
                        on_tools()
                    if resources:
                        on_catalog("resources")
                    if prompts:
                        on_catalog("prompts")
                async for event in subscription:
                    ended = 0
                    if isinstance(event, ToolsListChanged):
                        on_tools()
                    elif isinstance(event, ResourcesListChanged):
                        on_catalog("resources")
                    elif isinstance(event, PromptsListChanged):
                        on_catalog("prompts")
            reason = "the server closed it"
        except ListenNotSupportedError:
            return
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                logger.info("%s: subscriptions/listen refused: %s (list changes not followed)", server, exc)
                return
            reason = str(exc)
        except (SubscriptionLost, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
        ended += 1
        delay = min(MAX_LISTEN_DELAY, 2.0 ** (ended - 1))
        logger.info("%s: subscriptions/listen ended (%s); listening again in %g s", server, reason, delay)
        await anyio.sleep(delay)


class Watched:
    """The URIs subscribed to on one 2026-07-28 server, kept across its restarts, and what its
    ``subscriptions/listen`` stream for them (``follow_resource_updates``) has made of them.

    Attributes:
        uris: the URIs subscribed to (through the gateway).
        asked: the URIs the last stream was asked for (settled: acknowledged or refused).
        honored: those of them its acknowledgment honored (none once it ended).
        refused: why the server refused the last stream asked for (None: it did not).
    """

    def __init__(self) -> None:
        self.uris: frozenset[str] = frozenset()
        self.asked: frozenset[str] = frozenset()
        self.honored: frozenset[str] = frozenset()
        self.refused: str | None = None
        self._changed = anyio.Event()  # ``uris`` changed
        self._settled = anyio.Event()  # a stream was acknowledged, refused or ended

    def change(self, uri: str, *, on: bool) -> None:
        """Subscribe to ``uri`` (``on``) or no longer; the stream is re-opened with the new set."""
        uris = self.uris | {uri} if on else self.uris - {uri}
        if uris != self.uris:
            self.uris, self.refused = uris, None
            changed, self._changed = self._changed, anyio.Event()
            changed.set()

    def next_change(self) -> anyio.Event:
        """The event set when ``uris`` next changes."""
        return self._changed

    def settle(self, asked: frozenset[str], honored: frozenset[str], refused: str | None = None) -> None:
        """What became of the stream asked for ``asked``."""
        self.asked, self.honored, self.refused = asked, honored, refused
        settled, self._settled = self._settled, anyio.Event()
        settled.set()

    async def until_honored(self, uri: str, timeout: float) -> str | None:
        """Wait (at most ``timeout`` seconds) until a stream carries ``uri``: None, or why not."""
        with anyio.move_on_after(timeout):
            while uri in self.uris and uri not in self.honored:
                if self.refused is not None:
                    return self.refused
                if uri in self.asked:
                    return "the server did not honor it in subscriptions/listen"
                await self._settled.wait()
            return None
        return f"subscriptions/listen not acknowledged within {timeout:g} s"


async def follow_resource_updates(
    session: ClientSession,
    server: str,
    watched: Watched,
    on_updated: Callable[[str], Awaitable[None]],
) -> None:
    """Hold one ``subscriptions/listen`` stream open on a 2026-07-28 ``session`` for all the URIs
    in ``watched`` (none: no stream), and pass each ``resources/updated`` it carries to
    ``on_updated(uri)``: the path the handshake era's notifications take.

    One stream per server, not per URI: one request (and, over HTTP, one response stream) held
    open however many URIs, re-opened with the new set when the set changes. A stream that ends is
    opened again after 1, 2, 4... ``MAX_LISTEN_DELAY`` seconds (or at once when the set changes
    meanwhile); a server that refuses it is asked again when the set changes. Runs until
    cancelled (the session's end; the next session starts it again with the same ``watched``).
    """
    ended = 0
    while True:
        uris, changed = watched.uris, watched.next_change()
        if not uris:
            watched.settle(frozenset(), frozenset())
            await changed.wait()
            continue
        reason = "the server closed it"
        try:
            if await _listen_until_changed(session, uris, changed, watched, on_updated):
                ended = 0
            if changed.is_set():
                continue
        except ListenNotSupportedError:
            return
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                logger.info("%s: subscriptions/listen for %s refused: %s", server, sorted(uris), exc)
                watched.settle(uris, frozenset(), f"subscriptions/listen refused: {exc.message}")
                await changed.wait()
                continue
            reason = str(exc)
        except (SubscriptionLost, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
        watched.settle(frozenset(), frozenset())
        ended += 1
        delay = min(MAX_LISTEN_DELAY, 2.0 ** (ended - 1))
        logger.info("%s: subscriptions/listen for resources ended (%s); again in %g s", server, reason, delay)
        with anyio.move_on_after(delay):
            await changed.wait()


async def _listen_until_changed(
    session: ClientSession,
    uris: frozenset[str],
    changed: anyio.Event,
    watched: Watched,
    on_updated: Callable[[str], Awaitable[None]],
) -> bool:
    """One stream for ``uris``, until it ends or ``changed`` is set; whether it carried an event.
    Raises what ``listen`` raises (not wrapped in an exception group)."""
    failed: BaseException | None = None
    carried = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on, changed, tg.cancel_scope)
        try:
            async with listen(session, resource_subscriptions=sorted(uris)) as subscription:
                watched.settle(uris, frozenset(subscription.honored.resource_subscriptions or ()))
                async for event in subscription:
                    carried = True
                    if isinstance(event, ResourceUpdated):
                        await on_updated(event.uri)
        except (ListenNotSupportedError, MCPError, SubscriptionLost, TimeoutError) as exc:
            failed = exc
        tg.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return carried


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def upstream_log_level() -> types.LoggingLevel:
    """The ``io.modelcontextprotocol/logLevel`` asked of 2026-07-28 servers (which send no log
    otherwise): what the connection's logger shows, ``debug`` or ``warning``. Handshake-era
    servers send what they like, as before."""
    shown = logging.getLogger(__name__.rpartition(".")[0] + ".connection")
    return "debug" if shown.isEnabledFor(logging.DEBUG) else "warning"
