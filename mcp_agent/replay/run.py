"""Replaying a recording (``loop/recording.py``): the loop again, with no model server and no tool servers.

``replay`` builds an ``Agent`` over two stand-ins and runs the recorded query: ``ReplayProvider``
answers the n-th model call with the n-th recorded turn (or raises its recorded error),
``ReplayTools`` lists the recorded tools and answers each call with the recorded result of the
same call (same name and arguments, after the same model call: parallel calls may reach it in any
order). Each first checks that what the loop asks now is what it asked then (``compare.py``); the
events of the run (guard verdicts, approvals, the ending) are checked against the recorded ones as
they happen (``EventCheck``). The first difference is the divergence: it is kept, the run is
cancelled, and the report shows it with a diff.

Which settings: by default the recording's own (its system prompt, its run's effective limits,
the loop's ``llm`` options, its approvals), so an unchanged loop replays identically. With
``config`` the loop runs with that config's settings instead (sized for the recorded model
server, as ``open_agent`` would), and its servers' ``disabled``/``allowTools``/``denyTools``
filter the recorded tools: that is how a bad run becomes a regression test for a new prompt,
limit or tool filter. The report lists the settings that differ from the recording's.

Recorded approval decisions are given again (an approval the recording does not have is denied).
Page handles of long results are the recorded ones (``ReplayPages``), so the transcript matches.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from ..config import AgentConfig, load_config
from ..exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
)
from ..loop.agent import Agent
from ..loop.recording import RecordedError, Recording, read_recording, request_to_dict, settings_of
from ..messages import JSONObject, ToolResult, ToolSpec, Turn
from ..providers.base import DeltaCallback, ModelRequest
from ..providers.servers.info import ServerInfo, sized_for_server
from ..state.memory import MemoryPageStore, MemorySessionStore
from .compare import (
    COMPARED,
    Divergence,
    ReplayReport,
    event_what,
    json_diff,
    of_name,
    plain,
    request_difference,
    setting_changes,
    where,
)


def _filtered(specs: Sequence[ToolSpec], config: AgentConfig) -> list[ToolSpec]:
    """The recorded tools that ``config``'s servers still offer (disabled, allowTools, denyTools)."""
    from ..tools.presentation import tool_allowed

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
        agent_config, source = recording.config, "recording"
    else:
        if not isinstance(config, AgentConfig):
            source = str(config)
            config = load_config(config)
        else:
            source = "the given config"
        agent_config = sized_for_server(config, server, specs)
        specs = _filtered(specs, config)
    changes = setting_changes(recorded_settings, plain(settings_of(agent_config)))
    replayer = Replayer(recording)
    check = EventCheck(replayer)
    history = recording.history
    session_id = header.get("session_id") if history else None
    sessions = MemorySessionStore()
    if session_id:
        async with sessions.hold(session_id) as held:
            await sessions.save(held, history)
    handles = [
        e["handle"] for e in recording.events if e.get("type") == "tool_call_ended" and e.get("handle")
    ]
    agent = Agent(
        ReplayProvider(replayer, server),
        ReplayTools(replayer, specs),
        agent_config,
        sessions=sessions,
        events=check,
        pages=ReplayPages(agent_config.limits.max_paged_bytes_total, handles),
    )
    check.agent = agent
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


def _check_end(rp: Replayer, reason: str, answer: str) -> None:
    """After the run: what the recording has and the replay did not do, then the ending."""
    if rp.divergence is not None:
        return
    for index, event in enumerate(rp.recording.events):
        if not rp.used_events[index] and event.get("type") in COMPARED:
            shown = {name: event.get(name) for name in COMPARED[event["type"]]}
            what = f"the recording has a {event['type']}{of_name(event)} the replay did not emit"
            rp.diverge(where(event), what, json_diff(shown, None))
            return
    if rp.model_calls < len(rp.recording.models):
        rp.diverge(f"model call {rp.model_calls + 1}", "the recording made more model calls than the replay")
        return
    rp.check_tools_used(rp.model_calls)
    end = rp.recording.end
    if rp.divergence is None and end is not None:
        was = {"termination_reason": end.get("termination_reason"), "answer": end.get("answer")}
        now = plain({"termination_reason": reason, "answer": answer})
        if was != now:
            rp.diverge("end", "the run ended differently", json_diff(was, now))


# --------------------------------------------------------------------------------------------
# the stand-ins: the recording plays the model server, the tool servers and the approver


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


