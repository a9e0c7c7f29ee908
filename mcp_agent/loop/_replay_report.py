"""What a replay reports (``loop/_replay.py``): the first ``Divergence``, in a ``ReplayReport``.

Plain values, with ``to_dict`` for ``mcp-agent replay --json`` and ``describe`` for people.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..messages import JSONObject


@dataclass(frozen=True)
class Divergence:
    """Where the replayed run first did something other than the recorded one.

    Attributes:
        at: the point: ``model call 2``, ``tool call echo__add after model call 1``,
            ``tool_call_ended of call c1 (round 1)``, ``end``.
        what: one line saying what differs.
        diff: a readable diff (recorded ``-``, now ``+``), or "".
    """

    at: str
    what: str
    diff: str = ""

    def to_dict(self) -> JSONObject:
        return {"at": self.at, "what": self.what, "diff": self.diff}


@dataclass(frozen=True)
class ReplayReport:
    """The outcome of a replay. ``identical``: no divergence."""

    path: str
    divergence: Divergence | None
    termination_reason: str
    recorded_termination_reason: str | None
    model_calls: int
    recorded_model_calls: int
    tool_calls: int
    recorded_tool_calls: int
    settings: str
    """``recording`` or the config file the replay used."""
    setting_changes: tuple[str, ...] = ()
    ms: float = 0.0

    @property
    def identical(self) -> bool:
        return self.divergence is None

    def to_dict(self) -> JSONObject:
        return {
            "path": self.path,
            "identical": self.identical,
            "divergence": None if self.divergence is None else self.divergence.to_dict(),
            "termination_reason": self.termination_reason,
            "recorded_termination_reason": self.recorded_termination_reason,
            "model_calls": self.model_calls,
            "recorded_model_calls": self.recorded_model_calls,
            "tool_calls": self.tool_calls,
            "recorded_tool_calls": self.recorded_tool_calls,
            "settings": self.settings,
            "setting_changes": list(self.setting_changes),
            "ms": self.ms,
        }

    def describe(self) -> str:
        lines = [
            f"replay of {self.path} (settings: {self.settings}): "
            + ("identical" if self.identical else "DIVERGED"),
            f"  model calls {self.model_calls}/{self.recorded_model_calls}, tool calls "
            f"{self.tool_calls}/{self.recorded_tool_calls}, ended {self.termination_reason} "
            f"(recorded: {self.recorded_termination_reason}), {self.ms:.1f} ms",
        ]
        lines += [f"  setting changed: {change}" for change in self.setting_changes]
        if self.divergence is not None:
            lines.append(f"first divergence at {self.divergence.at}: {self.divergence.what}")
            if self.divergence.diff:
                lines += ["  " + line for line in self.divergence.diff.splitlines()]
        return "\n".join(lines)
