"""Logs on stderr for the CLI: human text by default, or one JSON object per line; secrets masked.

``setup_logging(verbose, log_format)`` gives the root logger one handler on stderr. Its
formatter is ``TextFormatter`` (``LEVEL logger: message``, the traceback after it) or
``JsonFormatter`` (``{"time", "level", "logger", "message"}``, plus ``exception`` and ``stack``
when the record has them and every extra field, such as ``run_id`` and ``session_id``). Both mask
secrets (``_redact.redact_text``: the known values, bearer tokens, key shapes, credentials in
URLs) in the message, the exception text and the extra fields. ``--log-format json`` or
``MCP_AGENT_LOG_FORMAT=json`` choose JSON; stdout is never touched (it carries the command's
output, or the MCP protocol for ``serve --stdio``).

The CLI's own stderr and stdout are wrapped too (``wrap_streams``): what is printed (progress, a
question, an error, the answer) has the known secrets masked, and with JSON logs each line
printed on stderr becomes a JSON object of its own (logger ``mcp_agent.cli.main``), so that every
line of stderr parses. Uncaught exceptions and Python warnings go through the log as well.

``log_fields(session_id=..., caller=...)`` adds fields to every record logged inside it (in that
task and the tasks it starts); ``RunLogFields``, an event sink, adds the ``run_id`` once the run
has one. The gateway wraps each run in them, so a run's records carry its ids.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from .._redact import mask_secrets, redact_text

TYPE_CHECKING = False  # not typing's: the CLI imports this module before it parses its arguments
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any, TextIO

LOG_FORMATS = ("text", "json")
FORMAT_VARIABLE = "MCP_AGENT_LOG_FORMAT"
"""The environment variable that chooses the format when ``--log-format`` is not given."""
CLI_LOGGER = "mcp_agent.cli.main"

_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
"""Attributes every LogRecord has: anything else was passed as ``extra=``."""
_LINE_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}
"""Characters ``json.dumps`` leaves raw that ``str.splitlines`` (and some shippers) split on."""


def _utc(created: float) -> str:
    """``2026-05-09T07:35:25.123Z``: ISO 8601 in UTC, to the millisecond."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


def log_format(given: str | None, environ: Mapping[str, str]) -> str:
    """The format asked for: ``given`` (``--log-format``), else ``$MCP_AGENT_LOG_FORMAT``, else text.

    Raises:
        ValueError: the variable names no known format (the message says which are).
    """
    if given:
        return given
    value = environ.get(FORMAT_VARIABLE, "").strip().lower()
    if not value:
        return "text"
    if value not in LOG_FORMATS:
        raise ValueError(f"${FORMAT_VARIABLE}={value!r}: use one of {', '.join(LOG_FORMATS)}")
    return value


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        key: value
        for key, value in vars(record).items()
        if key not in _RECORD_FIELDS and not key.startswith("_")
    }


def _redacted(value: Any) -> Any:
    """``redact_text`` over every string of a JSON-able value; other values as JSON would show them."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {str(k): _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_redacted(item) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact_text(repr(value))


class TextFormatter(logging.Formatter):
    """``LEVEL logger: message [key=value ...]``, the traceback on the lines after; secrets masked."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = _extras(record)
        if extras:
            shown = " ".join(f"{key}={value}" for key, value in extras.items())
            first, newline, rest = text.partition("\n")
            text = f"{first} [{shown}]{newline}{rest}"
        return redact_text(text)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line; secrets masked in every string."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        for key, value in _extras(record).items():
            entry.setdefault(key, value)
        line = json.dumps(_redacted(entry), ensure_ascii=False)
        for char, escaped in _LINE_BREAKS.items():
            line = line.replace(char, escaped)
        return line


_FIELDS: ContextVar[dict[str, Any]] = ContextVar("mcp_agent_log_fields", default={})  # noqa: B039 - never mutated
"""The fields ``log_fields`` adds to the records of this context."""


