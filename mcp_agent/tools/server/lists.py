"""A server's lists as last known: read from the tool cache (``cache.py``) at start, then as the
server gave them. Its tools are filtered and compiled for the hub; what it listed is written back
to the cache when it differs from what the cache held.

With a cache, a server that declares resources or prompts has them listed once it is up
(``list_catalog``, in the background: it does not delay the tools) and again after each of its
``list_changed`` notifications, so that the next start can list them while the server starts. A
list that fails keeps what was known; a server that does not implement
``resources/templates/list`` has none; a list longer than ``MAX_CACHED_ENTRIES`` is not cached.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Any, Literal, TypeVar

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, MCPError
from mcp_types import METHOD_NOT_FOUND
from pydantic import BaseModel, ValidationError

from ...config import RemoteServerConfig, StdioServerConfig
from ...messages import JSONObject
from ..cache import MAX_CACHED_ENTRIES, CachedList, ToolCache
from ..presentation import ServerTool, cached_tools, filter_warnings, server_tool
from .session import LiveSession, list_pages, list_tool_pages

logger = logging.getLogger(__name__)

CatalogKind = Literal["resources", "prompts"]
"""What of a server's catalog a ``list_changed`` notification names: its resources (with their
templates) or its prompts."""
CatalogPart = Literal["resources", "resource_templates", "prompts"]
"""A list of the catalog, by its ``CachedList`` field."""
M = TypeVar("M", bound=BaseModel)


def _wire(item: BaseModel) -> JSONObject:
    return item.model_dump(by_alias=True, exclude_none=True, mode="json")


async def _resources(session: ClientSession, params: types.PaginatedRequestParams | None) -> Any:
    return await session.list_resources(params=params)


async def _templates(session: ClientSession, params: types.PaginatedRequestParams | None) -> Any:
    return await session.list_resource_templates(params=params)


async def _prompts(session: ClientSession, params: types.PaginatedRequestParams | None) -> Any:
    return await session.list_prompts(params=params)


_LISTINGS: dict[CatalogPart, tuple[str, Callable[[ClientSession, Any], Awaitable[Any]], str]] = {
    "resources": ("resources/list", _resources, "resources"),
    "resource_templates": ("resources/templates/list", _templates, "resource_templates"),
    "prompts": ("prompts/list", _prompts, "prompts"),
}
"""Each part: its method, how to ask for a page, and the page's field holding the entries."""


