"""The replay: BFCL's multi-turn ground truth, turn by turn, as ``agent_query`` calls.

For each set of API classes the entries involve (20 sets over the 800 entries), one real
``mcp-agent serve`` on 127.0.0.1 runs one ``server.py`` per class (tools under their own names)
against the replay model (``model.ReplayModel`` behind a ``FakeModelServer``); one real MCP client
(the SDK's ``ClientSession`` over Streamable HTTP) replays the entries of that set one after the
other. Per entry:

1. every class's server loads the entry's initial state, offering the class's functions less
   the entry's ``excluded_function`` and its missed functions (control ``load``); the harness
   waits until the gateway lists exactly those (``GET /api/v1/tools``);
2. per turn: at a missed function's turn the server offers it (control ``hide``, the tool list
   grows by ``notifications/tools/list_changed``) and the harness waits for the gateway to list
   it; the model is given the turn's ground-truth calls; one ``agent_query`` (the turn's user
   messages as ``query``; the ``session_id`` of the first answer on every later turn) runs them;
   then every server hands over its live instance and the calls that reached it (control
   ``take``);
3. BFCL's checkers judge it (``judge``: the live state per turn, and ``multi_turn_checker``).

Sharing a gateway among entries is faithful: each entry is its own ``agent_query`` conversation,
and each starts from fresh instances. The replay model makes one call per round, in order.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import mcp.types as types

from bench._gateway import serving
from bench.bfcl.multi_turn import control
from bench.bfcl.multi_turn.data import CATEGORIES, Entry, function_names, load_entries, parse_call
from bench.bfcl.multi_turn.judge import Turn, bfcl_verdict, forget, live_verdict
from bench.bfcl.multi_turn.known import KNOWN
from bench.bfcl.multi_turn.model import NAME, ReplayModel

SERVER = str(Path(__file__).resolve().parent / "server.py")
LIMITS = {
    # the gateway's defaults, but for the rounds: two turns have 34 ground-truth calls, one per
    # round, plus the answer (no turn repeats a call three times: the loop guard stays on)
    "maxRounds": 40,
    "timeoutSeconds": 240,
}
LIST_WAIT = 30.0
"""Seconds to wait for the gateway to list a server's new tools."""


def gateway_config(folder: Path, classes: Sequence[str], endpoint: str) -> dict[str, Any]:
    return {
        "llm": {"endpoint": endpoint, "model": NAME, "stream": False, "maxRetries": 0},
        "mcpServers": {
            name: {
                "command": sys.executable,
                "args": [SERVER, name, str(folder / f"{name}.sock")],
                "toolPrefix": "",
            }
            for name in classes
        },
        "limits": LIMITS,
    }


@contextmanager
def running_gateway(folder: Path, classes: Sequence[str], endpoint: str) -> Iterator[str]:
    """``mcp-agent serve`` with one API server per class; yields its base URL."""
    with serving(folder, gateway_config(folder, classes, endpoint)) as url:
        yield url


