"""A run's recording: the file it is written to, the recorder that writes it, and reading it back.

A recording is one run, one JSON object a line, each with a ``kind``:

- ``header`` (first, once): ``format``, ``mcp_agent`` (version), ``recorded_at``, ``run_id``,
  ``session_id``, ``query``, ``history`` (the session's transcript before the run),
  ``config_digest`` (of the config with its secrets masked), ``settings`` (what the loop reads
  from the config: ``systemPrompt``, the run's effective ``limits``, the ``llm`` options the loop
  uses, ``approvals``), ``server`` (the model server as identified) and ``tools`` (every tool
  the source listed, whole).
- ``model``: the ``n``-th model call: ``request`` (messages, the offered tools as name and
  digest, the options), then ``turn`` or ``error``, and ``ms``.
- ``tool``: a call that reached the tool source: ``after_model`` (how many model calls came
  before it), ``name``, ``arguments``, ``result``, ``ms``.
- ``event``: a loop event, as ``to_dict`` gives it without ``ts``, ``run_id`` and deltas.
- ``end`` (last): the run's ending: ``termination_reason``, ``answer``, ``rounds``...

Writing happens at the loop's two seams, so the loop itself does not change: a
``RecordingProvider`` writes each model request and the turn (or error) it got, a
``RecordingToolSource`` each tool call and its result, and the ``Recorder`` (an ``EventSink``)
the run's events and its ending. ``Agent(..., record=...)`` wraps every run this way; ``mcp-agent
query --record FILE`` and ``gateway.recordDir`` use it. Secrets are never written: every line
goes through the known-secrets masking of ``_redact``, and neither the environment nor the
config's server entries (commands, headers, env) are recorded. A recording is the user's alone:
the file 0600, the folders it needed 0700 (``state/folder.py``).

Reading (``read_recording``, for ``mcp_agent.replay``, which runs the loop again against the
file) treats the file as untrusted input, since a recording is easy to pass around and to edit:
only a regular file is opened, at most ``MAX_RECORDING_BYTES`` are read, in lines of at most
``MAX_LINE_BYTES`` nested at most ``MAX_DEPTH`` deep, and each line must have the shape its kind
needs (pydantic, over the same dataclasses the loop uses) before replay sees it. The settings may
hold only what ``settings_of`` writes (``RECORDED_SETTINGS``): the system prompt's text, never
``systemPromptFile``, so a recording cannot make replay read a file. Lines of an unknown ``kind``
are skipped (a later format may add some); anything else wrong is a ``RecordingError`` naming
the file, the line and the JSON path, on one line.

    async with open_agent("agent.json", record="run.jsonl") as agent:
        await agent.query("What changed in the repo today?")
    report = await mcp_agent.replay.replay("run.jsonl")   # no servers needed
    assert report.identical, report.describe()
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, StrictInt, ValidationError

from .._redact import mask_secrets, mask_secrets_in
from .._version import __version__
from ..config import AgentConfig
from ..exceptions import MCPAgentError, ProviderError
from ..messages import JSONObject, Message, ToolResult, ToolSpec, Turn, Usage
from ..providers.base import DeltaCallback, ModelRequest, Provider
from ..state.folder import open_private, private_dirs
from ..tools.base import ToolSource

if TYPE_CHECKING:
    from ..config import Limits
    from ..events import Event
    from ..providers.servers.info import ServerInfo
    from .result import RunResult


FORMAT_VERSION = 1
"""The recording format this version writes and reads (a newer one is refused)."""
SKIPPED_EVENTS = frozenset({"model_delta"})
"""Event types not recorded: deltas are streaming progress, not behaviour."""


class RecordingError(MCPAgentError):
    """A recording file cannot be read: missing, not JSON lines, or not a recording.

    Args:
        message: what is wrong, naming the line.
        path: the file.
        line: the 1-based line number, when one is at fault.
    """

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}" if where else message)
        self.message = message
        self.path = path
        self.line = line


# --------------------------------------------------------------------------------------------
# values to JSON and back


def spec_to_dict(spec: ToolSpec) -> JSONObject:
    return {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "variants": dict(spec.variants),
        "server": spec.server,
        "mcp_name": spec.mcp_name,
        "changes": list(spec.changes),
        "annotations": dict(spec.annotations),
        "timeout_seconds": spec.timeout_seconds,
        "title": spec.title,
        "output_schema": spec.output_schema,
        "input_schema": spec.input_schema,
    }


def spec_digest(spec: ToolSpec) -> str:
    """A short digest of what the model sees of a tool (name, description, schemas)."""
    seen = {"description": spec.description, "parameters": spec.parameters, "variants": dict(spec.variants)}
    return hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode()).hexdigest()[:12]


def request_to_dict(request: ModelRequest) -> JSONObject:
    return {
        "messages": [message.to_dict() for message in request.messages],
        "tools": [{"name": spec.name, "digest": spec_digest(spec)} for spec in request.tools],
        "max_output_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "tool_choice": request.tool_choice,
    }


def event_to_dict(event: Any) -> JSONObject | None:
    """An event as recorded (None: not recorded)."""
    if event.type in SKIPPED_EVENTS:
        return None
    data: JSONObject = event.to_dict()
    for key in ("ts", "run_id"):
        data.pop(key, None)
    return data


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# writing


RecordTo = str | os.PathLike[str] | Callable[[str], str | os.PathLike[str]]
"""Where ``Agent(record=...)`` writes: one file (each run overwrites it), or a function of
the run id giving each run's file (``gateway.recordDir``: ``<dir>/<run id>.jsonl``)."""


