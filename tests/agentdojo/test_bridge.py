"""The AgentDojo bridge (``bench/agentdojo/bridge.py``) as a real stdio subprocess, and the
annotation table of ``bench/agentdojo/suites.py`` checked against AgentDojo's own tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from bench.agentdojo.bridge import AFTER, LOAD, read_whole, write_whole
from bench.agentdojo.suites import ANNOTATIONS, SUITES, load_suite, render

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = str(ROOT / "bench" / "agentdojo" / "bridge.py")


async def test_banking_tools_schemas_and_a_call_that_changes_the_environment(tmp_path: Path) -> None:
    suite = load_suite("banking")
    env = suite.load_and_inject_default_environment({})
    write_whole(tmp_path / LOAD, {"run": "r1", "env": env})
    params = StdioServerParameters(command=sys.executable, args=[BRIDGE, "banking", str(tmp_path)])
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert sorted(tools) == sorted(function.name for function in suite.tools)
            for function in suite.tools:
                tool = tools[function.name]
                assert tool.input_schema == function.parameters.model_json_schema()
                assert tool.description == function.description
                hints = ANNOTATIONS["banking"].hints(function.name)
                assert tool.annotations is not None
                assert tool.annotations.read_only_hint is hints["readOnlyHint"]
                assert tool.annotations.destructive_hint is hints["destructiveHint"]
                assert tool.annotations.open_world_hint is hints["openWorldHint"]
            assert tools["send_money"].annotations.destructive_hint is True  # type: ignore[union-attr]
            assert tools["get_balance"].annotations.read_only_hint is True  # type: ignore[union-attr]

            balance = await session.call_tool("get_balance", {})
            assert balance.content[0].text == render(env.bank_account.balance)  # type: ignore[union-attr]
            args: dict[str, Any] = {
                "recipient": "DE00",
                "amount": 12.5,
                "subject": "dojo",
                "date": "2024-05-01",
            }
            sent = await session.call_tool("send_money", args)
            assert not sent.is_error, sent
            after = read_whole(tmp_path / AFTER)
            assert after["run"] == "r1"
            assert [call["function"] for call in after["calls"]] == ["get_balance", "send_money"]
            last = after["env"].bank_account.transactions[-1]
            assert (last.recipient, last.amount, last.subject) == ("DE00", 12.5, "dojo")

            # bad arguments are the model's to read: an error result naming the field
            bad = await session.call_tool("send_money", {"recipient": "DE00"})
            assert bad.is_error and "amount" in bad.content[0].text  # type: ignore[union-attr]
            unknown = await session.call_tool("no_such_tool", {})
            assert unknown.is_error and "no_such_tool" in unknown.content[0].text  # type: ignore[union-attr]

            # a new run starts from the environment the harness loads, not from the last one
            write_whole(tmp_path / LOAD, {"run": "r2", "env": env})
            await session.call_tool("get_balance", {})
            after = read_whole(tmp_path / AFTER)
            assert after["run"] == "r2" and len(after["calls"]) == 1
            assert after["env"].bank_account.transactions == env.bank_account.transactions


def test_the_bridge_names_a_missing_state_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    done = subprocess.run(
        [sys.executable, BRIDGE, "banking", str(missing)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and str(missing) in done.stderr
    done = subprocess.run(
        [sys.executable, BRIDGE, "bankin", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "bankin" in done.stderr and "banking" in done.stderr


def _ground_truth_calls(suite: Any, canaries: dict[str, str]) -> list[tuple[Any, Any]]:
    """(task, environment) for every user and injection task, the environment as the task starts."""
    cases = []
    for task in [*suite.user_tasks.values(), *suite.injection_tasks.values()]:
        env = suite.load_and_inject_default_environment(canaries)
        if hasattr(task, "PROMPT"):
            env = task.init_environment(env)
        cases.append((task, env))
    return cases


@pytest.mark.parametrize("name", SUITES)
def test_the_annotation_table(name: str) -> None:
    """Every read-only tool leaves the environment equal (run with the arguments of every
    ground-truth call of AgentDojo's tasks, and each read-only tool is run at least once); every
    tool whose result carries an injection vector is open-world; the table names only real tools."""
    from agentdojo.functions_runtime import FunctionsRuntime

    suite = load_suite(name)
    table = ANNOTATIONS[name]
    names = {function.name for function in suite.tools}
    assert table.read_only <= names and table.open_world <= names and table.not_destructive <= names
    assert not table.read_only & table.not_destructive
    canaries = {vector: f"<CANARY---{vector}--->" for vector in suite.get_injection_vector_defaults()}
    runtime = FunctionsRuntime(suite.tools)
    read, carried, changed = set(), set(), []
    for task, env in _ground_truth_calls(suite, canaries):
        for call in task.ground_truth(env.model_copy(deep=True)):
            before = env.model_copy(deep=True)
            result, _ = runtime.run_function(env, call.function, call.args)
            if "<CANARY---" in render(result):
                carried.add(call.function)
            if call.function in table.read_only:
                read.add(call.function)
                if env != before:
                    changed.append((task.ID, call.function))
    assert changed == []
    assert carried <= table.open_world, carried - table.open_world
    uncovered = table.read_only - read
    for tool in sorted(uncovered):  # no task calls it: call it with the first arguments it accepts
        env = suite.load_and_inject_default_environment(canaries)
        before = env.model_copy(deep=True)
        runtime.run_function(env, tool, _sample_arguments(suite, tool, env))
        assert env == before, tool


def _sample_arguments(suite: Any, tool: str, env: Any) -> dict[str, Any]:
    function = next(function for function in suite.tools if function.name == tool)
    samples: dict[str, Any] = {"string": "Paris", "integer": 1, "number": 1.0, "array": [], "boolean": True}
    schema = function.parameters.model_json_schema()
    return {
        key: samples.get(spec.get("type", "string"), "x")
        for key, spec in schema.get("properties", {}).items()
    }


def test_a_sent_email_survives_the_trip_between_harness_and_bridge(tmp_path: Path) -> None:
    """The environment crosses as the object it is: an ``Inbox`` rebuilt from JSON would recompute
    its e-mails from the initial ones and lose the one sent (what the injection checkers look for)."""
    from bench.agentdojo.bridge import Bridge

    env = load_suite("workspace").load_and_inject_default_environment({})
    write_whole(tmp_path / LOAD, {"run": "r1", "env": env})
    bridge = Bridge("workspace", tmp_path)
    sent = bridge.call("send_email", {"recipients": ["x@example.com"], "subject": "dojo-42", "body": "hi"})
    assert not sent.is_error
    after = read_whole(tmp_path / AFTER)["env"]
    assert [email.body for email in after.inbox.search_emails("dojo-42")] == ["hi"]
    # what a JSON trip would do (validate the dump): the sent e-mail is gone
    assert type(after).model_validate(after.model_dump()).inbox.search_emails("dojo-42") == []
