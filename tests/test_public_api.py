"""The public API is exactly what __all__ says, sorted, and every name resolves.

The names are loaded lazily (``__getattr__``), so the test reads the three lists that must agree:
``__all__``, ``_EXPORTS`` (where each name lives at run time) and the imports under
``TYPE_CHECKING`` (what type checkers see).
"""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import mcp_agent

INIT = Path(mcp_agent.__file__)


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse(INIT.read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    return {
        alias.asname or alias.name: "." * node.level + (node.module or "")
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.level
        for alias in node.names
    }


def test_all_is_sorted_and_unique():
    assert mcp_agent.__all__ == sorted(set(mcp_agent.__all__))


def test_all_matches_the_exports_and_what_type_checkers_see():
    assert set(mcp_agent._EXPORTS) == set(mcp_agent.__all__)
    assert _type_checking_imports() == mcp_agent._EXPORTS


def test_every_name_resolves_to_the_object_of_its_module():
    for name in mcp_agent.__all__:
        module = importlib.import_module(mcp_agent._EXPORTS[name], "mcp_agent")
        assert getattr(mcp_agent, name) is getattr(module, name)


def test_dir_lists_every_name_and_nothing_else_public():
    public = {
        name
        for name in dir(mcp_agent)
        if not name.startswith("_")
        and not isinstance(getattr(mcp_agent, name), type(mcp_agent))
        and name not in {"annotations", "TYPE_CHECKING"}
    }
    assert public == set(mcp_agent.__all__)


def test_an_unknown_name_is_an_attribute_error():
    try:
        mcp_agent.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_star_import_and_from_import_work_in_a_fresh_interpreter():
    code = (
        "from mcp_agent import *\n"
        "from mcp_agent import Agent, RunResult, ToolHub, open_tool_hub\n"
        "import mcp_agent\n"
        "assert all(globals()[name] is getattr(mcp_agent, name) for name in mcp_agent.__all__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=INIT.parent.parent
    )
    assert done.returncode == 0, done.stderr
