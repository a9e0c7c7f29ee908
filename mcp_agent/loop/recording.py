"""Record a run, and replay it with no model server and no tool servers.

Recording happens at the loop's two seams, so the loop itself does not change: a
``RecordingProvider`` writes each model request and the turn (or error) it got, a
``RecordingToolSource`` each tool call and its result, and the ``Recorder`` (an ``EventSink``)
the run's events and its ending. ``Agent(..., record=...)`` wraps every run this way; ``mcp-agent
query --record FILE`` and ``gateway.recordDir`` use it. The file format is in ``_record_format``.

``replay(path)`` (``_replay.py``) runs the loop again against the file: the model's turns and
the tools' results come from the recording, each checked against what the loop asks now, and the
report names the first point where the run diverges. Secrets are never written: every line goes
through the known-secrets masking of ``_redact``, and neither the environment nor the config's
server entries (commands, headers, env) are recorded. A recording is the user's alone: the file
0600, the folders it needed 0700 (``_paths``).

    async with Agent.from_config("agent.json", record="run.jsonl") as agent:
        await agent.query("What changed in the repo today?")
    report = await replay("run.jsonl")          # no servers needed
    assert report.identical, report.describe()
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .._redact import mask_secrets, mask_secrets_in
from .._version import __version__
from ..exceptions import ProviderError
from ..messages import JSONObject, Message, ToolResult, ToolSpec, Turn
from ..providers.base import DeltaCallback, ModelRequest, Provider
from ..state.folder import open_private, private_dirs
from ..tools.base import ToolSource
from ._record_format import (
    FORMAT_VERSION,
    RecordingError,
    digest,
    event_to_dict,
    request_to_dict,
    spec_to_dict,
)
from ._replay_report import Divergence, ReplayReport

if TYPE_CHECKING:
    from ..config import AgentConfig, Limits
    from ..events import Event
    from ..providers.servers.info import ServerInfo
    from .result import RunResult

__all__ = [
    "Divergence",
    "RecordTo",
    "Recorder",
    "RecordingError",
    "RecordingProvider",
    "RecordingToolSource",
    "ReplayReport",
    "record_path",
    "replay",
    "settings_of",
]

RecordTo = str | os.PathLike[str] | Callable[[str], str | os.PathLike[str]]
"""Where ``Agent(record=...)`` writes: one file (each run overwrites it), or a function of
the run id giving each run's file (``gateway.recordDir``: ``<dir>/<run id>.jsonl``)."""


def record_path(record: RecordTo, run_id: str) -> Path:
    """The file a run with ``run_id`` is recorded to."""
    return Path(record(run_id) if callable(record) else record)


def settings_of(config: AgentConfig, limits: Limits | None = None) -> JSONObject:
    """What the loop reads from ``config`` (with the run's effective ``limits``), in config spelling.

    Replay builds its config from this (``_replay.config_from_settings``).
    """
    llm = config.llm
    return {
        "systemPrompt": config.prompt(),
        "limits": (limits or config.limits).model_dump(by_alias=True, mode="json"),
        "llm": {
            "temperature": llm.temperature,
            "maxOutputTokens": llm.max_output_tokens,
            "toolChoice": llm.tool_choice,
            "toolBudget": llm.tool_budget,
            "pinnedTools": list(llm.pinned_tools),
        },
        "approvals": config.approvals.model_dump(by_alias=True, mode="json"),
    }


