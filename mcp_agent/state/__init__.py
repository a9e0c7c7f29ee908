"""Conversations, approvals, run records and a session's paged results kept outside a run: the
seam, and opening a store.

``open_state(url)`` picks the backend by the URL's scheme (``state.url`` in agent.json):

- ``memory://``: in this process only (tests, ``serve --stateless``, library use by default);
- ``sqlite:///PATH``: one SQLite file (``~`` expanded), the default for ``serve`` and
  ``query --session``;
- ``redis://HOST:PORT/DB`` (and ``rediss://``): shared by several gateway replicas; needs the
  optional ``redis`` package (``pip install 'mcp-gateway-agent[redis]'``).

The backend modules are imported only when their scheme is asked for. ``open_agent_state(config)``
opens the store agent.json names, with the limits it sets (``state_limits``), for the gateway
and the command line.

``import_session_files`` moves in the conversations ``query --session`` kept as JSON files before
the state store: ``<state dir>/sessions/ID.json`` (``{"id", "runs", "transcript"}``). It copies
each into a ``SessionStore`` (unless the store already has one under that id: the store wins),
then renames the folder to ``sessions.imported``, so the import runs once and the files stay on
disk, untouched, for whoever wants them. A file that cannot be read is left there and named in
the log; the folder is then kept, and the next start tries that file again. What goes into the
store has its known secrets masked, as every transcript the Agent keeps
(``loop/_records.kept_transcript``).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .._redact import mask_secrets_in
from ..exceptions import ConfigError
from ..messages import Message
from .base import ApprovalStore, PageStore, RunStore, SessionStore, State
from .records import (
    INTERRUPTED,
    Approval,
    Decision,
    Page,
    PageInfo,
    Recovery,
    RunRecord,
    Session,
    SessionInfo,
    StateLimits,
    new_replica_id,
    new_session_id,
    valid_session_id,
)

if TYPE_CHECKING:
    from ..config import AgentConfig

__all__ = [
    "INTERRUPTED",
    "Approval",
    "ApprovalStore",
    "Decision",
    "Page",
    "PageInfo",
    "PageStore",
    "Recovery",
    "RunRecord",
    "RunStore",
    "Session",
    "SessionInfo",
    "SessionStore",
    "State",
    "StateLimits",
    "import_session_files",
    "new_replica_id",
    "new_session_id",
    "open_agent_state",
    "open_state",
    "state_limits",
    "valid_session_id",
]

logger = logging.getLogger(__name__)

IMPORTED_SUFFIX = ".imported"

_BACKENDS = {
    "memory": ("memory", "open_memory_state"),
    "sqlite": ("sqlite", "open_sqlite_state"),
    "redis": ("redis", "open_redis_state"),
    "rediss": ("redis", "open_redis_state"),
}


async def open_state(url: str, *, limits: StateLimits | None = None, replica: str | None = None) -> State:
    """The state backend ``url`` names, opened (close it with ``aclose``).

    Args:
        url: ``memory://``, ``sqlite:///PATH`` or ``redis://HOST:PORT/DB``.
        limits: retention, caps and the lease length; the defaults when None.
        replica: this process's replica id (a new one when None).

    Raises:
        ConfigError: an unknown scheme, a missing optional package, or a store that cannot be
            opened (unreadable, corrupt, unreachable); the message names ``state.url``.
    """
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme not in _BACKENDS:
        raise ConfigError(
            f"state.url {url!r}: unknown scheme {scheme or '(none)'!r}; use memory://, "
            "sqlite:///PATH or redis://HOST:PORT/DB",
            "state.url",
        )
    module_name, opener = _BACKENDS[scheme]
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ImportError as exc:
        if module_name == "redis":
            raise ConfigError(
                f"state.url {url!r} needs the redis package ({exc}); "
                "install it with: pip install 'mcp-gateway-agent[redis]'",
                "state.url",
            ) from None
        raise
    opened: State = await getattr(module, opener)(url, limits=limits or StateLimits(), replica=replica)
    return opened


def state_limits(config: AgentConfig, *, per_owner: int = 0) -> StateLimits:
    """The state's limits from agent.json (``sessions`` and ``state``)."""
    return StateLimits(
        session_ttl_seconds=config.sessions.ttl_seconds,
        max_sessions=config.sessions.max_sessions,
        max_sessions_per_owner=per_owner,
        max_session_bytes=config.state.max_session_bytes,
        max_runs=config.state.runs.max_count,
        max_run_age_days=config.state.runs.max_age_days,
        lease_seconds=config.state.lease_seconds,
        max_paged_bytes_total=config.limits.max_paged_bytes_total,
    )


async def open_agent_state(config: AgentConfig, *, default: str | os.PathLike[str] | None) -> State:
    """The state ``config`` names (``state.url``); without one, SQLite on ``default`` (a file),
    or memory when ``default`` is None. Close it with ``aclose``.

    Raises:
        ConfigError: the store cannot be opened; the message names ``state.url``.
    """
    return await open_state(config.state_url(default), limits=state_limits(config))


async def import_session_files(folder: str | os.PathLike[str], sessions: SessionStore) -> int:
    """Copy the JSON conversations in ``folder`` into ``sessions`` once; how many were copied.

    Never raises for a bad file (it is logged and left in place); raises ``StateError`` when the
    store fails (the folder is then left as it was, to try again).
    """
    path = Path(folder)
    if not path.is_dir():
        return 0
    imported, failed = 0, 0
    for file in sorted(path.glob("*.json")):
        session_id = file.stem
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            transcript = tuple(Message.from_dict(mask_secrets_in(m)) for m in data["transcript"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("session file %s cannot be read (%s); left in place", file, exc)
            failed += 1
            continue
        if not valid_session_id(session_id):
            logger.warning("session file %s: %r is not a session id; left in place", file, session_id)
            failed += 1
            continue
        if await sessions.get(session_id) is not None:
            continue  # the store has it already: the store wins
        async with sessions.hold(session_id) as session:
            if session.transcript:
                continue
            await sessions.save(session, transcript)
        imported += 1
    if not failed:
        target = path.with_name(path.name + IMPORTED_SUFFIX)
        try:
            path.rename(target)
        except OSError as exc:  # a second import only re-reads files the store has
            logger.warning("could not rename %s after importing it: %s", path, exc)
    if imported:
        logger.info("imported %d conversation(s) from %s into the state store", imported, path)
    return imported
