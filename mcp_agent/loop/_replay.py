"""Replay a recording (``loop/recording.py``): the loop again, with no model server and no tool servers.

An ``Agent`` runs the recorded query over two stand-ins: ``ReplayProvider`` answers the n-th model
call with the n-th recorded turn (or raises its recorded error), ``ReplayTools`` lists the recorded
tools and answers each call with the recorded result of the same call (same name and arguments,
after the same model call: parallel calls may reach it in any order). Each first checks that
what the loop asks now is what it asked then; the events of the run (guard verdicts, approvals,
the ending) are checked against the recorded ones as they happen. The first difference is the
divergence: it is kept, the run is cancelled, and the report shows it with a diff.

Which settings: by default the recording's own (its system prompt, its run's effective limits,
the loop's ``llm`` options, its approvals), so an unchanged loop replays identically. With
``config`` the loop runs with that config's settings instead (sized for the recorded model
server, as ``Agent.from_config`` would), and its servers' ``disabled``/``allowTools``/
``denyTools`` filter the recorded tools: that is how a bad run becomes a regression test for a
new prompt, limit or tool filter. The report lists the settings that differ from the recording's.

Recorded approval decisions are given again (an approval the recording does not have is denied).
Page handles of long results are the recorded ones, so the transcript matches.
"""

from __future__ import annotations

import difflib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from .._redact import mask_secrets
from .._types import JSONObject
from ..config import AgentConfig, load_config
from ..exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
)
from ..messages import ToolResult, ToolSpec, Turn, Usage
from ..providers.base import DeltaCallback, ModelRequest
from ..providers.server_info import ServerInfo, sized_for_server
from ._record_format import Recording, read_recording, request_to_dict, result_from_dict
from .agent import Agent
from .pages import PageStore
from .sessions import MemorySessionStore

_ERRORS: dict[str, type[ProviderError]] = {
    cls.__name__: cls
    for cls in (
        ProviderError,
        ProviderConnectionError,
        ProviderHTTPError,
        ContextLengthError,
        ProviderResponseError,
    )
}

_COMPARED: dict[str, tuple[str, ...]] = {
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


# --------------------------------------------------------------------------------------------
# comparing


def _plain(value: Any) -> Any:
    """``value`` as the recording holds it: JSON, with known secrets masked."""
    return json.loads(mask_secrets(json.dumps(value, ensure_ascii=False, default=str)))


def _text_diff(old: str, new: str, old_name: str = "recorded", new_name: str = "now") -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="", n=2)
    return "\n".join(lines)


def _json_diff(old: Any, new: Any) -> str:
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
            return f"message {index} ({present.get('role')}) {verb}", _json_diff(was, now)
        role = was.get("role")
        label = "the system prompt" if role == "system" and index == 0 else f"message {index} ({role})"
        if {k: v for k, v in was.items() if k != "content"} == {
            k: v for k, v in now.items() if k != "content"
        }:
            return f"{label} changed", _text_diff(str(was.get("content")), str(now.get("content")))
        return f"{label} changed", _json_diff(was, now)
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
        return [f"{prefix}: changed ({len(old)} -> {len(new)} characters)"]
    return [f"{prefix}: {old!r} -> {new!r}"]


# --------------------------------------------------------------------------------------------
# the stand-ins


