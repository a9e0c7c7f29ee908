"""BFCL's ground truth through the gateway's real path (``open_agent``, each provider family,
the BFCL MCP server in its own process, BFCL's checker on what reached it), on a fixed sample:
the first 3 entries of every single-turn category; and the harness failing when a call changes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from bench.bench_bfcl import parse, run, run_all
from bench.bfcl import oracle as oracle_module
from bench.bfcl.data import CATEGORIES, entry, load_category
from bench.bfcl.harness import FAMILIES, Model, run_entry
from bench.bfcl.known import known_exceptions
from bench.bfcl.oracle import NAME, OracleModel
from bench.bfcl.server import running_server
from tests.fakes.model_server import RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import completion


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Model, OracleModel]]:
    with running_server() as server, running_model_server() as fake:
        oracle = OracleModel()
        fake.handler = oracle
        yield server, Model(fake.base_url, NAME, oracle=True), oracle


async def test_the_first_entries_of_every_category_pass_in_every_family(
    served: tuple[str, Model, OracleModel],
) -> None:
    server, model, oracle = served
    work = [
        (item, family, "auto")
        for name in CATEGORIES
        for item in load_category(name)[:3]
        for family in FAMILIES
    ]
    outcomes = await run_all(work, server=server, model=model, oracle=oracle, concurrency=4)
    assert len(outcomes) == len(CATEGORIES) * 3 * 3
    known = known_exceptions()
    failed = [
        (o.entry, o.family, o.error_type, o.error, o.refused)
        for o in outcomes
        if not o.passed and o.entry not in known
    ]
    assert failed == []
    assert all(o.model_seconds < o.seconds for o in outcomes)


async def test_a_changed_call_fails_with_bfcls_error(
    served: tuple[str, Model, OracleModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, model, oracle = served
    real = oracle_module.planned_calls

    def changed(item: Any) -> Any:
        [(name, arguments)] = real(item)
        return [(name, {**arguments, "base": 11})]

    monkeypatch.setattr(oracle_module, "planned_calls", changed)
    async with httpx2.AsyncClient() as http:
        outcome = await run_entry(
            entry("simple_python_0"), "openai", "auto", server=server, model=model, http=http, oracle=oracle
        )
    assert not outcome.passed and outcome.error_type == "value_error:others"
    assert "Invalid value for parameter 'base': 11" in outcome.error[0]


async def test_a_call_the_gateway_refuses_never_reaches_the_tool(
    served: tuple[str, Model, OracleModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, model, oracle = served
    monkeypatch.setattr(
        oracle_module,
        "planned_calls",
        lambda item: [("calculate_triangle_area", {"base": "ten", "height": 5})],
    )
    async with httpx2.AsyncClient() as http:
        outcome = await run_entry(
            entry("simple_python_0"), "gemini", "auto", server=server, model=model, http=http, oracle=oracle
        )
    assert not outcome.passed and outcome.error_type == "simple_function_checker:wrong_count"
    assert outcome.refused and "invalid_arguments" in outcome.refused[0]


def test_the_endpoint_mode_reports_both_parsing_settings_and_the_gateways_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Against any OpenAI-compatible server (here one that never calls a tool)."""

    def answer(request: RecordedRequest) -> Reply:
        if request.method == "GET":
            return Reply.json({"object": "list", "data": [{"id": "m", "object": "model"}]})
        return Reply.json(completion(content="I cannot help with that."))

    with running_model_server() as fake:
        fake.handler = answer
        report = run(
            parse(
                [
                    "--endpoint",
                    fake.base_url,
                    "--model",
                    "m",
                    "--categories",
                    "simple_python,irrelevance",
                    "--limit",
                    "2",
                ]
            )
        )
    json.dumps(report)
    assert report["model"] == "m" and report["runs"] == 8
    for setting in ("parsing_on", "parsing_off"):
        assert report["categories"]["simple_python"][setting]["passed"] == 0.0
        assert report["categories"]["irrelevance"][setting]["passed"] == 1.0
        assert 0 < report["totals"][setting]["gateway_share"] < 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--endpoint", "http://127.0.0.1:1/v1"], "--endpoint needs --model"),
        (["--categories", "simple_python,multi_turn_base"], "--categories: unknown multi_turn_base"),
        (["--families", "openai,cohere"], "--families: unknown cohere"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--temperature", "0"], "need --endpoint"),
    ],
)
def test_bad_arguments_are_named(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err
