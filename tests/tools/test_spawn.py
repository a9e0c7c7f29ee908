"""Children die with us: on Linux they ask for SIGTERM on our death before running their command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import anyio
import pytest

from mcp_agent.tools.stdio.processes import die_with_parent_hook, open_child_process

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# prints the child's own parent-death signal (PR_GET_PDEATHSIG), then echoes stdin to stdout
REPORT = (
    "import ctypes, sys; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v)); "
    "print(v.value, flush=True); sys.stdout.write(sys.stdin.read())"
)


@linux_only
async def test_a_child_asks_for_sigterm_when_its_parent_dies() -> None:
    with anyio.fail_after(20):
        process = await open_child_process([sys.executable, "-c", REPORT], env=dict(os.environ))
        async with process:
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send(b"round trip\n")
            await process.stdin.aclose()
            output = b""
            with pytest.raises(anyio.EndOfStream):
                while True:
                    output += await process.stdout.receive()
            assert await process.wait() == 0
    assert output.split() == [str(int(signal.SIGTERM)).encode(), b"round", b"trip"]
    assert os.getpgid(0) != process.pid  # its own process group


@linux_only
def test_a_child_whose_parent_died_before_asking_exits_instead_of_running() -> None:
    # the hook compares the child's parent with the pid given: a different one means "died"
    hook = die_with_parent_hook(os.getpid())
    ran = subprocess.run([sys.executable, "-c", "print('ran')"], preexec_fn=hook, capture_output=True)
    assert (ran.returncode, ran.stdout) == (0, b"ran\n")
    orphaned = die_with_parent_hook(os.getpid() + 1)
    lost = subprocess.run([sys.executable, "-c", "print('ran')"], preexec_fn=orphaned, capture_output=True)
    assert (lost.returncode, lost.stdout) == (1, b"")


async def test_a_missing_command_is_file_not_found() -> None:
    with pytest.raises(FileNotFoundError):
        await open_child_process(["no-such-command-mcp-agent"], env=dict(os.environ))
