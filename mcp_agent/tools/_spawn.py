"""Starting a child process that dies with us: ``open_child_process``.

On Linux the child asks the kernel for ``PR_SET_PDEATHSIG`` before it runs its command, so it
gets SIGTERM when we die, even by SIGKILL, when nothing of ours runs to stop it. SIGTERM rather
than SIGKILL: the launchers most servers run under (``npx``, ``uvx``) pass SIGTERM on to the
real server (and a script ending in ``exec`` becomes the server: the setting survives exec),
and any server gets a chance to stop its own children; SIGKILL would orphan the real server
behind every launcher. A child that ignores SIGTERM outlives us until the next start reaps it
(``_orphans.py``).

How: anyio's ``open_process`` has no ``preexec_fn``, so on asyncio the child is spawned with
``loop.subprocess_exec(..., preexec_fn=...)`` and wrapped in a small ``anyio.abc.Process``
with anyio's semantics. The fork happens on the event loop's thread, and the parent-death
signal fires when the thread that forked exits: the loop's thread lives as long as anything
that could stop the child. Between the fork and the ``prctl`` we may already have died; the
child then sees another parent and exits. ``preexec_fn`` makes ``subprocess`` fork instead
of vfork, which costs (2 cores, 75 MB gateway process) about 1.7 ms more per bare spawn and
about 4-5 ms more per server start from spawn to tools listed (copy-on-write faults in the
parent until the child execs); a Python exec shim would cost about 7.5 ms per spawn. It also
runs Python in the child before exec, so the hook does as little as possible: two system calls
through a function resolved beforehand. Elsewhere
(not Linux, not asyncio, no ``prctl``) children are spawned by ``anyio.open_process`` without
the signal.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import cache

import anyio
import anyio.abc
import anyio.lowlevel

PR_SET_PDEATHSIG = 1
PARENT_DEATH_SIGNAL = signal.SIGTERM
"""What a child gets when we die (see the module docstring for why not SIGKILL)."""
_PIPE_LIMIT = 2**16


async def open_child_process(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None
) -> anyio.abc.Process:
    """Start ``argv`` in a new session (its own process group), with pipes for stdin, stdout and
    stderr; on Linux with asyncio the child dies with us (``PR_SET_PDEATHSIG``).

    Raises:
        OSError: the command cannot be started (``FileNotFoundError`` for a missing command or
            working folder).
    """
    hook = die_with_parent_hook(os.getpid())
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend
        hook = None
    if hook is None:
        return await anyio.open_process(list(argv), env=env, cwd=cwd, start_new_session=True)
    # shielded: cancelled halfway, asyncio kills the child but no longer waits for it, and the
    # child is reaped (if ever) by a watcher whose loop may be gone; whole, the caller stops it
    with anyio.CancelScope(shield=True):
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=hook,
        )
    return _Process(transport, protocol)


@cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def die_with_parent_hook(parent: int) -> Callable[[], None] | None:
    """The ``preexec_fn`` that makes a child die with ``parent`` (the pid of the process that
    forks it), or None where that is unsupported. A child whose parent is no longer ``parent``
    when it runs (it died meanwhile) exits with status 1 instead of running its command."""
    prctl = _prctl()
    if prctl is None:
        return None
    signum = int(PARENT_DEATH_SIGNAL)

    def die_with_parent() -> None:  # runs in the child between fork and exec: keep it minimal
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # we died before the prctl: nobody will send the signal
            os._exit(1)

    return die_with_parent


# -------------------------------------------------------------------- anyio Process over asyncio


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol plus an ``exited`` event: its own ``wait()`` also waits for
    every pipe to close, which a grandchild holding stdout open can delay forever."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_PIPE_LIMIT, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


class _Receive(anyio.abc.ByteReceiveStream):
    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self._stream.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._stream.set_exception(anyio.ClosedResourceError())
        await anyio.lowlevel.checkpoint()


class _Send(anyio.abc.ByteSendStream):
    def __init__(self, stream: asyncio.StreamWriter) -> None:
        self._stream = stream
        self._closed = False

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            self._stream.write(item)
            await self._stream.drain()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True
        self._stream.close()
        await anyio.lowlevel.checkpoint()


class _Process(anyio.abc.Process):
    """An asyncio subprocess as an ``anyio.abc.Process`` (what ``anyio.open_process`` returns)."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._pid: int = transport.get_pid()
        self._stdin = _Send(protocol.stdin) if protocol.stdin else None
        self._stdout = _Receive(protocol.stdout) if protocol.stdout else None
        self._stderr = _Receive(protocol.stderr) if protocol.stderr else None

    async def aclose(self) -> None:
        """Close the pipes (a child blocked on a full pipe then gets SIGPIPE) and wait for the
        exit; cancelled while waiting, kill the child and wait for it."""
        with anyio.CancelScope(shield=True) as scope:
            for fd, stream in ((0, self._stdin), (1, self._stdout), (2, self._stderr)):
                if stream is not None:
                    await stream.aclose()
                    if pipe := self._transport.get_pipe_transport(fd):
                        pipe.close()
            scope.shield = False
            try:
                await self.wait()
            except BaseException:
                scope.shield = True
                self._transport.close()  # kills the child if it still runs
                await self.wait()
                raise

    async def wait(self) -> int:
        await self._protocol.exited.wait()
        code = self._transport.get_returncode()
        assert code is not None
        return code

    def terminate(self) -> None:
        self._transport.terminate()

    def kill(self) -> None:
        self._transport.kill()

    def send_signal(self, signal: int) -> None:
        self._transport.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stderr