class Replayer:
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
            if tool.after_model == after and not self.used_tools[index]:
                self.diverge(
                    f"tool call {tool.name} after model call {after}",
                    f"the recording called {tool.name} here; the replay did not",
                    json_diff(tool.arguments, None),
                )
                return


class ReplayProvider:
    """A Provider that answers from the recording, checking each request first."""

    def __init__(self, replayer: Replayer, server_info: ServerInfo) -> None:
        self.replayer = replayer
        self.server_info = server_info

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        rp = self.replayer
        if rp.divergence is not None:
            raise rp.stopped()
        rp.check_tools_used(rp.model_calls)
        rp.model_calls += 1
        n, models = rp.model_calls, rp.recording.models
        now = plain(request_to_dict(request))
        if n > len(models):
            last = now["messages"][-1] if now["messages"] else None
            rp.diverge(
                f"model call {n}",
                f"the loop made a model call the recording does not have (it has {len(models)})",
                json_diff(None, last),
            )
        elif (difference := request_difference(models[n - 1].request, now)) is not None:
            rp.diverge(f"model call {n}", *difference)
        if rp.divergence is not None:
            raise rp.stopped()
        recorded = models[n - 1]
        if recorded.error is not None:
            raise _error_from(recorded.error)
        assert recorded.turn is not None  # read_recording: a turn or an error
        return recorded.turn


def _error_from(data: RecordedError) -> ProviderError:
    cls = _ERRORS.get(data.type, ProviderError)
    error = cls(
        data.message,
        status=data.status,
        request_id=data.request_id,
        terminal=data.terminal,
        retryable=data.retryable,
    )
    if data.usage is not None:
        error.usage = data.usage
    return error


class ReplayTools:
    """A ToolSource over the recorded tools that answers each call with its recorded result."""

    def __init__(self, replayer: Replayer, specs: Sequence[ToolSpec]) -> None:
        self.replayer = replayer
        self.specs = list(specs)

    def list_tools(self) -> Sequence[ToolSpec]:
        return self.specs

    async def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None
    ) -> ToolResult:
        rp = self.replayer
        after, args = rp.model_calls, plain(arguments)
        here = [
            i for i, t in enumerate(rp.recording.tools) if t.after_model == after and not rp.used_tools[i]
        ]
        for index in here:
            tool = rp.recording.tools[index]
            if tool.name == name and tool.arguments == args:
                rp.used_tools[index] = True
                return tool.result
        same = [rp.recording.tools[i] for i in here if rp.recording.tools[i].name == name]
        if same:
            rp.diverge(
                f"tool call {name} after model call {after}",
                f"{name} was called with other arguments",
                json_diff(same[0].arguments, args),
            )
        else:
            recorded = ", ".join(rp.recording.tools[i].name for i in here) or "none"
            rp.diverge(
                f"tool call {name} after model call {after}",
                f"the recording has no call of {name} here (recorded here: {recorded})",
                json_diff(None, {"name": name, "arguments": args}),
            )
        return ToolResult("error: replay stopped at the first divergence", is_error=True)


class ReplayPages(MemoryPageStore):
    """An in-memory PageStore that hands out the recorded page handles, in recorded order."""

    def __init__(self, max_bytes: int, handles: Sequence[str]) -> None:
        super().__init__(max_bytes)
        self._handles = list(handles)

    def _new_handle(self, scope: str) -> str:
        return self._handles.pop(0) if self._handles else super()._new_handle(scope)


class EventCheck:
    """An EventSink comparing each event with the recorded one of the same kind, round and call;
    it also gives recorded approval decisions again."""

    def __init__(self, replayer: Replayer) -> None:
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
        data = plain(event.to_dict())
        if data["type"] == "approval_requested":
            self._decide(data)
        fields = COMPARED.get(data["type"])
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
                left = len(rp.recording.models) - rp.model_calls
                rp.diverge(where(data), event_what(data, was, now, left), json_diff(was, now))
            return
        shown = {name: data.get(name) for name in fields}
        what = f"{data['type']}{of_name(data)}: the recording does not have it"
        if data["type"] == "approval_requested":
            what = f"{data.get('name')} now needs approval; the recorded run did not ask"
        rp.diverge(where(data), what, json_diff(None, shown))

    def _decide(self, data: Mapping[str, Any]) -> None:
        for old in self.replayer.recording.events:
            if old.get("type") == "approval_resolved" and old.get("call_id") == data.get("call_id"):
                decision = (data["approval_id"], bool(old.get("approved")), str(old.get("reason") or ""))
                break
        else:
            decision = (data["approval_id"], False, "replay: the recording has no decision for this call")
        self.decisions.send_nowait(decision)
