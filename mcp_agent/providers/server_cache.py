"""What each model server is, remembered on disk so that ``mcp-agent query`` does not ask every time.

One JSON file in the state folder (``_paths.state_dir()``), ``server-info.json``::

    {"version": 1, "entries": {"http://127.0.0.1:8080/v1 | qwen3:8b": {"at": 1796123509.2, "info": {...}}}}

keyed by the normalised base URL without its user info and the model (the context window is the
model's), each entry good for ``TTL_SECONDS`` (a server restarted with another ``--ctx-size`` is
asked again soon). Only what a server answered is kept: a server that did not answer at all is
asked again next time. Reading and writing never raise: a missing, corrupt or unwritable file
only means asking again (logged). Writes go to a temporary file renamed into place, so a reader
never sees half a file, and the file is the user's alone (``_paths.write_private``).

No credential is written: the key and a stored tokenizer URL carry no user info (a loaded entry
gets the endpoint's back, ``known_server``), and every other known secret in an entry (a
server's evidence quoting its URL) is masked (``_redact.mask_secrets_in``).

``known_server`` is the one call the rest uses: the cached entry while it is fresh, else
``identify.identify_server`` and store. ``remember`` adds what was learned later (``doctor``'s
check that a server drops tools) to a fresh entry.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .._redact import mask_secrets_in
from ..config import LLMConfig
from ..state.folder import write_private
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
    """The key of ``llm``'s server and model: the normalised base URL (without user info) and the model name."""
    return f"{_without_userinfo(resolve_endpoint(llm).base_url)} | {llm.model}"


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])) if "@" in parts.netloc else url


def _with_userinfo_of(url: str, base_url: str) -> str:
    """``url`` (stored without user info) with the user info of ``base_url``, the endpoint's now."""
    userinfo = urlsplit(base_url).netloc.rpartition("@")[0]
    parts = urlsplit(url)
    if not userinfo or "@" in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


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


def load_cached(
    path: Path, key: str, *, now: float | None = None, ttl: float = TTL_SECONDS
) -> ServerInfo | None:
    """The fresh entry for ``key`` in the cache file at ``path`` (``source`` "cache"), else None."""
    entry = _read(path).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), int | float):
        return None
    now = time.time() if now is None else now
    if not 0 <= now - entry["at"] <= ttl or not isinstance(entry.get("info"), dict):
        return None
    return replace(ServerInfo.from_dict(entry["info"]), source="cache")


def store(
    path: Path, key: str, info: ServerInfo, *, now: float | None = None, ttl: float = TTL_SECONDS
) -> None:
    """Keep ``info`` for ``key`` (dropping stale entries); never raises."""
    now = time.time() if now is None else now
    entries = {
        name: entry
        for name, entry in _read(path).items()
        if isinstance(entry, dict)
        and isinstance(entry.get("at"), int | float)
        and 0 <= now - entry["at"] <= ttl
    }
    if info.tokenize_url is not None:
        info = replace(info, tokenize_url=_without_userinfo(info.tokenize_url))
    entries[key] = {"at": now, "info": info.to_dict()}
    newest = sorted(entries.items(), key=lambda item: item[1]["at"])[-_MAX_ENTRIES:]
    try:
        write_private(path, json.dumps(mask_secrets_in({"version": 1, "entries": dict(newest)})))
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
        if cached.tokenize_url is not None:
            cached = replace(
                cached, tokenize_url=_with_userinfo_of(cached.tokenize_url, resolve_endpoint(llm).base_url)
            )
        return cached
    info = await identify_server(llm, client)
    if path is not None and info.source in ("probe", "port"):
        store(path, key, info)
    return info
