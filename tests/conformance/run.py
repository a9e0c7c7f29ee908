"""The conformance tier: the official MCP conformance suite against this project.

    .venv/bin/python -m tests.conformance.run [--targets a,b,c,d,e,f] [--sets 2025-11-25,2026-07-28]
                                              [--no-client] [--legs client,...,client-auth] [--keep DIR]

The suite (``@modelcontextprotocol/conformance``, pinned in ``npm/package.json`` with the Node
22 it needs from npm's ``node`` package; ``make test-conformance`` installs both) runs its
server scenarios, each requirement set at its own wire, against six targets:

- ``a``: the fixture ``tests/servers/conformance.py`` directly, over Streamable HTTP;
- ``b``: ``mcp-agent serve`` with ``exposeTools`` and ``toolPrefix: ""`` in front of the fixture,
  the fixture an HTTP upstream;
- ``c``: the same with the fixture a stdio upstream;
- ``e`` and ``f``: ``b`` and ``c`` with the gateway speaking the handshake era to the fixture
  (``protocol: legacy``); in ``b`` and ``c`` it speaks what the fixture does best, 2026-07-28;
- ``d``: the gateway's own endpoint (``agent_query`` only), for the scenarios that apply to any
  server (``GENERIC``).

Then its client scenarios (not the auth ones), three ways: ``client``, the gateway (its ToolHub)
as the client; ``client-sdk``, the MCP SDK's ``Client`` directly, the reference; and
``client-through``, that SDK client talking through ``mcp-agent serve`` to the scenario's server.
And its authorization scenarios (``auth/*``, with the client-credentials extension's two) as
``client-auth``: the gateway as the OAuth client (``mcp-agent login``, then the ToolHub).
``client.py`` is the command the suite runs with the scenario server's URL.

Each process gets a free 127.0.0.1 port, is waited for, and is stopped by its pid. The suite
writes one ``checks.json`` per scenario; those files are parsed (never the console text). A
scenario passes when none of its checks is a ``FAILURE``.

Verdicts: ``expected-failures.json`` lists what fails for reasons of the suite or the fixture
(never of the gateway); ``gateway-gaps.json`` lists what fails through the gateway today and
passes directly. The run fails when a scenario fails that neither lists, or when a listed one
now passes (the lists stay true). It prints a JSON summary on stdout and a table on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conformance.processes import fixture_http, gateway

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NPM = HERE / "npm"
NODE = NPM / "node_modules" / ".bin" / "node"
SUITE = NPM / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
REQUIREMENTS = NPM / "node_modules" / "@modelcontextprotocol" / "conformance" / "requirements"
FIXTURE = ROOT / "tests" / "servers" / "conformance.py"
EXPECTED = HERE / "expected-failures.json"
GAPS = HERE / "gateway-gaps.json"
SETS = ("2025-11-25", "2026-07-28")
TARGETS = ("a", "b", "c", "d", "e", "f")
TARGET_NAMES = {
    "a": "fixture directly (HTTP)",
    "b": "gateway, exposeTools, HTTP upstream",
    "c": "gateway, exposeTools, stdio upstream",
    "d": "gateway's own agent_query endpoint",
    "e": "gateway, exposeTools, HTTP upstream, legacy era",
    "f": "gateway, exposeTools, stdio upstream, legacy era",
    "client": "gateway as the client (ToolHub)",
    "client-sdk": "SDK client directly (reference)",
    "client-through": "SDK client through the gateway",
    "client-auth": "gateway as the OAuth client (login, ToolHub)",
}
CLIENT_LEGS = {"client": "hub", "client-sdk": "sdk", "client-through": "through", "client-auth": "login"}
# what a gap of a target is measured against: it must pass there
DIRECT = {"b": "a", "c": "a", "e": "a", "f": "a", "client": "client-sdk", "client-through": "client-sdk"}
# The server scenarios that ask nothing of a server's tools, resources or prompts: target d.
GENERIC = {
    "2025-11-25": [
        "server-initialize",
        "ping",
        "tools-list",
        "dns-rebinding-protection",
        "server-session-lifecycle",
    ],
    "2026-07-28": [
        "server-stateless",
        "tools-list",
        "dns-rebinding-protection",
        "input-required-result-unsupported-methods",
        "http-header-validation",
    ],
}
# The client scenarios run with the gateway as the client: each set's own, but the auth ones.
CLIENT = {
    "2025-11-25": [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "json-schema-2020-12-preservation",
    ],
    "2026-07-28": [
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ],
}
# The authorization scenarios, with the gateway as the OAuth client (``client-auth``): every one a
# set's ``client`` leg lists, and the client-credentials extension's two (not scored).
EXTENSION_AUTH = ["auth/client-credentials-basic", "auth/client-credentials-jwt"]


def auth_scenarios(requirement_set: str) -> list[str]:
    listed = required_scenarios(requirement_set, "client", scored_only=True)
    return [name for name in listed if name.startswith("auth/")] + EXTENSION_AUTH


PARALLEL = 3  # client scenarios run at once
SCENARIO_DIR = re.compile(r"^(?P<name>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def required_scenarios(requirement_set: str, leg: str = "server", *, scored_only: bool = False) -> list[str]:
    """The scenarios a requirement set runs for ``leg`` (its list and, unless ``scored_only``, its
    ``not_scored`` entries), read from the suite's own ``requirements/<set>.yaml`` (a flat YAML:
    no parser needed)."""
    names: list[str] = []
    section = None
    not_scored: list[dict[str, str]] = []
    for line in (REQUIREMENTS / f"{requirement_set}.yaml").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            section = line.rstrip(":").strip()
            continue
        item = line.strip()
        if section == leg and item.startswith("- "):
            names.append(item[2:].strip())
        elif section == "not_scored":
            if item.startswith("- scenario:"):
                not_scored.append({"scenario": item.split(":", 1)[1].strip()})
            elif item.startswith("leg:") and not_scored:
                not_scored[-1]["leg"] = item.split(":", 1)[1].strip()
    if not scored_only:
        names += [entry["scenario"] for entry in not_scored if entry.get("leg") == leg]
    return names


@contextlib.contextmanager
def target(name: str, folder: Path) -> Iterator[str]:
    """The MCP URL of target ``name`` while it runs."""
    folder.mkdir(parents=True, exist_ok=True)
    if name == "a":
        with fixture_http(folder, FIXTURE) as url:
            yield url
    elif name in ("b", "e"):  # e: the gateway speaks the handshake era to its upstream
        era = {"protocol": "legacy"} if name == "e" else {}
        with (
            fixture_http(folder, FIXTURE) as upstream,
            gateway(
                folder / "gateway",
                {"fx": {"url": upstream.replace("localhost", "127.0.0.1"), "toolPrefix": "", **era}},
                expose=True,
            ) as url,
        ):
            yield url
    elif name in ("c", "f"):
        era = {"protocol": "legacy"} if name == "f" else {}
        stdio = {"fx": {"command": sys.executable, "args": [str(FIXTURE)], "toolPrefix": "", **era}}
        with gateway(folder / "gateway", stdio, expose=True) as url:
            yield url
    elif name == "d":
        with gateway(folder / "gateway", {}, expose=False) as url:
            yield url
    else:
        raise ValueError(f"unknown target {name!r}")


@dataclass
class Verdict:
    scenario: str
    requirement_set: str
    target: str
    passed: bool
    checks_passed: int
    checks_total: int
    failing: list[str] = field(default_factory=list)
    failing_ids: set[str] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.scenario, self.requirement_set, self.target)


def read_results(out: Path, requirement_set: str, target_name: str) -> dict[str, Verdict]:
    """One verdict per scenario folder the suite wrote under ``out`` (``server-<scenario>-<time>``
    for a server scenario, ``<scenario>-<time>`` for a client one)."""
    verdicts: dict[str, Verdict] = {}
    prefix = "" if target_name.startswith("client") else "server-"
    # an ``auth/...`` scenario's folder is ``auth/<name>-<time>``
    folders = [*out.iterdir(), *(out / "auth").glob("*")] if (out / "auth").is_dir() else list(out.iterdir())
    for folder in sorted(folders):
        match = SCENARIO_DIR.match(folder.name.removeprefix(prefix))
        checks_file = folder / "checks.json"
        if not folder.name.startswith(prefix) or not match or not checks_file.exists():
            continue
        checks = json.loads(checks_file.read_text())
        scored = [check for check in checks if check.get("status") in {"SUCCESS", "FAILURE", "WARNING"}]
        failing = [
            f"{check.get('id')}: {str(check.get('errorMessage') or '')[:160]}"
            for check in checks
            if check.get("status") == "FAILURE"
        ]
        name = ("auth/" if folder.parent.name == "auth" else "") + match["name"]
        verdicts[name] = Verdict(
            name,
            requirement_set,
            target_name,
            passed=not failing,
            checks_passed=sum(check.get("status") != "FAILURE" for check in scored),
            checks_total=len(scored),
            failing=failing,
            failing_ids={str(check.get("id")) for check in checks if check.get("status") == "FAILURE"},
        )
    return verdicts


def suite(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(SUITE), *args],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_server_set(url: str, requirement_set: str, target_name: str, out: Path) -> dict[str, Verdict]:
    wanted = GENERIC[requirement_set] if target_name == "d" else required_scenarios(requirement_set)
    out.mkdir(parents=True, exist_ok=True)
    if target_name == "d":
        for scenario in wanted:
            suite(
                [
                    "server",
                    "--url",
                    url,
                    "--scenario",
                    scenario,
                    "--spec-version",
                    requirement_set,
                    "--force",
                    "-o",
                    str(out),
                ],
                timeout=180,
            )
    else:
        suite(["server", "--url", url, "--requirements", requirement_set, "-o", str(out)], timeout=600)
    verdicts = read_results(out, requirement_set, target_name)
    for scenario in wanted:
        if scenario not in verdicts:
            verdicts[scenario] = Verdict(
                scenario, requirement_set, target_name, False, 0, 0, ["the suite wrote no result"]
            )
    return {name: verdict for name, verdict in verdicts.items() if name in wanted}


def run_client_set(requirement_set: str, target_name: str, out: Path) -> dict[str, Verdict]:
    """The client scenarios of a set, ``PARALLEL`` at a time (each has a server of its own, and
    most of their time is spent waiting)."""
    out.mkdir(parents=True, exist_ok=True)
    command = f"{sys.executable} -m tests.conformance.client --as {CLIENT_LEGS[target_name]}"
    wanted = auth_scenarios(requirement_set) if target_name == "client-auth" else CLIENT[requirement_set]

    def one(scenario: str) -> None:
        suite(
            [
                "client",
                "--command",
                command,
                "--scenario",
                scenario,
                "--spec-version",
                requirement_set,
                "--timeout",
                "90000",
                "-o",
                str(out),
                *(["--force"] if scenario in EXTENSION_AUTH else []),  # an extension: on no spec timeline
            ],
            timeout=240,
        )

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(one, wanted))
    verdicts = read_results(out, requirement_set, target_name)
    for scenario in wanted:
        if scenario not in verdicts:
            verdicts[scenario] = Verdict(
                scenario, requirement_set, target_name, False, 0, 0, ["the suite wrote no result"]
            )
    return verdicts


@dataclass(frozen=True)
class Listed:
    """One entry of a verdict file: why it fails, and which checks may (all, when none named)."""

    reason: str
    checks: frozenset[str] = frozenset()

    def covers(self, verdict: Verdict) -> bool:
        return not self.checks or verdict.failing_ids <= self.checks


def load_listed(path: Path) -> dict[tuple[str, str, str], Listed]:
    """``(scenario, set, target) -> Listed`` from a verdict file (``targets`` may name several)."""
    listed: dict[tuple[str, str, str], Listed] = {}
    for entry in json.loads(path.read_text())["entries"]:
        for target_name in entry["targets"]:
            listed[(entry["scenario"], entry["set"], target_name)] = Listed(
                entry["reason"], frozenset(entry.get("checks", ()))
            )
    return listed


def judge(
    verdicts: list[Verdict],
    expected: dict[tuple[str, str, str], Listed],
    gaps: dict[tuple[str, str, str], Listed],
) -> list[str]:
    """What makes the run fail: failures no entry covers, and entries that are no longer true."""
    problems: list[str] = []
    by_key = {verdict.key: verdict for verdict in verdicts}
    for verdict in verdicts:
        label = f"{verdict.scenario} [{verdict.requirement_set}, {verdict.target}]"
        listed = expected.get(verdict.key) or gaps.get(verdict.key)
        where = "expected-failures.json" if verdict.key in expected else "gateway-gaps.json"
        if not verdict.passed and (listed is None or not listed.covers(verdict)):
            uncovered = sorted(verdict.failing_ids - (listed.checks if listed else frozenset()))
            problems.append(
                f"FAILS, listed nowhere: {label}: checks {uncovered}: " + "; ".join(verdict.failing[:3])
            )
        elif verdict.passed and listed is not None:
            problems.append(f"PASSES now, remove it from {where}: {label}")
        elif listed is not None and listed.checks - verdict.failing_ids:
            passing = sorted(listed.checks - verdict.failing_ids)
            problems.append(f"checks {passing} pass now, remove them from {where}: {label}")
    for key in gaps:
        direct = by_key.get((key[0], key[1], DIRECT.get(key[2], "")))
        if key in by_key and direct is not None and not direct.passed:
            problems.append(f"gateway-gaps.json lists {key} but it fails directly too: not a gateway gap")
    return problems


def table(verdicts: list[Verdict]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for target_name in (*TARGETS, *CLIENT_LEGS):
        for requirement_set in SETS:
            mine = [v for v in verdicts if v.target == target_name and v.requirement_set == requirement_set]
            if not mine:
                continue
            leg = "client" if target_name.startswith("client") else "server"
            scored = [
                v for v in mine if v.scenario in required_scenarios(requirement_set, leg, scored_only=True)
            ]
            rows.append(
                {
                    "target": target_name,
                    "set": requirement_set,
                    "scenarios_passed": sum(v.passed for v in mine),
                    "scenarios": len(mine),
                    "scored_passed": sum(v.passed for v in scored),
                    "scored": len(scored),
                    "checks_passed": sum(v.checks_passed for v in mine),
                    "checks": sum(v.checks_total for v in mine),
                    "failing": sorted(v.scenario for v in mine if not v.passed),
                }
            )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    log(f"{'target':<50} {'set':<11} {'scenarios':>10} {'scored':>10} {'checks':>10}")
    for row in rows:
        name = f"{row['target']}: {TARGET_NAMES[row['target']]}"
        log(
            f"{name:<50} {row['set']:<11} {row['scenarios_passed']:>4}/{row['scenarios']:<5}"
            f" {row['scored_passed']:>4}/{row['scored']:<5} {row['checks_passed']:>4}/{row['checks']:<5}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--no-client", action="store_true", help="skip the client scenarios")
    parser.add_argument("--legs", default=",".join(CLIENT_LEGS), help="which client legs run")
    parser.add_argument("--keep", type=Path, help="keep the suite's results and the logs in this folder")
    options = parser.parse_args(argv)
    if not NODE.exists() or not SUITE.exists():
        log(f"conformance: the suite is not installed in {NPM}: run `make test-conformance`")
        return 2
    targets = [name for name in options.targets.split(",") if name]
    sets = [name for name in options.sets.split(",") if name]
    work = options.keep or Path(tempfile.mkdtemp(prefix="mcp-agent-conformance-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    verdicts: list[Verdict] = []
    try:
        for target_name in targets:
            with target(target_name, work / target_name) as url:
                for requirement_set in sets:
                    began = time.monotonic()
                    found = run_server_set(
                        url, requirement_set, target_name, work / target_name / requirement_set
                    )
                    verdicts += found.values()
                    log(
                        f"conformance: {target_name} {requirement_set}: {sum(v.passed for v in found.values())}"
                        f"/{len(found)} scenarios pass ({time.monotonic() - began:.1f} s)"
                    )
        for leg in [] if options.no_client else [name for name in options.legs.split(",") if name]:
            for requirement_set in sets:
                began = time.monotonic()
                found = run_client_set(requirement_set, leg, work / leg / requirement_set)
                verdicts += found.values()
                log(
                    f"conformance: {leg} {requirement_set}: {sum(v.passed for v in found.values())}"
                    f"/{len(found)} scenarios pass ({time.monotonic() - began:.1f} s)"
                )
    finally:
        if options.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    problems = judge(verdicts, load_listed(EXPECTED), load_listed(GAPS))
    rows = table(verdicts)
    print_table(rows)
    for problem in problems:
        log(f"conformance: {problem}")
    summary = {
        "suite": "@modelcontextprotocol/conformance@"
        + json.loads((NPM / "package.json").read_text())["dependencies"]["@modelcontextprotocol/conformance"],
        "seconds": round(time.monotonic() - started, 1),
        "table": rows,
        "problems": problems,
        "verdicts": [
            {
                "scenario": v.scenario,
                "set": v.requirement_set,
                "target": v.target,
                "passed": v.passed,
                "checks": f"{v.checks_passed}/{v.checks_total}",
                **({"failing": v.failing} if v.failing else {}),
            }
            for v in verdicts
        ],
    }
    print(json.dumps(summary, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