class Recorder:
    """Writes one run as JSON lines; an ``EventSink`` for the run's events.

    Open it with ``start`` (writes the header), wrap the seams with ``provider`` and ``tools``,
    pass it among the run's event sinks, and ``finish`` it with the result. Every line is
    flushed as it is written, so a run that crashes leaves what it did. Writing never raises
    into the run: a write that fails (a full disk) stops the recording and is kept in ``error``.

    Args:
        path: the file, created (with its folder) or overwritten, owner-only.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.error: OSError | None = None
        self.model_calls = 0
        self.tool_calls = 0
        self._start = time.perf_counter()
        self._file: IO[str] | None = None

    def start(
        self,
        *,
        query: str,
        run_id: str,
        settings: JSONObject,
        tools: Sequence[ToolSpec],
        config: AgentConfig | None = None,
        server: ServerInfo | None = None,
        history: Sequence[Message] = (),
        session_id: str | None = None,
    ) -> None:
        """Open the file and write the header."""
        try:
            private_dirs(self.path.parent)
            self._file = open_private(self.path)
        except OSError as exc:
            self.error = exc
            return
        dumped = None if config is None else mask_secrets_in(config.model_dump(mode="json", by_alias=True))
        self._write(
            {
                "kind": "header",
                "format": FORMAT_VERSION,
                "mcp_agent": __version__,
                "recorded_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "run_id": run_id,
                "session_id": session_id,
                "query": query,
                "history": [message.to_dict() for message in history],
                "config_digest": None if dumped is None else digest(dumped),
                "settings": settings,
                "server": None if server is None else server.to_dict(),
                "tools": [spec_to_dict(spec) for spec in tools],
            }
        )

    def provider(self, provider: Provider) -> RecordingProvider:
        return RecordingProvider(provider, self)

    def tools(self, tools: ToolSource) -> RecordingToolSource:
        return RecordingToolSource(tools, self)

    def emit(self, event: Event) -> None:
        data = event_to_dict(event)
        if data is not None:
            self._write({"kind": "event", "event": data})

    def finish(self, result: RunResult) -> None:
        """Write the ending and close the file."""
        self._write(
            {
                "kind": "end",
                "termination_reason": result.termination_reason.value,
                "answer": result.answer,
                "detail": result.detail,
                "rounds": result.rounds,
                "model_calls": self.model_calls,
                "tool_calls": self.tool_calls,
                "ms": self._ms(),
            }
        )
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _ms(self, since: float | None = None) -> float:
        return round((time.perf_counter() - (self._start if since is None else since)) * 1000, 3)

    def _write(self, line: JSONObject) -> None:
        if self._file is None:
            return
        try:
            self._file.write(mask_secrets(json.dumps(line, ensure_ascii=False, default=str)) + "\n")
            self._file.flush()
        except OSError as exc:
            self.error = exc
            self.close()


class RecordingProvider:
    """A Provider that passes each call on and records the request and the turn or error."""

    def __init__(self, inner: Provider, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    def __getattr__(self, name: str) -> Any:  # server_info and the like: the inner provider's
        return getattr(self.inner, name)

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        rec = self.recorder
        rec.model_calls += 1
        line: JSONObject = {"kind": "model", "n": rec.model_calls, "at_ms": rec._ms()}
        line["request"] = request_to_dict(request)
        start = time.perf_counter()
        try:
            turn = await self.inner.complete(request, on_delta)
        except ProviderError as exc:
            line["error"] = {
                "type": type(exc).__name__,
                "message": exc.message,
                "status": exc.status,
                "request_id": exc.request_id,
                "terminal": exc.terminal,
                "retryable": exc.retryable,
                "usage": None if exc.usage is None else exc.usage.to_dict(),
            }
            line["ms"] = rec._ms(start)
            rec._write(line)
            raise
        line["turn"] = turn.to_dict()
        line["ms"] = rec._ms(start)
        rec._write(line)
        return turn


class RecordingToolSource:
    """A ToolSource that passes each call on and records the call and its result."""

    def __init__(self, inner: ToolSource, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    def __getattr__(self, name: str) -> Any:  # status() and the like: the inner source's
        return getattr(self.inner, name)

    def list_tools(self) -> Sequence[ToolSpec]:
        return self.inner.list_tools()

    async def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None
    ) -> ToolResult:
        rec = self.recorder
        after = rec.model_calls
        start = time.perf_counter()
        result = await self.inner.call_tool(name, arguments, timeout=timeout)
        rec.tool_calls += 1
        rec._write(
            {
                "kind": "tool",
                "after_model": after,
                "name": name,
                "arguments": arguments,
                "result": result.to_dict(),
                "ms": rec._ms(start),
            }
        )
        return result


async def replay(
    path: str | os.PathLike[str], *, config: AgentConfig | str | os.PathLike[str] | None = None
) -> ReplayReport:
    """Replay the recording at ``path``; see ``_replay.replay``."""
    from ._replay import replay as _run_replay

    return await _run_replay(path, config=config)


_ = RecordingError  # re-exported