@asynccontextmanager
async def mcp_session(url: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@dataclass
class Outcome:
    """One entry's replay."""

    id: str
    seconds: float
    why: str | None = None
    """None: BFCL's expected state was reached (both verdicts pass)."""
    offered: list[list[list[str]]] = field(default_factory=list)
    """Per turn, the tool names the model was offered on each request."""


@dataclass
class Replayer:
    """Replays entries through one gateway (``url``) whose servers listen at ``folder``."""

    url: str
    folder: Path
    classes: Sequence[str]
    session: Any
    model: ReplayModel
    http: httpx.AsyncClient
    tags: Iterator[int] = field(default_factory=itertools.count)
    keep_offered: bool = False

    def _socket(self, class_name: str) -> str:
        return str(self.folder / f"{class_name}.sock")

    async def _ask(self, class_name: str, request: dict[str, Any]) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(control.ask, self._socket(class_name), request)

    async def _listed(self, hidden: dict[str, frozenset[str]]) -> None:
        """Wait until the gateway lists each server's tools less ``hidden``."""
        want = {c: {n for n in function_names(c) if n not in hidden[c]} for c in self.classes}
        deadline = time.monotonic() + LIST_WAIT
        while True:
            response = await self.http.get(f"{self.url}/api/v1/tools")
            response.raise_for_status()
            have: dict[str, set[str]] = {c: set() for c in self.classes}
            for tool in response.json()["tools"]:
                have.setdefault(tool["server"], set()).add(tool["mcp_name"])
            if have == want:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the gateway did not list the expected tools in {LIST_WAIT:g} s: {have} != {want}"
                )
            await anyio.sleep(0.01)

    async def _agent_query(self, query: str, session_id: str | None) -> tuple[str | None, str | None]:
        """One turn: the conversation id and, when the run failed, why."""
        arguments: dict[str, Any] = {"query": query}
        if session_id:
            arguments["session_id"] = session_id
        result = await self.session.call_tool("agent_query", arguments)
        structured = result.structured_content or {}
        text = "\n".join(part.text for part in result.content if isinstance(part, types.TextContent))
        return structured.get("session_id") or session_id, (text[:300] if result.is_error else None)

    async def replay(self, entry: Entry, script: Sequence[Sequence[str]] | None = None) -> Outcome:
        """Replay ``entry``: the model makes ``script``'s calls per turn (default: the ground truth)."""
        calls = entry.ground_truth if script is None else script
        started = time.perf_counter()
        tag = f"replay{next(self.tags)}"
        hidden = entry.hidden(-1)
        for class_name in entry.classes:
            await self._ask(
                class_name,
                {
                    "op": "load",
                    "config": entry.config(class_name),
                    "long_context": entry.long_context,
                    "hidden": sorted(hidden[class_name]),
                },
            )
        await self._listed(hidden)
        outcome = Outcome(entry.id, 0.0)
        turns: list[Turn] = []
        session_id: str | None = None
        for index, query in enumerate(entry.turns()):
            if index in entry.missed:
                hidden = entry.hidden(index)
                for class_name in entry.classes:
                    await self._ask(class_name, {"op": "hide", "hidden": sorted(hidden[class_name])})
                await self._listed(hidden)
            self.model.start([parse_call(call, entry.classes) for call in calls[index]])
            session_id, failed = await self._agent_query(query, session_id)
            if self.keep_offered:
                outcome.offered.append(self.model.offered)
            turn = Turn()
            for class_name in entry.classes:
                taken = await self._ask(class_name, {"op": "take"})
                turn.instances[class_name] = control.unpack(taken["instance"])
                turn.calls.extend(taken["calls"])
            turn.calls.sort(key=lambda call: call["at"])
            turns.append(turn)
            if failed is not None:
                outcome.why = f"turn {index}: agent_query failed: {failed}"
                break
        try:
            if outcome.why is None:
                live = live_verdict(entry, turns, f"{tag}_live")
                judged = bfcl_verdict(entry, turns, f"{tag}_bfcl")
                if live is not None or judged is not None:
                    outcome.why = "; ".join(
                        f"{name}: {why}"
                        for name, why in (("live", live), ("bfcl", judged))
                        if why is not None
                    )
        finally:
            forget(f"{tag}_live")
            forget(f"{tag}_bfcl")
        outcome.seconds = time.perf_counter() - started
        return outcome


def select(categories: Sequence[str], limit: int | None, ids: Sequence[str] = ()) -> list[Entry]:
    """The entries to run: the first ``limit`` of each category (all: None), or those named."""
    chosen: list[Entry] = []
    for category in categories:
        entries = load_entries(category)
        if ids:
            entries = [entry for entry in entries if entry.id in ids]
        chosen.extend(entries if limit is None else entries[:limit])
    return chosen


