"""The ``sessions`` and ``state`` sections of agent.json: what is kept, where, and for how long.

``SessionsConfig`` bounds conversations (idle time, count); ``StateConfig`` says where
conversations, approvals and run records are stored (``mcp_agent.state``) and how long run
records are kept (``RunRetentionConfig``).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ._config_model import ConfigModel


class SessionsConfig(ConfigModel):
    ttl_seconds: float = Field(default=1800, ge=0)
    """A conversation idle this long is forgotten (0 = never)."""
    max_sessions: int = Field(default=1000, ge=0)
    """Beyond this count the oldest idle conversations are dropped, first those of the caller
    holding the most, and no caller holds more than its share (0 = no cap)."""


class RunRetentionConfig(ConfigModel):
    max_count: int = Field(default=10_000, ge=0)
    """Run records kept; the oldest finished ones go first (0 = no cap)."""
    max_age_days: float = Field(default=30, ge=0)
    """Finished run records (and decided approvals) older than this go (0 = kept forever)."""


class StateConfig(ConfigModel):
    """Where conversations, approvals and run records are kept (``mcp_agent.state``)."""

    url: str | None = None
    """``sqlite:///PATH`` (``~`` expanded; a relative path is relative to this file's folder),
    ``redis://HOST:PORT/DB`` or ``memory://``. Unset: ``serve`` and ``query --session`` use
    ``sqlite:///$MCP_AGENT_STATE_DIR/state.db``; an ``Agent`` built in code keeps it in memory."""
    max_session_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    """A conversation whose stored transcript (JSON) is bigger is not saved; the run still
    answers, and says so (0 = no cap)."""
    lease_seconds: float = Field(default=30, ge=1)
    """A session lock or a gateway's liveness lease lapses this long after its holder stopped
    renewing it (a holder that died, on another host; on this host a dead process is seen at once)."""
    max_outage_seconds: float = Field(default=300, ge=0)
    """A store that keeps failing (every heartbeat, a third of ``lease_seconds`` apart) for this
    long makes ``serve`` stop and exit 1, so that its supervisor restarts it: a restart reconnects
    (a Redis that failed over to another address), or fails at start with an error saying what is
    wrong with the store, where a process left running would only answer errors. Shorter
    outages (a Redis restart, a disk full until logs rotate) are ridden out: running queries go
    on, and the store is used again once it works. 0 = never exit for this."""
    runs: RunRetentionConfig = Field(default_factory=RunRetentionConfig)

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is not None and value.split("://", 1)[0].lower() not in ("memory", "sqlite", "redis", "rediss"):
            raise ValueError(f"{value!r}: use sqlite:///PATH, redis://HOST:PORT/DB or memory://")
        return value
