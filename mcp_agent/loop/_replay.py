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

This module drives the replay; the stand-ins are in ``_replay_standins``, the comparing (pure)
in ``_replay_compare``, and the report's values in ``_replay_report``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import anyio

from ..config import AgentConfig, load_config
from ..messages import ToolSpec
from ..providers.servers.info import ServerInfo, sized_for_server
from ._record_format import config_from_settings, read_recording
from ._replay_compare import COMPARED, json_diff, of_name, plain, setting_changes, where
from ._replay_report import ReplayReport
from ._replay_standins import EventCheck, Replayer, ReplayPages, ReplayProvider, ReplayTools
from .agent import Agent
from .sessions import MemorySessionStore

__all__ = ["config_from_settings", "replay"]


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
        agent_config, source = recording.config, "recording"
    else:
        if not isinstance(config, AgentConfig):
            source = str(config)
            config = load_config(config)
        else:
            source = "the given config"
        agent_config = sized_for_server(config, server, specs)
        specs = _filtered(specs, config)
    from .recording import settings_of

    changes = setting_changes(recorded_settings, plain(settings_of(agent_config)))
    replayer = Replayer(recording)
    check = EventCheck(replayer)
    history = recording.history
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
    agent._pages = ReplayPages(agent_config.limits.max_paged_bytes_total, handles)
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
