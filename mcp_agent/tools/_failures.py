"""What went wrong with a tool server, in words: a failed start or a crash, with the exit code
and the tail of its stderr (a stdio child's), for the status, the log and failed calls."""

from __future__ import annotations

import anyio
from mcp import MCPError

from ..exceptions import ToolServerError, ToolServerExited, ToolServerStartError
from ._stdio import StdioChild

EXIT_WAIT_SECONDS = 1.0
"""How long a failure waits for a dying child's exit code."""
STDERR_SHOWN = 5
"""The lines of a child's stderr a failure quotes."""


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups (G5)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def error_text(error: ToolServerError) -> str:
    """The error without the leading server name (the status already names the server)."""
    text = str(error)
    prefix = f"{error.server}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


async def exit_info(child: StdioChild | None) -> tuple[int | None, tuple[str, ...]]:
    """The child's exit code (None: still running after a second, or no child) and stderr tail."""
    if child is None:
        return None, ()
    with anyio.move_on_after(EXIT_WAIT_SECONDS):
        await child.exited.wait()
    return child.returncode, child.stderr_tail(STDERR_SHOWN)


async def start_error(server: str, exc: BaseException, child: StdioChild | None) -> ToolServerStartError:
    """Why the start of ``server`` failed with ``exc`` (possibly an exception group)."""
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, ToolServerStartError):
            return leaf
    code, tail = await exit_info(child)
    if code is not None:
        message = "exited during start-up"
    else:
        leaf = next((e for e in leaves if isinstance(e, MCPError)), leaves[0])
        message = f"start-up failed: {type(leaf).__name__}: {leaf}"
    return ToolServerStartError(message, server=server, exit_code=code, stderr_tail=tail)


async def crash_error(server: str, child: StdioChild | None, exc: BaseException | None) -> ToolServerExited:
    """Why the running ``server`` went away (``exc``: what the transport raised, if anything)."""
    code, tail = await exit_info(child)
    if code is not None:
        message = "exited"
    elif child is not None:
        message = "closed its stdout"
    else:
        message = "connection closed" + (f": {_leaves(exc)[0]}" if exc is not None else "")
    return ToolServerExited(message, server=server, exit_code=code, stderr_tail=tail)
