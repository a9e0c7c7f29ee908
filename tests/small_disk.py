"""A real small file system for the tests of a full disk: a tmpfs of a few megabytes, mounted
under the test's own folder (root only), filled to the last byte and freed again on demand.

``small_disk(folder, size)`` mounts it and unmounts it at the end; where mounting is impossible
(not root, no tmpfs in a container) the test is skipped, saying why. The tests that inject the
same SQLite errors at the ``sqlite3`` boundary (``tests/state/test_store_failures.py``) stand in
for it there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

CHUNK = 64 * 1024


class SmallDisk:
    """A mounted tmpfs at ``path``; ``fill`` takes every free byte, ``free`` gives them back."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.filler = path / "filler"

    def fill(self) -> None:
        """Write ``filler`` until the file system is full (bounded by its size)."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for _ in range(self.size // CHUNK + 16):
                try:
                    os.write(fd, b"\0" * CHUNK)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            for _ in range(CHUNK):  # the last bytes, one at a time
                try:
                    os.write(fd, b"\0")
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    return
        finally:
            os.close(fd)
        raise AssertionError(f"{self.path} did not fill up")

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@contextlib.contextmanager
def small_disk(path: Path, size: int = 4 * 1024 * 1024) -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` bytes mounted at ``path`` (made if missing) for the block; skips the test
    where it cannot be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the sqlite3-boundary tests stand in)")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path}: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield SmallDisk(path, size)
    finally:
        subprocess.run(["umount", "--lazy", str(path)], capture_output=True, timeout=30, check=False)
