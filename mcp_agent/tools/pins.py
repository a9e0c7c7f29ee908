"""Tool integrity: each server's tool definitions pinned on first sight, a changed one withheld
until a person accepts it.

A tool's *definition* is what the model reads of it and what steers a call: its description,
``inputSchema``, ``outputSchema``, annotations and title, as the server sent them
(``definition``). The hub (``hub.py``) passes each server's list through ``ToolPins.offered``
before naming the tools, the one place the model's catalog (and an ``exposeTools`` client's
list) is built from:

- **First sight.** A server with no pin yet, listing live (a list from the tool cache pins
  nothing), is pinned as it lists: its tools are offered, the pin is written to the state store
  (``PinStore``, every backend). A tool new to a pinned server is pinned the same way (added to
  the pin). With ``policy.pinNewServers`` both are held instead, once any pin exists: a server
  (or a tool) first seen after pins exist waits for ``tools --accept`` like a changed one.
- **A change.** A tool whose definition differs from its pin is *withheld*: not offered, not
  callable (its name answers as held), its new text never reaches the model. Its other tools
  keep working. A tool the server no longer lists stays in the pin, so removing a tool and
  adding it back with another text is a change, not a first sight.
- **What was seen.** Each list that differs from the last one written is kept as the server's
  ``seen`` record: ``mcp-agent tools --diff`` compares it to the pin, ``--accept SERVER`` makes it
  the pin (``accept``), from any process sharing the state store. The gateway notices an accept
  written by another process on its next look: every ``RECHECK_SECONDS`` while it withholds
  something (one read of the pins; nothing while nothing is withheld). Its own REST accept
  (``/api/v1/tools/pins``, the dashboard) applies at once.

Each change found is logged (a warning naming the server and its tools) and counted
(``changes``, by server; ``/metrics``); the tool list that loses (or regains) the tools is
announced to clients as any tool-list change is (``notifications/tools/list_changed``).
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from ..exceptions import StateError
from ..messages import JSONObject
from ..state.base import PinStore
from ..state.records import ToolPin
from .presentation import ServerTool

logger = logging.getLogger(__name__)

RECHECK_SECONDS = 2.0
"""How often a gateway that withholds tools reads the pins again (another process's accept)."""
FIELDS = ("description", "inputSchema", "outputSchema", "annotations", "title")


def definition(tool: ServerTool) -> JSONObject:
    """What is pinned of ``tool``: its definition as the server sent it (JSON-ready)."""
    return {
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": dict(tool.annotations),
        "title": tool.title,
    }


def definitions(tools: Sequence[ServerTool]) -> dict[str, JSONObject]:
    """Each tool's ``definition`` by its MCP name."""
    return {tool.mcp_name: definition(tool) for tool in tools}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class ToolChange:
    """How one tool's definition differs from its pin.

    Attributes:
        tool: its MCP name.
        kind: ``changed``, ``added`` (not in the pin) or ``removed`` (no longer listed).
        fields: which of ``FIELDS`` changed (empty for added and removed).
    """

    tool: str
    kind: str
    fields: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.tool} ({', '.join(self.fields)})" if self.fields else f"{self.tool} ({self.kind})"


def changes(pinned: Mapping[str, Any], seen: Mapping[str, Any]) -> list[ToolChange]:
    """How ``seen`` differs from ``pinned`` (definitions by MCP name), by tool name."""
    found: list[ToolChange] = []
    for name in sorted(set(pinned) | set(seen)):
        if name not in seen:
            found.append(ToolChange(name, "removed"))
        elif name not in pinned:
            found.append(ToolChange(name, "added"))
        else:
            old, new = pinned[name] or {}, seen[name] or {}
            fields = tuple(f for f in FIELDS if _canonical(old.get(f)) != _canonical(new.get(f)))
            if fields:
                found.append(ToolChange(name, "changed", fields))
    return found


def _lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines() or [""]
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def diff_text(server: str, pinned: Mapping[str, Any], seen: Mapping[str, Any]) -> str:
    """A readable diff of ``seen`` against ``pinned``: per changed tool and field, a unified diff
    (descriptions line by line, schemas and annotations as indented JSON); empty when equal.
    Invisible characters show as ``\\u`` escapes (``hidden.visible``), so a diff shows them."""
    from .hidden import visible

    out: list[str] = []
    for change in changes(pinned, seen):
        if change.kind == "removed":
            out.append(f"{server}: tool {change.tool} is no longer listed")
            continue
        if change.kind == "added":
            out.append(f"{server}: tool {change.tool} is new")
            fields: Sequence[str] = [f for f in FIELDS if (seen[change.tool] or {}).get(f) is not None]
            old: Mapping[str, Any] = {}
        else:
            out.append(f"{server}: tool {change.tool} changed: {', '.join(change.fields)}")
            fields, old = change.fields, pinned[change.tool] or {}
        new = seen[change.tool] or {}
        for field in fields:
            before = [visible(line) for line in _lines(old.get(field))] if field in old else []
            after = [visible(line) for line in _lines(new.get(field))]
            out.extend(
                "  " + line.rstrip("\n")
                for line in difflib.unified_diff(
                    before, after, f"pinned {field}", f"now {field}", n=2, lineterm=""
                )
            )
    return "\n".join(out)


