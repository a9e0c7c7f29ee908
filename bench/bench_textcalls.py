"""Benchmark: extracting tool calls written as text from 20 kB of model content.

Prints one JSON object: the median (and best) microseconds per ``extract_tool_calls`` call on
20 kB of prose alone, and on the same prose with four calls in Hermes and in Qwen3-Coder XML
form spread through it, plus a 20 kB adversarial text (thousands of unclosed markers) and two of 2 MB (only the first
``MAX_SCAN_CHARS`` characters and ``MAX_MARKERS`` markers are read: bounded, whatever the length).

    .venv/bin/python bench/bench_textcalls.py
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Callable

from mcp_agent.messages import ToolSpec
from mcp_agent.providers.textcalls import extract_tool_calls, split_reasoning

SIZE = 20_000
TOOLS = [
    ToolSpec(
        "weather__get_weather",
        mcp_name="get_weather",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    ),
    ToolSpec(
        "files__read_file",
        mcp_name="read_file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    ),
]

PARAGRAPH = (
    "The service listens on port 8000 and answers health checks at /api/v1/health. When the "
    'check fails it returns {"status": "down", "since": 1712345678} and the load balancer '
    "[drains the node](https://example.com/docs) within thirty seconds. Logs rotate daily; see "
    "`journalctl -u app` for details, and note that array indexes like items[0] start at zero.\n\n"
)


def prose(size: int) -> str:
    return (PARAGRAPH * (size // len(PARAGRAPH) + 1))[:size]


def hermes(i: int) -> str:
    return f'\n<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "City {i}", "days": {i}}}}}\n</tool_call>\n'


def qwen_xml(i: int) -> str:
    return (
        f"\n<tool_call>\n<function=get_weather>\n<parameter=city>\nCity {i}\n</parameter>\n"
        f"<parameter=days>\n{i}\n</parameter>\n</function>\n</tool_call>\n"
    )


def with_calls(block: Callable[[int], str]) -> str:
    calls = "".join(block(i) for i in range(4))
    body = prose(SIZE - len(calls))
    quarter = len(body) // 4
    return "".join(body[k * quarter : (k + 1) * quarter] + block(k) for k in range(4)) + body[4 * quarter :]


def measure(fn: Callable[[], object], *, rounds: int = 200) -> dict[str, float]:
    fn()  # warm up (imports, regex caches)
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1e6)
    return {"median_us": round(statistics.median(samples), 1), "best_us": round(min(samples), 1)}


def main() -> None:
    texts = {
        "prose_only": prose(SIZE),
        "prose_4_hermes_calls": with_calls(hermes),
        "prose_4_qwen_xml_calls": with_calls(qwen_xml),
        "adversarial_unclosed_markers": ("<tool_call>{" * (SIZE // 12))[:SIZE],
        "adversarial_unclosed_markers_2mb": "<tool_call>{" * (2_000_000 // 12),
        "adversarial_function_json_2mb": "<function=get_weather>{" * (2_000_000 // 23),
    }
    expected = {
        "prose_only": 0,
        "prose_4_hermes_calls": 4,
        "prose_4_qwen_xml_calls": 4,
        "adversarial_unclosed_markers": 0,
        "adversarial_unclosed_markers_2mb": 0,
        "adversarial_function_json_2mb": 1000,  # MAX_MARKERS: the rest stays text
    }
    results: dict[str, object] = {}
    for name, text in texts.items():
        found = len(extract_tool_calls(text, TOOLS).calls)
        if found != expected[name]:
            raise SystemExit(f"{name}: expected {expected[name]} calls, found {found}")
        results[name] = {
            "chars": len(text),
            "calls": found,
            **measure(lambda t=text: extract_tool_calls(t, TOOLS), rounds=200 if len(text) <= SIZE else 5),
        }
    results["split_reasoning_prose_only"] = measure(lambda: split_reasoning(texts["prose_only"]))
    print(
        json.dumps(
            {
                "benchmark": "textcalls",
                "unit": "microseconds per call",
                "python": sys.version.split()[0],
                "machine": platform.machine(),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
