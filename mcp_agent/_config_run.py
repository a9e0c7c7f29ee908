"""What bounds and gates one run: the ``limits`` and ``approvals`` sections of agent.json.

``Limits`` are the run's budgets and guards (**0 means off** for every number), which a
caller's request may only tighten (``Limits.tighten``). ``ApprovalsConfig`` names the tool
calls that wait for a human (``loop/approvals.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from ._config_model import ConfigModel


class Limits(ConfigModel):
    """Budgets and guards of one run. **0 means off** for every number here."""

    max_rounds: int = Field(default=10, ge=0)
    """At most this many model calls per run."""
    max_tokens: int = Field(default=100_000, ge=0)
    """Total tokens (prompt + completion, summed over the run's model calls)."""
    max_tool_calls: int = Field(default=50, ge=0)
    timeout_seconds: float = Field(default=240, ge=0)
    """Wall-clock deadline of the whole run. The default stays below the 300 s read timeout
    many MCP clients use, so a caller gets the run's own ``timeout`` answer, not its client's."""
    tool_timeout_seconds: float = Field(default=60, ge=0)
    """Deadline of one tool call, unless its server sets ``callTimeoutSeconds``."""
    max_result_chars: int = Field(default=16_000, ge=0)
    """A tool result longer than this is paged: the model gets the first page of this many
    characters, a handle and ``read_result`` for the rest (``pageResults``); else it is cut, with a note."""
    page_results: bool = True
    """Page long results (``loop/pages.py``); false cuts them, with a note, as before."""
    max_paged_bytes: int = Field(default=8_000_000, ge=0)
    """The most bytes the paged results of one run (or one session) hold; its least recently
    read results go first, and a bigger result is kept up to this size."""
    max_paged_bytes_total: int = Field(default=64_000_000, ge=0)
    """The most bytes paged results hold in all: those of runs without a session in the Agent's
    memory, those of sessions in the state store; least recently used go first. Read from the
    config when the Agent and the state start; a query's limits do not change it."""
    max_history_chars: int = Field(default=80_000, ge=0)
    """History is trimmed to this size before each model call."""
    max_parallel_tools: int = Field(default=4, ge=0)
    loop_threshold: int = Field(default=3, ge=0)
    """The N-th identical call (same tool, same arguments) in a run ends it as ``loop_detected``."""
    failure_hint_after: int = Field(default=2, ge=0)
    """After N consecutive failures of a tool its result tells the model not to retry."""
    disable_tool_after: int = Field(default=3, ge=0)
    """After N consecutive failures a tool is withdrawn for the rest of the run."""
    early_stop: bool = False
    """On a budget or loop stop, make one more model call without tools for a best-effort answer."""

    def tighten(self, other: Limits | Mapping[str, Any] | None) -> Limits:
        """These limits, made stricter by ``other`` (a client's request); never looser.

        For each number the smaller non-zero value wins (0 is "off", the loosest). ``early_stop``
        is taken from ``other`` when it sets it, since it changes no budget.
        """
        if other is None:
            return self
        if isinstance(other, Mapping):
            other = Limits.model_validate(other)
        given = other.model_fields_set
        values: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name not in given:
                continue
            mine, theirs = getattr(self, name), getattr(other, name)
            if name == "page_results":  # off (cutting) holds the least memory: either side may choose it
                values[name] = mine and theirs
            elif name == "early_stop" or (theirs and (not mine or theirs < mine)):
                values[name] = theirs
        return self.model_copy(update=values) if values else self


class ApprovalsConfig(ConfigModel):
    require: list[str] = Field(default_factory=list)
    """Globs on exposed tool names whose calls wait for a human's approval."""
    require_destructive: bool = False
    """Also gate every tool whose MCP annotations say ``destructiveHint: true`` (and not
    ``readOnlyHint: true``)."""
    timeout_seconds: float = Field(default=60, ge=0)
    """An unanswered approval is denied after this long (0 = wait for the run's deadline)."""
    max_pending: int = Field(default=64, ge=0)
    """At most this many approvals wait at once (each caller its share); one more is denied at
    once (0 = no cap)."""
    self_approval: bool = False
    """Let a caller without the ``approve`` scope answer, by MCP elicitation, the approvals of its
    own runs. Off by default: many MCP clients answer elicitations automatically, which would
    remove the human check. Callers with ``approve`` (and a gateway without tokens) are asked
    either way."""
