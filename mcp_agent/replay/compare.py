"""Comparing a replay with its recording, and the report of what differs (pure: no I/O).

``request_difference`` names the first difference between a recorded model request and the one
made now (a message, the tools offered, the request options); ``setting_changes`` lists the
settings a config changes; ``COMPARED`` says which fields of which events are behaviour, and
``where``/``event_what`` describe an event that differs. Values are compared as the recording
holds them (``plain``: JSON, known secrets masked); diffs show the recorded side as ``-``.

What is found is a ``Divergence`` (the first one), reported in a ``ReplayReport``: plain values,
with ``to_dict`` for ``mcp-agent replay --json`` and ``describe`` for people.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._plural import counted
from .._redact import mask_secrets
from ..messages import JSONObject

COMPARED: dict[str, tuple[str, ...]] = {
    "run_started": ("query",),
    "round_started": ("round",),
    "round_ended": ("round", "tool_calls"),
    "tool_call_started": ("round", "call_id", "name", "arguments"),
    "tool_call_ended": ("round", "call_id", "name", "verdict", "ok", "truncated", "pages", "total_chars"),
    "approval_requested": ("round", "call_id", "name"),
    "approval_resolved": ("call_id", "name", "approved"),
    "run_ended": ("termination_reason", "early_stopped", "rounds", "tool_calls"),
}
"""The events compared, and their fields that are behaviour (not timings, ids or config echoes)."""


def plain(value: Any) -> Any:
    """``value`` as the recording holds it: JSON, with known secrets masked."""
    return json.loads(mask_secrets(json.dumps(value, ensure_ascii=False, default=str)))


def _text_diff(old: str, new: str, old_name: str = "recorded", new_name: str = "now") -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="", n=2)
    return "\n".join(lines)


def json_diff(old: Any, new: Any) -> str:
    return _text_diff(json.dumps(old, indent=1, sort_keys=True), json.dumps(new, indent=1, sort_keys=True))


def request_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, str] | None:
    """What differs between a recorded model request and the one made now: (what, diff), or None."""
    old_tools = {tool["name"]: tool.get("digest") for tool in old.get("tools", [])}
    new_tools = {tool["name"]: tool.get("digest") for tool in new.get("tools", [])}
    old_messages, new_messages = list(old.get("messages", [])), list(new.get("messages", []))
    for index in range(max(len(old_messages), len(new_messages))):
        was = old_messages[index] if index < len(old_messages) else None
        now = new_messages[index] if index < len(new_messages) else None
        if was == now:
            continue
        if was is None or now is None:
            present: Any = now if was is None else was
            verb = "is new" if was is None else "is missing"
            return f"message {index} ({present.get('role')}) {verb}", json_diff(was, now)
        role = was.get("role")
        label = "the system prompt" if role == "system" and index == 0 else f"message {index} ({role})"
        if {k: v for k, v in was.items() if k != "content"} == {
            k: v for k, v in now.items() if k != "content"
        }:
            return f"{label} changed", _text_diff(str(was.get("content")), str(now.get("content")))
        return f"{label} changed", json_diff(was, now)
    if old_tools != new_tools:
        gone = [name for name in old_tools if name not in new_tools]
        added = [name for name in new_tools if name not in old_tools]
        changed = [name for name in old_tools if name in new_tools and old_tools[name] != new_tools[name]]
        parts = [f"no longer offered: {', '.join(gone)}"] if gone else []
        parts += [f"newly offered: {', '.join(added)}"] if added else []
        parts += [f"definition changed: {', '.join(changed)}"] if changed else []
        diff = "\n".join([*(f"- {name}" for name in gone), *(f"+ {name}" for name in added)])
        return "the tools offered differ (" + "; ".join(parts) + ")", diff
    options = [
        key for key in ("max_output_tokens", "temperature", "tool_choice") if old.get(key) != new.get(key)
    ]
    if options:
        return "the request options differ", "\n".join(
            f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in options
        )
    return None


def setting_changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Each setting that differs, as ``path: old -> new`` (long texts summarised)."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[str] = []
        for key in sorted({*old, *new}):
            changes += setting_changes(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key)
        return changes
    if old == new:
        return []
    if isinstance(old, str) and isinstance(new, str) and (len(old) > 60 or len(new) > 60):
        return [f"{prefix}: changed ({len(old)} -> {counted(len(new), 'character')})"]
    return [f"{prefix}: {old!r} -> {new!r}"]


def where(data: Mapping[str, Any]) -> str:
    """Where an event is, for a divergence: ``end``, or its type, tool, call and round."""
    if data["type"] == "run_ended":
        return "end"
    round_ = f", round {data['round']}" if data.get("round") is not None else ""
    call = (
        f" (call {data['call_id']}{round_})" if data.get("call_id") else f" ({round_[2:]})" if round_ else ""
    )
    return f"{data['type']}{of_name(data)}{call}"


def of_name(data: Mapping[str, Any]) -> str:
    """`` of <tool>`` for an event that names a tool, else ""."""
    return f" of {data['name']}" if data.get("name") else ""


def event_what(
    data: Mapping[str, Any], was: Mapping[str, Any], now: Mapping[str, Any], models_left: int
) -> str:
    """What differs in an event (``data``) whose compared fields were ``was`` and are ``now``;
    ``models_left``: the recorded model calls the replay has not made."""
    changed = ", ".join(f"{k} {was[k]!r} -> {now[k]!r}" for k in was if was[k] != now[k])
    if data["type"] == "run_ended":
        more = f"; the recording went on for {models_left} more model call(s)" if models_left > 0 else ""
        return f"the run ended differently: {changed}{more}"
    if data["type"] == "tool_call_ended" and was.get("verdict") != now.get("verdict"):
        return f"a different guard decision for {data.get('name')}: {changed}"
    return changed


# --------------------------------------------------------------------------------------------
# the report


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
