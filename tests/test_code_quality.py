"""The code stays lint-clean (ruff) and type-clean (mypy --strict, configured in pyproject)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=110)


def test_ruff():
    pytest.importorskip("ruff")
    done = _run("ruff", "check", "mcp_agent", "servers", "tests", "bench")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict():
    pytest.importorskip("mypy")
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr
