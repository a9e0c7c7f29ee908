"""Our stdio transport: one MCP server as a child process, speaking JSON-RPC lines on stdin/stdout.

The SDK's ``stdio_client`` hides what a supervisor needs, so this small transport replaces it.
It yields the same pair of memory-object streams of ``SessionMessage`` the SDK's
``ClientSession`` expects, plus a ``StdioChild`` handle that knows the process id, the exit code
once there is one, the last 100 lines of stderr and how many junk lines came on stdout.

- The child runs in its own process group (``start_new_session``) with the SDK's safe default
  environment plus the server's ``env`` plus our ``MCP_AGENT_OWNER`` marker.
- Children die with the gateway: on Linux each child gets SIGTERM from the kernel when the
  gateway dies, even by SIGKILL (``PR_SET_PDEATHSIG``, ``processes.py``). Their own children do
  not; for them the process group is recorded in the state folder while it runs, and the next
  hub to start reaps the marked processes of groups whose gateway is gone (``processes.py``).
- A stdout line that is not a JSON-RPC message is logged (warning, at most one every few
  seconds) and counted, never fatal, before or after the handshake. Blank lines are ignored.
- A stdout line longer than ``maxMessageBytes`` is never held: it is dropped as it streams in.
  When it is the response to a request (its id is found at either end), that request fails with
  a JSON-RPC error naming the size and the limit; otherwise it counts as a junk line. Big
  messages are parsed cheaply (below); their content parts are capped by the repair filter
  (``server/session.py``), as on every transport.
- stderr goes to a ring buffer and to our log at debug level.
- When the process exits, the session's read stream ends at once (after a short grace for output
  still in the pipe), even when a grandchild keeps stdout open: in-flight requests then fail with
  "Connection closed" instead of waiting for their timeout.
- Shutdown, shielded from cancellation so a cancelled owner still reaps: close stdin, wait up to
  2 s, SIGTERM the whole group, wait up to 2 s, SIGKILL the group. The group is signalled even
  when the leader exited by itself, so grandchildren never outlive it.
"""

from __future__ import annotations

import collections
import gc
import json
import logging
import os
import re
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
import pydantic_core
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ...config import StdioServerConfig
from ...exceptions import ToolServerStartError
from .processes import OWNER_ENV, ChildRecords, all_stats, open_child_process, owner_marker, procfs_available

logger = logging.getLogger(__name__)

STDERR_LINES = 100
"""How many lines of a child's stderr are kept."""
CLOSE_GRACE_SECONDS = 2.0
"""How long a child may take to exit after its stdin closes, and after SIGTERM."""
_EXIT_POLL_SECONDS = 0.05
_SHUTDOWN_POLL_SECONDS = 0.01
_EOF_GRACE_SECONDS = 0.2
_FLUSH_SECONDS = 0.5
_JUNK_WARN_EVERY_SECONDS = 5.0
_JUNK_SHOWN_CHARS = 200
_PIPE_ERRORS = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)


