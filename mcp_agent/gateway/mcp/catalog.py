"""The gateway's MCP handlers for the tool servers' resources and prompts (``exposeTools`` only).

``create_mcp_server`` registers them only with ``exposeTools``, so only then does the gateway
declare the ``resources`` and ``prompts`` capabilities (``listChanged`` on, ``subscribe`` off).
What they answer comes from the ToolHub's catalog (``tools/catalog.py``): resources keep their
URIs, prompts are named ``server__prompt``, resource lists are paged one server page at a time.

- Listings need no query slot and answer empty while the agent starts (the clients are told
  when that changes). ``resources/read`` and ``prompts/get`` make a tool server work, so each
  takes a query slot of the caller's, like an exposed tool call (``GatewayService.in_slot``).
- Errors are JSON-RPC errors: the tool server's own (code and message) where it sent one.
- What a 2025 server asks over its back channel while it reads or gets a prompt goes to the
  client that asked for it, as during an exposed call: a 2025 client on its own back channel, a
  2026 client in ``input_required`` rounds (``held_calls.py``).
- When a server announces ``resources/list_changed`` or ``prompts/list_changed``, or a server
  that offers them comes up or goes down, every legacy client with a standalone channel gets the
  notification, and 2026 clients get it on their ``subscriptions/listen`` stream.
- ``completion/complete`` goes to the server of the prompt (``server__prompt``) or resource
  template its reference names (``Catalog.complete``); the gateway declares ``completions`` only
  while a server that is up declares it (``offers``).
- ``resources/subscribe`` goes to the server that owns the URI (routed as a read; an unknown URI
  or an owner without subscriptions is an error), once per URI however many clients subscribe;
  its ``notifications/resources/updated`` go to each client connection that subscribed. A 2026
  client that listens for URIs (``subscriptions/listen``) subscribes the same way for as long as
  its stream is open (a URI no server offers is honoured and never fires, as the SDK does), and
  gets the updates on its stream. When the last subscriber unsubscribes or disconnects, the
  server gets ``resources/unsubscribe``. A 2026-07-28 server has neither request: the URI joins
  (or leaves) the one ``subscriptions/listen`` stream the gateway holds on it for its subscribed
  URIs, re-opened with each new set and after a restart (``tools/server/era.py``), and its
  updates take the same way to the clients. The gateway declares ``resources.subscribe`` only
  while a server that is up declares it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal, TypeVar, cast

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    SubscriptionBus,
)
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

from ...tools.catalog import Catalog
from ...tools.relay import current_channel, relaying_to
from ...tools.server.connection import ServerConnection
from .._internals import request_connection
from ..admission import Busy
from ..callers import Caller
from ..service import GatewayService, NotReady
from .held_calls import HeldCalls, may_be_asked, request_failed
from .relay import LogLevels, RequestChannel, resume_of

logger = logging.getLogger(__name__)

NOTIFY_TIMEOUT_SECONDS = 2.0
T = TypeVar("T")


def _method_of(params: types.GetPromptRequestParams | types.ReadResourceRequestParams) -> str:
    return "prompts/get" if isinstance(params, types.GetPromptRequestParams) else "resources/read"


class CatalogHandlers:
    """``resources/list``, ``resources/templates/list``, ``resources/read``, ``prompts/list``,
    ``prompts/get``, and the list_changed notifications, over one GatewayService.

    Args:
        service: the gateway's service.
        caller_of: who sent a request (None: nobody the gateway knows).
        remember: keeps a legacy client's connection, to notify it later.
        connections: the legacy connections to notify.
        bus: the 2026 clients' subscription bus.
        levels: the 2025 clients' log levels; with them, a read's ``input_required`` is relayed.
        held: the held calls (``held_calls.py``): a 2026 client's read whose server asks it
            something over its back channel is held between ``input_required`` rounds.
    """

    def __init__(
        self,
        service: GatewayService,
        *,
        caller_of: Callable[[ServerRequestContext[Any]], Caller | None],
        remember: Callable[[ServerRequestContext[Any]], None],
        connections: Callable[[], Iterable[Any]],
        bus: SubscriptionBus,
        levels: LogLevels | None = None,
        held: HeldCalls | None = None,
    ) -> None:
        self.service = service
        self._held = held
        self._caller_of = caller_of
        self._remember = remember
        self._connections = connections
        self._bus = bus
        self._levels = levels
        self._subscribers: dict[str, dict[int, Any]] = {}  # URI → client connections
        self._subscribed: dict[str, ServerConnection] = {}  # URI → the server subscribed to
        self._hooked: set[int] = set()  # the hubs whose updates reach ``updated``
        service.on_catalog_changed(self.changed)

    # ---------------------------------------------------------------- listings

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        self._remember(ctx)
        catalog = self.service.catalog()
        if catalog is None:
            return types.ListResourcesResult(resources=[])
        return await catalog.list_resources(params.cursor if params is not None else None)

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        self._remember(ctx)
        catalog = self.service.catalog()
        if catalog is None:
            return types.ListResourceTemplatesResult(resource_templates=[])
        return await catalog.list_resource_templates(params.cursor if params is not None else None)

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        self._remember(ctx)
        catalog = self.service.catalog()
        if catalog is None:
            return types.ListPromptsResult(prompts=[])
        return await catalog.list_prompts()

    # ---------------------------------------------------------------- reads

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        return await self._relayed(ctx, params, lambda catalog: catalog.read_resource(uri))

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name, arguments = params.name, params.arguments
        return await self._relayed(ctx, params, lambda catalog: catalog.get_prompt(name, arguments))

    async def _relayed(
        self,
        ctx: ServerRequestContext[Any],
        params: types.GetPromptRequestParams | types.ReadResourceRequestParams,
        work: Callable[[Catalog], Awaitable[T]],
    ) -> T:
        """``work`` in a relay channel to this client (``relay.py``): a 2026 server's
        ``input_required`` goes to a 2026 client untouched (``-32021`` when it lacks a capability
        the requests need) and its retry back to the server; a 2025 client is asked; a 2026
        client is asked what a 2025 server asks over its back channel in ``input_required``
        rounds (``held_calls.py``)."""
        caller = self._caller_of(ctx)
        if caller is None or self._levels is None:
            return await self._in_slot(ctx, work)
        held, method = self._held, _method_of(params)
        # a held request's answer is of its method's type: HeldCalls checks the method of a retry
        if held is not None and held.holds(params.request_state):  # answers to what its server asked
            return cast(T, await held.retry(ctx, caller, params, method))
        if held is not None and may_be_asked(ctx):
            answer = await held.start(
                ctx,
                caller,
                lambda: self._answered(ctx, work),
                resume=resume_of(params),
                method=method,
                fail=request_failed,
            )
            return cast(T, answer)
        channel = RequestChannel(
            ctx,
            caller,
            self._levels,
            resume_of(params),
            answer_seconds=self.service.gateway.input_timeout_seconds,
        )
        try:
            with relaying_to(channel):
                return await self._answered(ctx, work)
        finally:
            channel.end()

    async def _answered(self, ctx: ServerRequestContext[Any], work: Callable[[Catalog], Awaitable[T]]) -> T:
        """``work``'s answer in the current relay channel (raises ``MCPError`` -32021 when the
        client did not declare a capability the server's requests need)."""
        result = await self._in_slot(ctx, work)
        channel = current_channel()
        kept = channel.kept if isinstance(channel, RequestChannel) else None
        if isinstance(kept, types.ErrorData):
            raise MCPError(kept.code, kept.message, kept.data)
        return result

    async def _in_slot(self, ctx: ServerRequestContext[Any], work: Callable[[Catalog], Awaitable[T]]) -> T:
        self._remember(ctx)
        caller = self._caller_of(ctx)
        if caller is None:
            raise MCPError(INVALID_REQUEST, "Unauthorized: this connection has no caller")
        service = self.service
        try:
            return await service.in_slot(caller, lambda: work(self._ready_catalog()))
        except Busy as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from None
        except NotReady as exc:
            raise MCPError(INTERNAL_ERROR, f"Agent unavailable ({exc.state}): {exc.message}") from None

    def _ready_catalog(self) -> Catalog:
        catalog = self.service.catalog()
        if catalog is None:
            raise MCPError(INTERNAL_ERROR, "the tool servers offer no resources or prompts")
        return catalog

    # ---------------------------------------------------------------- completions, subscriptions

    def offers(self, feature: Literal["completions", "subscribe"]) -> bool:
        """Whether a tool server that is up offers ``completions`` or resource subscriptions."""
        hub = self.service.hub
        return hub is not None and hub.declares(feature)

    async def complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        return await self._in_slot(ctx, lambda catalog: catalog.complete(params))

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self._remember(ctx)
        if self._caller_of(ctx) is None:
            raise MCPError(INVALID_REQUEST, "Unauthorized: this connection has no caller")
        uri, connection = str(params.uri), request_connection(ctx)
        if await self._add(uri, id(connection), connection):
            connection.exit_stack.push_async_callback(self._drop, uri, id(connection))
        return types.EmptyResult()

    async def _add(self, uri: str, client: int, connection: Any) -> bool:
        """Subscribe ``client`` (its ``connection``, None for a 2026 listener) to ``uri``, and the
        gateway to the server that owns it when nobody was; False when it already was.

        Raises:
            MCPError: see ``Catalog.subscription_owner``; the server's own error.
        """
        hub = self.service.hub
        if hub is not None and id(hub) not in self._hooked:
            self._hooked.add(id(hub))
            hub.on_resource_updated(self.updated)
        if uri not in self._subscribed:
            catalog = self._ready_catalog()
            server = await catalog.subscription_owner(uri)
            await catalog.subscribe(server, uri)
            self._subscribed[uri] = server
        subscribers = self._subscribers.setdefault(uri, {})
        if client in subscribers:
            return False
        subscribers[client] = connection
        return True

    def listening(self, handler: ListenHandler) -> Callable[..., Awaitable[types.SubscriptionsListenResult]]:
        """``handler`` (``subscriptions/listen``), subscribing the gateway to the resources a 2026
        client listens for while its stream is open (a URI no server offers never fires)."""

        async def listen(
            ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
        ) -> types.SubscriptionsListenResult:
            uris = list(params.notifications.resource_subscriptions or ())
            key, held = id(ctx), []
            try:
                for uri in uris:
                    try:
                        if await self._add(uri, key, None):
                            held.append(uri)
                    except MCPError as exc:
                        logger.info("subscriptions/listen: %s is not subscribed: %s", uri, exc.message)
                return await handler(ctx, params)
            finally:
                with anyio.CancelScope(shield=True):
                    for uri in held:
                        await self._drop(uri, key)

        return listen

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._remember(ctx)
        await self._drop(str(params.uri), id(request_connection(ctx)))
        return types.EmptyResult()

    async def _drop(self, uri: str, client: int) -> None:
        """``client`` no longer subscribes to ``uri``; the last one gone, neither does the gateway."""
        subscribers = self._subscribers.get(uri)
        if subscribers is None or client not in subscribers:
            return
        del subscribers[client]
        if subscribers:
            return
        del self._subscribers[uri]
        server = self._subscribed.pop(uri, None)
        catalog = self.service.catalog()
        if server is None or catalog is None:
            return
        with anyio.move_on_after(NOTIFY_TIMEOUT_SECONDS):
            try:
                await catalog.subscribe(server, uri, on=False)
            except Exception as exc:
                logger.info("%s: resources/unsubscribe %s failed: %s", server.name, uri, exc)

    async def updated(self, server: str, uri: str) -> None:
        """A server's ``notifications/resources/updated``: to the clients that subscribed."""
        if self._subscribed.get(uri) is None or self._subscribed[uri].name != server:
            logger.debug("%s: resources/updated %s: nobody subscribed through the gateway", server, uri)
            return
        for connection in list(self._subscribers.get(uri, {}).values()):
            if connection is None:  # a 2026 listener: the bus below reaches it
                continue
            with anyio.move_on_after(NOTIFY_TIMEOUT_SECONDS):
                try:
                    await connection.send_resource_updated(uri)
                except Exception:
                    logger.debug("could not send resources/updated", exc_info=True)
        await self._bus.publish(ResourceUpdated(uri=uri))

    # ---------------------------------------------------------------- list_changed

    async def changed(self, kind: str) -> None:
        """Tell every client that the resources (``kind="resources"``) or prompts changed."""
        for connection in list(self._connections()):
            send = (
                connection.send_resource_list_changed
                if kind == "resources"
                else connection.send_prompt_list_changed
            )
            with anyio.move_on_after(NOTIFY_TIMEOUT_SECONDS):
                try:
                    await send()
                except Exception:
                    logger.debug("could not send %s/list_changed", kind, exc_info=True)
        await self._bus.publish(ResourcesListChanged() if kind == "resources" else PromptsListChanged())