class _Replayer:
    """The recording being replayed, what was used of it, and the first divergence."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.divergence: Divergence | None = None
        self.cancel = anyio.Event()
        self.model_calls = 0
        self.used_tools = [False] * len(recording.tools)
        self.used_events = [False] * len(recording.events)

    def diverge(self, at: str, what: str, diff: str = "") -> None:
        if self.divergence is None:
            self.divergence = Divergence(at, what, diff)
            self.cancel.set()

    def stopped(self) -> ProviderError:
        return ProviderError("replay stopped at the first divergence", terminal=True)

    def check_tools_used(self, after: int) -> None:
        """Every recorded call made after model call ``after`` was made again."""
        for index, tool in enumerate(self.recording.tools):
            if tool["after_model"] == after and not self.used_tools[index]:
                self.diverge(
                    f"tool call {tool['name']} after model call {after}",
                    f"the recording called {tool['name']} here; the replay did not",
                    _json_diff(tool["arguments"], None),
                )
                return


class ReplayProvider:
    """A Provider that answers from the recording, checking each request first."""

    def __init__(self, replayer: _Replayer, server_info: ServerInfo) -> None:
        self.replayer = replayer
        self.server_info = server_info

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        rp = self.replayer
        if rp.divergence is not None:
            raise rp.stopped()
        rp.check_tools_used(rp.model_calls)
        rp.model_calls += 1
        n, models = rp.model_calls, rp.recording.models
        now = _plain(request_to_dict(request))
        if n > len(models):
            last = now["messages"][-1] if now["messages"] else None
            rp.diverge(
                f"model call {n}",
                f"the loop made a model call the recording does not have (it has {len(models)})",
                _json_diff(None, last),
            )
        elif (difference := request_difference(models[n - 1]["request"], now)) is not None:
            rp.diverge(f"model call {n}", *difference)
        if rp.divergence is not None:
            raise rp.stopped()
        recorded = models[n - 1]
        if "error" in recorded:
            raise _error_from(recorded["error"])
        return Turn.from_dict(recorded["turn"])


def _error_from(data: Mapping[str, Any]) -> ProviderError:
    cls = _ERRORS.get(str(data.get("type")), ProviderError)
    error = cls(
        str(data.get("message", "")),
        status=data.get("status"),
        request_id=data.get("request_id"),
        terminal=bool(data.get("terminal")),
        retryable=bool(data.get("retryable")),
    )
    if data.get("usage"):
        error.usage = Usage.from_dict(data["usage"])
    return error


class ReplayTools:
    """A ToolSource over the recorded tools that answers each call with its recorded result."""

    def __init__(self, replayer: _Replayer, specs: Sequence[ToolSpec]) -> None:
        self.replayer = replayer
        self.specs = list(specs)

    def list_tools(self) -> Sequence[ToolSpec]:
        return self.specs

    async def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None
    ) -> ToolResult:
        rp = self.replayer
        after, args = rp.model_calls, _plain(arguments)
        here = [
            i for i, t in enumerate(rp.recording.tools) if t["after_model"] == after and not rp.used_tools[i]
        ]
        for index in here:
            tool = rp.recording.tools[index]
            if tool["name"] == name and tool["arguments"] == args:
                rp.used_tools[index] = True
                return result_from_dict(tool["result"])
        same = [rp.recording.tools[i] for i in here if rp.recording.tools[i]["name"] == name]
        if same:
            rp.diverge(
                f"tool call {name} after model call {after}",
                f"{name} was called with other arguments",
                _json_diff(same[0]["arguments"], args),
            )
        else:
            recorded = ", ".join(rp.recording.tools[i]["name"] for i in here) or "none"
            rp.diverge(
                f"tool call {name} after model call {after}",
                f"the recording has no call of {name} here (recorded here: {recorded})",
                _json_diff(None, {"name": name, "arguments": args}),
            )
        return ToolResult("error: replay stopped at the first divergence", is_error=True)


class _ReplayPages(PageStore):
    """A PageStore that hands out the recorded page handles, in recorded order."""

    def __init__(self, max_bytes: int, handles: Sequence[str]) -> None:
        super().__init__(max_bytes)
        self._handles = list(handles)

    def _new_handle(self) -> str:
        return self._handles.pop(0) if self._handles else super()._new_handle()


class _EventCheck:
    """An EventSink comparing each event with the recorded one of the same kind, round and call;
    it also gives recorded approval decisions again."""

    def __init__(self, replayer: _Replayer) -> None:
        self.replayer = replayer
        self.agent: Agent | None = None
        self.decisions, self._decided = anyio.create_memory_object_stream[tuple[str, bool, str]](100)
        """The decisions to give (approval id, approved, reason): ``emit`` must not wait, so
        ``give_decisions`` resolves them beside the run."""

    async def give_decisions(self) -> None:
        async with self._decided:
            async for approval_id, approved, reason in self._decided:
                if self.agent is not None:
                    await self.agent.approvals.resolve(approval_id, approved, reason)

    def emit(self, event: Any) -> None:
        rp = self.replayer
        data = _plain(event.to_dict())
        if data["type"] == "approval_requested":
            self._decide(data)
        fields = _COMPARED.get(data["type"])
        if fields is None or rp.divergence is not None:
            return
        key = (data["type"], data.get("round"), data.get("call_id"))
        for index, old in enumerate(rp.recording.events):
            if rp.used_events[index] or (old.get("type"), old.get("round"), old.get("call_id")) != key:
                continue
            rp.used_events[index] = True
            was = {name: old.get(name) for name in fields}
            now = {name: data.get(name) for name in fields}
            if was != now:
                rp.diverge(_where(data), _event_what(data, was, now, rp), _json_diff(was, now))
            return
        shown = {name: data.get(name) for name in fields}
        what = f"{data['type']}{_of(data)}: the recording does not have it"
        if data["type"] == "approval_requested":
            what = f"{data.get('name')} now needs approval; the recorded run did not ask"
        rp.diverge(_where(data), what, _json_diff(None, shown))

    def _decide(self, data: Mapping[str, Any]) -> None:
        for old in self.replayer.recording.events:
            if old.get("type") == "approval_resolved" and old.get("call_id") == data.get("call_id"):
                decision = (data["approval_id"], bool(old.get("approved")), str(old.get("reason") or ""))
                break
        else:
            decision = (data["approval_id"], False, "replay: the recording has no decision for this call")
        self.decisions.send_nowait(decision)


def _where(data: Mapping[str, Any]) -> str:
    if data["type"] == "run_ended":
        return "end"
    round_ = f", round {data['round']}" if data.get("round") is not None else ""
    call = f" (call {data['call_id']}{round_})" if data.get("call_id") else f" ({round_[2:]})" if round_ else ""
    return f"{data['type']}{_of(data)}{call}"


def _of(data: Mapping[str, Any]) -> str:
    return f" of {data['name']}" if data.get("name") else ""


def _event_what(
    data: Mapping[str, Any], was: Mapping[str, Any], now: Mapping[str, Any], rp: _Replayer
) -> str:
    changed = ", ".join(f"{k} {was[k]!r} -> {now[k]!r}" for k in was if was[k] != now[k])
    if data["type"] == "run_ended":
        left = len(rp.recording.models) - rp.model_calls
        more = f"; the recording went on for {left} more model call(s)" if left > 0 else ""
        return f"the run ended differently: {changed}{more}"
    if data["type"] == "tool_call_ended" and was.get("verdict") != now.get("verdict"):
        return f"a different guard decision for {data.get('name')}: {changed}"
    return changed


# --------------------------------------------------------------------------------------------
# replay


def config_from_settings(settings: Mapping[str, Any]) -> AgentConfig:
    """The AgentConfig a recording's ``settings`` describe (no servers, no model server)."""
    return AgentConfig.model_validate(dict(settings))


