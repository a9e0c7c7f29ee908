"""The conformance tier's own machinery, checked in the fast tier: its verdict files are true to
what the runner knows, the runner judges a run as its docstring says, and the fixture answers
both eras over stdio. The tier itself (the suite, with Node 22) runs in ``make test-conformance``
only."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.conformance.run import (
    CLIENT,
    CLIENT_LEGS,
    EXPECTED,
    GAPS,
    GENERIC,
    REQUIREMENTS,
    SETS,
    TARGETS,
    Listed,
    Verdict,
    auth_scenarios,
    judge,
    load_listed,
    required_scenarios,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "servers" / "conformance.py"
SCENARIO_NAME = re.compile(r"^[a-z0-9][a-z0-9_/-]*$")


def entries(path: Path) -> list[dict[str, object]]:
    return list(json.loads(path.read_text())["entries"])


def test_every_verdict_entry_names_a_set_a_target_a_reason_and_a_scenario_that_target_runs() -> None:
    for path in (EXPECTED, GAPS):
        for entry in entries(path):
            assert set(entry) <= {"scenario", "set", "targets", "reason", "checks"}, entry
            assert entry["set"] in SETS, entry
            assert isinstance(entry["reason"], str) and len(entry["reason"]) > 20, entry
            scenario = str(entry["scenario"])
            assert SCENARIO_NAME.match(scenario), entry
            for target in entry["targets"]:  # type: ignore[attr-defined]
                assert target in (*TARGETS, *CLIENT_LEGS), entry
                if target == "client-auth" and REQUIREMENTS.exists():
                    assert scenario in auth_scenarios(str(entry["set"])), entry
                elif target in CLIENT_LEGS and target != "client-auth":
                    assert scenario in CLIENT[str(entry["set"])], entry
                if target == "d":
                    assert scenario in GENERIC[str(entry["set"])], entry
                if REQUIREMENTS.exists() and target in {"a", "b", "c", "e", "f"}:  # the suite is installed
                    assert scenario in required_scenarios(str(entry["set"])), entry


def test_a_gateway_gap_is_never_the_fixture_s_and_no_key_is_listed_twice() -> None:
    expected, gaps = load_listed(EXPECTED), load_listed(GAPS)
    assert not set(expected) & set(gaps)
    assert all(target not in {"a", "client-sdk"} for _, _, target in gaps), "no gateway there"
    assert len(load_listed(GAPS)) == sum(len(e["targets"]) for e in entries(GAPS))  # type: ignore[arg-type]


def test_the_suite_and_its_node_are_pinned_exactly_and_locked() -> None:
    npm = ROOT / "tests" / "conformance" / "npm"
    pins = json.loads((npm / "package.json").read_text())["dependencies"]
    lock = json.loads((npm / "package-lock.json").read_text())["packages"]
    assert pins["@modelcontextprotocol/conformance"] == "0.2.0-alpha.12"
    assert pins["node"].startswith("22.")
    for name, version in pins.items():
        assert lock[f"node_modules/{name}"]["version"] == version


def test_make_and_ci_run_the_tier_after_the_browser_tier() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-conformance: .*\$\(CONFORMANCE_STAMP\)", makefile, re.M)
    assert "-m tests.conformance.run" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("make test-browser") < ci.index("make test-conformance")


def verdict(scenario: str, target: str, *failing: str) -> Verdict:
    return Verdict(
        scenario, "2026-07-28", target, not failing, 3 - len(failing), 3, list(failing), set(failing)
    )


def test_judge_fails_an_unlisted_failure_and_passes_a_listed_one() -> None:
    gap = {("s", "2026-07-28", "b"): Listed("the gateway drops it")}
    assert judge([verdict("s", "a"), verdict("s", "b", "x")], {}, gap) == []
    [problem] = judge([verdict("s", "a"), verdict("s", "c", "x")], {}, gap)
    assert problem.startswith("FAILS, listed nowhere: s [2026-07-28, c]")


def test_judge_fails_a_listed_entry_that_passes_now() -> None:
    gap = {("s", "2026-07-28", "b"): Listed("the gateway drops it")}
    [problem] = judge([verdict("s", "a"), verdict("s", "b")], {}, gap)
    assert problem == "PASSES now, remove it from gateway-gaps.json: s [2026-07-28, b]"
    [problem] = judge([verdict("s", "a")], {("s", "2026-07-28", "a"): Listed("the suite's own gap")}, {})
    assert "remove it from expected-failures.json" in problem


def test_judge_holds_an_entry_to_the_checks_it_names() -> None:
    gap = {("s", "2026-07-28", "b"): Listed("one check", frozenset({"x", "y"}))}
    assert judge([verdict("s", "a"), verdict("s", "b", "x", "y")], {}, gap) == []
    [problem] = judge([verdict("s", "a"), verdict("s", "b", "x", "z")], {}, gap)
    assert "FAILS, listed nowhere" in problem and "['z']" in problem
    [problem] = judge([verdict("s", "a"), verdict("s", "b", "x")], {}, gap)
    assert problem == "checks ['y'] pass now, remove them from gateway-gaps.json: s [2026-07-28, b]"


def test_judge_refuses_a_gateway_gap_that_fails_directly_too() -> None:
    gap = {("s", "2026-07-28", "b"): Listed("the gateway drops it")}
    problems = judge([verdict("s", "a", "x"), verdict("s", "b", "x")], {}, gap)
    assert any("fails directly too" in problem for problem in problems)


async def test_the_fixture_answers_both_eras_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)], cwd=str(ROOT))
    with open(tmp_path / "stderr.txt", "w") as errlog, anyio.fail_after(60):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {
                "test_simple_text",
                "test_input_required_result_elicitation",
                "json_schema_2020_12_tool",
            } <= names
            result = await session.call_tool("test_simple_text", {})
            assert result.content == [types.TextContent(text="This is a simple text response for testing.")]
        async with Client(stdio_client(params, errlog=errlog)) as client:  # the SDK's auto mode
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("test_simple_text", {})
            assert result.content == [types.TextContent(text="This is a simple text response for testing.")]
            with pytest.raises(MCPError) as refused:  # this client declared no sampling capability
                await client.call_tool("test_missing_capability", {})
            assert refused.value.error.code == -32021
