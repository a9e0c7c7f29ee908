"""Where mcp-agent keeps state between runs: one folder, resolved in one place, and kept private.

``$MCP_AGENT_STATE_DIR`` when set, else ``$XDG_STATE_HOME/mcp-agent``, else
``~/.local/state/mcp-agent``. It holds ``state.db`` (conversations, approvals and run records,
when ``state.url`` is not set: ``serve`` and ``query --session``) and ``children/`` (the record of
running tool-server processes, so a gateway that was killed can be cleaned up after by the next
start); ``sessions.imported/`` holds the JSON conversations of earlier versions, once imported.

**Private by default.** Every folder mcp-agent creates there (and in ``gateway.recordDir``, and
for a ``state.url`` SQLite file) is the user's alone, 0700, and every file 0600: ``private_dirs``,
``write_private`` (atomic, through a temporary file), ``open_private`` and ``create_private``
give them that mode as they create them. SQLite gives a database's ``-wal`` and ``-shm`` files
the mode of the database file, so ``create_private`` makes the file before SQLite opens it.
These helpers set the mode of what they create rather than the process's umask: mcp_agent is
also a library, and the umask belongs to the program that embeds it, is shared by all its
threads and would change the mode of every file that program creates (and setting it back for a
moment is a race).

**A folder that is ours.** ``private_folder`` (the state folder, ``gateway.recordDir``) refuses a
folder owned by another user or writable by group or others (``ConfigError`` naming the fix):
another local user could read the conversations there and replace the tool cache. A folder of
ours that others can only read (0755: what earlier versions created) is tightened to 0700 with a
warning; the files it holds keep their modes, but nobody else can reach them any more.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import IO

from ..exceptions import ConfigError

logger = logging.getLogger(__name__)

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
_OTHERS = 0o077
_WRITABLE_BY_OTHERS = 0o022
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)  # not on Windows


def state_dir() -> Path:
    """The state folder, as configured (not created here: ``private_state_dir`` creates and checks it)."""
    if folder := os.environ.get("MCP_AGENT_STATE_DIR"):
        return Path(folder)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "mcp-agent"


def private_state_dir() -> Path:
    """The state folder, created owner-only when missing and checked by ``private_folder``.

    Raises:
        ConfigError: it belongs to another user or others may write into it.
    """
    return private_folder(
        state_dir(), what="the state folder", other="set MCP_AGENT_STATE_DIR to a folder of your own"
    )


def private_folder(path: str | os.PathLike[str], *, what: str, other: str) -> Path:
    """``path``, created owner-only when missing (parents too), refused when it is not ours.

    A folder that cannot be created is returned as it is: whoever writes into it says why it
    failed. One that others may read but not write is tightened to 0700 (a warning).

    Args:
        path: the folder.
        what: what it is, for messages ("the state folder").
        other: how to choose another one, for messages ("set MCP_AGENT_STATE_DIR to ...").

    Raises:
        ConfigError: it is not a folder, belongs to another user, or is writable by group or others.
    """
    folder = Path(path)
    with suppress(OSError):
        private_dirs(folder)
    try:
        info = os.stat(folder)
    except OSError:
        return folder
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{what} {folder} is not a folder: {other}")
    if os.name != "posix":  # no owner and mode bits to check (Windows: the folder's ACL decides)
        return folder
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.geteuid():
        raise ConfigError(
            f"{what} {folder} belongs to another user (uid {info.st_uid}, not {os.geteuid()}), who could read "
            f"and replace what mcp-agent keeps there: {other}, or make it yours: "
            f"chown {os.geteuid()} {folder} && chmod 700 {folder}"
        )
    if mode & _WRITABLE_BY_OTHERS:
        who = (
            "group and others" if mode & 0o020 and mode & 0o002 else "its group" if mode & 0o020 else "others"
        )
        raise ConfigError(
            f"{what} {folder} is writable by {who} (mode {mode:04o}): another local user could replace or read "
            f"what mcp-agent keeps there. Make it private: chmod 700 {folder}; or {other}"
        )
    if mode & _OTHERS:
        try:
            os.chmod(folder, mode & ~_OTHERS)
        except OSError as exc:
            logger.warning(
                "%s %s is readable by other users (mode %04o) and cannot be made private: %s",
                what,
                folder,
                mode,
                exc,
            )
        else:
            logger.warning(
                "%s %s was readable by other users (mode %04o, as earlier versions made it); it is now %04o",
                what,
                folder,
                mode,
                mode & ~_OTHERS,
            )
    return folder


def private_dirs(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` and its missing parents, each 0700; existing ones stay as they are.

    Raises:
        OSError: one cannot be created.
    """
    folder = Path(path)
    missing = []
    probe = folder
    while not probe.is_dir() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    for each in reversed(missing):
        with suppress(FileExistsError):
            os.mkdir(each, PRIVATE_DIR)
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder")
    return folder


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path``, 0600, atomically (a temporary file in its folder, renamed over it).

    Raises:
        OSError: it cannot be written (nothing is left behind).
    """
    target = Path(path)
    folder = private_dirs(target.parent)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def open_private(path: str | os.PathLike[str]) -> IO[str]:
    """Open ``path`` for writing text (created or emptied), 0600; a file there before is made 0600 too.

    Raises:
        OSError: it cannot be opened.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _CLOEXEC, PRIVATE_FILE)
    try:
        if os.name == "posix" and stat.S_IMODE(os.fstat(fd).st_mode) & _OTHERS:
            os.fchmod(fd, PRIVATE_FILE)
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def create_private(path: str | os.PathLike[str]) -> bool:
    """Create ``path`` as an empty 0600 file unless something is there (which is left as it is).

    Returns whether it was created. SQLite creates a database's ``-wal`` and ``-shm`` files with
    the mode of the database file: a database created this way keeps all three private.

    Raises:
        OSError: it cannot be created.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, PRIVATE_FILE))
    except FileExistsError:
        return False
    return True
