"""What each model server is, remembered on disk so that ``mcp-agent query`` does not ask every time.

One JSON file in the state folder (``_paths.state_dir()``), ``server-info.json``::

    {"version": 1, "entries": {"http://127.0.0.1:8080/v1 | qwen3:8b": {"at": 1796123509.2, "info": {...}}}}

keyed by the normalised base URL and the model (the context window is the model's), each entry
good for ``TTL_SECONDS`` (a server restarted with another ``--ctx-size`` is asked again soon).
Only what a server answered is kept: a server that did not answer at all is asked again next
time. Reading and writing never raise: a missing, corrupt or unwritable file only means asking
again (logged). Writes go to a temporary file renamed into place, so a reader never sees half a
file.

``known_server`` is the one call the rest uses: the cached entry while it is fresh, else
``identify.identify_server`` and store. ``remember`` adds what was learned later (``doctor``'s
check that a server drops tools) to a fresh entry.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from ..config import LLMConfig
from .endpoints import resolve_endpoint
from .identify import identify_server
from .server_info import ServerInfo

__all__ = ["CACHE_FILE", "TTL_SECONDS", "cache_key", "known_server", "load_cached", "remember", "store"]

logger = logging.getLogger(__name__)

CACHE_FILE = "server-info.json"
TTL_SECONDS = 600.0
"""How long an identification is trusted (ten minutes)."""
_MAX_ENTRIES = 64


def cache_key(llm: LLMConfig) -> str:
    """The key of ``llm``'s server and model: the normalised base URL and the model name."""
    return f"{resolve_endpoint(llm).base_url} | {llm.model}"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("ignoring the server-info cache %s: %s", path, exc)
        return {}
    entries = data.get("entries") if isinstance(data, dict) and data.get("version") == 1 else None
    return entries if isinstance(entries, dict) else {}


def load_cached(path: Path, key: str, *, now: float | None = None, ttl: float = TTL_SECONDS) -> ServerInfo | None:
    """The fresh entry for ``key`` in the cache file at ``path`` (``source`` "cache"), else None."""
    entry = _read(path).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), int | float):
        return None
    now = time.time() if now is None else now
    if not 0 <= now - entry["at"] <= ttl or not isinstance(entry.get("info"), dict):
        return None
    return replace(ServerInfo.from_dict(entry["info"]), source="cache")


def store(path: Path, key: str, info: ServerInfo, *, now: float | None = None, ttl: float = TTL_SECONDS) -> None:
    """Keep ``info`` for ``key`` (dropping stale entries); never raises."""
    now = time.time() if now is None else now
    entries = {
        name: entry
        for name, entry in _read(path).items()
        if isinstance(entry, dict) and isinstance(entry.get("at"), int | float) and 0 <= now - entry["at"] <= ttl
    }
    entries[key] = {"at": now, "info": info.to_dict()}
    newest = sorted(entries.items(), key=lambda item: item[1]["at"])[-_MAX_ENTRIES:]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".server-info.", delete=False) as out:
            json.dump({"version": 1, "entries": dict(newest)}, out)
        os.replace(out.name, path)
    except OSError as exc:
        logger.warning("cannot write the server-info cache %s: %s", path, exc)


def remember(path: Path, llm: LLMConfig, **changes: Any) -> None:
    """Add what was learned about ``llm``'s server (``tools_dropped=True``) to its fresh entry."""
    key = cache_key(llm)
    cached = load_cached(path, key)
    if cached is not None:
        store(path, key, replace(cached, **changes))


async def known_server(
    llm: LLMConfig, client: httpx.AsyncClient, *, state_dir: Path | None, refresh: bool = False
) -> ServerInfo:
    """What ``llm``'s server is: from the cache in ``state_dir`` while fresh, else asked (and kept).

    Args:
        llm: the ``llm`` section (endpoint, model, headers).
        client: the HTTP client to ask with.
        state_dir: the state folder; None: no cache.
        refresh: ask even when a fresh entry exists (``doctor``).
    """
    path = state_dir / CACHE_FILE if state_dir is not None else None
    key = cache_key(llm)
    if path is not None and not refresh and (cached := load_cached(path, key)) is not None:
        return cached
    info = await identify_server(llm, client)
    if path is not None and info.source in ("probe", "port"):
        store(path, key, info)
    return info