@contextmanager
def log_fields(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (those not None) to every record logged in this context until the end."""
    token = _FIELDS.set(
        {**_FIELDS.get(), **{key: value for key, value in fields.items() if value is not None}}
    )
    try:
        yield
    finally:
        _FIELDS.reset(token)


class RunLogFields:
    """An EventSink that adds the run's id to the log fields when the run starts.

    Use it inside ``log_fields``: the run emits its events in the caller's task, so the id holds
    for the rest of the run (and the tasks it starts), and the end of ``log_fields`` drops it.
    """

    def emit(self, event: Any) -> None:
        if getattr(event, "type", None) == "run_started":
            _FIELDS.set({**_FIELDS.get(), "run_id": event.run_id})


class ContextFields(logging.Filter):
    """Puts the ``log_fields`` of the logging context on each record (an ``extra=`` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _FIELDS.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def setup_logging(verbose: int, log_format: str = "text", stream: TextIO | None = None) -> logging.Handler:
    """One handler on the root logger, writing ``log_format`` to ``stream`` (stderr).

    ``verbose`` 0 shows warnings and errors, 1 adds info, 2 adds debug. Python warnings are
    logged (logger ``py.warnings``) rather than printed.
    """
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(ContextFields())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)
    return handler


def say(handler: logging.Handler, message: str, *, level: int = logging.INFO) -> None:
    """Write ``message`` through ``handler`` whatever the log level (the CLI's own notices: the
    address it serves on). With text logs the caller prints instead; this is for JSON."""
    record = logging.getLogger(CLI_LOGGER).makeRecord(CLI_LOGGER, level, "(cli)", 0, message, (), None)
    handler.handle(record)


# --------------------------------------------------------------------------------------------
# the CLI's streams


class MaskedStream:
    """A text stream that masks the known secrets in everything written to it.

    With ``json_lines`` (stderr, with JSON logs), each complete line becomes a JSON log object
    (logger ``mcp_agent.cli.main``, level INFO); a partial line is held until its end or a ``flush``,
    so that a question printed without a newline still shows. Everything else (``fileno``,
    ``isatty``, ``buffer``...) is the wrapped stream's.
    """

    def __init__(self, stream: TextIO, *, json_lines: bool = False) -> None:
        self._stream = stream
        self._json = JsonFormatter() if json_lines else None
        self._pending = ""
        self._lock = threading.Lock()

    @property
    def wrapped(self) -> TextIO:
        return self._stream

    def write(self, text: str) -> int:
        if self._json is None:
            self._stream.write(mask_secrets(text))
            return len(text)
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self._emit(line)
        return len(text)

    def flush(self) -> None:
        if self._json is not None:
            with self._lock:
                if self._pending:
                    self._emit(self._pending)
                    self._pending = ""
        self._stream.flush()

    def _emit(self, line: str) -> None:
        assert self._json is not None
        record = logging.LogRecord(CLI_LOGGER, logging.INFO, "(cli)", 0, line.rstrip("\r"), None, None)
        self._stream.write(self._json.format(record) + "\n")

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def wrap_streams(*, stdout: bool, json_stderr: bool) -> None:
    """Mask secrets in what the CLI prints on stderr (and on stdout when ``stdout``); with
    ``json_stderr`` every stderr line is a JSON object. ``unwrap_streams`` undoes it."""
    if not isinstance(sys.stderr, MaskedStream):
        sys.stderr = MaskedStream(sys.stderr, json_lines=json_stderr)
    if stdout and not isinstance(sys.stdout, MaskedStream):
        sys.stdout = MaskedStream(sys.stdout)


def unwrap_streams() -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, MaskedStream):
            stream.flush()
            setattr(sys, name, stream.wrapped)


def log_uncaught(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
    """``sys.excepthook`` with JSON logs: a crash is one log object with its traceback."""
    logging.getLogger(CLI_LOGGER).critical("uncaught %s", kind.__name__, exc_info=(kind, error, traceback))