def record_path(record: RecordTo, run_id: str) -> Path:
    """The file a run with ``run_id`` is recorded to."""
    return Path(record(run_id) if callable(record) else record)


def settings_of(config: AgentConfig, limits: Limits | None = None) -> JSONObject:
    """What the loop reads from ``config`` (with the run's effective ``limits``), in config spelling.

    Replay builds its config back from this (``config_from_settings``).
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


# --------------------------------------------------------------------------------------------
# reading

MAX_RECORDING_BYTES = 128 * 1024 * 1024
"""The largest recording read (the whole file); a bigger one is refused before it is read."""
MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest line read: a tool result is at most ``maxMessageBytes`` (4 MiB by default) before
JSON escaping, so a longer line is not one a recorder wrote."""
MAX_DEPTH = 200
"""The deepest nesting of JSON arrays and objects in a line (the loop walks values recursively)."""
RECORDED_SETTINGS: dict[str, tuple[str, ...] | None] = {
    "systemPrompt": None,
    "limits": None,
    "llm": ("temperature", "maxOutputTokens", "toolChoice", "toolBudget", "pinnedTools"),
    "approvals": None,
}
"""The header's ``settings`` keys (``settings_of`` writes exactly these; for ``llm``,
exactly those of its keys). A recording holds the system prompt's text, never a file to read:
``systemPromptFile``, servers or any other key make it a bad recording, so that a recording can
never make replay read a file or start anything."""


@dataclass(frozen=True)
class ModelCall:
    """A recorded model call: the request as recorded (JSON), then the turn or the error."""

    request: JSONObject
    turn: Turn | None
    error: RecordedError | None


@dataclass(frozen=True)
class ToolCallRecord:
    """A recorded call that reached the tool source, after ``after_model`` model calls."""

    after_model: int
    name: str
    arguments: JSONObject
    result: ToolResult


@dataclass
class Recording:
    """A recording as read and checked: the header, its settings as a config, and the lines of
    each kind in file order (events and the ending stay JSON: they are compared as such)."""

    path: str
    header: JSONObject
    config: AgentConfig
    tool_specs: list[ToolSpec]
    history: list[Message]
    models: list[ModelCall] = field(default_factory=list)
    tools: list[ToolCallRecord] = field(default_factory=list)
    events: list[JSONObject] = field(default_factory=list)
    end: JSONObject | None = None


# the shapes each kind of line must have (what replay uses); unknown keys are let pass (a later
# version of format 1 may add some), except in the settings


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RecordedError(_Shape):
    """A model call's recorded error (``RecordingProvider``)."""

    type: str = "ProviderError"
    message: str = ""
    status: StrictInt | None = None
    request_id: str | None = None
    terminal: bool = False
    retryable: bool = False
    usage: Usage | None = None


class _OfferedTool(_Shape):
    name: str
    digest: str | None = None


