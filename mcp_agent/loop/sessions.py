"""Conversation sessions: a small store interface and the in-memory store behind it.

A session is a conversation carried across queries: its transcript (always valid: every tool
call answered, so it can be sent to a strict server next time) and a lock, so that runs on one
session are serialised while different sessions run concurrently. Per-run state (failure
ledger, fingerprints, budgets) is never kept here: each query starts fresh.

``MemorySessionStore`` forgets a session idle for ``ttlSeconds`` and, beyond ``maxSessions``,
the least recently used idle ones of the owner holding the most (so one caller's flood of new
conversations evicts its own first, never another's while it holds more); an owner beyond
``max_per_owner`` loses its own least recently used idle one. A session with a run in progress
is never evicted. New ids
(``new_session_id``) are 24 random letters and digits (142 bits from ``secrets``), so every id
issued passes ``valid_session_id``, the one rule for ids a caller sends back. ``list()`` and
``delete()`` serve the gateway's ``/api/v1/sessions`` routes.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import secrets
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from .._types import JSONObject
from ..config import SessionsConfig
from ..messages import Message

logger = logging.getLogger(__name__)

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
"""What a session id may look like: 1-128 characters of letters, digits and ``. _ : @ -``,
starting with a letter or digit. Always matched whole (``fullmatch``: no trailing newline)."""
_ID_ALPHABET = string.ascii_letters + string.digits
_ID_LENGTH = 24


def new_session_id() -> str:
    """A new, unguessable session id: 24 random letters and digits (about 142 bits)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


def valid_session_id(value: str) -> bool:
    """Whether ``value`` is a well-formed session id (see ``SESSION_ID_PATTERN``)."""
    return SESSION_ID_PATTERN.fullmatch(value) is not None


@dataclass
class Session:
    """One conversation.

    Attributes:
        id: the session id.
        transcript: the conversation so far, system prompt first.
        lock: held by the run in progress; runs on one session wait for each other.
        created: wall time of creation.
        updated: wall time of the last save.
        runs: how many runs saved into it.
        owner: the caller that started it (the gateway's caller name), if any.
    """

    id: str
    transcript: tuple[Message, ...] = ()
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    runs: int = 0
    last_used: float = 0.0  # the store's clock, for eviction
    owner: str | None = None


@dataclass(frozen=True)
class SessionInfo:
    """A session as the gateway lists it."""

    id: str
    messages: int
    runs: int
    created: float
    updated: float
    busy: bool
    owner: str | None = None

    def to_dict(self) -> JSONObject:
        return {
            "id": self.id,
            "owner": self.owner,
            "messages": self.messages,
            "runs": self.runs,
            "created": self.created,
            "updated": self.updated,
            "busy": self.busy,
        }


class SessionStore(Protocol):
    """Where sessions live.

    ``open`` returns the session with this id, creating an empty one when there is none (an
    unknown or expired id starts afresh). ``create`` makes a session with a new, unguessable id,
    owned by ``owner``.
    ``save`` stores a run's transcript into a session that ``open`` returned (a session deleted
    meanwhile stays deleted).
    """

    def open(self, session_id: str) -> Session: ...

    def create(self, owner: str | None = None) -> Session: ...

    def get(self, session_id: str) -> Session | None: ...

    def save(self, session: Session, transcript: Sequence[Message]) -> None: ...

    def list(self) -> list[SessionInfo]: ...

    def delete(self, session_id: str) -> bool: ...


