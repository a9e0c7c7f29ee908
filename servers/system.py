"""system: disk space, memory and the busiest processes of this machine (an MCP server over stdio).

Run it as ``python servers/system.py``. Three narrow, read-only tools built on psutil:
``disk_usage(path)`` (the filesystem a path lies on: mount point, type, total/used/free),
``memory_usage()`` (RAM and swap) and ``top_processes(n, sort_by)`` (pid, name, CPU %, resident
memory, user). CPU % is measured the way ``top`` does it: every process is sampled twice,
``CPU_SAMPLE_SECONDS`` apart, and 100 % means one full core. Sizes are in binary units
(KiB, MiB, GiB).

``disk_usage`` is not a way to learn whether a path exists. A path only picks a filesystem,
and it does so by its text alone: the deepest mount point in psutil's mount table that
contains the absolute, normalised path (``..`` folded lexically, symlinks not followed, ``~``
and ``~/`` expanded to this server's home but ``~name`` left as it is). The path itself is never
looked at, so ``~/.ssh/id_ed25519`` and ``~/.ssh/no-such-key`` get the same answer, errors
included, and nothing says whether the path exists or what kind of file it is. The mount table
is no secret (any process can read /proc/self/mounts). The price: a path through a symlink to
another disk is placed by the symlink's own location; give the real path for that disk.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import psutil
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

logger = logging.getLogger("servers.system")

CPU_SAMPLE_SECONDS = 0.3
"""The interval between the two CPU samples of ``top_processes``."""
MAX_PROCESSES = 50
NAME_CHARS = 25
"""Process names are cut to this many characters to keep the table narrow."""

mcp = MCPServer(
    "system",
    version="1.0.0",
    log_level="WARNING",
    instructions="Answers questions about this machine's disks, memory and processes.",
)

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


# --------------------------------------------------------------------------------------------
# pure helpers


def human_bytes(count: float) -> str:
    """A byte count in binary units with one decimal: ``0 B``, ``512 B``, ``1.5 KiB``, ``2.0 GiB``."""
    value = float(count)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def absolute(path: str, home: str, cwd: str) -> str:
    """``path`` made absolute and normalised by its text alone, touching no file.

    ``~`` and ``~/...`` start at ``home``; ``~name`` is not expanded (that would reveal whether
    user ``name`` exists); a relative path starts at ``cwd``; ``..`` and ``.`` fold lexically.
    """
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return os.path.normpath(os.path.join(cwd, path))


def containing_mount(path: str, mounts: Iterable[str]) -> str:
    """The deepest of ``mounts`` that contains the absolute, normalised ``path`` by its text.

    ``/`` when none does. ``/home`` contains ``/home`` and ``/home/x`` but not ``/homework``.
    """
    best = os.path.abspath(os.sep)
    for mount in mounts:
        if (path == mount or path.startswith(os.path.join(mount, ""))) and len(mount) > len(best):
            best = mount
    return best


@dataclass(frozen=True)
class ProcessRow:
    """One line of the process table."""

    pid: int
    name: str
    cpu_percent: float
    rss: int
    user: str


def format_processes(rows: list[ProcessRow], *, total: int, sort_by: str, sample: float) -> str:
    """The answer of ``top_processes``: a header and one aligned row per process."""
    width = max([len(row.name) for row in rows] + [4])
    lines = [
        f"Top {len(rows)} of {total} processes by {sort_by} (CPU sampled over {sample:g} s; "
        f"100% = one core; rss = resident memory):",
        f"{'pid':>7}  {'name':<{width}}  {'cpu%':>6}  {'rss':>10}  user",
    ]
    for row in rows:
        lines.append(
            f"{row.pid:>7}  {row.name:<{width}}  {row.cpu_percent:>6.1f}  {human_bytes(row.rss):>10}  {row.user}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# tools

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@mcp.tool(
    annotations=_READ_ONLY,
    structured_output=False,
    description=(
        "Disk space of the filesystem that a path lies on, on this machine (default '/'): its mount "
        "point, filesystem type and device, total, used and free space in human units, and percent "
        "used. The path only picks the filesystem, by its text and the mount table (it need not "
        "exist, and symlinks are not followed). The answer is complete; do not call again for the "
        "same path."
    ),
)
def disk_usage(
    path: Annotated[
        str, Field(description="A file or folder on this machine; '~' is the home folder. Default '/'.")
    ] = "/",
) -> str:
    if not path.strip():
        raise ToolError("path is empty; give a file or folder such as '/' or '/home'")
    full = absolute(path.strip(), os.path.expanduser("~"), os.getcwd())
    parts = {p.mountpoint: p for p in psutil.disk_partitions(all=True)}  # the last of a stack is on top
    mount = containing_mount(full, parts)
    try:
        usage = psutil.disk_usage(mount)
    except OSError as exc:
        raise ToolError(
            f"cannot read disk usage of the filesystem mounted at {mount}: {exc.strerror or exc}"
        ) from None
    part = parts.get(mount)
    kind = f" ({part.fstype}, {part.device})" if part is not None and part.fstype else ""
    where = f"{path} is on the filesystem mounted at {mount}{kind}" if full != mount else f"{mount}{kind}"
    return (
        f"{where}: total {human_bytes(usage.total)}, used {human_bytes(usage.used)} "
        f"({usage.percent:.1f}%), free {human_bytes(usage.free)}."
    )


@mcp.tool(
    annotations=_READ_ONLY,
    structured_output=False,
    description=(
        "Memory of this machine: RAM (total, used, available, percent in use) and swap (total, used, "
        "free, percent in use). 'available' is what new programs can still get without swapping. "
        "The answer is complete; do not call again for the same question."
    ),
)
def memory_usage() -> str:
    ram = psutil.virtual_memory()
    swap = psutil.swap_memory()
    lines = [
        f"RAM: total {human_bytes(ram.total)}, used {human_bytes(ram.used)}, "
        f"available {human_bytes(ram.available)} ({ram.percent:.1f}% in use)."
    ]
    if swap.total:
        lines.append(
            f"Swap: total {human_bytes(swap.total)}, used {human_bytes(swap.used)}, "
            f"free {human_bytes(swap.free)} ({swap.percent:.1f}% in use)."
        )
    else:
        lines.append("Swap: none configured.")
    return "\n".join(lines)


def _info(proc: psutil.Process) -> dict[str, Any] | None:
    try:
        with proc.oneshot():
            rss = proc.memory_info().rss
            name = proc.name()[:NAME_CHARS]
            try:
                user = proc.username()
            except (psutil.AccessDenied, KeyError):
                user = "?"
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return {"name": "?", "rss": 0, "user": "?"}
    return {"name": name, "rss": rss, "user": user}


@mcp.tool(
    annotations=_READ_ONLY,
    structured_output=False,
    description=(
        "The processes of this machine using the most memory or CPU, as a table: pid, name, CPU % "
        "(measured over 0.3 s; 100% = one full core), resident memory (rss) and user. "
        "The table is complete; do not call again for the same question."
    ),
)
def top_processes(
    n: Annotated[int, Field(ge=1, le=MAX_PROCESSES, description="How many processes to list (1-50).")] = 10,
    sort_by: Annotated[
        Literal["cpu", "memory"], Field(description="'memory' (resident memory) or 'cpu' (CPU %).")
    ] = "memory",
) -> str:
    procs = list(psutil.process_iter())
    for proc in procs:  # the first cpu_percent() call of a Process object only starts its clock
        try:
            proc.cpu_percent(None)
        except psutil.Error:
            continue
    time.sleep(CPU_SAMPLE_SECONDS)
    rows = []
    for proc in procs:
        try:
            cpu = proc.cpu_percent(None)
        except psutil.Error:
            continue
        info = _info(proc)
        if info is not None:
            rows.append(ProcessRow(pid=proc.pid, cpu_percent=cpu, **info))
    key = (lambda r: (r.cpu_percent, r.rss)) if sort_by == "cpu" else (lambda r: (r.rss, r.cpu_percent))
    rows.sort(key=key, reverse=True)
    return format_processes(rows[:n], total=len(rows), sort_by=sort_by, sample=CPU_SAMPLE_SECONDS)


def main() -> None:
    """Serve the tools over stdio."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    mcp.run()


if __name__ == "__main__":
    main()