class _Request(_Shape):
    messages: list[dict[str, Any]]
    tools: list[_OfferedTool] = []


class _Header(_Shape):
    format: StrictInt
    query: str
    settings: dict[str, Any]
    tools: list[ToolSpec]
    history: list[Message] = []
    session_id: str | None = None
    server: dict[str, Any] | None = None


class _ModelLine(_Shape):
    request: _Request
    turn: Turn | None = None
    error: RecordedError | None = None


class _ToolLine(_Shape):
    after_model: StrictInt
    name: str
    arguments: dict[str, Any]
    result: ToolResult


class _Event(_Shape):
    type: str
    handle: str | None = None
    call_id: str | None = None
    approval_id: str | None = None


class _EventLine(_Shape):
    event: _Event


class _EndLine(_Shape):
    termination_reason: str
    answer: str | None = None


_S = TypeVar("_S", bound=_Shape)


def _validated(shape: type[_S], data: JSONObject, name: str, number: int) -> _S:
    """``data`` as a line of ``shape``, or a RecordingError naming the line and the JSON path."""
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        kind = data["kind"]
        raise RecordingError(
            f"a {kind} line that is not what a recorder writes: {_first_error(kind, exc)}",
            path=name,
            line=number,
        ) from None


def read_recording(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_RECORDING_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Recording:
    """Read and check a recording, reading at most ``max_bytes`` and lines of ``max_line_bytes``.

    Only a regular file is opened (a FIFO, a device, a folder is refused before it is read),
    and every line is checked against the shape its kind needs, so that what replay uses is
    what the recorder wrote: a bad recording fails here, with its line, never later in the run.

    Raises:
        RecordingError: the file is missing, not a regular file, too big, empty, not JSON lines
            (or a line too long, too deep, not UTF-8), has no valid header, was written by
            another format, or has a line without the shape its kind needs.
    """
    name = str(path)
    recording: Recording | None = None
    with _open_regular(name, max_bytes) as file:
        for number, data in _lines(file, name, max_bytes, max_line_bytes):
            kind = data["kind"]
            if kind == "header":
                if recording is not None:
                    raise RecordingError(
                        "a second header: one recording holds one run", path=name, line=number
                    )
                _check_format(data, name, number)
                header = _validated(_Header, data, name, number)
                recording = _recording(name, data, header, number)
            elif recording is None:
                raise RecordingError("the first line is not a recording header", path=name, line=number)
            elif kind == "model":
                model = _validated(_ModelLine, data, name, number)
                if model.turn is None and model.error is None:
                    raise RecordingError("a model line without turn or error", path=name, line=number)
                recording.models.append(ModelCall(data["request"], model.turn, model.error))
            elif kind == "tool":
                tool = _validated(_ToolLine, data, name, number)
                recording.tools.append(
                    ToolCallRecord(tool.after_model, tool.name, tool.arguments, tool.result)
                )
            elif kind == "event":
                _validated(_EventLine, data, name, number)
                recording.events.append(data["event"])
            elif kind == "end":
                _validated(_EndLine, data, name, number)
                recording.end = data
            # any other kind: one a later format may add, skipped
    if recording is None:
        raise RecordingError("empty: not a recording", path=name)
    return recording


def config_from_settings(settings: Mapping[str, Any]) -> AgentConfig:
    """The AgentConfig a recording's ``settings`` describe (no servers, no model server).

    Raises:
        ValueError: a key a recording never holds (``systemPromptFile``, ``mcpServers``...),
            or a value the config refuses; the message names the key.
    """
    if "systemPromptFile" in settings:
        raise ValueError(
            "settings.systemPromptFile: a recording holds the system prompt's text (systemPrompt), never "
            "a file to read; to replay with a prompt file, pass a config that names it (--config)"
        )
    for key, value in settings.items():
        if key not in RECORDED_SETTINGS:
            known = ", ".join(RECORDED_SETTINGS)
            raise ValueError(f"settings.{key}: not a recorded setting (a recording holds {known})")
        inner = RECORDED_SETTINGS[key]
        if inner is not None and isinstance(value, dict):
            for sub in value:
                if sub not in inner:
                    held = ", ".join(inner)
                    raise ValueError(
                        f"settings.{key}.{sub}: not a recorded setting (a recording holds {held})"
                    )
    if not isinstance(settings.get("systemPrompt", ""), str):
        raise ValueError("settings.systemPrompt: not a text")
    try:
        return AgentConfig.model_validate(dict(settings))
    except ValidationError as exc:
        raise ValueError(_first_error("settings", exc)) from None


def _check_format(data: JSONObject, name: str, number: int) -> None:
    """A header's format first: a newer one may have another shape, and upgrading is the fix."""
    version = data.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        return  # the shape check says what is wrong
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"written in format {_short(version)} by mcp_agent {_short(data.get('mcp_agent', '?'))}; this "
            f"version reads format {FORMAT_VERSION} and older: upgrade mcp_agent",
            path=name,
            line=number,
        )
    if version < 1:
        raise RecordingError(
            f"format {_short(version)} is not a recording format (this version reads 1 to {FORMAT_VERSION})",
            path=name,
            line=number,
        )


