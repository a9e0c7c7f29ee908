"""The code stays lint-clean (ruff) and type-clean (mypy --strict, configured in pyproject)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=110
    )


def test_ruff():
    pytest.importorskip("ruff")
    done = _run("ruff", "check", "mcp_agent", "servers", "tests", "bench")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict():
    pytest.importorskip("mypy")
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_symlinks_are_tracked():
    """A worktree's symlink to ``tests/npm/node_modules`` was committed twice; checked out, it
    replaced the real folder with a link to itself. Nothing in the repository is a symlink."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    links = [line.split("\t", 1)[1] for line in listed.stdout.splitlines() if line.startswith("120000 ")]
    assert links == []
