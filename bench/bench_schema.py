"""Cost of the schema pipeline: compiling a tool schema, building a checker, checking arguments.

Runs over the real-looking schemas in tests/tools/schema/schemas/ and prints one JSON object (microseconds
per operation, the median of several rounds):

    .venv/bin/python bench/bench_schema.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_agent.tools.schema import ArgumentChecker, checker_for, compile_tool_schema  # noqa: E402


def per_call_us(fn: Callable[[], Any], number: int, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean time of one call, in microseconds."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number * 1e6)
    return round(statistics.median(times), 1)


def main() -> None:
    cases = [
        json.loads(p.read_text())
        for p in sorted((ROOT / "tests" / "tools" / "schema" / "schemas").glob("*.json"))
    ]
    schemas = [c["inputSchema"] for c in cases]
    compiled = [compile_tool_schema(s) for s in schemas]
    checkers = [ArgumentChecker(c.parameters) for c in compiled]
    valid = [
        (ch, call["arguments"])
        for ch, case in zip(checkers, cases, strict=True)
        for call in case["calls"]
        if "coerced" in call and call["coerced"] == call["arguments"]
    ]
    coerced = [
        (ch, call["arguments"])
        for ch, case in zip(checkers, cases, strict=True)
        for call in case["calls"]
        if "coerced" in call and call["coerced"] != call["arguments"]
    ]
    invalid = [
        (ch, call["arguments"])
        for ch, case in zip(checkers, cases, strict=True)
        for call in case["calls"]
        if "error_paths" in call
    ]

    def each(pairs: list[tuple[ArgumentChecker, Any]]) -> Callable[[], None]:
        def run() -> None:
            for checker, arguments in pairs:
                checker.check(arguments)

        return run

    fetch = next(c.parameters for c, case in zip(compiled, cases, strict=True) if "fetch" in case["server"])
    checker_for(fetch)
    result = {
        "schemas": len(schemas),
        "compile_tool_schema_us": round(
            per_call_us(lambda: [compile_tool_schema(s) for s in schemas], 20) / len(schemas), 1
        ),
        "argument_checker_init_us": round(
            per_call_us(lambda: [ArgumentChecker(c.parameters) for c in compiled], 20) / len(compiled), 1
        ),
        "check_valid_us": round(per_call_us(each(valid), 200) / len(valid), 1),
        "check_needs_coercion_us": round(per_call_us(each(coerced), 100) / len(coerced), 1),
        "check_invalid_us": round(per_call_us(each(invalid), 100) / len(invalid), 1),
        "checker_for_cached_fetch_us": per_call_us(lambda: checker_for(fetch), 2000),
        "calls": {"valid": len(valid), "needs_coercion": len(coerced), "invalid": len(invalid)},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
