"""Resources, resource templates and prompts of every tool server, behind one catalog.

The gateway offers them with ``exposeTools`` (``gateway/mcp/catalog.py``); the loop never sees
them. A listing asks the servers that are up and declared the capability, so a list is as fresh
as the servers' own (their ``list_changed`` notifications reach the gateway's clients through
the hub). A server that is starting, idle (lazy) or restarting is listed from its known lists
(the tool cache's, or its last start's: ``server/lists.py``) when there are any, so a warm start lists
at once what the server will offer; once it is up, a list that differs is announced with
``list_changed``. A read or a get on such a server waits for its start (bounded by its
``startupTimeoutSeconds``), as a tool call does.

Known lists only speed up listing; they decide nothing. A read or a get that only they route
(its URI, template or prompt name came from a server's known lists, not from the running server)
first has that server started and listed live (every page of its resources and templates, or of
every running server's prompts), then is routed again on what the live lists say. So a stale or
poisoned cache entry can neither take a read or a get (with a prompt's arguments) meant for
another server, nor send one to a server that no longer offers it: a URI that no live list offers
answers "Resource not found" naming the server whose cached list offered it, and a prompt name no
live list has answers "Unknown prompt". Each pass lists one more server live, so there are at
most as many passes as servers. Routes from listings of running servers cost nothing more.

A server that has failed (its start is retried with backoff, or it gave up restarting) is not
listed, as its tools are not: listing what cannot be read would only move the failure to the
read. Its clients are told (``list_changed``), and a read of one of its URIs, or a get of one of
its prompts, answers an error that names the server and why it is down, not "not found".

- **Resources keep their URIs.** A URI is a global identifier that clients show, open and
  match (``file:///…``), and that tool results, embedded resources and prompt messages quote:
  a prefix scheme would have to rewrite every one of them, and a ``resource_link`` a tool
  returned would no longer be readable. So URIs go out as the servers sent them, and a read is
  routed by what the listings showed: the server that listed the URI (the first in
  configuration order when two did), else the first whose listed template matches it, else
  each server offering resources in configuration order until one answers (then it owns the
  URI). An owner's answer, error included, is final.
- **Resources and templates are paged through**, one upstream page per gateway page: the
  gateway's cursor names the server and that server's own cursor, so a listing never reads a
  server with 10 000 resources whole (a read that only known lists route does, see above), and
  a client that stops early costs nothing more. At most
  ``MAX_PAGES`` pages are followed per server (a server whose cursor loops cannot trap a client).
- **Prompts are named like tools** (``server__prompt``, the server's ``toolPrefix``, see
  ``presentation.py``) and are listed whole (all pages of all servers, in one answer): names can only
  be made unique over the whole set, and prompt lists are short.

A server that fails a listing is skipped with a warning; the others are listed. Reads and gets
raise ``MCPError`` (the server's own error where it sent one), which the gateway answers as a
JSON-RPC error.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import mcp_types as types
from mcp import ClientSession, MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND

from .presentation import NamedTool, assign_names
from .relay import Resume, current_channel, through_rounds
from .server.connection import ServerConnection
from .server.era import is_modern
from .server.lists import CatalogKind

logger = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC code MCP gives an unknown resource URI."""
MAX_PAGES = 100
"""The most pages of one server a listing follows."""
MAX_ROUTES = 10_000
"""The most URIs (and templates) remembered for routing reads; the oldest are forgotten first."""
SUBSCRIBE_TIMEOUT = 10.0
"""How long a subscribe to a 2026-07-28 server waits for its ``subscriptions/listen`` to carry the URI."""

P = TypeVar("P")
K = TypeVar("K")
V = TypeVar("V")


# ------------------------------------------------------------------------------ pure parts