class StdioChild:
    """A running stdio server process and what we know about it.

    Attributes:
        name: the server's name, for logs.
        pid: the process id (also the process group id).
        exited: set once the process has exited (``returncode`` is then known).
        ended: set once ``read_stream`` has ended (stdout closed, or the process exited).
        junk_lines: how many stdout lines were not JSON-RPC messages.
        max_message_bytes: the longest stdout line taken (0 = no limit).
        repair: applied to every response's ``result`` before it is delivered (the
            ``ResponseRepairer``), so the repair costs no extra stream hop.
    """

    def __init__(self, name: str, process: anyio.abc.Process, *, max_message_bytes: int = 0) -> None:
        self.name = name
        self.pid = process.pid
        self.exited = anyio.Event()
        self.junk_lines = 0
        self.max_message_bytes = max_message_bytes
        self._process = process
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.ended = anyio.Event()
        self.repair: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self._writer_done = anyio.Event()
        self._last_junk_warning = float("-inf")
        self._suppressed_junk = 0
        self._read_send, self.read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write_stream, self._write_receive = anyio.create_memory_object_stream[SessionMessage](0)

    @property
    def returncode(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""
        return self._process.returncode

    def stderr_tail(self, lines: int = 10) -> tuple[str, ...]:
        """The last ``lines`` lines the process wrote to stderr."""
        return tuple(self._stderr)[-lines:] if lines > 0 else ()

    # ---------------------------------------------------------------- pumps

    async def _read_stdout(self, cancel_scope: anyio.CancelScope) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        lines = LineSplitter(self.max_message_bytes)
        with cancel_scope:
            async with self._read_send:
                try:
                    while True:
                        for line in lines.feed(await stdout.receive()):
                            await self._deliver(line)
                except _PIPE_ERRORS:
                    pass
                with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    for line in lines.flush():
                        await self._deliver(line)
        self.ended.set()
        # The session is gone or the pipe ended: keep draining so a child blocked on a full
        # pipe can still read its stdin's end and exit.
        with suppress(*_PIPE_ERRORS):
            while True:
                await stdout.receive()

    async def _deliver(self, line: bytes | OversizedLine) -> None:
        if isinstance(line, OversizedLine):
            await self._oversized(line)
            return
        line = line.strip()
        if not line:
            return
        big = len(line) >= BIG_MESSAGE_BYTES
        with gc_paused() if big else nullcontext():
            try:
                message = parse_message(line)
            except ValueError:
                self._junk(line)
                return
            del line
            if self.repair is not None and isinstance(message, types.JSONRPCResponse):
                if big:  # the parse and the repair (which may drop many parts) each block a while
                    await anyio.lowlevel.checkpoint()
                try:
                    message.result = self.repair(message.result)
                except Exception:  # a bug in the repair must not cost the connection
                    logger.exception("%s: could not repair a response; passing it on as it came", self.name)
        await self._send(message)

    async def _oversized(self, line: OversizedLine) -> None:
        text = oversize_text(self.name, line.size, self.max_message_bytes)
        request_id = response_id(line.head, line.tail)
        if request_id is None:
            self.junk_lines += 1
            logger.warning("%s: %s; it answers no request we can tell, so it was dropped", self.name, text)
            return
        logger.warning("%s: %s; request %r fails", self.name, text, request_id)
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=text)
        await self._send(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))

    async def _send(self, message: types.JSONRPCMessage) -> None:
        with suppress(anyio.BrokenResourceError):  # nobody reads any more (shutdown): drain on
            await self._read_send.send(SessionMessage(message))

    def _junk(self, line: bytes) -> None:
        self.junk_lines += 1
        shown = line[:_JUNK_SHOWN_CHARS].decode("utf-8", "replace")
        now = time.monotonic()
        if now - self._last_junk_warning >= _JUNK_WARN_EVERY_SECONDS:
            more = f" (+{self._suppressed_junk} more since the last warning)" if self._suppressed_junk else ""
            logger.warning(
                "%s: ignored a non-JSON-RPC line on stdout (%d so far)%s: %s",
                self.name,
                self.junk_lines,
                more,
                shown,
            )
            self._last_junk_warning = now
            self._suppressed_junk = 0
        else:
            self._suppressed_junk += 1
            logger.debug("%s: ignored stdout line: %s", self.name, shown)

    async def _read_stderr(self) -> None:
        stderr = self._process.stderr
        assert stderr is not None
        pending = b""
        with suppress(*_PIPE_ERRORS):
            while True:
                pending += await stderr.receive()
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    self._stderr_line(raw)
                if len(pending) > 65536:  # a child writing without newlines
                    self._stderr_line(pending)
                    pending = b""
        if pending:
            self._stderr_line(pending)

    def _stderr_line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if text:
            self._stderr.append(text)
            logger.debug("%s stderr: %s", self.name, text)

    async def _write_stdin(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            async with self._write_receive:
                async for item in self._write_receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(data.encode() + b"\n")
        except _PIPE_ERRORS:
            # The child closed its stdin or died: the session must see the end, not hang.
            self._read_send.close()
        finally:
            self._writer_done.set()

    async def _watch_exit(self, stdout_scope: anyio.CancelScope) -> None:
        while self._process.returncode is None:
            await anyio.sleep(_EXIT_POLL_SECONDS)
        self.exited.set()
        # Output still in the pipe arrives first; a grandchild holding stdout open must not keep
        # the session waiting for an end that never comes.
        with anyio.move_on_after(_EOF_GRACE_SECONDS):
            await self.ended.wait()
        if not self.ended.is_set():
            stdout_scope.cancel()

    # ------------------------------------------------------------- shutdown

    async def _shutdown(self) -> None:
        """Stop the child and its whole process group. Every wait is bounded."""
        self.write_stream.close()
        with anyio.move_on_after(_FLUSH_SECONDS):
            await self._writer_done.wait()
        self.read_stream.close()
        if self._process.stdin is not None:
            with suppress(*_PIPE_ERRORS):
                await self._process.stdin.aclose()
        await _wait_until(lambda: self._process.returncode is not None, CLOSE_GRACE_SECONDS)
        if _group_alive(self.pid):
            _signal_group(self.pid, signal.SIGTERM)
            if not await _wait_until(lambda: not _group_alive(self.pid), CLOSE_GRACE_SECONDS):
                logger.warning("%s: process group %d ignored SIGTERM; killing it", self.name, self.pid)
                _signal_group(self.pid, signal.SIGKILL)
        if not await _wait_until(lambda: self._process.returncode is not None, CLOSE_GRACE_SECONDS):
            logger.warning("%s: process %d is still alive after SIGKILL; abandoning it", self.name, self.pid)
        self.exited.set()
        with anyio.move_on_after(CLOSE_GRACE_SECONDS):
            await self._process.aclose()


async def _wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll ``condition()`` until it is true or ``timeout`` passes; return whether it came true."""
    deadline = anyio.current_time() + timeout
    while not condition():
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_SHUTDOWN_POLL_SECONDS)
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs. Zombies (exited, not yet reaped by their
    parent, often PID 1 in containers) count as gone: they hold no resources."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not procfs_available():
        return True
    return any(stat.pgid == pgid and not stat.dead for stat in all_stats())


@asynccontextmanager
async def open_stdio_transport(
    config: StdioServerConfig, *, name: str, records: ChildRecords | None = None
) -> AsyncIterator[StdioChild]:
    """Start a stdio server and yield its handle; stop it and its process group on exit.

    Args:
        config: the server's command, arguments, environment and working folder.
        name: the server's name, for logs and errors.
        records: where the process group is recorded while it runs (None: nowhere).

    Raises:
        ToolServerStartError: the process could not be started (no such command, not
            executable, missing working folder).
    """
    env = get_default_environment() | dict(config.env) | {OWNER_ENV: owner_marker()}
    try:
        process = await open_child_process([config.command, *config.args], env=env, cwd=config.cwd)
    except FileNotFoundError as exc:
        missing = config.cwd if config.cwd and not Path(config.cwd).is_dir() else config.command
        raise ToolServerStartError(
            f"cannot start {config.command!r}: {missing!r} not found", server=name
        ) from exc
    except (OSError, ValueError) as exc:
        raise ToolServerStartError(f"cannot start {config.command!r}: {exc}", server=name) from exc

    child = StdioChild(name, process, max_message_bytes=config.max_message_bytes)
    if records is not None:
        records.add(process.pid, name)
    logger.debug("%s: started pid %d: %s", name, process.pid, " ".join([config.command, *config.args]))
    stdout_scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(child._read_stdout, stdout_scope)
        tg.start_soon(child._read_stderr)
        tg.start_soon(child._write_stdin)
        tg.start_soon(child._watch_exit, stdout_scope)
        try:
            yield child
        finally:
            with anyio.CancelScope(shield=True):
                await child._shutdown()
            if records is not None and not _group_alive(child.pid):
                records.remove(child.pid)
            tg.cancel_scope.cancel()
    logger.debug("%s: pid %d ended with exit code %s", name, child.pid, child.returncode)


# Big lines from a server's stdout, bounded in size and in work (pure, no I/O).
#
# A server can write a line of any length on stdout. What keeps it cheap:
#
# - ``LineSplitter`` cuts stdout into lines and never holds more than ``max_bytes`` of one. A
#   longer line is dropped as it streams in; only its head and tail (a few KB each) are kept, so
#   ``response_id`` can find the request it answers (the Python SDK writes ``id`` near the start,
#   the TypeScript SDK as the last key) and that request can fail at once.
# - ``parse_message`` turns a line into a JSON-RPC message with pydantic-core's JSON parser and
#   the SDK's model. Validating ``dict[str, Any]`` straight from JSON costs ~10x more than parsing
#   first and validating the Python value (1 s against 0.1 s for 8 MiB of tiny parts), and the
#   cyclic GC is paused while a big line is parsed: it would traverse the new objects again and
#   again (up to 6x the parse itself).
#
# Measured with ``bench/bench_big_results.py``.
KEPT_BYTES = 4096
"""How much of the head and of the tail of an oversized line is kept to find its id."""
BIG_MESSAGE_BYTES = 256 * 1024
"""From this size on, a message is parsed with the cyclic GC paused."""


@dataclass(frozen=True)
class OversizedLine:
    """A line longer than the limit, of which only both ends were kept.

    Attributes:
        size: the line's length in bytes (without its newline).
        head: its first ``KEPT_BYTES`` bytes.
        tail: its last ``KEPT_BYTES`` bytes.
    """

    size: int
    head: bytes
    tail: bytes


class LineSplitter:
    """Bytes in, lines out, holding at most ``max_bytes`` (0 = no limit) of an unfinished line."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pending: list[bytes] = []
        self._size = 0
        self._head: bytes | None = None
        """Set while a line longer than ``max_bytes`` is being dropped."""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        """The lines that ``chunk`` completes, in order (without their newlines)."""
        lines: list[bytes | OversizedLine] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:end])
            lines.append(self._finish())
            start = end + 1
        if start < len(chunk):
            self._add(chunk[start:])
        return lines

    def flush(self) -> list[bytes | OversizedLine]:
        """The unfinished last line, if any (the stream ended without a newline)."""
        return [self._finish()] if self._size else []

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._head is not None:
            if len(self._head) < KEPT_BYTES:
                self._head += piece[: KEPT_BYTES - len(self._head)]
            self._tail = (self._tail + piece)[-KEPT_BYTES:]
        elif self.max_bytes and self._size > self.max_bytes:
            line = b"".join([*self._pending, piece])
            self._head, self._tail = line[:KEPT_BYTES], line[-KEPT_BYTES:]
            self._pending.clear()
        else:
            self._pending.append(piece)

    def _finish(self) -> bytes | OversizedLine:
        line: bytes | OversizedLine
        if self._head is not None:
            line = OversizedLine(self._size, self._head, self._tail)
        else:
            line = b"".join(self._pending)
        self._pending.clear()
        self._size, self._head, self._tail = 0, None, b""
        return line


