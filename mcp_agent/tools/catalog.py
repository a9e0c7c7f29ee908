"""Resources, resource templates and prompts of every tool server, behind one catalog.

The gateway offers them with ``exposeTools`` (``gateway/mcp_catalog.py``); the loop never sees
them. A listing asks the servers that are up and declared the capability, so a list is as fresh
as the servers' own (their ``list_changed`` notifications reach the gateway's clients through
the hub). A server that is starting, idle (lazy) or restarting is listed from its known lists
(the tool cache's, or its last start's: ``_lists.py``) when there are any, so a warm start lists
at once what the server will offer; once it is up, a list that differs is announced with
``list_changed``. A read or a get on such a server waits for its start (bounded by its
``startupTimeoutSeconds``), as a tool call does.

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
  gateway's cursor names the server and that server's own cursor, so a server with 10 000
  resources is never read whole, and a client that stops early costs nothing more. At most
  ``MAX_PAGES`` pages are followed per server (a server whose cursor loops cannot trap a client).
- **Prompts are named like tools** (``server__prompt``, the server's ``toolPrefix``, see
  ``naming.py``) and are listed whole (all pages of all servers, in one answer): names can only
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import mcp_types as types
from mcp import ClientSession, MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from .connection import CatalogKind, ServerConnection
from .naming import NamedTool, assign_names

logger = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC code MCP gives an unknown resource URI."""
MAX_PAGES = 100
"""The most pages of one server a listing follows."""
MAX_ROUTES = 10_000
"""The most URIs (and templates) remembered for routing reads; the oldest are forgotten first."""

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


async def _list_prompts(
    session: ClientSession, *, params: types.PaginatedRequestParams | None
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
        self._owners: dict[str, str] = {}
        self._templates: dict[tuple[str, str], re.Pattern[str]] = {}
        self._prompts: dict[str, tuple[str, str]] = {}
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

    # ------------------------------------------------------------------ resources

    async def list_resources(self, cursor: str | None = None) -> types.ListResourcesResult:
        """One page of resources (URIs as the servers sent them)."""
        items, following = await self._paged(
            cursor,
            "resources/list",
            lambda session, params: session.list_resources(params=params),
            lambda page: page.resources,
            lambda connection: connection.lists.entries("resources", types.Resource),
        )
        for server, resource in items:
            self._own(resource.uri, server)
        return types.ListResourcesResult(resources=[r for _, r in items], next_cursor=following)

    async def list_resource_templates(self, cursor: str | None = None) -> types.ListResourceTemplatesResult:
        """One page of resource templates (as the servers sent them)."""
        items, following = await self._paged(
            cursor,
            "resources/templates/list",
            lambda session, params: session.list_resource_templates(params=params),
            lambda page: page.resource_templates,
            lambda connection: connection.lists.entries("resource_templates", types.ResourceTemplate),
        )
        for server, template in items:
            _remember(
                self._templates, (server, template.uri_template), template_pattern(template.uri_template)
            )
        return types.ListResourceTemplatesResult(
            resource_templates=[t for _, t in items], next_cursor=following
        )

    def _own(self, uri: str, server: str) -> None:
        owner = self._owners.get(uri)
        if owner is None:
            _remember(self._owners, uri, server)
        elif owner != server and uri not in self._collisions and len(self._collisions) < MAX_ROUTES:
            self._collisions.add(uri)
            logger.warning(
                "resource %s is offered by servers %s and %s; reads go to %s", uri, owner, server, owner
            )

    def owner(self, uri: str) -> str | None:
        """The server a read of ``uri`` goes to, from what the listings showed, else from what
        the servers are known to list (None: unknown)."""
        owner = self._owners.get(uri)
        if owner is not None:
            return owner
        order = list(self._connections)
        matches = [server for (server, _), pattern in self._templates.items() if pattern.fullmatch(uri)]
        if matches:
            return min(matches, key=order.index)
        known = [c.lists for c in self._connections.values()]
        for lists in known:
            if any(resource.uri == uri for resource in lists.entries("resources", types.Resource)):
                return lists.name
        for lists in known:
            templates = lists.entries("resource_templates", types.ResourceTemplate)
            if any(template_pattern(t.uri_template).fullmatch(uri) for t in templates):
                return lists.name
        return None

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read ``uri`` from the server that owns it (see the module docstring).

        Raises:
            MCPError: the owner's error, or the first server's when no server could read it.
        """
        what = f"resources/read {uri}"
        servers = {c.name: c for c in self.servers("resources")}
        owner = self.owner(uri)
        if owner in servers:
            return await self._ask(servers[owner], what, lambda session: session.read_resource(uri))
        if owner is not None:  # its server lists it no more: say why rather than "not found"
            raise _unavailable(what, self._connections[owner], "resources")
        first: MCPError | None = None
        for connection in servers.values():
            try:
                result = await self._ask(connection, what, lambda session: session.read_resource(uri))
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
    ) -> tuple[list[tuple[str, P]], str | None]:
        """One upstream page, from the server (and its cursor) that ``cursor`` names.

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
            if connection.state != "up":  # its known list, whole (none left after a live page)
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
                return items, encode_cursor(connection.name, following, pages + 1)
            if following:
                logger.warning("%s: stopped listing %s after %d pages", connection.name, method, MAX_PAGES)
            upstream, pages = None, 0
            if items:
                after = names.index(connection.name) + 1
                return items, encode_cursor(names[after], None, 0) if after < len(names) else None
        return [], None

    # ------------------------------------------------------------------ prompts

    async def list_prompts(self) -> types.ListPromptsResult:
        """Every prompt of every server, named ``server__prompt`` (all pages, one answer)."""
        listed: list[tuple[ServerConnection, types.Prompt]] = []
        for connection in self.servers("prompts"):
            try:
                if connection.state == "up":
                    prompts = await self._all_prompts(connection)
                else:
                    prompts = connection.lists.entries("prompts", types.Prompt)
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

    async def _all_prompts(self, connection: ServerConnection) -> list[types.Prompt]:
        prompts: list[types.Prompt] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await self._ask(
                connection, "prompts/list", functools.partial(_list_prompts, params=params)
            )
            prompts.extend(page.prompts)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        else:
            logger.warning("%s: stopped listing prompts after %d pages", connection.name, MAX_PAGES)
        return prompts

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> types.GetPromptResult:
        """Get the prompt the gateway lists as ``name`` from its server.

        Raises:
            MCPError: ``INVALID_PARAMS`` for an unknown name, else the server's error.
        """
        if name not in self._prompts:  # not listed yet, or changed since
            await self.list_prompts()
        route = self._prompts.get(name)
        gone = self._gone(name) if route is None else None
        if gone is not None:  # its server lists it no more: say why rather than "unknown"
            raise _unavailable(f"prompts/get {name}", gone, "prompts")
        connection = self._connections.get(route[0]) if route is not None else None
        if route is None or connection is None:
            known = ", ".join(sorted(self._prompts)[:50]) or "(none)"
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}. Available prompts: {known}")
        mcp_name = route[1]
        args = dict(arguments) if arguments else None
        return await self._ask(
            connection, f"prompts/get {name}", lambda session: session.get_prompt(mcp_name, args)
        )