def _filtered(specs: Sequence[ToolSpec], config: AgentConfig) -> list[ToolSpec]:
    """The recorded tools that ``config``'s servers still offer (disabled, allowTools, denyTools)."""
    from ..tools._server_tools import tool_allowed

    servers = config.servers()
    kept = []
    for spec in specs:
        server = servers.get(spec.server) if spec.server else None
        if spec.server and (server is None or server.disabled):
            continue
        if server is not None and not tool_allowed(
            spec.mcp_name or spec.name, server.allow_tools, server.deny_tools
        ):
            continue
        kept.append(spec)
    return kept


async def replay(
    path: str | os.PathLike[str], *, config: AgentConfig | str | os.PathLike[str] | None = None
) -> ReplayReport:
    """Run the recorded query again against the recording; report the first divergence.

    Args:
        path: the recording.
        config: None: the recording's own settings. Else a config (or its file) whose settings
            the loop uses instead, and whose servers filter the recorded tools.

    Raises:
        RecordingError: the file is not a readable recording.
        ConfigError: ``config`` is not a valid config.
    """
    start = time.perf_counter()
    recording = read_recording(path)
    header = recording.header
    server = ServerInfo.from_dict(header.get("server") or {})
    specs = recording.tool_specs
    recorded_settings = header["settings"]
    if config is None:
        agent_config, source = config_from_settings(recorded_settings), "recording"
    else:
        if not isinstance(config, AgentConfig):
            source = str(config)
            config = load_config(config)
        else:
            source = "the given config"
        agent_config = sized_for_server(config, server, specs)
        specs = _filtered(specs, config)
    from .recording import settings_of

    changes = setting_changes(recorded_settings, _plain(settings_of(agent_config)))
    replayer = _Replayer(recording)
    check = _EventCheck(replayer)
    history = [_message(m) for m in header.get("history") or []]
    session_id = header.get("session_id") if history else None
    sessions = MemorySessionStore()
    if session_id:
        async with sessions.hold(session_id) as held:
            await sessions.save(held, history)
    agent = Agent(
        ReplayProvider(replayer, server),
        ReplayTools(replayer, specs),
        agent_config,
        sessions=sessions,
        events=check,
    )
    check.agent = agent
    handles = [
        e["handle"] for e in recording.events if e.get("type") == "tool_call_ended" and e.get("handle")
    ]
    agent._pages = _ReplayPages(agent_config.limits.max_paged_bytes_total, handles)
    async with anyio.create_task_group() as tg:
        tg.start_soon(check.give_decisions)
        result = await agent.query(header["query"], session_id=session_id, cancel=replayer.cancel)
        check.decisions.close()
    _check_end(replayer, result.termination_reason.value, result.answer)
    end = recording.end or {}
    return ReplayReport(
        path=str(path),
        divergence=replayer.divergence,
        termination_reason=result.termination_reason.value,
        recorded_termination_reason=end.get("termination_reason"),
        model_calls=replayer.model_calls,
        recorded_model_calls=len(recording.models),
        tool_calls=sum(replayer.used_tools),
        recorded_tool_calls=len(recording.tools),
        settings=source,
        setting_changes=tuple(changes),
        ms=round((time.perf_counter() - start) * 1000, 3),
    )


def _message(data: Mapping[str, Any]) -> Any:
    from ..messages import Message

    return Message.from_dict(data)


def _check_end(rp: _Replayer, reason: str, answer: str) -> None:
    """After the run: what the recording has and the replay did not do, then the ending."""
    if rp.divergence is not None:
        return
    for index, event in enumerate(rp.recording.events):
        if not rp.used_events[index] and event.get("type") in _COMPARED:
            shown = {name: event.get(name) for name in _COMPARED[event["type"]]}
            what = f"the recording has a {event['type']}{_of(event)} the replay did not emit"
            rp.diverge(_where(event), what, _json_diff(shown, None))
            return
    if rp.model_calls < len(rp.recording.models):
        rp.diverge(f"model call {rp.model_calls + 1}", "the recording made more model calls than the replay")
        return
    rp.check_tools_used(rp.model_calls)
    end = rp.recording.end
    if rp.divergence is None and end is not None:
        was = {"termination_reason": end.get("termination_reason"), "answer": end.get("answer")}
        now = _plain({"termination_reason": reason, "answer": answer})
        if was != now:
            rp.diverge("end", "the run ended differently", _json_diff(was, now))


_ = field
