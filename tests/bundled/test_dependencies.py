"""The bundled servers import only what pyproject.toml declares.

A fresh install gets exactly the declared dependencies (and whatever they declare), so every
third-party package a script in ``servers/`` imports, lazily inside a function too, must be in
``[project] dependencies``. So must the packages an import needs without its own metadata
saying so: trafilatura imports justext, whose ``core`` does ``from lxml.html.clean import
Cleaner``; since lxml 5.2 that module is a shim over the separate ``lxml_html_clean``
distribution, which only justext >= 3.0.1 pulls in (as ``lxml[html_clean]``; 3.0.0 declares plain
``lxml``, and an installer that drops extras loses it too). Without it every HTML page fails
with "lxml.html.clean module is now a separate project".
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from .harness import SERVERS_DIR

PYPROJECT = SERVERS_DIR.parent / "pyproject.toml"

NEEDS_WITHOUT_SAYING: Mapping[str, tuple[str, ...]] = {
    "trafilatura": ("lxml_html_clean",),  # trafilatura → justext.core → lxml.html.clean → lxml_html_clean
}
"""Import name → distributions it needs at run time that its own metadata may not pull in."""


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them: ``Foo_Bar.baz`` → ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a PEP 508 requirement names: ``"lxml[html_clean]>=5; os_name=='nt'"`` → ``lxml``."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return normalize(match.group(1))


def third_party_imports(source: str) -> set[str]:
    """The top-level names of every absolute import in ``source`` that is not the standard library.

    Imports inside functions count (a server may import a slow package lazily).
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names}


def undeclared(
    imports: Iterable[str], declared: Iterable[str], providers: Mapping[str, Sequence[str]]
) -> list[str]:
    """What is imported (or needed without saying) but not declared, one line per problem.

    Args:
        imports: Top-level import names.
        declared: Declared distribution names (any spelling).
        providers: Import name → the installed distributions that provide it
            (``importlib.metadata.packages_distributions()``).
    """
    wanted = {normalize(name) for name in declared}
    problems = []
    for name in sorted(set(imports)):
        dists = providers.get(name)
        if not dists:
            problems.append(f"{name}: imported, but no installed distribution provides it")
        elif not wanted & {normalize(dist) for dist in dists}:
            problems.append(f"{name}: imported, but none of {sorted(dists)} is a declared dependency")
        problems += [
            f"{need}: needed by {name} (not pulled in by its own metadata) but not declared"
            for need in NEEDS_WITHOUT_SAYING.get(name, ())
            if normalize(need) not in wanted
        ]
    return problems


def declared_dependencies(pyproject: Path) -> list[str]:
    """The distribution names in ``[project] dependencies``."""
    with pyproject.open("rb") as file:
        return [requirement_name(req) for req in tomllib.load(file)["project"]["dependencies"]]


@pytest.mark.parametrize("script", sorted(path.name for path in SERVERS_DIR.glob("*.py")))
def test_a_bundled_server_imports_only_declared_dependencies(script: str) -> None:
    imports = third_party_imports((SERVERS_DIR / script).read_text(encoding="utf-8"))
    assert imports, "the parser found no third-party import at all"
    problems = undeclared(
        imports, declared_dependencies(PYPROJECT), importlib.metadata.packages_distributions()
    )
    assert not problems, f"servers/{script}:\n" + "\n".join(problems)


def test_the_web_server_needs_lxml_html_clean_through_trafilatura() -> None:
    assert "trafilatura" in third_party_imports((SERVERS_DIR / "web.py").read_text(encoding="utf-8"))
    assert "lxml-html-clean" in declared_dependencies(PYPROJECT)


@pytest.mark.parametrize(
    ("source", "declared", "expected"),
    [
        ("import psutil\nimport os", ["psutil>=6"], []),
        ("import yaml", ["psutil"], ["yaml: imported, but none of ['PyYAML'] is a declared dependency"]),
        ("import yaml", ["pyyaml"], []),  # names compare normalized
        ("def f():\n    import nowhere_pkg\n", [], ["nowhere_pkg: imported, but no installed"]),
        ("from mcp.types import Tool", ["mcp[cli]>=2"], []),
        ("from . import sibling\nimport json", [], []),  # relative and stdlib imports are ours
        ("import trafilatura", ["trafilatura"], ["lxml_html_clean: needed by trafilatura"]),
        ("import trafilatura", ["trafilatura>=2", "lxml_html_clean"], []),
    ],
)
def test_undeclared_reports_each_missing_distribution(
    source: str, declared: list[str], expected: list[str]
) -> None:
    providers = {"psutil": ["psutil"], "yaml": ["PyYAML"], "mcp": ["mcp"], "trafilatura": ["trafilatura"]}
    problems = undeclared(third_party_imports(source), [requirement_name(d) for d in declared], providers)
    assert len(problems) == len(expected)
    for problem, start in zip(problems, expected, strict=True):
        assert problem.startswith(start), problem


@pytest.mark.parametrize(
    ("requirement", "name"),
    [
        ("mcp>=2.3,<3", "mcp"),
        ("lxml[html_clean]>=5.2", "lxml"),
        ("json-repair>=0.30", "json-repair"),
        ("lxml_html_clean ; python_version >= '3.11'", "lxml-html-clean"),
        ("Foo.Bar==1", "foo-bar"),
    ],
)
def test_requirement_name(requirement: str, name: str) -> None:
    assert requirement_name(requirement) == name
