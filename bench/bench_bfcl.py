"""BFCL v4's single-turn categories through the gateway's real path, judged by BFCL's own checker.

Issue 26's measure. Every entry is one ``open_agent`` + ``query`` (``bench/bfcl/harness.py``):
the entry's functions served as MCP tools by ONE BFCL server process (``bench/bfcl/server.py``,
Streamable HTTP on 127.0.0.1, the entry chosen by the URL), the schemas compiled for the
provider family, the model's calls validated, coerced and sent; the arguments that reached the
server (not the model's text) go to BFCL's checker (``bench/bfcl/checker.py``).

Models:

- ``--oracle`` (the default): ``bench/bfcl/oracle.py`` answers every entry with BFCL's ground
  truth, in each family's wire format (``--families openai,anthropic,gemini``, all three by
  default). Every failure is a defect of the gateway, unless ``bench/bfcl/known.json`` names the
  entry (a ground truth that contradicts its own schema): those are reported apart, with the
  reason.
- ``--endpoint URL --model M``: any OpenAI-compatible server (``…/v1``), family ``openai``,
  once with the gateway's text-call parsing on (``llm.toolCallStyle`` ``auto``) and once off
  (``native``: server-native tool calls only); ``--text-calls on,off`` picks. Reports accuracy
  per category side by side, and the gateway's share of the wall time (the time not spent in
  model calls, from the gateway's own ``model_call_ended`` events).

Prints ONE JSON object on stdout: per category, per family (oracle) or per parsing setting
(endpoint), entries run, the share passed, the failing ids with BFCL's error type and message,
the known exceptions, and the harness time per entry; ``totals`` pools the categories. Progress
goes to stderr.

Run: ``.venv/bin/python bench/bench_bfcl.py --oracle [--categories a,b] [--limit N]
[--families openai,anthropic,gemini] [--concurrency N]``; ``make bench-bfcl`` runs the whole
oracle. ``.venv/bin/python bench/bench_bfcl.py --endpoint http://127.0.0.1:11434/v1 --model
qwen3:0.6b --categories simple_python,irrelevance --limit 20`` measures a local model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bfcl.data import CATEGORIES, Entry, load_category  # noqa: E402
from bench.bfcl.harness import FAMILIES, Model, Outcome, run_entry  # noqa: E402
from bench.bfcl.known import known_exceptions  # noqa: E402
from bench.bfcl.oracle import NAME, OracleModel  # noqa: E402
from bench.bfcl.server import running_server  # noqa: E402

STYLES = {"on": "auto", "off": "native"}
"""``--text-calls`` -> ``llm.toolCallStyle``."""


def summary(outcomes: Sequence[Outcome], known: dict[str, str], *, model_share: bool) -> dict[str, Any]:
    """One row of the report: the entries of one category (or all) under one setting."""
    passed = sum(o.passed for o in outcomes)
    failing = [o for o in outcomes if not o.passed and o.entry not in known]
    known_failing = [o.entry for o in outcomes if not o.passed and o.entry in known]
    row: dict[str, Any] = {
        "entries": len(outcomes),
        "passed": round(passed / len(outcomes), 4) if outcomes else None,
        "passed_but_known": sum(o.passed for o in outcomes if o.entry in known),
        "failures": [
            {
                "id": o.entry,
                "error_type": o.error_type,
                "error": list(o.error)[:3],
                **({"refused": list(o.refused)} if o.refused else {}),
            }
            for o in failing
        ],
        "known_failures": known_failing,
        "ms_per_entry": round(1000 * sum(o.seconds for o in outcomes) / len(outcomes), 1)
        if outcomes
        else None,
    }
    if outcomes and (len(outcomes) - len(known_failing)):
        row["passed_without_known"] = round(
            sum(o.passed for o in outcomes if o.entry not in known) / (len(outcomes) - len(known_failing)), 4
        )
    if model_share:
        wall = sum(o.seconds for o in outcomes)
        waited = sum(o.model_seconds for o in outcomes)
        row["model_seconds"] = round(waited, 2)
        row["gateway_share"] = round(1 - waited / wall, 4) if wall else None
    return row


async def run_all(
    work: list[tuple[Entry, str, str]],
    *,
    server: str,
    model: Model,
    oracle: OracleModel | None,
    concurrency: int,
    known: Collection[str] = (),
) -> list[Outcome]:
    """Every (entry, family, style) of ``work``, ``concurrency`` at a time, in ``work``'s order;
    with the oracle, each failure is told on stderr as it comes (``known``: the known exceptions)."""
    results: list[Outcome | None] = [None] * len(work)
    limiter = anyio.CapacityLimiter(concurrency)
    done = [0]

    async with httpx2.AsyncClient(timeout=60) as http:

        async def one(index: int, entry: Entry, family: str, style: str) -> None:
            async with limiter:
                outcome = results[index] = await run_entry(
                    entry, family, style, server=server, model=model, http=http, oracle=oracle
                )
            if not outcome.passed and oracle is not None:
                detail = "; ".join([*outcome.error[:1], *outcome.refused])
                label = "known" if entry.id in known else "FAIL"
                print(
                    f"bench_bfcl: {label} {entry.id} {family}: {outcome.error_type}: {detail}",
                    file=sys.stderr,
                )
            done[0] += 1
            if done[0] % 200 == 0 or done[0] == len(work):
                print(f"bench_bfcl: {done[0]}/{len(work)}", file=sys.stderr)

        async with anyio.create_task_group() as group:
            for index, (entry, family, style) in enumerate(work):
                group.start_soon(one, index, entry, family, style)
    return [r for r in results if r is not None]


@contextmanager
def model_endpoint(args: argparse.Namespace) -> Iterator[tuple[Model, OracleModel | None]]:
    if args.endpoint is not None:
        extra: dict[str, Any] = {}
        if args.api_key_env:
            extra["apiKey"] = "${" + args.api_key_env + "}"
        if args.max_output_tokens is not None:
            extra["maxOutputTokens"] = args.max_output_tokens
        if args.temperature is not None:
            extra["temperature"] = args.temperature
        if args.tool_budget is not None:
            extra["toolBudget"] = args.tool_budget
        extra["requestTimeoutSeconds"] = args.request_timeout
        yield Model(args.endpoint, args.model, extra=extra), None
        return
    from tests.fakes.model_server import running_model_server

    with running_model_server() as fake:
        oracle = OracleModel()
        fake.handler = oracle
        yield Model(fake.base_url, NAME, oracle=True), oracle


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    known = known_exceptions()
    entries = {name: list(load_category(name))[: args.limit] for name in args.categories}
    settings = (
        [(family, "auto") for family in args.families]
        if args.endpoint is None
        else [("openai", STYLES[setting]) for setting in args.text_calls]
    )
    work = [
        (entry, family, style)
        for name in args.categories
        for entry in entries[name]
        for family, style in settings
    ]
    with running_server() as server, model_endpoint(args) as (model, oracle):
        outcomes = anyio.run(
            lambda: run_all(
                work, server=server, model=model, oracle=oracle, concurrency=args.concurrency, known=known
            )
        )
    seconds = time.perf_counter() - started

    def label(outcome: Outcome) -> str:
        if args.endpoint is None:
            return outcome.family
        return "parsing_" + ("on" if outcome.style == "auto" else "off")

    labels = [args.families if args.endpoint is None else ["parsing_" + s for s in args.text_calls]][0]
    endpoint = args.endpoint is not None
    categories: dict[str, Any] = {}
    for name in args.categories:
        mine = [o for o in outcomes if o.category == name]
        categories[name] = {
            key: summary([o for o in mine if label(o) == key], known, model_share=endpoint) for key in labels
        }
    totals = {
        key: summary([o for o in outcomes if label(o) == key], known, model_share=endpoint) for key in labels
    }
    for row in totals.values():
        row["failures"] = len(row["failures"])
    return {
        "benchmark": "BFCL v4 single-turn (bfcl-eval 2026.3.23) through open_agent, judged by BFCL's ast_checker",
        "model": "oracle" if args.endpoint is None else args.model,
        "limit": args.limit,
        "concurrency": args.concurrency,
        "runs": len(outcomes),
        "known_exceptions": {
            key: known[key] for key in sorted(known) if any(o.entry == key for o in outcomes)
        },
        "totals": totals,
        "categories": categories,
        "seconds": round(seconds, 1),
        "ms_per_run_wall": round(1000 * seconds / len(outcomes), 1) if outcomes else None,
    }


def _list(parser: argparse.ArgumentParser, flag: str, value: str, choices: Sequence[str]) -> list[str]:
    chosen = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [item for item in chosen if item not in choices]
    if unknown or not chosen:
        parser.error(
            f"{flag}: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(choices)}"
        )
    return chosen


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--oracle", action="store_true", help="the ground-truth model (the default)")
    parser.add_argument("--endpoint", help="an OpenAI-compatible base URL (…/v1) instead of the oracle")
    parser.add_argument("--model", help="the model to ask --endpoint for")
    parser.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated (default: all)")
    parser.add_argument("--limit", type=int, help="the first N entries of each category")
    parser.add_argument(
        "--families", default=",".join(FAMILIES), help="provider families for the oracle (default: all three)"
    )
    parser.add_argument(
        "--text-calls", default="on,off", help="--endpoint: the gateway's text-call parsing on, off or both"
    )
    parser.add_argument("--concurrency", type=int, help="entries at a time (default: 4 oracle, 1 endpoint)")
    real = parser.add_argument_group("a real model (--endpoint only)")
    real.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the API key")
    real.add_argument("--max-output-tokens", type=int, metavar="N", help="llm.maxOutputTokens per model call")
    real.add_argument("--temperature", type=float, help="llm.temperature (default: the endpoint's)")
    real.add_argument(
        "--tool-budget",
        type=int,
        metavar="N",
        help="llm.toolBudget: tools offered before the router picks (0: never route; default: the gateway's)",
    )
    real.add_argument(
        "--request-timeout", type=float, default=120, metavar="SECONDS", help="per model call (default 120)"
    )
    args = parser.parse_args(argv)
    if args.oracle and args.endpoint:
        parser.error("--oracle and --endpoint exclude each other")
    if args.endpoint and not args.model:
        parser.error("--endpoint needs --model M (the model to ask for)")
    if args.model and not args.endpoint:
        parser.error("--model needs --endpoint")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, not {args.limit}")
    if args.concurrency is None:
        args.concurrency = 4 if args.endpoint is None else 1
    if args.concurrency < 1:
        parser.error(f"--concurrency must be at least 1, not {args.concurrency}")
    if args.endpoint is None and any(
        v is not None for v in (args.api_key_env, args.max_output_tokens, args.temperature, args.tool_budget)
    ):
        parser.error("--api-key-env, --max-output-tokens, --temperature and --tool-budget need --endpoint")
    args.categories = _list(parser, "--categories", args.categories, CATEGORIES)
    args.families = _list(parser, "--families", args.families, FAMILIES)
    args.text_calls = _list(parser, "--text-calls", args.text_calls, tuple(STYLES))
    if args.endpoint is not None and args.families != list(FAMILIES) and args.families != ["openai"]:
        parser.error("--endpoint speaks the OpenAI family only: leave --families out")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    print(json.dumps(run(parse(argv)), indent=2))


if __name__ == "__main__":
    main()
