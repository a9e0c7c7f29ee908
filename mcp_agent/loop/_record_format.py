"""The recording file format (``loop/recording.py``): JSON lines, pure conversion and parsing.

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

Every line is written with the known secret values masked (``_redact.mask_secrets``), and
nothing from the environment is written. Lines of an unknown ``kind`` are skipped on reading
(a later format may add some); a line that is not a JSON object, a missing or newer header, or
a line missing what its kind needs is a ``RecordingError`` naming the line.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._types import JSONObject
from ..exceptions import MCPAgentError
from ..messages import ToolResult, ToolSpec
from ..providers.base import ModelRequest

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
    }


def spec_from_dict(data: Mapping[str, Any]) -> ToolSpec:
    return ToolSpec(
        name=data["name"],
        description=data.get("description") or "",
        parameters=data.get("parameters") or {"type": "object", "properties": {}},
        variants=data.get("variants") or {},
        server=data.get("server") or "",
        mcp_name=data.get("mcp_name") or "",
        changes=tuple(data.get("changes") or ()),
        annotations=data.get("annotations") or {},
        timeout_seconds=data.get("timeout_seconds"),
        title=data.get("title"),
        output_schema=data.get("output_schema"),
    )


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


def result_from_dict(data: Mapping[str, Any]) -> ToolResult:
    return ToolResult(
        text=data.get("text") or "",
        is_error=bool(data.get("is_error")),
        content=tuple(data.get("content") or ()),
        structured=data.get("structured"),
        elapsed_ms=float(data.get("elapsed_ms") or 0.0),
    )


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
# reading


@dataclass
class Recording:
    """A recording as read: the header and the lines of each kind, in file order."""

    path: str
    header: JSONObject
    models: list[JSONObject] = field(default_factory=list)
    tools: list[JSONObject] = field(default_factory=list)
    events: list[JSONObject] = field(default_factory=list)
    end: JSONObject | None = None

    @property
    def tool_specs(self) -> list[ToolSpec]:
        return [spec_from_dict(spec) for spec in self.header["tools"]]


_NEEDS: dict[str, tuple[str, ...]] = {
    "header": ("format", "query", "settings", "tools"),
    "model": ("request",),
    "tool": ("name", "arguments", "result", "after_model"),
    "event": ("event",),
    "end": ("termination_reason",),
}


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Read and check a recording.

    Raises:
        RecordingError: the file is missing, empty, not JSON lines, has no valid header, was
            written by a newer format, or has a line that lacks what its kind needs.
    """
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordingError(f"cannot read the recording: {exc.strerror or exc}", path=name) from None
    except UnicodeDecodeError as exc:
        raise RecordingError(f"not UTF-8 text (byte {exc.start}): not a recording", path=name) from None
    recording: Recording | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordingError(
                f"not JSON ({exc.msg} at column {exc.colno})", path=name, line=number
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            raise RecordingError('not a recording line (a JSON object with a "kind")', path=name, line=number)
        kind = data["kind"]
        missing = [key for key in _NEEDS.get(kind, ()) if key not in data]
        if missing:
            raise RecordingError(f"a {kind} line without {', '.join(missing)}", path=name, line=number)
        if recording is None:
            if kind != "header":
                raise RecordingError("the first line is not a recording header", path=name, line=number)
            _check_header(data, name, number)
            recording = Recording(name, data)
        elif kind == "model":
            if not ("turn" in data or "error" in data):
                raise RecordingError("a model line without turn or error", path=name, line=number)
            recording.models.append(data)
        elif kind == "tool":
            recording.tools.append(data)
        elif kind == "event":
            recording.events.append(data["event"])
        elif kind == "end":
            recording.end = data
        elif kind == "header":
            raise RecordingError("a second header: one recording holds one run", path=name, line=number)
    if recording is None:
        raise RecordingError("empty: not a recording", path=name)
    return recording


def _check_header(data: JSONObject, path: str, line: int) -> None:
    version = data["format"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordingError(f"format {version!r} is not a format version", path=path, line=line)
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"written in format {version} by mcp_agent {data.get('mcp_agent', '?')}; this version reads "
            f"format {FORMAT_VERSION} and older: upgrade mcp_agent",
            path=path,
            line=line,
        )
    if not isinstance(data["query"], str) or not isinstance(data["settings"], dict):
        raise RecordingError("the header's query or settings has the wrong type", path=path, line=line)
    tools = data["tools"]
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
    ):
        raise RecordingError("the header's tools are not a list of tools", path=path, line=line)


def named(specs: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in specs}
