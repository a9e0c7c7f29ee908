"""A server's tool list as last known: read from the tool cache (``cache.py``) at start, then
as the server listed it, filtered and compiled; what it listed is written back to the cache when
it differs from what the cache held."""

from __future__ import annotations

import logging

import mcp_types as types
from pydantic import ValidationError

from .._types import JSONObject
from ..config import RemoteServerConfig, StdioServerConfig
from ._server_tools import ServerTool, filter_warnings, server_tool
from ._session import LiveSession, list_tool_pages
from .cache import CachedList, ToolCache

logger = logging.getLogger(__name__)


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

    def cached_tools(self) -> tuple[ServerTool, ...]:
        """The cached tools, filtered and compiled (empty without a cached entry)."""
        if self.cached is None:
            return ()
        tools: list[ServerTool] = []
        for raw in self.cached.tools:
            try:
                shell = types.Tool.model_validate(
                    {
                        "name": raw["name"],
                        "description": raw.get("description")
                        if isinstance(raw.get("description"), str)
                        else None,
                        "inputSchema": {"type": "object"},
                        "execution": raw.get("execution") if isinstance(raw.get("execution"), dict) else None,
                    }
                )
            except ValidationError:
                shell = types.Tool(name=str(raw["name"]), input_schema={"type": "object"})
            tool = server_tool(self.name, self.config, shell, raw)
            if tool is not None:
                tools.append(tool)
        return tuple(tools)

    async def list_tools(
        self, live: LiveSession, capabilities: types.ServerCapabilities | None
    ) -> tuple[ServerTool, ...]:
        """Every page of ``tools/list``, filtered and compiled; remembered (and cached)."""
        listed = await list_tool_pages(live, self.name)
        self._remember(
            [
                live.repairer.raw_tools.get(t.name)
                or t.model_dump(by_alias=True, exclude_none=True, mode="json")
                for t in listed
            ],
            capabilities,
        )
        warnings = filter_warnings(self.name, self.config, [t.name for t in listed])
        for warning in [w for w in warnings if w not in self.glob_warnings]:
            logger.warning("%s", warning)
        self.glob_warnings = warnings
        return tuple(
            tool
            for t in listed
            if (tool := server_tool(self.name, self.config, t, live.repairer.raw_tools.get(t.name)))
            is not None
        )

    def _remember(self, raw: list[JSONObject], capabilities: types.ServerCapabilities | None) -> None:
        """Cache what the server listed when it differs from what the cache holds."""
        wire = capabilities.model_dump(by_alias=True, exclude_none=True, mode="json") if capabilities else {}
        listed = CachedList(tuple(raw), wire)
        self.from_cache = False
        if listed.tools == (self.cached.tools if self.cached else None):
            self.cache_note = "the cached list was up to date"
            return
        if self._cache is not None:
            self.cache_note = "the cached list was out of date: updated" if self.cached else "list cached"
        self.cached = listed
        if self._cache is not None and self._cache.save(self.name, self.config, listed.tools, wire):
            logger.debug("%s: cached its tool list (%d tools)", self.name, len(raw))