class MemorySessionStore:
    """Sessions in a dict, with idle expiry and a count cap.

    Args:
        ttl_seconds: a session idle this long is forgotten (0 = never).
        max_sessions: beyond this many, the least recently used idle sessions of the owner
            holding the most go (0 = no cap).
        max_per_owner: one owner's own least recently used idle session goes when it would hold
            more than this (0 = no cap of its own).
        clock: the monotonic clock used for expiry (injectable for tests).
    """

    def __init__(
        self,
        *,
        ttl_seconds: float = 1800,
        max_sessions: int = 1000,
        max_per_owner: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_sessions = max_sessions
        self.max_per_owner = max_per_owner
        self._clock = clock
        self._sessions: dict[str, Session] = {}

    @classmethod
    def from_config(cls, config: SessionsConfig) -> MemorySessionStore:
        return cls(ttl_seconds=config.ttl_seconds, max_sessions=config.max_sessions)

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, session_id: str) -> Session:
        if not session_id:
            raise ValueError("a session id must be a non-empty string")
        self._evict()
        session = self._sessions.get(session_id)
        if session is None:
            session = self._add(Session(session_id))
        session.last_used = self._clock()
        return session

    def create(self, owner: str | None = None) -> Session:
        self._evict()
        return self._add(Session(new_session_id(), owner=owner))

    def get(self, session_id: str) -> Session | None:
        self._evict()
        return self._sessions.get(session_id)

    def save(self, session: Session, transcript: Sequence[Message]) -> None:
        # a session deleted (or replaced) while the run went on is not put back: only the
        # object the run holds is updated
        session.transcript = tuple(transcript)
        session.updated = time.time()
        session.runs += 1
        session.last_used = self._clock()

    def list(self) -> list[SessionInfo]:
        self._evict()
        return [
            SessionInfo(s.id, len(s.transcript), s.runs, s.created, s.updated, s.lock.locked(), s.owner)
            for s in self._sessions.values()
        ]

    def delete(self, session_id: str) -> bool:
        return self._sessions.pop(session_id, None) is not None

    def _add(self, session: Session) -> Session:
        if self.max_per_owner:
            self._shrink_owner(session.owner, self.max_per_owner - 1)
        if self.max_sessions:
            self._shrink(self.max_sessions - 1)
        session.last_used = self._clock()
        self._sessions[session.id] = session
        return session

    def _evict(self) -> None:
        if self.ttl_seconds:
            cutoff = self._clock() - self.ttl_seconds
            for session in [s for s in self._sessions.values() if s.last_used <= cutoff]:
                if not session.lock.locked():
                    del self._sessions[session.id]

    def _shrink(self, keep: int) -> None:
        """Drop idle sessions until at most ``keep`` remain: always the least recently used one
        of the owner holding the most sessions."""
        excess = len(self._sessions) - keep
        if excess <= 0:
            return
        counts = collections.Counter(s.owner for s in self._sessions.values())
        idle: dict[str | None, list[Session]] = {}
        for s in sorted(self._sessions.values(), key=lambda s: s.last_used, reverse=True):
            if not s.lock.locked():
                idle.setdefault(s.owner, []).append(s)  # newest first: pop() takes the oldest
        for _ in range(excess):
            if not idle:
                return  # every session left is busy: nothing can go
            owner = max(idle, key=lambda o: counts[o])
            victim = idle[owner].pop()
            if not idle[owner]:
                del idle[owner]
            counts[owner] -= 1
            del self._sessions[victim.id]

    def _shrink_owner(self, owner: str | None, keep: int) -> None:
        """Drop ``owner``'s least recently used idle sessions until it holds at most ``keep``."""
        mine = [s for s in self._sessions.values() if s.owner == owner]
        idle = sorted((s for s in mine if not s.lock.locked()), key=lambda s: s.last_used)
        for session in idle[: max(len(mine) - keep, 0)]:
            del self._sessions[session.id]


class FileSessionStore(MemorySessionStore):
    """Sessions kept in memory and also written to one JSON file each in ``folder``.

    For the CLI, whose process ends after one query: ``mcp-agent query --session ID`` reads
    the conversation back from ``<folder>/<ID>.json``. An id that is not a plain name
    (letters, digits, ``_``, ``-``, up to 64 characters) is refused. A file that cannot be read
    starts the session afresh, with a warning.
    """

    def __init__(self, folder: str | os.PathLike[str], **kwargs: float | int) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.folder = os.fspath(folder)

    def _path(self, session_id: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", session_id):
            raise ValueError(f"session id {session_id!r}: use letters, digits, _ and - (at most 64)")
        return os.path.join(self.folder, f"{session_id}.json")

    def open(self, session_id: str) -> Session:
        path = self._path(session_id)
        known = self.get(session_id) is not None
        session = super().open(session_id)
        if not known and os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as file:
                    data = json.load(file)
                session.transcript = tuple(Message.from_dict(m) for m in data["transcript"])
                session.runs = int(data.get("runs", 0))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                logger.warning("session %s: cannot read %s (%s); starting afresh", session_id, path, exc)
        return session

    def save(self, session: Session, transcript: Sequence[Message]) -> None:
        super().save(session, transcript)
        path = self._path(session.id)
        os.makedirs(self.folder, exist_ok=True)
        data = {"id": session.id, "runs": session.runs, "transcript": [m.to_dict() for m in session.transcript]}
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as file:
            json.dump(data, file, ensure_ascii=False)
        os.replace(tmp, path)

    def delete(self, session_id: str) -> bool:
        found = super().delete(session_id)
        try:
            os.remove(self._path(session_id))
            found = True
        except FileNotFoundError:
            pass
        return found
