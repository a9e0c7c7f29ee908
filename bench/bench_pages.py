"""Benchmark of paged tool results (``loop/pages.py``); prints one JSON object to stdout.

For a result of ``--mib`` MiB (1 by default) at the default ``maxResultChars`` (16 000), per text
shape (``ascii``: lines of digits; ``mixed``: lines with ``é`` and ``😀``, so Python keeps four bytes
a character; ``one_line``: no line breaks at all):

- ``page_ms``: keeping the result and building the first page and its note (``RunPages.page``),
  median of ``--repeat``; ``cut_ms``: the old cut (``cut_text``), for comparison.
- ``read_ms``: one ``read_result`` answer, the mean over every page.
- ``store_bytes``: what the store holds for the result; ``alloc_peak_mb``: the peak of memory
  allocated while paging it (``tracemalloc``), beyond the result itself.
- ``run_ms`` / ``run_cut_ms``: a whole ``run()`` with a scripted model and an in-memory tool
  returning the result, reading pages 2 to 5 then answering, against the same run with
  ``pageResults: false`` (one tool call, then the answer): the loop's cost, no network.

Run: ``.venv/bin/python bench/bench_pages.py [--mib 1] [--repeat 20]``
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import anyio

from mcp_agent.config import Limits
from mcp_agent.loop.guards import cut_text
from mcp_agent.loop.pages import PageStore, RunPages
from mcp_agent.loop.run import run
from mcp_agent.messages import ToolCall
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

PAGE = 16_000
HANDLE = re.compile(r"paged result (r[0-9a-f]{8})")


def make_text(shape: str, chars: int) -> str:
    line = {"ascii": "0123456789 " * 7 + "\n", "mixed": "line é😀 " * 8 + "\n", "one_line": "x" * 80}[shape]
    return (line * (chars // len(line) + 1))[:chars]


def timed(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


def paging(text: str, repeat: int) -> dict[str, Any]:
    def page_once() -> None:
        RunPages(PageStore(), "run:bench", PAGE).page("tool", text)

    tracemalloc.start()
    pages = RunPages(PageStore(), "run:bench", PAGE)
    paged = pages.page("tool", text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    start = time.perf_counter()
    for number in range(1, paged.pages + 1):
        pages.read({"handle": paged.handle, "page": number})
    read_ms = (time.perf_counter() - start) * 1000 / paged.pages
    return {
        "chars": len(text),
        "pages": paged.pages,
        "page_ms": timed(page_once, repeat),
        "cut_ms": timed(lambda: cut_text(text, PAGE), repeat),
        "read_ms": round(read_ms, 4),
        "store_bytes": pages.store.bytes,
        "alloc_peak_mb": round(peak / 2**20, 2),
    }


async def whole_run(text: str, paged: bool) -> float:
    tools = MemoryToolSource()
    tools.add("big", lambda: text, parameters={"type": "object", "properties": {}})

    def read(number: int) -> Callable[[ModelRequest], Any]:
        def turn(request: ModelRequest) -> Any:
            handle = HANDLE.search(request.messages[-1].content or "") or HANDLE.search(
                "\n".join(m.content for m in request.messages if m.role == "tool")
            )
            assert handle, "no handle in the first result"
            return tool_turn(ToolCall(f"p{number}", "read_result", {"handle": handle.group(1), "page": number}))

        return turn

    reads = [read(n) for n in range(2, 6)] if paged else []
    provider = ScriptedProvider([tool_turn(ToolCall("c1", "big", {})), *reads, text_turn("done")])
    limits = Limits(max_result_chars=PAGE, page_results=paged, max_history_chars=0, max_tokens=0)
    start = time.perf_counter()
    result = await run("q", provider=provider, tools=tools, limits=limits)
    elapsed = (time.perf_counter() - start) * 1000
    assert result.ok, result.detail
    return round(elapsed, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    chars = int(args.mib * 2**20)
    report: dict[str, Any] = {"page_chars": PAGE, "mib": args.mib, "shapes": {}}
    for shape in ("ascii", "mixed", "one_line"):
        text = make_text(shape, chars)
        case = paging(text, args.repeat)
        case["run_ms"] = statistics.median(anyio.run(whole_run, text, True) for _ in range(5))
        case["run_cut_ms"] = statistics.median(anyio.run(whole_run, text, False) for _ in range(5))
        report["shapes"][shape] = case
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