_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_JSONRPC = rb'(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?'
_ID_FIRST = re.compile(rb"\A\s*\{\s*" + _JSONRPC + rb'"id"\s*:\s*' + _ID + rb'\s*,\s*"(?:result|error)"\s*:')
_RESULT_FIRST = re.compile(rb"\A\s*\{\s*" + _JSONRPC + rb'"(?:result|error)"\s*:')
_ID_LAST = re.compile(rb',\s*"id"\s*:\s*' + _ID + rb"\s*\}\s*\Z")


def response_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the JSON-RPC response whose first and last bytes these are, or None.

    Only a response counts: ``{"jsonrpc": "2.0", "id": 7, "result": ...`` (id before
    ``result``/``error``, as the Python SDK writes it) or ``{"result": ..., "id": 7}`` (id as the
    last key, as the TypeScript SDK writes it). An ``id`` inside the result is never taken: the
    patterns are anchored at the line's ends. A request or a notification gives None.
    """
    match = _ID_FIRST.match(head) or (_ID_LAST.search(tail) if _RESULT_FIRST.match(head) else None)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:  # an escape json rejects
        return None
    return value if isinstance(value, int | str) else None


def oversize_text(server: str, size: int, limit: int) -> str:
    """What a call whose answer was too big fails with."""
    return f"server {server} sent a message of {size} bytes; the limit is {limit} (mcpServers.{server}.maxMessageBytes)"


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic cyclic garbage collection inside (nested and concurrent uses may overlap)."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def parse_message(line: bytes) -> types.JSONRPCMessage:
    """One JSON-RPC message from one line.

    Raises:
        ValueError: the line is not JSON (nesting deeper than 200 levels included) or not a
            JSON-RPC message (pydantic's ``ValidationError`` is a ``ValueError``).
    """
    data = pydantic_core.from_json(line)
    return types.jsonrpc_message_adapter.validate_python(data, by_name=False)
