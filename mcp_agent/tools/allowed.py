"""Which tools one caller may use: ``ToolFilter`` (allow and deny globs over exposed names) and
``AllowedTools``, a ToolSource narrowed to them.

``gateway.callers.NAME.tools`` gives a caller ``{"allow": [...], "deny": [...]}``: fnmatch globs
over exposed names (``time__*``), matched case-sensitively as ``allowTools``/``denyTools`` are
(``presentation.tool_allowed``). No ``allow`` means every tool; ``deny`` wins over ``allow``.

A run for that caller gets ``AllowedTools`` over the agent's tools: it lists only the permitted
tools, so the model is offered only those, and a call of any other answers exactly as a tool
that does not exist (the loop's own unknown-tool answer, which names only the permitted tools).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import JSONObject, ToolResult, ToolSpec
from .base import LiveToolSource, ToolSource
from .presentation import tool_allowed

__all__ = ["EVERY_TOOL", "AllowedTools", "ToolFilter"]

_MAX_LISTED_NAMES = 50
_MAX_MEMO = 4096
"""Names whose verdict one filter remembers; past this many the memo starts over."""


@dataclass(frozen=True)
class ToolFilter:
    """Allow and deny globs over exposed names (module docstring). Hashable: a ``Caller`` holds one.

    A filter remembers its verdict for each name it was asked about, and the last list it
    narrowed (by identity: a hub hands out the same tuple until its tools change), so that a
    caller's every request does not match every glob against every tool again.

    Attributes:
        allow: only tools matching one of these (None: every tool).
        deny: never tools matching one of these, whatever ``allow`` says.
    """

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    _verdicts: dict[str, bool] = field(default_factory=dict, init=False, compare=False, repr=False)
    _narrowed: list[Any] = field(default_factory=lambda: [None, ()], init=False, compare=False, repr=False)

    @classmethod
    def of(cls, config: Mapping[str, Sequence[str] | None] | None) -> ToolFilter:
        """From the ``{"allow": [...], "deny": [...]}`` of agent.json (None: every tool)."""
        if not config:
            return EVERY_TOOL
        allow = config.get("allow")
        return cls(tuple(allow) if allow is not None else None, tuple(config.get("deny") or ()))

    @property
    def everything(self) -> bool:
        """Whether every tool passes (no ``allow``, no ``deny``)."""
        return self.allow is None and not self.deny

    def permits(self, name: str) -> bool:
        if self.everything:
            return True
        verdict = self._verdicts.get(name)
        if verdict is None:
            if len(self._verdicts) >= _MAX_MEMO:
                self._verdicts.clear()
            verdict = self._verdicts[name] = tool_allowed(name, self.allow, self.deny)
        return verdict

    def narrow(self, specs: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        """The permitted ones of ``specs``, in their order (``specs`` itself when all pass)."""
        if self.everything:
            return specs
        last = self._narrowed
        if last[0] is not specs:
            last[:] = [specs, tuple(spec for spec in specs if self.permits(spec.name))]
        narrowed: Sequence[ToolSpec] = last[1]
        return narrowed

    @property
    def globs(self) -> dict[str, tuple[str, ...]]:
        """The globs by key (``allow``, ``deny``), for the start-up warnings."""
        return {"allow": self.allow or (), "deny": self.deny}


EVERY_TOOL = ToolFilter()
"""The filter of a caller without ``tools``: every tool."""


class AllowedTools:
    """``source`` narrowed to what ``only`` permits, for one run (module docstring)."""

    def __init__(self, source: ToolSource, only: ToolFilter) -> None:
        self.source = source
        self.only = only

    def list_tools(self) -> Sequence[ToolSpec]:
        """The permitted tools: the same sequence until the source's list changes (``narrow``)."""
        return self.only.narrow(self.source.list_tools())

    async def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None
    ) -> ToolResult:
        if not self.only.permits(name):
            return self.unknown(name)
        return await self.source.call_tool(name, arguments, timeout=timeout)

    async def live_spec(self, name: str) -> ToolSpec | ToolResult:
        """The source's live definition (``LiveToolSource``) of a permitted tool; a source that
        is not live has only the definitions it lists."""
        if not self.only.permits(name):
            return self.unknown(name)
        if isinstance(self.source, LiveToolSource):
            return await self.source.live_spec(name)
        spec = next((spec for spec in self.list_tools() if spec.name == name), None)
        return spec if spec is not None else self.unknown(name)

    def unknown(self, name: str) -> ToolResult:
        """The answer for a tool that is not this caller's: as for a tool that does not exist."""
        names = sorted(spec.name for spec in self.list_tools())
        if not names:
            return ToolResult(f"unknown tool {name!r}: no tools are available", is_error=True)
        shown = ", ".join(names[:_MAX_LISTED_NAMES])
        more = f" and {len(names) - _MAX_LISTED_NAMES} more" if len(names) > _MAX_LISTED_NAMES else ""
        return ToolResult(f"unknown tool {name!r}. Available tools: {shown}{more}", is_error=True)