class KnownLists:
    """The lists of one server: cached, then listed.

    Attributes:
        cached: the server's entry in the cache (after a listing: what it listed), or None.
        from_cache: the tools offered now are the cached ones (the server has not listed yet).
        cache_note: for ``doctor``: how the cached list compared with the one the server gave.
        glob_warnings: its ``allowTools``/``denyTools`` globs that match none of the tools it
            last listed (each logged as a warning when it first appears).
    """

    def __init__(
        self, name: str, config: StdioServerConfig | RemoteServerConfig, cache: ToolCache | None
    ) -> None:
        self.name = name
        self.config = config
        self._cache = cache
        self.cached: CachedList | None = None
        if cache is not None and not config.disabled:
            self.cached = cache.load(name, config)
        self.from_cache = False
        self.cache_note: str | None = None
        self.glob_warnings: tuple[str, ...] = ()
        self._models: dict[CatalogPart, tuple[tuple[JSONObject, ...], list[Any]]] = {}
        self._relist: MemoryObjectSendStream[None] | None = None
        self.protocol_version: str | None = None
        """The protocol version of the server's current start, cached with its lists."""

    @property
    def caching(self) -> bool:
        """Whether there is a cache to keep the lists in."""
        return self._cache is not None

    # ------------------------------------------------------------------ tools

    def cached_tools(self) -> tuple[ServerTool, ...]:
        """The cached tools, filtered and compiled (empty without a cached entry)."""
        return () if self.cached is None else cached_tools(self.name, self.config, self.cached.tools)

    async def list_tools(
        self, live: LiveSession, capabilities: types.ServerCapabilities | None
    ) -> tuple[ServerTool, ...]:
        """Every page of ``tools/list``, filtered and compiled; remembered (and cached)."""
        listed = await list_tool_pages(live, self.name)
        self._remember(
            [live.repairer.raw_tools.get(t.name) or _wire(t) for t in listed],
            _wire(capabilities) if capabilities else {},
        )
        warnings = filter_warnings(self.name, self.config, [t.name for t in listed])
        for warning in [w for w in warnings if w not in self.glob_warnings]:
            logger.warning("%s", warning)
        self.glob_warnings = warnings
        tools = (
            server_tool(
                self.name,
                self.config,
                live.repairer.raw_tools.get(t.name) or _wire(t),
                name=t.name,
                description=t.description or "",
                task_required=t.execution is not None and t.execution.task_support == "required",
            )
            for t in listed
        )
        return tuple(tool for tool in tools if tool is not None)

    async def keep_tools(
        self,
        live: LiveSession,
        capabilities: types.ServerCapabilities | None,
        requests: MemoryObjectReceiveStream[None],
        on_change: Callable[[tuple[ServerTool, ...]], None],
    ) -> None:
        """While ``live`` serves: list the tools again after each ``tools/list_changed`` (one
        item of ``requests``) and give them to ``on_change``; a listing that fails keeps the old
        list (the next change tries again)."""
        async for _ in requests:
            try:
                with anyio.fail_after(self.config.startup_timeout_seconds or None):
                    tools = await self.list_tools(live, capabilities)
            except Exception as exc:
                logger.warning("%s: re-listing tools after tools/list_changed failed: %r", self.name, exc)
                continue
            logger.info("%s: tools changed (%d now)", self.name, len(tools))
            on_change(tools)

    def _remember(self, raw: list[JSONObject], capabilities: JSONObject) -> None:
        """Cache what the server listed when it differs from what the cache holds."""
        before = self.cached
        self.from_cache = False
        if before is not None and tuple(raw) == before.tools:
            self.cache_note = "the cached list was up to date"
            if capabilities == before.capabilities and self.protocol_version == before.protocol_version:
                return
        elif self._cache is not None:
            self.cache_note = "the cached list was out of date: updated" if before else "list cached"
        if before is None:
            self.cached = CachedList(tuple(raw), capabilities, protocol_version=self.protocol_version)
        else:  # the catalog stays as known until the server lists it (list_catalog)
            self.cached = dataclasses.replace(
                before, tools=tuple(raw), capabilities=capabilities, protocol_version=self.protocol_version
            )
        if self._cache is not None and self._cache.save(self.name, self.config, self.cached):
            logger.debug("%s: cached its tool list (%d tools)", self.name, len(raw))

    # ------------------------------------------------------------------ catalog

    def known(self, part: CatalogPart) -> bool:
        """Whether the server's ``part`` is known (cached or listed) without asking it."""
        return self.cached is not None and getattr(self.cached, part) is not None

    def entries(self, part: CatalogPart, model: type[M]) -> list[M]:
        """The known entries of ``part`` as ``model`` objects (empty when not known); an entry
        that does not validate is skipped."""
        raw: tuple[JSONObject, ...] = (getattr(self.cached, part) if self.cached else None) or ()
        made = self._models.get(part)
        if made is not None and made[0] is raw:
            return list(made[1])
        models: list[M] = []
        for entry in raw:
            try:
                models.append(model.model_validate(entry))
            except ValidationError:
                logger.debug("%s: cached %s entry does not validate: %r", self.name, part, entry)
        self._models[part] = (raw, models)
        return list(models)

    def catalog_changed(self) -> None:
        """The server announced a change of its resources or prompts: list them again (when
        ``keep_catalog`` runs; a listing already pending is enough)."""
        if self._relist is not None:
            with suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                self._relist.send_nowait(None)

    async def keep_catalog(
        self,
        live: LiveSession,
        capabilities: types.ServerCapabilities | None,
        on_change: Callable[[CatalogKind], None],
    ) -> None:
        """While ``live`` serves: list the catalog for the cache now, calling ``on_change`` for
        each list that differs from the cached one, then again after each ``catalog_changed``
        (whose notification was passed on already)."""
        send, requests = anyio.create_memory_object_stream[None](1)
        self._relist = send
        try:
            async with send, requests:
                for kind in sorted(await self.list_catalog(live, capabilities)):
                    logger.info("%s: its %s differ from the cached ones", self.name, kind)
                    on_change(kind)
                async for _ in requests:
                    await self.list_catalog(live, capabilities)
        finally:
            if self._relist is send:
                self._relist = None

    async def list_catalog(
        self, live: LiveSession, capabilities: types.ServerCapabilities | None
    ) -> set[CatalogKind]:
        """List the resources, templates and prompts the server declares, and cache them.

        Returns:
            what changed from a known list (``"resources"`` for resources or templates,
            ``"prompts"``): a client may have been given the old one.
        """
        if self._cache is None or self.cached is None:
            return set()
        resources = capabilities is not None and capabilities.resources is not None
        prompts = capabilities is not None and capabilities.prompts is not None
        known = self.cached
        listed = {
            "resources": await self._list_part(live, "resources", known.resources) if resources else None,
            "resource_templates": await self._list_part(live, "resource_templates", known.resource_templates)
            if resources
            else None,
            "prompts": await self._list_part(live, "prompts", known.prompts) if prompts else None,
        }
        before = self.cached  # the tools may have been listed again meanwhile
        after = dataclasses.replace(
            before,
            resources=listed["resources"],
            resource_templates=listed["resource_templates"],
            prompts=listed["prompts"],
        )
        if after == before:
            return set()
        self.cached = after
        if self._cache.save(self.name, self.config, after):
            logger.debug("%s: cached its resources and prompts", self.name)
        changed: set[CatalogKind] = set()
        if before.resources is not None and (before.resources, before.resource_templates) != (
            after.resources,
            after.resource_templates,
        ):
            changed.add("resources")
        if before.prompts is not None and before.prompts != after.prompts:
            changed.add("prompts")
        return changed

    async def _list_part(
        self, live: LiveSession, part: CatalogPart, known: tuple[JSONObject, ...] | None
    ) -> tuple[JSONObject, ...] | None:
        """Every entry of ``part``; what was ``known`` when the listing fails."""
        method, fetch, field = _LISTINGS[part]
        try:
            with anyio.fail_after(self.config.startup_timeout_seconds or None):
                entries: Sequence[BaseModel] | None = await list_pages(
                    live,
                    self.name,
                    method,
                    fetch,
                    lambda page: getattr(page, field),
                    max_items=MAX_CACHED_ENTRIES,
                )
        except MCPError as exc:
            if exc.code == METHOD_NOT_FOUND:
                return ()
            logger.info("%s: %s for the tool cache failed: %s", self.name, method, exc.message)
            return known
        except Exception as exc:
            logger.info("%s: %s for the tool cache failed: %r", self.name, method, exc)
            return known
        if entries is None:
            logger.info("%s: more than %d entries in %s: not cached", self.name, MAX_CACHED_ENTRIES, method)
            return None
        return tuple(_wire(entry) for entry in entries)