async def replay_group(
    url: str,
    folder: Path,
    classes: Sequence[str],
    entries: Sequence[Entry],
    model: ReplayModel,
    keep_offered: bool,
    scripts: Mapping[str, Sequence[Sequence[str]]],
) -> list[Outcome]:
    async with mcp_session(f"{url}/mcp") as session, httpx.AsyncClient(timeout=30) as http:
        replayer = Replayer(url, folder, classes, session, model, http, keep_offered=keep_offered)
        return [await replayer.replay(entry, scripts.get(entry.id)) for entry in entries]


def run_multi_turn(
    categories: Sequence[str] = CATEGORIES,
    limit: int | None = None,
    *,
    ids: Sequence[str] = (),
    keep_offered: bool = False,
    scripts: Mapping[str, Sequence[Sequence[str]]] | None = None,
) -> dict[str, Any]:
    """Replay the ground truth of ``categories`` (the first ``limit`` entries of each; all when
    None; only ``ids`` when given) and judge it with BFCL's checkers.

    Returns per category the entries run, the share that reached BFCL's expected state, the
    failing ids with why (and, for the ones BFCL's own data makes fail, ``known``: the reason from
    ``known.KNOWN``), the failures not so explained (``unexplained``, also pooled: the target is
    none) and the seconds per entry; ``outcomes`` (``Outcome`` per entry) only
    with ``keep_offered`` (then each also holds the tools offered per turn). ``scripts`` (for
    tests) makes the model call other calls than the ground truth for the entries it names: entry
    id -> per turn the call strings.
    """
    from tests.fakes.model_server import running_model_server

    for category in categories:
        if category not in CATEGORIES:
            raise ValueError(f"unknown multi-turn category {category!r}: choose from {', '.join(CATEGORIES)}")
    started = time.perf_counter()
    entries = select(categories, limit, ids)
    groups: dict[tuple[str, ...], list[Entry]] = {}
    for entry in entries:
        groups.setdefault(tuple(sorted(entry.classes)), []).append(entry)
    outcomes: dict[str, Outcome] = {}
    model = ReplayModel()
    with running_model_server() as server:
        server.handler = model
        for classes, members in groups.items():
            print(f"bfcl multi-turn: {len(members)} entries over {', '.join(classes)}", file=sys.stderr)
            with (
                tempfile.TemporaryDirectory(prefix="bfcl-mt-") as name,
                running_gateway(Path(name), classes, server.base_url) as url,
            ):
                for outcome in anyio.run(
                    replay_group, url, Path(name), classes, members, model, keep_offered, scripts or {}
                ):
                    outcomes[outcome.id] = outcome
            server.requests.clear()  # the fake server keeps every request; a group's are done
    result: dict[str, Any] = {
        "benchmark": "BFCL v4 multi-turn ground truth replayed through agent_query sessions",
        "entries": len(entries),
        "gateways": len(groups),
        "categories": {},
    }
    for category in categories:
        rows = [outcomes[entry.id] for entry in entries if entry.category == category]
        if not rows:
            continue
        failed = [
            {"id": row.id, "why": row.why, **({"known": KNOWN[row.id]} if row.id in KNOWN else {})}
            for row in rows
            if row.why is not None
        ]
        result["categories"][category] = {
            "entries": len(rows),
            "passed": round(1 - len(failed) / len(rows), 4),
            "failed": failed,
            "unexplained": [row["id"] for row in failed if "known" not in row],
            "seconds_per_entry": round(sum(row.seconds for row in rows) / len(rows), 3),
        }
    passed = sum(1 for outcome in outcomes.values() if outcome.why is None)
    result["passed"] = round(passed / len(entries), 4) if entries else None
    result["unexplained"] = [name for row in result["categories"].values() for name in row["unexplained"]]
    result["known_that_passed"] = [
        entry.id for entry in entries if entry.id in KNOWN and outcomes[entry.id].why is None
    ]
    result["seconds"] = round(time.perf_counter() - started, 1)
    if keep_offered:
        result["outcomes"] = outcomes
    return result