def _recording(name: str, data: JSONObject, header: _Header, number: int) -> Recording:
    try:
        config = config_from_settings(header.settings)
    except ValueError as exc:
        raise RecordingError(f"the header's {exc}", path=name, line=number) from None
    return Recording(name, data, config, list(header.tools), list(header.history))


def _open_regular(name: str, max_bytes: int) -> IO[bytes]:
    """Open ``name`` for reading if it is a regular file of at most ``max_bytes``. Checked before
    the open (a FIFO is never opened, a device never read) and again on what was opened, which
    is opened non-blocking: a file swapped for a FIFO in between does not hang the open."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        _check_regular(os.stat(name), name, max_bytes)
        fd = os.open(name, flags)
    except OSError as exc:
        raise RecordingError(f"cannot read the recording: {exc.strerror or exc}", path=name) from None
    try:
        _check_regular(os.fstat(fd), name, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _check_regular(info: os.stat_result, name: str, max_bytes: int) -> None:
    kind = _not_regular(info.st_mode)
    if kind is not None:
        raise RecordingError(f"{kind}, not a regular file: not a recording", path=name)
    if info.st_size > max_bytes:
        raise RecordingError(
            f"{_mib(info.st_size)} is more than a recording may be ({_mib(max_bytes)}): not a recording",
            path=name,
        )


def _not_regular(mode: int) -> str | None:
    """What a file that is not a regular file is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a file"


def _lines(
    file: IO[bytes], name: str, max_bytes: int, max_line_bytes: int
) -> Iterator[tuple[int, JSONObject]]:
    """Each non-blank line as a JSON object with a string ``kind``, with its 1-based number.

    Lines end at ``\n`` only: JSON text may hold U+2028 and the like, which ``str.splitlines``
    would take for line ends.
    """
    total = 0
    number = 0
    while raw := file.readline(max_line_bytes + 1):
        number += 1
        total += len(raw)
        if total > max_bytes:
            raise RecordingError(f"more than a recording may be ({_mib(max_bytes)})", path=name, line=number)
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            raise RecordingError(
                f"a line longer than {_mib(max_line_bytes)}: not a recording line", path=name, line=number
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordingError(
                f"not UTF-8 text (byte {exc.start + 1} of the line): not a recording", path=name, line=number
            ) from None
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordingError(
                f"not JSON ({exc.msg} at column {exc.colno})", path=name, line=number
            ) from None
        except RecursionError:
            raise RecordingError(
                f"JSON nested deeper than {MAX_DEPTH} levels", path=name, line=number
            ) from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise RecordingError(f"not JSON ({exc})", path=name, line=number) from None
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            raise RecordingError('not a recording line (a JSON object with a "kind")', path=name, line=number)
        if _too_deep(data, MAX_DEPTH):
            raise RecordingError(f"JSON nested deeper than {MAX_DEPTH} levels", path=name, line=number)
        yield number, data


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _first_error(root: str, exc: ValidationError) -> str:
    """The first of pydantic's errors, on one line: its JSON path and what is wrong."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    path = root
    for part in first["loc"]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = " ".join(str(first["msg"]).removeprefix("Value error, ").split())
    return f"{path}: {message}{more}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.0f} MiB" if size >= 1024 * 1024 else f"{size} bytes"