def encode_cursor(server: str, cursor: str | None, page: int) -> str:
    """The gateway's cursor: which server, its own cursor, and how many pages came before."""
    raw = json.dumps([server, cursor, page], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str | None, int]:
    """The parts of a cursor made by ``encode_cursor``.

    Raises:
        MCPError: ``INVALID_PARAMS`` for anything else.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        server, upstream, page = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise MCPError(INVALID_PARAMS, "invalid cursor") from None
    if not isinstance(server, str) or not isinstance(upstream, str | None) or not isinstance(page, int):
        raise MCPError(INVALID_PARAMS, "invalid cursor")
    return server, upstream, page


def template_pattern(template: str) -> re.Pattern[str]:
    """A regular expression for the URIs an RFC 6570 URI template expands to.

    Good enough to route: ``{var}`` matches one path segment, ``{+var}``/``{#var}`` anything,
    other operators (``{?q}``, ``{/p}``...) anything from where they stand.
    """
    pattern, last = [], 0
    for match in re.finditer(r"\{([^}]*)\}", template):
        pattern.append(re.escape(template[last : match.start()]))
        expression = match.group(1)
        pattern.append("[^/?#]*" if expression[:1].isalnum() or expression[:1] == "_" else ".*")
        last = match.end()
    pattern.append(re.escape(template[last:]))
    return re.compile("".join(pattern), re.DOTALL)


def _remember(routes: dict[K, V], key: K, value: V) -> None:
    if key not in routes and len(routes) >= MAX_ROUTES:
        del routes[next(iter(routes))]
    routes.setdefault(key, value)


async def _with_params(
    fetch: Callable[[ClientSession, types.PaginatedRequestParams | None], Awaitable[P]],
    params: types.PaginatedRequestParams | None,
    session: ClientSession,
) -> P:
    return await fetch(session, params)


async def _list_resources(
    session: ClientSession, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return await session.list_resources(params=params)


async def _list_templates(
    session: ClientSession, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return await session.list_resource_templates(params=params)


async def _list_prompts(
    session: ClientSession, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return await session.list_prompts(params=params)


def _unavailable(what: str, connection: ServerConnection, kind: CatalogKind) -> MCPError:
    """The error of a read or get whose server lists it no more: down (and why), or it stopped
    offering ``kind``."""
    if connection.state == "up":
        return MCPError(INTERNAL_ERROR, f"{what}: server {connection.name} offers no {kind} now")
    reason = f": {connection.error}" if connection.error else ""
    return MCPError(INTERNAL_ERROR, f"{what}: server {connection.name} is {connection.state}{reason}")


# ------------------------------------------------------------------------------ the catalog


class Catalog:
    """The resources and prompts of the hub's servers; see the module docstring.

    Args:
        connections: every server by name, in configuration order (the hub's own).
        default_timeout: seconds per request when the server sets no ``callTimeoutSeconds``.
    """

    def __init__(
        self, connections: Mapping[str, ServerConnection], *, default_timeout: float | None = None
    ) -> None:
        self._connections = connections
        self._default_timeout = default_timeout
        # routes from listings of running servers, and from known lists (the cache's): the
        # latter only name a server to start and list live (_route)
        self._owners: dict[str, str] = {}
        self._known_owners: dict[str, str] = {}
        self._templates: dict[tuple[str, str], re.Pattern[str]] = {}
        self._known_templates: dict[tuple[str, str], re.Pattern[str]] = {}
        self._prompts: dict[str, tuple[str, str]] = {}
        self._known_prompts: set[str] = set()
        self._gone_prompts: dict[str, tuple[str, str]] = {}
        self._collisions: set[str] = set()

    def servers(self, kind: CatalogKind) -> list[ServerConnection]:
        """The servers whose ``kind`` is listed now (``ServerConnection.offers``), in configuration
        order."""
        return [c for c in self._connections.values() if c.offers(kind)]

    def _timeout(self, connection: ServerConnection) -> float | None:
        own = connection.config.call_timeout_seconds
        return (own if own is not None else self._default_timeout) or None

    async def _ask(
        self, connection: ServerConnection, what: str, request: Callable[[ClientSession], Awaitable[P]]
    ) -> P:
        return await connection.ask(what, request, timeout=self._timeout(connection))

    async def _interactive(
        self,
        connection: ServerConnection,
        what: str,
        request: Callable[[ClientSession, Resume | None], Awaitable[P | types.InputRequiredResult]],
    ) -> P | types.InputRequiredResult:
        """A request a 2026 server may answer with ``input_required``: its rounds go through the
        current relay channel (``relay.through_rounds``: the client's own retry passed on, the
        result handed to a 2026 client, a 2025 client asked); with no channel, an error. While it
        runs it is a call in flight on the server, as an exposed ``tools/call`` is: what a 2025
        server asks over its back channel meanwhile goes to the channel's client."""
        channel = current_channel()

        async def send(resume: Resume | None) -> P | types.InputRequiredResult:
            try:
                return await self._ask(connection, what, lambda session: request(session, resume))
            except MCPError as exc:
                if channel is not None and resume is not None and resume is channel.resume:
                    channel.refused(exc.error)  # the client's own requestState: its business
                raise

        with connection.relay.calling(channel):
            result = await through_rounds(channel, send)
        if isinstance(result, types.ErrorData):
            raise MCPError(result.code, f"{what}: {result.message}", result.data)
        if isinstance(result, types.InputRequiredResult) and channel is None:
            asked = ", ".join(sorted({r.method for r in (result.input_requests or {}).values()})) or "input"
            raise MCPError(
                INTERNAL_ERROR, f"{what}: the server needs {asked} from a client, and no client can answer"
            )
        return result

    # ------------------------------------------------------------------ resources

    async def list_resources(self, cursor: str | None = None) -> types.ListResourcesResult:
        """One page of resources (URIs as the servers sent them)."""
        items, following, live = await self._paged(
            cursor,
            "resources/list",
            _list_resources,
            lambda page: page.resources,
            lambda connection: connection.lists.entries("resources", types.Resource),
        )
        for server, resource in items:
            self._own(resource.uri, server, live=live)
        return types.ListResourcesResult(resources=[r for _, r in items], next_cursor=following)

    async def list_resource_templates(self, cursor: str | None = None) -> types.ListResourceTemplatesResult:
        """One page of resource templates (as the servers sent them)."""
        items, following, live = await self._paged(
            cursor,
            "resources/templates/list",
            _list_templates,
            lambda page: page.resource_templates,
            lambda connection: connection.lists.entries("resource_templates", types.ResourceTemplate),
        )
        routes = self._templates if live else self._known_templates
        for server, template in items:
            _remember(routes, (server, template.uri_template), template_pattern(template.uri_template))
        return types.ListResourceTemplatesResult(
            resource_templates=[t for _, t in items], next_cursor=following
        )

    def _own(self, uri: str, server: str, *, live: bool) -> None:
        if not live:
            _remember(self._known_owners, uri, server)
            return
        owner = self._owners.get(uri)
        if owner is None:
            _remember(self._owners, uri, server)
        elif owner != server and uri not in self._collisions and len(self._collisions) < MAX_ROUTES:
            self._collisions.add(uri)
            logger.warning(
                "resource %s is offered by servers %s and %s; reads go to %s", uri, owner, server, owner
            )

    def _claim(self, uri: str, ruled_out: Collection[str] = ()) -> tuple[str, bool] | None:
        """Which server a read of ``uri`` goes to by the rules of the module docstring, and
        whether a listing of the running server says so (False: only its known lists do).

        A listed URI first, else a listed template that matches, else the servers' known lists;
        among claims of one rank, the first server in configuration order (a live claim before a
        known one of the same server). Servers in ``ruled_out`` (their live lists lack the URI)
        are passed over.
        """
        live_owner, known_owner = self._owners.get(uri), self._known_owners.get(uri)
        if live_owner is not None and known_owner is None and live_owner not in ruled_out:
            return live_owner, True  # the usual case, at the cost of two lookups
        listed = self._first([(live_owner, True), (known_owner, False)], ruled_out)
        if listed is not None:
            return listed
        matched = self._first(
            [
                (server, live)
                for live, routes in ((True, self._templates), (False, self._known_templates))
                for (server, _), pattern in routes.items()
                if pattern.fullmatch(uri)
            ],
            ruled_out,
        )
        if matched is not None:
            return matched
        known = [c.lists for c in self._connections.values() if c.name not in ruled_out]
        for lists in known:
            if any(resource.uri == uri for resource in lists.entries("resources", types.Resource)):
                return lists.name, False
        for lists in known:
            templates = lists.entries("resource_templates", types.ResourceTemplate)
            if any(template_pattern(t.uri_template).fullmatch(uri) for t in templates):
                return lists.name, False
        return None

    def _first(
        self, claims: list[tuple[str | None, bool]], ruled_out: Collection[str]
    ) -> tuple[str, bool] | None:
        """The claim of the first server in configuration order (live before known)."""
        kept = [(server, live) for server, live in claims if server is not None and server not in ruled_out]
        if len(kept) < 2:
            return kept[0] if kept else None
        order = {name: index for index, name in enumerate(self._connections)}
        return min(kept, key=lambda claim: (order.get(claim[0], len(order)), not claim[1]))

    def owner(self, uri: str) -> str | None:
        """The server that claims ``uri`` by what the listings showed, else by what the servers
        are known to list (None: nobody). ``read_resource`` sends nothing on a claim that only
        known lists make: it checks it against the live lists first."""
        claim = self._claim(uri)
        return claim[0] if claim is not None else None

    async def _route(self, uri: str, what: str) -> str | None:
        """The server a read of ``uri`` goes to, decided by live lists alone.

        A claim from known lists starts its server (or waits for its start) and lists it live
        (``_list_live``); a server whose live lists lack the URI (or that declares no resources
        once it runs) is passed over, and the claims are weighed again. None: nobody claims the
        URI (a trial follows, as for any URI never listed).

        Raises:
            MCPError: ``RESOURCE_NOT_FOUND`` when known lists claimed the URI and no live list
                has it; the server's state when it cannot start; a live listing's error.
        """
        ruled_out: list[str] = []
        for _ in range(len(self._connections) + 1):  # each pass lists one more server live
            claim = self._claim(uri, ruled_out)
            if claim is None:
                if not ruled_out:
                    return None
                offered = (
                    f"server {ruled_out[0]}'s cached list offered it, but the running server does not list it"
                    if len(ruled_out) == 1
                    else f"the cached lists of servers {', '.join(ruled_out)} offered it, but the running "
                    "servers do not list it"
                )
                raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri} ({offered})")
            owner, live = claim
            connection = self._connections[owner]
            if live:
                return owner
            if connection.state in ("starting", "idle"):
                await connection.wait_started()
            if connection.state != "up":
                raise _unavailable(what, connection, "resources")
            if not connection.offers("resources"):  # its known lists said it does
                self._replace_routes(owner, [], [])
                ruled_out.append(owner)
            elif not await self._list_live(connection, uri, what):
                ruled_out.append(owner)
        raise MCPError(INTERNAL_ERROR, f"{what}: not sent: the servers' live lists kept changing")

    async def _list_live(self, connection: ServerConnection, uri: str, what: str) -> bool:
        """List the running ``connection``'s resources and templates (every page, ``MAX_PAGES`` at
        most), make them its routes in place of what its known lists gave, and say whether they
        offer ``uri``.

        Raises:
            MCPError: a listing failed (nothing is read on a route it could not check).
        """
        name = connection.name
        try:
            resources = await self._every_page(
                connection, "resources/list", _list_resources, lambda p: p.resources
            )
            try:
                templates = await self._every_page(
                    connection, "resources/templates/list", _list_templates, lambda p: p.resource_templates
                )
            except MCPError as exc:
                if exc.code != METHOD_NOT_FOUND:
                    raise
                templates = []
        except MCPError as exc:
            raise MCPError(
                exc.code, f"{what}: not sent: server {name}'s resources could not be listed: {exc.message}"
            ) from None
        patterns = self._replace_routes(name, resources, templates)
        return any(resource.uri == uri for resource in resources) or any(p.fullmatch(uri) for p in patterns)

    def _replace_routes(
        self, name: str, resources: Sequence[types.Resource], templates: Sequence[types.ResourceTemplate]
    ) -> list[re.Pattern[str]]:
        """Make what the running server ``name`` listed its routes, in place of what its known
        lists (and its earlier listings) gave; returns its templates' patterns."""
        listed = {resource.uri for resource in resources}
        self._known_owners = {u: server for u, server in self._known_owners.items() if server != name}
        self._owners = {u: server for u, server in self._owners.items() if server != name or u in listed}
        self._known_templates = {key: p for key, p in self._known_templates.items() if key[0] != name}
        self._templates = {key: p for key, p in self._templates.items() if key[0] != name}
        for resource in resources:
            self._own(resource.uri, name, live=True)
        patterns = [template_pattern(t.uri_template) for t in templates]
        for template, pattern in zip(templates, patterns, strict=True):
            _remember(self._templates, (name, template.uri_template), pattern)
        return patterns

    async def read_resource(self, uri: str) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read ``uri`` from the server that owns it (see the module docstring); a 2026 server's
        ``input_required`` goes through the relay channel of the read (``_interactive``).

        Raises:
            MCPError: the owner's error, or the first server's when no server could read it.
        """
        what = f"resources/read {uri}"
        owner = await self._route(uri, what)
        servers = {c.name: c for c in self.servers("resources")}
        if owner in servers:
            return await self._interactive(servers[owner], what, functools.partial(_read, uri))
        if owner is not None:  # its server lists it no more: say why rather than "not found"
            raise _unavailable(what, self._connections[owner], "resources")
        first: MCPError | None = None
        for connection in servers.values():
            if connection.state in ("starting", "idle"):
                await connection.wait_started()
            if connection.state == "up" and not connection.offers("resources"):
                continue  # its known lists said it offers resources; the running server does not
            try:
                result = await self._interactive(connection, what, functools.partial(_read, uri))
            except MCPError as exc:
                first = first or exc
                continue
            _remember(self._owners, uri, connection.name)
            return result
        if first is not None:
            raise first
        raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri} (no tool server offers resources now)")

    async def _paged(
        self,
        cursor: str | None,
        method: str,
        fetch: Callable[[ClientSession, types.PaginatedRequestParams | None], Awaitable[Any]],
        items_of: Callable[[Any], Sequence[P]],
        known: Callable[[ServerConnection], Sequence[P]],
    ) -> tuple[list[tuple[str, P]], str | None, bool]:
        """One upstream page, from the server (and its cursor) that ``cursor`` names, and whether
        the running server listed it (False: its known lists).

        A server that is not up gives its ``known`` list as one page. A server that fails is
        skipped with a warning, and so is one with nothing to list, so a page is empty only at
        the end.
        """
        servers = self.servers("resources")
        names = [c.name for c in servers]
        index, upstream, pages = 0, None, 0
        if cursor is not None:
            server, upstream, pages = decode_cursor(cursor)
            if server not in names:
                raise MCPError(INVALID_PARAMS, f"invalid cursor: server {server} offers no resources now")
            index = names.index(server)
        for connection in servers[index:]:
            params = types.PaginatedRequestParams(cursor=upstream) if upstream is not None else None
            page: Any = None
            live = connection.state == "up"
            if not live:  # its known list, whole (none left after a live page)
                cached = known(connection) if upstream is None else []
                items, following = [(connection.name, item) for item in cached], None
            else:
                try:
                    page = await self._ask(connection, method, functools.partial(_with_params, fetch, params))
                except MCPError as exc:
                    logger.warning("%s: %s failed: %s", connection.name, method, exc.message)
                items = [(connection.name, item) for item in items_of(page)] if page is not None else []
                following = page.next_cursor if page is not None else None
            if following and pages + 1 < MAX_PAGES:
                return items, encode_cursor(connection.name, following, pages + 1), live
            if following:
                logger.warning("%s: stopped listing %s after %d pages", connection.name, method, MAX_PAGES)
            upstream, pages = None, 0
            if items:
                after = names.index(connection.name) + 1
                return items, encode_cursor(names[after], None, 0) if after < len(names) else None, live
        return [], None, True

    # ------------------------------------------------------------------ prompts

    async def list_prompts(self) -> types.ListPromptsResult:
        """Every prompt of every server, named ``server__prompt`` (all pages, one answer)."""
        listed: list[tuple[ServerConnection, types.Prompt]] = []
        known: set[str] = set()  # the servers listed from their known lists
        for connection in self.servers("prompts"):
            try:
                if connection.state == "up":
                    prompts = await self._every_page(
                        connection, "prompts/list", _list_prompts, lambda page: page.prompts
                    )
                else:
                    prompts = connection.lists.entries("prompts", types.Prompt)
                    known.add(connection.name)
            except MCPError as exc:
                logger.warning("%s: prompts/list failed: %s", connection.name, exc.message)
                continue
            listed.extend((connection, prompt) for prompt in prompts)
        named = [NamedTool(c.name, prompt.name, c.config.tool_prefix) for c, prompt in listed]
        names, warnings = assign_names(named)
        for warning in warnings:
            logger.warning("prompt names: %s", warning)
        routes: dict[str, tuple[str, str]] = {}
        exposed_prompts: list[types.Prompt] = []
        for connection, prompt in listed:
            exposed = names[(connection.name, prompt.name)]
            routes[exposed] = (connection.name, prompt.name)
            exposed_prompts.append(prompt.model_copy(update={"name": exposed}))
        for name, route in self._prompts.items():  # a prompt whose server went: kept to say why
            if name not in routes and route[0] not in {c.name for c, _ in listed}:
                _remember(self._gone_prompts, name, route)
        for name in routes:
            self._gone_prompts.pop(name, None)
        self._prompts = routes
        self._known_prompts = {name for name, (server, _) in routes.items() if server in known}
        return types.ListPromptsResult(prompts=exposed_prompts)

    def _gone(self, name: str) -> ServerConnection | None:
        """The server that listed the prompt ``name`` (earlier, or in its known lists) and lists
        it no more."""
        gone = self._gone_prompts.get(name)
        if gone is not None:
            return self._connections.get(gone[0])
        for connection in self._connections.values():
            if connection.offers("prompts"):
                continue
            prompts = connection.lists.entries("prompts", types.Prompt)
            names, _ = assign_names(
                [NamedTool(connection.name, p.name, connection.config.tool_prefix) for p in prompts]
            )
            if name in names.values():
                return connection
        return None

    async def _every_page(
        self,
        connection: ServerConnection,
        method: str,
        fetch: Callable[[ClientSession, types.PaginatedRequestParams | None], Awaitable[Any]],
        items_of: Callable[[Any], Sequence[P]],
    ) -> list[P]:
        """Every page of ``method`` from the running server (``MAX_PAGES`` at most; a cursor seen
        before ends the listing)."""
        items: list[P] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await self._ask(connection, method, functools.partial(_with_params, fetch, params))
            items.extend(items_of(page))
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        else:
            logger.warning("%s: stopped listing %s after %d pages", connection.name, method, MAX_PAGES)
        return items

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Get the prompt the gateway lists as ``name`` from its server (its ``input_required``
        as a read's, ``_interactive``).

        A name routed by a server's known lists first has that server started and the prompts
        listed again: the get goes where the live lists route the name (see the module docstring).

        Raises:
            MCPError: ``INVALID_PARAMS`` for an unknown name, else the server's error.
        """
        what = f"prompts/get {name}"
        if name not in self._prompts:  # not listed yet, or changed since
            await self.list_prompts()
        for _ in range(len(self._connections) + 1):  # each pass lists one more server live
            route = self._prompts.get(name)
            if route is None or name not in self._known_prompts:
                break
            server = self._connections[route[0]]
            if server.state in ("starting", "idle"):
                await server.wait_started()
            if server.state != "up":
                raise _unavailable(what, server, "prompts")
            await self.list_prompts()
        else:
            raise MCPError(INTERNAL_ERROR, f"{what}: not sent: the servers' live lists kept changing")
        route = self._prompts.get(name)
        gone = self._gone(name) if route is None else None
        if gone is not None:  # its server lists it no more: say why rather than "unknown"
            raise _unavailable(what, gone, "prompts")
        connection = self._connections.get(route[0]) if route is not None else None
        if route is None or connection is None:
            known = ", ".join(sorted(self._prompts)[:50]) or "(none)"
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}. Available prompts: {known}")
        mcp_name = route[1]
        args = dict(arguments) if arguments else None
        return await self._interactive(connection, what, functools.partial(_get_prompt, mcp_name, args))

    # ------------------------------------------------------------------ completions and subscriptions
    #
    # ``completion/complete`` goes to the server whose prompt (``server__prompt``) or resource
    # template the reference names, with the server's own prompt name; ``resources/subscribe`` and
    # ``unsubscribe`` to the server that owns the URI (routed as a read is). A server that did not
    # declare ``completions`` or ``resources.subscribe`` is not asked: the error says so.

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Complete an argument of a prompt or of a resource template, on the server that offers it.

        Raises:
            MCPError: ``INVALID_PARAMS`` for an unknown prompt or template, ``METHOD_NOT_FOUND``
                when its server offers no completions, else the server's error.
        """
        ref = params.ref
        sent_ref: types.PromptReference | types.ResourceTemplateReference
        if isinstance(ref, types.PromptReference):
            what = f"completion/complete for prompt {ref.name}"
            if ref.name not in self._prompts:
                await self.list_prompts()
            route = self._prompts.get(ref.name)
            if route is None:
                raise MCPError(INVALID_PARAMS, f"{what}: unknown prompt {ref.name}")
            server, sent_ref = route[0], ref.model_copy(update={"name": route[1]})
        else:
            what = f"completion/complete for resource template {ref.uri}"
            owner = await self._template_owner(ref.uri, what)
            if owner is None:
                raise MCPError(INVALID_PARAMS, f"{what}: no tool server offers this resource template")
            server, sent_ref = owner, ref
        connection = self._connections[server]
        if connection.state in ("starting", "idle"):
            await connection.wait_started()
        capabilities = connection.capabilities
        if connection.state == "up" and (capabilities is None or capabilities.completions is None):
            raise MCPError(METHOD_NOT_FOUND, f"{what}: server {server} offers no completions")
        # the client's own _meta stays behind: in 2026-07-28 it is the envelope of its era and its
        # request to the gateway, not to this server
        sent = types.CompleteRequestParams(ref=sent_ref, argument=params.argument, context=params.context)
        request = types.CompleteRequest(params=sent)
        return await self._ask(
            connection, what, lambda session: session.send_request(request, types.CompleteResult)
        )

    async def _template_owner(self, template: str, what: str) -> str | None:
        """The server that lists the resource template ``template`` (its live lists decide)."""
        listed = {server for server, t in self._templates if t == template}
        for name in self._connections:  # configuration order
            if name in listed:
                return name
        for connection in self.servers("resources"):
            if connection.state in ("starting", "idle"):
                await connection.wait_started()
            if connection.state != "up" or not connection.offers("resources"):
                continue
            try:
                templates = await self._every_page(
                    connection, "resources/templates/list", _list_templates, lambda p: p.resource_templates
                )
            except MCPError as exc:
                logger.warning("%s: %s: templates not listed: %s", connection.name, what, exc.message)
                continue
            for listed_template in templates:
                _remember(
                    self._templates,
                    (connection.name, listed_template.uri_template),
                    template_pattern(listed_template.uri_template),
                )
            if any(t.uri_template == template for t in templates):
                return connection.name
        return None

    async def subscription_owner(self, uri: str) -> ServerConnection:
        """The running server to subscribe to ``uri`` on: its owner, when it declared
        ``resources.subscribe``.

        Raises:
            MCPError: ``RESOURCE_NOT_FOUND`` when no server lists the URI (or a template that
                matches it), ``METHOD_NOT_FOUND`` when its owner does not offer subscriptions.
        """
        what = f"resources/subscribe {uri}"
        owner = await self._route(uri, what) or await self._lister(uri, what)
        if owner is None:
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri} (no tool server lists it)")
        connection = self._connections[owner]
        if connection.state in ("starting", "idle"):
            await connection.wait_started()
        if connection.state != "up":
            raise _unavailable(what, connection, "resources")
        resources = connection.capabilities.resources if connection.capabilities is not None else None
        if resources is None or not resources.subscribe:
            raise MCPError(METHOD_NOT_FOUND, f"{what}: server {owner} does not offer resource subscriptions")
        return connection

    async def _lister(self, uri: str, what: str) -> str | None:
        """The first server (configuration order) whose live lists offer ``uri``, listed now: a
        subscription, unlike a read, is not tried on each server in turn."""
        for connection in self.servers("resources"):
            if connection.state in ("starting", "idle"):
                await connection.wait_started()
            if connection.state != "up" or not connection.offers("resources"):
                continue
            try:
                if await self._list_live(connection, uri, what):
                    return connection.name
            except MCPError as exc:
                logger.warning("%s: %s", connection.name, exc.message)
        return None

    async def subscribe(self, connection: ServerConnection, uri: str, *, on: bool = True) -> None:
        """Send ``resources/subscribe`` (``on``) or ``resources/unsubscribe`` for ``uri``; to a
        2026-07-28 server, which has neither, add ``uri`` to (or remove it from) the URIs its
        ``subscriptions/listen`` stream carries (``era.follow_resource_updates``), and wait for
        that stream's acknowledgment."""
        method = "resources/subscribe" if on else "resources/unsubscribe"
        if is_modern(connection.protocol_version):
            connection.watched.change(uri, on=on)
            if on:
                why = await connection.watched.until_honored(uri, SUBSCRIBE_TIMEOUT)
                if why is not None:
                    connection.watched.change(uri, on=False)
                    raise MCPError(INTERNAL_ERROR, f"{method} {uri}: server {connection.name}: {why}")
            return
        request: types.SubscribeRequest | types.UnsubscribeRequest = (
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            if on
            else types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        )
        await self._ask(
            connection, f"{method} {uri}", lambda session: session.send_request(request, types.EmptyResult)
        )


async def _read(
    uri: str, session: ClientSession, resume: Resume | None
) -> types.ReadResourceResult | types.InputRequiredResult:
    return await session.read_resource(
        uri,
        input_responses=resume.input_responses if resume is not None else None,
        request_state=resume.request_state if resume is not None else None,
        allow_input_required=True,
    )


async def _get_prompt(
    name: str, arguments: dict[str, str] | None, session: ClientSession, resume: Resume | None
) -> types.GetPromptResult | types.InputRequiredResult:
    return await session.get_prompt(
        name,
        arguments,
        input_responses=resume.input_responses if resume is not None else None,
        request_state=resume.request_state if resume is not None else None,
        allow_input_required=True,
    )
