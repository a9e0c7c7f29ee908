"""The Makefile's two set-up stamps, by ``make -n`` (what it would run) in a scratch folder.

``make run`` installs only what serving needs, ``make test`` adds the test extras; ``make test``
after ``make run`` adds them, ``make run`` after ``make test`` installs nothing. The real
installs are tried from a clean clone by hand (they need the network); this checks the logic.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "tests" / "npm").mkdir(parents=True)  # make test also installs the npm test servers
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "tests" / "npm" / name, tmp_path / "tests" / "npm" / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    old = (tmp_path / "pyproject.toml").stat().st_mtime - 100
    os.utime(tmp_path / "pyproject.toml", (old, old))
    return tmp_path


def would_run(folder: Path, target: str) -> list[str]:
    done = subprocess.run(["make", "-n", target], cwd=folder, capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if "pip install" in line]


def stamp(folder: Path, *names: str) -> None:
    """Stamps made after pyproject.toml was written (explicit times: no same-tick ties)."""
    when = (folder / "pyproject.toml").stat().st_mtime + 10
    for name in names:
        (folder / ".venv" / name).touch()
        os.utime(folder / ".venv" / name, (when, when))


def test_run_installs_only_what_serving_needs(folder: Path) -> None:
    assert would_run(folder, "run") == [".venv/bin/python -m pip install --quiet -e ."]


def test_test_installs_the_test_extras(folder: Path) -> None:
    assert would_run(folder, "test") == [".venv/bin/python -m pip install --quiet -e '.[test]'"]


def test_test_after_run_adds_the_extras(folder: Path) -> None:
    stamp(folder, ".installed-run")
    assert would_run(folder, "run") == []
    assert would_run(folder, "test") == [".venv/bin/python -m pip install --quiet -e '.[test]'"]


def test_run_after_test_installs_nothing(folder: Path) -> None:
    stamp(folder, ".installed-run", ".installed-test")  # what the test recipe touches
    assert would_run(folder, "run") == []
    assert would_run(folder, "test") == []


def test_a_changed_pyproject_installs_again(folder: Path) -> None:
    stamp(folder, ".installed-run", ".installed-test")
    later = (folder / ".venv" / ".installed-run").stat().st_mtime + 10
    os.utime(folder / "pyproject.toml", (later, later))
    assert would_run(folder, "run") == [".venv/bin/python -m pip install --quiet -e ."]


def test_the_test_recipe_refreshes_both_stamps() -> None:
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("$(TEST_STAMP): ", 1)[1].split("\n\n", 1)[0]
    assert "touch $(RUN_STAMP) $(TEST_STAMP)" in recipe
