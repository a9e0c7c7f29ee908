"""Conversations, approvals, run records and a session's paged results kept outside a run: the
seam and ``open_state``.

``open_state(url)`` picks the backend by the URL's scheme (``state.url`` in agent.json):

- ``memory://``: in this process only (tests, ``serve --stateless``, library use by default);
- ``sqlite:///PATH``: one SQLite file (``~`` expanded), the default for ``serve`` and
  ``query --session``;
- ``redis://HOST:PORT/DB`` (and ``rediss://``): shared by several gateway replicas; needs the
  optional ``redis`` package (``pip install 'mcp-gateway-agent[redis]'``).

The backend modules are imported only when their scheme is asked for.
"""

from __future__ import annotations

import importlib
from urllib.parse import urlsplit

from ..exceptions import ConfigError
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
    "new_replica_id",
    "new_session_id",
    "open_state",
    "valid_session_id",
]

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
