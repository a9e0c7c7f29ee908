"""The Makefile's set-up stamps, by ``make -n`` (what it would run) in a scratch folder.

``make run`` installs only what serving needs, ``make test`` adds the test extras; ``make test``
after ``make run`` adds them, ``make run`` after ``make test`` installs nothing. ``make
test-frameworks`` makes one virtual environment per agent framework from its pins, anew only when
they change. The real installs are tried from a clean clone by hand (they need the network); this
checks the logic.
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
    (tmp_path / "tests" / "frameworks").mkdir()
    for pins in (ROOT / "tests" / "frameworks").glob("*.txt"):
        shutil.copy(pins, tmp_path / "tests" / "frameworks" / pins.name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    old = (tmp_path / "pyproject.toml").stat().st_mtime - 100
    for path in (tmp_path / "pyproject.toml", *(tmp_path / "tests" / "frameworks").glob("*.txt")):
        os.utime(path, (old, old))
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


TEST_INSTALL = [
    ".venv/bin/python -m pip install --quiet -e '.[test]'",
    # AgentDojo for tests/agentdojo and BFCL for tests/bfcl, without the model SDKs they declare
    # (the Makefile says why)
    ".venv/bin/python -m pip install --quiet --no-deps agentdojo==0.1.35 bfcl-eval==2026.3.23",
]


def test_test_installs_the_test_extras(folder: Path) -> None:
    assert would_run(folder, "test") == TEST_INSTALL


def test_test_after_run_adds_the_extras(folder: Path) -> None:
    stamp(folder, ".installed-run")
    assert would_run(folder, "run") == []
    assert would_run(folder, "test") == TEST_INSTALL


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
    recipe = (
        (ROOT / "Makefile").read_text(encoding="utf-8").split("$(TEST_STAMP): ", 1)[1].split("\n\n", 1)[0]
    )
    assert "touch $(RUN_STAMP) $(TEST_STAMP)" in recipe


FRAMEWORKS = ["openai-agents", "langchain-mcp-adapters", "pydantic-ai-1", "pydantic-ai-2", "smolagents"]


def framework_installs(folder: Path) -> list[str]:
    return [line for line in would_run(folder, "test-frameworks") if " -r " in line]


def test_the_pins_are_the_frameworks_of_the_makefile() -> None:
    pins = sorted(path.stem for path in (ROOT / "tests" / "frameworks").glob("*.txt"))
    assert pins == sorted(FRAMEWORKS)
    assert f"FRAMEWORKS := {' '.join(FRAMEWORKS)}" in (ROOT / "Makefile").read_text(encoding="utf-8")


def test_test_frameworks_installs_each_framework_from_its_pins(folder: Path) -> None:
    stamp(folder, ".installed-run", ".installed-test")
    assert framework_installs(folder) == [
        f".venv-frameworks/{name}/bin/python -m pip install --quiet -r tests/frameworks/{name}.txt"
        for name in FRAMEWORKS
    ]
    assert would_run(folder, "test") == []  # make test installs none of them


def test_a_framework_is_made_anew_only_when_its_pins_change(folder: Path) -> None:
    stamp(folder, ".installed-run", ".installed-test")
    when = (folder / "pyproject.toml").stat().st_mtime + 10
    for name in FRAMEWORKS:
        installed = folder / ".venv-frameworks" / name / ".installed"
        installed.parent.mkdir(parents=True)
        installed.touch()
        os.utime(installed, (when, when))
    assert framework_installs(folder) == []
    later = when + 10
    os.utime(folder / "tests" / "frameworks" / "smolagents.txt", (later, later))
    assert framework_installs(folder) == [
        ".venv-frameworks/smolagents/bin/python -m pip install --quiet -r tests/frameworks/smolagents.txt"
    ]
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("$(FRAMEWORK_VENVS)/%/.installed:", 1)[1]
    assert recipe.split("\n\t", 2)[1].startswith("rm -rf $(FRAMEWORK_VENVS)/$*")  # anew: no stale packages


def test_the_scale_tier_runs_only_in_make_test_scale(folder: Path) -> None:
    """``make test`` leaves the ``scale`` marker out (pyproject's addopts); ``make test-scale``
    selects it, after the test extras, which carry the ``redis`` client."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    options = pyproject["tool"]["pytest"]["ini_options"]
    assert "not scale" in options["addopts"][options["addopts"].index("-m") + 1]
    assert any(marker.startswith("scale:") for marker in options["markers"])
    assert any(
        dependency.startswith("redis") for dependency in pyproject["project"]["optional-dependencies"]["test"]
    )
    stamp(folder, ".installed-run", ".installed-test")
    # --no-print-directory: under a make of its own (CI runs `make test`), make says where it is
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "test-scale"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == [".venv/bin/python -m pytest -q -m scale tests/scale"]