def _log_findings(server: str, seen: Mapping[str, JSONObject], before: Mapping[str, JSONObject]) -> None:
    """A warning for each tool new or changed in ``seen`` whose definition holds signs of hidden
    instructions (``hidden.py``)."""
    from .hidden import findings

    for name, spec in seen.items():
        if _canonical(before.get(name)) == _canonical(spec):
            continue
        found = findings(spec)
        if found:
            logger.warning(
                "server %s: tool %s has signs of hidden instructions: %s",
                server,
                name,
                "; ".join(map(str, found)),
            )


class ToolPins:
    """The hub's gate over one ``PinStore`` (see the module docstring).

    ``load`` reads the pins once before the hub's first list; ``offered`` (sync, no I/O) decides
    which of a server's tools are offered and queues what to write; ``run`` (in the hub's task
    group) writes it and rereads the pins while something is withheld; ``accept`` pins a
    server's last seen list.
    """

    def __init__(
        self,
        store: PinStore,
        *,
        pin_new_servers: bool = False,
        by: str = "",
        recheck: float = RECHECK_SECONDS,
    ) -> None:
        self.store = store
        self.pin_new_servers = pin_new_servers
        self._by = by or "first sight"
        self._recheck = recheck
        self._pinned: dict[str, dict[str, JSONObject]] = {}
        self._seen: dict[str, dict[str, JSONObject]] = {}
        self._had_pins = False
        self.held: dict[str, tuple[str, ...]] = {}
        """The tools withheld now, by server (MCP names)."""
        self.changes: dict[str, int] = {}
        """Changes found since start, by server (a server whose held tools grew counts once)."""
        self.accepted: dict[str, int] = {}
        """Accepts applied since start, by server."""
        self._writes: list[ToolPin] = []
        self._wake = anyio.Event()
        self._stopped = False
        self._version = 0
        """Bumped whenever a pin changes under ``offered``'s memory (``_apply``)."""
        self._memo: dict[str, tuple[tuple[ServerTool, ...], tuple[bool, int], tuple[ServerTool, ...]]] = {}
        self.on_change: Callable[[], None] = lambda: None
        """Called (sync) when the pins changed under the hub (an accept): the hub lists anew."""

    async def load(self) -> None:
        """Read every pin (once, before the first ``offered``).

        Raises:
            StateError: the store fails (the hub cannot offer tools it cannot check).
        """
        self._pinned = {pin.server: dict(pin.tools) for pin in await self.store.list("pinned")}
        self._seen = {pin.server: dict(pin.tools) for pin in await self.store.list("seen")}
        self._had_pins = bool(self._pinned)

    def offered(
        self, server: str, tools: tuple[ServerTool, ...], *, from_cache: bool = False
    ) -> tuple[ServerTool, ...]:
        """The tools of ``server``'s list that may be offered; the rest are withheld (``held``).

        The same list (the same tuple: a server's list is a new one each time it lists) under
        the same pins is answered from memory: the hub asks at every change of any server."""
        memo = self._memo.get(server)
        if memo is not None and memo[0] is tools and memo[1] == (from_cache, self._version):
            return memo[2]
        offered = self._offered(server, tools, from_cache)
        self._memo[server] = (tools, (from_cache, self._version), offered)
        return offered

    def _offered(
        self, server: str, tools: tuple[ServerTool, ...], from_cache: bool
    ) -> tuple[ServerTool, ...]:
        seen = definitions(tools)
        pinned = self._pinned.get(server)
        if pinned is None and from_cache:
            return tools  # a cached list pins nothing: the live list will, or is held then
        if not from_cache and seen != self._seen.get(server):
            _log_findings(server, seen, self._seen.get(server) or {})
            self._seen[server] = seen
            self._write(ToolPin(server, "seen", seen, by=self._by))
        hold_new = self.pin_new_servers and self._had_pins
        if pinned is None:
            if not hold_new:
                self._pinned[server] = pinned = dict(seen)
                self._write(ToolPin(server, "pinned", pinned, by=self._by))
                logger.info(
                    "tools of server %s pinned on first sight: %s", server, ", ".join(sorted(seen)) or "none"
                )
            else:
                pinned = {}
        added = [name for name in seen if name not in pinned]
        if added and not hold_new and not from_cache:
            pinned = self._pinned[server] = {**pinned, **{name: seen[name] for name in added}}
            self._write(ToolPin(server, "pinned", pinned, by=self._by))
            logger.info("new tools of server %s pinned on first sight: %s", server, ", ".join(sorted(added)))
        held = tuple(
            sorted(name for name, spec in seen.items() if _canonical(pinned.get(name)) != _canonical(spec))
        )
        before = self.held.get(server, ())
        if held != before:
            if held:
                self.held[server] = held
            else:
                self.held.pop(server, None)
            if set(held) - set(before):
                self.changes[server] = self.changes.get(server, 0) + 1
                described = ", ".join(c.describe() for c in changes(pinned, seen) if c.tool in held)
                logger.warning(
                    "server %s: tool definitions changed since they were pinned, withheld until accepted "
                    "(mcp-agent tools --diff; mcp-agent tools --accept %s): %s",
                    server,
                    server,
                    described,
                )
            self._wake.set()
        return tuple(tool for tool in tools if tool.mcp_name not in held)

    def is_held(self, server: str, mcp_name: str) -> bool:
        return mcp_name in self.held.get(server, ())

    def _write(self, pin: ToolPin) -> None:
        self._writes = [w for w in self._writes if (w.server, w.kind) != (pin.server, pin.kind)] + [pin]
        self._wake.set()

    async def accept(self, server: str, *, by: str = "") -> ToolPin | None:
        """Pin ``server``'s last seen list (from the store: any process's sighting); None when
        none was seen. Applies here at once."""
        seen = await self.store.get(server, "seen")
        if seen is None:
            return None
        pin = ToolPin(server, "pinned", dict(seen.tools), by=by or "accept")
        await self.store.put(pin)
        self._apply({server: dict(pin.tools)})
        return pin

    def _apply(self, pinned: Mapping[str, dict[str, JSONObject]]) -> None:
        """Take pins written elsewhere; the hub lists anew when a held server's pin changed."""
        moved = [s for s, tools in pinned.items() if self._pinned.get(s) != tools]
        if not moved:
            return
        self._version += 1
        for server in moved:
            self._pinned[server] = pinned[server]
            if server in self.held:
                self.accepted[server] = self.accepted.get(server, 0) + 1
                logger.warning(
                    "server %s: tool definitions accepted: %s", server, ", ".join(self.held[server])
                )
        self.on_change()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write what ``offered`` queued, and reread the pins while tools are withheld, until
        cancelled. A store failure is logged and tried again (the tools stay withheld)."""
        task_status.started()
        failed = False
        while True:
            with anyio.move_on_after(self._recheck if self.held or failed else None):
                await self._wake.wait()
            self._wake = anyio.Event()
            failed = False
            try:
                while self._writes:
                    pin = self._writes[0]
                    await self.store.put(pin)
                    if self._writes and self._writes[0] is pin:
                        self._writes.pop(0)
                if self.held:
                    stored = {p.server: dict(p.tools) for p in await self.store.list("pinned")}
                    self._apply({s: stored[s] for s in self.held if s in stored})
            except StateError as exc:
                logger.warning("tool pins: the state store failed (%s); trying again", exc)
                failed = True
            if self._stopped:
                return

    def stop(self) -> None:
        """End ``run`` once it has written what is queued (the hub closes)."""
        self._stopped = True
        self._wake.set()


def pin_report(pinned: Sequence[ToolPin], seen: Sequence[ToolPin]) -> list[JSONObject]:
    """Per server with a pin or a sighting (by name): what its last seen list changes against
    its pin, as ``tools --diff`` prints it and ``GET /api/v1/tools/pins`` answers it:
    ``{"server", "pinned_at", "seen_at", "changes": [{"tool", "kind", "fields"}], "diff",
    "findings": [{"tool", "where", "what", "excerpt"}]}`` (findings: ``hidden.findings`` over the
    tools as last seen, or as pinned when none was seen)."""
    from .hidden import findings

    pins = {pin.server: pin for pin in pinned}
    seens = {pin.server: pin for pin in seen}
    report: list[JSONObject] = []
    for server in sorted(set(pins) | set(seens)):
        pin, sight = pins.get(server), seens.get(server)
        old = dict(pin.tools) if pin is not None else {}
        new = dict(sight.tools) if sight is not None else old
        found = [
            {"tool": name, **finding.to_dict()}
            for name, spec in sorted(new.items())
            for finding in findings(spec or {})
        ]
        listed = [c for c in changes(old, new) if c.kind != "removed"]
        report.append(
            {
                "server": server,
                "pinned_at": pin.at if pin is not None else None,
                "seen_at": sight.at if sight is not None else None,
                "changes": [{"tool": c.tool, "kind": c.kind, "fields": list(c.fields)} for c in listed],
                "diff": diff_text(server, old, new),
                "findings": found,
            }
        )
    return report
