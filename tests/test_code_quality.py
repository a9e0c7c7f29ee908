"""The code stays lint-clean (ruff) and type-clean (mypy --strict, configured in pyproject), and
reaches into private modules of its libraries only through the one adapter."""

from __future__ import annotations

import ast
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


def test_ruff_format():
    pytest.importorskip("ruff")
    done = _run("ruff", "format", "--check", "mcp_agent", "servers", "tests", "bench")
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


PRIVATE_OF = ("mcp", "uvicorn", "starlette")
"""Libraries whose ``_private`` modules only the adapter may import."""
ADAPTER = "mcp_agent/gateway/_internals.py"


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] in PRIVATE_OF and any(part.startswith("_") for part in parts[1:]):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    return found


def test_private_modules_of_the_sdk_are_imported_only_by_the_adapter():
    """``gateway/_internals.py`` holds every reach into a private part of mcp, uvicorn or Starlette
    (each pinned by a test and listed in docs/development.md's "Known limits"); nothing else imports one."""
    found = []
    for path in sorted((ROOT / "mcp_agent").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative == ADAPTER:
            continue
        found += _private_imports(path)
    assert found == []
    assert _private_imports(ROOT / ADAPTER), "the adapter no longer reaches anywhere: drop this exception"
