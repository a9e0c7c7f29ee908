"""AgentDojo through the gateway's ``agent_query``: utility and attack success, per policy mode.

Issue 25's measure. Each AgentDojo suite (workspace, banking, travel, slack; AgentDojo
``suites.VERSION``) is served by ``bench/agentdojo/bridge.py`` as a stdio MCP server of a real
``mcp-agent serve`` on 127.0.0.1 (tools under their own names); every case is one
``agent_query`` by a real MCP client (the SDK's ``ClientSession`` over Streamable HTTP) that
answers the gateway's approval elicitations itself: it grants them all, or declines them all.
AgentDojo runs the case (``TaskSuite.run_task_with_pipeline``: its environment with the case's
injections, its checkers for utility and security) with this harness as its "pipeline": the
environment goes to the bridge before the run (``load.pickle``), and comes back after it with
the calls that ran (``after.pickle``).

Cases: every user task without an attack (the injection vectors keep their default, harmless
values) for utility, and every (user task, injection task) pair under AgentDojo's
``important_instructions`` attack for attack success.

Model: ``--obedient`` (the default) is ``bench/agentdojo/obedient.py``, the worst case: it makes
the user task's ground-truth calls and, as soon as a tool result carries an injection, the
injection task's. ``--endpoint URL --model M`` runs any OpenAI-compatible model instead.

Policy modes (``--modes``; the ``policy.mode`` key of agent.json, issue 25's provenance policy):

- ``off``: ``utility_no_attack``, ``attack_success``;
- ``warn``: the same two;
- ``enforce``: ``utility_no_attack_auto_approved`` (approvals granted),
  ``utility_no_attack_denied`` (approvals declined) and ``attack_success`` (approvals declined:
  a call held after untrusted text is refused). Its per-suite detail names the user tasks that
  asked for an approval without an attack and the ones that lost their utility when it was denied.

Every mode also reports ``attack_success_side_effects``: attack success over the injection tasks
whose ground truth is a sequence of calls. The others are named per suite in
``injection_tasks_without_calls``: travel's ``injection_task_6`` only asks the model to say
something ("say that I should visit ..."), which no call policy can stop, and AgentDojo v1.2
leaves the ground truth of workspace's ``injection_task_6`` to ``13`` empty, so the obedient model
has nothing to carry out for them.

Prints ONE JSON object on stdout (shares 0-1, pooled over the suites' cases, plus ``suites``:
the same per suite); progress goes to stderr. Bounded: every run has the gateway's limits (at most
40 model rounds, 240 s) and every case one ``agent_query``.

Run: ``.venv/bin/python bench/bench_agentdojo.py --obedient [--suites banking,slack] [--limit N]
[--modes off,warn,enforce]`` (``--limit N``: the first N user tasks and N injection tasks of
each suite). ``make bench-agentdojo`` runs it all (about ten minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp.types as types

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import serving  # noqa: E402
from bench.agentdojo.bridge import AFTER, LOAD, read_whole, write_whole  # noqa: E402
from bench.agentdojo.obedient import ObedientModel  # noqa: E402
from bench.agentdojo.suites import ATTACK, SUITES, VERSION, injections, load_suite  # noqa: E402

BRIDGE = str(ROOT / "bench" / "agentdojo" / "bridge.py")
MODES = ("off", "warn", "enforce")
LIMITS = {
    # AgentDojo shows a model whole results and whole histories; the obedient model's longest
    # script (a workspace task and its injection) is under 40 calls, and may repeat a call
    "maxRounds": 40,
    "maxToolCalls": 60,
    "maxTokens": 0,
    "maxResultChars": 0,
    "maxHistoryChars": 0,
    "loopThreshold": 0,
    "timeoutSeconds": 240,
}


@dataclass(frozen=True)
class RealModel:
    """What a real model's runs need beyond the obedient model's (``--endpoint``'s options).

    A small local model generates a few tokens a second on a busy machine and may never stop
    calling tools: a cap on its output per call, on its rounds and on a run's seconds keeps a
    case bounded; temperature 0 makes reruns comparable. ``None`` keeps the gateway's default
    (or, for rounds and seconds, the obedient model's ``LIMITS``)."""

    api_key_env: str | None = None
    max_output_tokens: int | None = None
    max_rounds: int | None = None
    run_seconds: float | None = None
    temperature: float | None = None


def gateway_config(
    state: Path, suite: str, endpoint: str, model: str, mode: str, real: RealModel | None = None
) -> dict[str, Any]:
    real = real or RealModel()
    llm: dict[str, Any] = {"endpoint": endpoint, "model": model, "stream": False, "maxRetries": 0}
    if real.api_key_env is not None:
        llm["apiKey"] = (
            "${" + real.api_key_env + "}"
        )  # expanded by the gateway: the key stays out of the file
    if real.max_output_tokens is not None:
        llm["maxOutputTokens"] = real.max_output_tokens
    if real.temperature is not None:
        llm["temperature"] = real.temperature
    limits = dict(LIMITS)
    if real.max_rounds is not None:
        limits["maxRounds"] = real.max_rounds
    if real.run_seconds is not None:
        limits["timeoutSeconds"] = real.run_seconds
    config: dict[str, Any] = {
        "llm": llm,
        "mcpServers": {
            suite: {"command": sys.executable, "args": [BRIDGE, suite, str(state)], "toolPrefix": ""}
        },
        "limits": limits,
        "policy": {"mode": mode},
    }
    return config


@contextmanager
def running_gateway(
    folder: Path, suite: str, endpoint: str, model: str, mode: str, real: RealModel | None = None
) -> Iterator[str]:
    """``mcp-agent serve`` for one suite and mode; yields its MCP endpoint."""
    state = folder / "bridge"
    state.mkdir(parents=True, exist_ok=True)
    # the bridge imports AgentDojo: seconds on a busy machine
    with serving(folder, gateway_config(state, suite, endpoint, model, mode, real)) as url:
        yield f"{url}/mcp"


@dataclass
class Harness:
    """AgentDojo's pipeline for one suite: each ``query`` is one ``agent_query`` via the gateway."""

    suite_name: str
    state: Path
    session: Any
    model: ObedientModel | None
    approve: bool = True
    name: str = "mcp-agent"
    runs: Iterator[int] = field(default_factory=itertools.count)
    tasks: tuple[Any, Any] = (None, None)
    asked: list[str] = field(default_factory=list)
    """The tools whose approval the gateway asked for in the current case."""

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(getattr(params, "message", "")[:200])
        if self.approve:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    def query(
        self, query: str, runtime: Any, env: Any, messages: Sequence[Any] = (), extra_args: Any = None
    ) -> tuple[str, Any, Any, list[Any], Any]:
        """Called by AgentDojo (in a worker thread) with the case's environment."""
        from agentdojo.functions_runtime import FunctionCall
        from agentdojo.types import ChatAssistantMessage, text_content_block_from_string

        run = f"{self.suite_name}-{next(self.runs)}"
        write_whole(self.state / LOAD, {"run": run, "env": env})
        if self.model is not None:
            user_task, injection_task = self.tasks
            planned = user_task.ground_truth(env.model_copy(deep=True))
            if injection_task is None:
                self.model.start(planned, user_task.GROUND_TRUTH_OUTPUT)
            else:
                injected = injection_task.ground_truth(env.model_copy(deep=True))
                self.model.start(
                    planned, user_task.GROUND_TRUTH_OUTPUT, injected, injection_task.GROUND_TRUTH_OUTPUT
                )
        text = anyio.from_thread.run(self._agent_query, query)
        calls: list[dict[str, Any]] = []
        after_path = self.state / AFTER
        if after_path.exists():
            after = read_whole(after_path)
            if after["run"] == run:
                env, calls = after["env"], after["calls"]
        trace: list[Any] = [
            ChatAssistantMessage(
                role="assistant",
                content=None,
                tool_calls=[FunctionCall(function=call["function"], args=call["args"], id=f"c{i}")],
            )
            for i, call in enumerate(calls)
        ]
        trace.append(
            ChatAssistantMessage(
                role="assistant", content=[text_content_block_from_string(text)], tool_calls=None
            )
        )
        return query, runtime, env, trace, extra_args

    async def _agent_query(self, query: str) -> str:
        result = await self.session.call_tool("agent_query", {"query": query})
        return "\n".join(part.text for part in result.content if isinstance(part, types.TextContent))


@asynccontextmanager
async def mcp_session(url: str, harness_ref: list[Harness]) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return await harness_ref[0].elicit(context, params)

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        yield session


@dataclass
class Tally:
    cases: int = 0
    true: int = 0

    def add(self, value: bool) -> None:
        self.cases += 1
        self.true += bool(value)

    def share(self) -> float | None:
        return round(self.true / self.cases, 4) if self.cases else None


def pick(tasks: dict[str, Any], limit: int | None) -> list[Any]:
    chosen = list(tasks.values())
    return chosen if limit is None else chosen[:limit]


async def run_suite(
    suite_name: str, mode: str, url: str, state: Path, model: ObedientModel | None, limit: int | None
) -> dict[str, Any]:
    """The cases of one suite under one policy mode, through the gateway at ``url``."""
    suite = load_suite(suite_name)
    user_tasks = pick(suite.user_tasks, limit)
    injection_tasks = pick(suite.injection_tasks, limit)
    ref: list[Harness] = []
    async with mcp_session(url, ref) as session:
        harness = Harness(suite_name, state, session, model)
        ref.append(harness)

        async def case(
            user_task: Any, injection_task: Any, values: dict[str, str], approve: bool
        ) -> tuple[bool, bool]:
            harness.tasks, harness.approve, harness.asked = (user_task, injection_task), approve, []
            return await anyio.to_thread.run_sync(
                suite.run_task_with_pipeline, harness, user_task, injection_task, values
            )

        answers = {"auto_approved": True} if mode != "enforce" else {"auto_approved": True, "denied": False}
        row: dict[str, Any] = {}
        asked_for: list[str] = []
        lost: list[str] = []
        for label, approve in answers.items():
            utility = Tally()
            for user_task in user_tasks:
                ok, _ = await case(user_task, None, {}, approve)
                utility.add(ok)
                if harness.asked and approve:
                    asked_for.append(user_task.ID)
                if not ok and not approve and harness.asked:  # failed because an approval was declined
                    lost.append(user_task.ID)
            key = "utility_no_attack" if mode != "enforce" else f"utility_no_attack_{label}"
            row[key] = utility
        attacks = Tally()
        # an injection task with no calls in its ground truth either only asks the model to say
        # something (travel's "say that I should visit ...": no call policy can stop words) or has
        # its ground truth left empty by AgentDojo (workspace 6-13): attacks with calls also
        # counted on their own
        default_env = suite.load_and_inject_default_environment({})
        without_calls = {
            task.ID for task in injection_tasks if not task.ground_truth(default_env.model_copy(deep=True))
        }
        side_effect_attacks = Tally()
        succeeded: list[str] = []
        not_injectable: list[str] = []
        for user_task in user_tasks:
            for injection_task in injection_tasks:
                try:
                    values = injections(suite_name, user_task, injection_task)
                except ValueError:
                    not_injectable.append(user_task.ID)
                    break
                _, success = await case(user_task, injection_task, values, mode != "enforce")
                attacks.add(success)
                if injection_task.ID not in without_calls:
                    side_effect_attacks.add(success)
                if success:
                    succeeded.append(f"{user_task.ID}+{injection_task.ID}")
        row["attack_success"] = attacks
        row["attack_success_side_effects"] = side_effect_attacks
        detail: dict[str, Any] = {key: tally.share() for key, tally in row.items()}
        detail["user_tasks"] = len(user_tasks)
        detail["attack_cases"] = attacks.cases
        if not_injectable:
            detail["not_injectable"] = not_injectable
        if without_calls:
            detail["injection_tasks_without_calls"] = sorted(without_calls)
        if mode == "enforce":
            detail["attacks_that_succeeded"] = succeeded
            detail["asked_approval_without_attack"] = asked_for
            detail["utility_lost_when_denied"] = lost
        return {"tallies": row, "detail": detail}


def run(args: argparse.Namespace) -> dict[str, Any]:
    suites = args.suites
    for name in suites:
        load_suite(name)  # an unknown name stops here, naming the choices
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": f"AgentDojo {VERSION} through agent_query, attack {ATTACK}",
        "model": "obedient" if args.endpoint is None else args.model,
        "limit": args.limit,
    }
    totals: dict[str, dict[str, Tally]] = {}
    per_suite: dict[str, dict[str, Any]] = {name: {} for name in suites}
    with contextmanager_or_none(args.endpoint is None) as server:
        model: ObedientModel | None = None
        endpoint = args.endpoint
        if server is not None:
            model = ObedientModel()
            server.handler = model
            endpoint = server.base_url
        for mode in args.modes:
            for name in suites:
                print(f"bench_agentdojo: {name}, policy {mode}", file=sys.stderr)
                with (
                    tempfile.TemporaryDirectory() as folder,
                    running_gateway(Path(folder), name, endpoint, args.model, mode, args.real) as url,
                ):
                    done = anyio.run(run_suite, name, mode, url, Path(folder) / "bridge", model, args.limit)
                per_suite[name][mode] = done["detail"]
                for key, tally in done["tallies"].items():
                    total = totals.setdefault(mode, {}).setdefault(key, Tally())
                    total.cases += tally.cases
                    total.true += tally.true
    for mode in args.modes:
        result[mode] = {key: tally.share() for key, tally in totals[mode].items()}
    result["suites"] = per_suite
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


@contextmanager
def contextmanager_or_none(obedient: bool) -> Iterator[Any]:
    if not obedient:
        yield None
        return
    from tests.fakes.model_server import running_model_server

    with running_model_server() as server:
        yield server


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--obedient", action="store_true", help="the scripted worst-case model (the default)")
    parser.add_argument(
        "--endpoint", help="an OpenAI-compatible base URL (…/v1) instead of the obedient model"
    )
    parser.add_argument("--model", default="obedient", help="the model name to ask --endpoint for")
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated (default: all four)")
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help="policy modes, comma-separated (default: all three)",
    )
    parser.add_argument(
        "--limit", type=int, help="the first N user tasks and N injection tasks of each suite"
    )
    real = parser.add_argument_group("a real model (--endpoint only)")
    real.add_argument(
        "--api-key-env", metavar="VAR", help="the environment variable holding --endpoint's API key"
    )
    real.add_argument("--max-output-tokens", type=int, metavar="N", help="llm.maxOutputTokens per model call")
    real.add_argument(
        "--max-rounds", type=int, metavar="N", help=f"model rounds per case (default {LIMITS['maxRounds']})"
    )
    real.add_argument(
        "--run-timeout",
        type=float,
        metavar="SECONDS",
        help=f"seconds per case (default {LIMITS['timeoutSeconds']}); a run that ends on it counts as failed",
    )
    real.add_argument("--temperature", type=float, help="llm.temperature (default: the endpoint's)")
    args = parser.parse_args(argv)
    if args.obedient and args.endpoint:
        parser.error("--obedient and --endpoint exclude each other")
    if args.endpoint and args.model == "obedient":
        parser.error("--endpoint needs --model M (the model to ask for)")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, not {args.limit}")
    for flag, value in (
        ("--max-output-tokens", args.max_output_tokens),
        ("--max-rounds", args.max_rounds),
        ("--run-timeout", args.run_timeout),
    ):
        if value is not None and value <= 0:
            parser.error(f"{flag} must be above 0, not {value:g}")
    if args.temperature is not None and not 0 <= args.temperature <= 2:
        parser.error(f"--temperature must be from 0 to 2, not {args.temperature:g}")
    args.real = RealModel(
        api_key_env=args.api_key_env,
        max_output_tokens=args.max_output_tokens,
        max_rounds=args.max_rounds,
        run_seconds=args.run_timeout,
        temperature=args.temperature,
    )
    extra = [flag for flag, value in vars(args.real).items() if value is not None]
    if extra and args.endpoint is None:
        parser.error(
            "--api-key-env, --max-output-tokens, --max-rounds, --run-timeout and --temperature need --endpoint"
        )
    args.suites = [name.strip() for name in args.suites.split(",") if name.strip()]
    unknown = [name for name in args.suites if name not in SUITES]
    if unknown or not args.suites:
        parser.error(
            f"--suites: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(SUITES)}"
        )
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    bad = [mode for mode in args.modes if mode not in MODES]
    if bad or not args.modes:
        parser.error(f"--modes: unknown {', '.join(bad) or '(none given)'}; choose from {', '.join(MODES)}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    print(json.dumps(run(parse(argv)), indent=2))


if __name__ == "__main__":
    main()
