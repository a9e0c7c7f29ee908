"""The stand-ins a replay runs the loop over (``loop/_replay.py``): the recording plays the servers.

``Replayer`` holds the recording, what of it was used, and the first divergence (which cancels
the run). ``ReplayProvider`` answers the n-th model call with the n-th recorded turn (or its
recorded error); ``ReplayTools`` answers each tool call with the recorded result of the same call
after the same model call; ``ReplayPages`` hands out the recorded page handles; ``EventCheck``
compares each event with the recorded one and gives recorded approval decisions again. Each
checks first that what the loop asks now is what it asked then (``_replay_compare``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from ..exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
)
from ..messages import JSONObject, ToolResult, ToolSpec, Turn
from ..providers.base import DeltaCallback, ModelRequest
from ..providers.servers.info import ServerInfo
from ..state.memory import MemoryPageStore
from ._record_format import RecordedError, Recording, request_to_dict
from ._replay_compare import COMPARED, event_what, json_diff, of_name, plain, request_difference, where
from ._replay_report import Divergence
from .agent import Agent

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
