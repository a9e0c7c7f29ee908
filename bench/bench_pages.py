"""Benchmark of paged tool results (``loop/pages.py``); prints one JSON object to stdout.

For a result of ``--mib`` MiB (1 by default) at the default ``maxResultChars`` (16 000), per text
shape (``ascii``: lines of digits; ``mixed``: lines with ``é`` and ``😀``, so Python keeps four bytes
a character; ``one_line``: no line breaks at all):

- ``page_ms``: keeping the result and building the first page and its note (``RunPages.page``),
  median of ``--repeat``; ``cut_ms``: the old cut (``cut_text``), for comparison.
- ``read_ms``: one ``read_result`` answer, the mean over every page.
- ``store_bytes``: what the store holds for the result; ``alloc_peak_mb``: the peak of memory
  allocated while paging it (``tracemalloc``), beyond the result itself.
- ``sqlite`` (and ``redis`` with ``--redis URL``): ``page_ms`` and ``read_ms`` as above, paging
  into a session's store (``State.pages``): one transaction (one script) each.
- ``run_ms`` / ``run_cut_ms``: a whole ``run()`` with a scripted model and an in-memory tool
  returning the result, reading pages 2 to 5 then answering, against the same run with
  ``pageResults: false`` (one tool call, then the answer): the loop's cost, no network.

Run: ``.venv/bin/python bench/bench_pages.py [--mib 1] [--repeat 20] [--redis redis://127.0.0.1:6379/15]``
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mcp_agent.config import Limits
from mcp_agent.loop.guards import cut_text
from mcp_agent.loop.pages import RunPages
from mcp_agent.loop.run import run
from mcp_agent.messages import ToolCall
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.state import StateLimits, open_state
from mcp_agent.state.memory import MemoryPageStore
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


async def atimed(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


async def paging(text: str, repeat: int) -> dict[str, Any]:
    async def page_once() -> None:
        await RunPages(MemoryPageStore(), "run:bench", PAGE).page("tool", text)

    store = MemoryPageStore()
    tracemalloc.start()
    pages = RunPages(store, "run:bench", PAGE)
    paged = await pages.page("tool", text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert paged is not None
    start = time.perf_counter()
    for number in range(1, paged.pages + 1):
        await pages.read({"handle": paged.handle, "page": number})
    read_ms = (time.perf_counter() - start) * 1000 / paged.pages
    return {
        "chars": len(text),
        "pages": paged.pages,
        "page_ms": await atimed(page_once, repeat),
        "cut_ms": timed(lambda: cut_text(text, PAGE), repeat),
        "read_ms": round(read_ms, 4),
        "store_bytes": store.bytes,
        "alloc_peak_mb": round(peak / 2**20, 2),
    }


async def stored(url: str, text: str, repeat: int) -> dict[str, Any]:
    """Paging into a session's store (``State.pages``) and reading it back, one page at a time."""
    state = await open_state(url, limits=StateLimits())
    try:
        session = await state.sessions.create()
        pages = RunPages(state.pages, session.id, PAGE)
        paged = await pages.page("tool", text)
        assert paged is not None
        start = time.perf_counter()
        for number in range(1, paged.pages + 1):
            await pages.read({"handle": paged.handle, "page": number})
        read_ms = (time.perf_counter() - start) * 1000 / paged.pages
        page_ms = await atimed(lambda: pages.page("tool", text), repeat)
        return {"page_ms": page_ms, "read_ms": round(read_ms, 4)}
    finally:
        await state.aclose()


async def whole_run(text: str, paged: bool) -> float:
    tools = MemoryToolSource()
    tools.add("big", lambda: text, parameters={"type": "object", "properties": {}})

    def read(number: int) -> Callable[[ModelRequest], Any]:
        def turn(request: ModelRequest) -> Any:
            handle = HANDLE.search(request.messages[-1].content or "") or HANDLE.search(
                "\n".join(m.content for m in request.messages if m.role == "tool")
            )
            assert handle, "no handle in the first result"
            return tool_turn(
                ToolCall(f"p{number}", "read_result", {"handle": handle.group(1), "page": number})
            )

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
    parser.add_argument("--redis", default=None, help="also page into this Redis (redis://HOST:PORT/DB)")
    args = parser.parse_args()
    chars = int(args.mib * 2**20)
    report: dict[str, Any] = {"page_chars": PAGE, "mib": args.mib, "shapes": {}}
    with tempfile.TemporaryDirectory() as folder:
        for shape in ("ascii", "mixed", "one_line"):
            text = make_text(shape, chars)
            case = anyio.run(paging, text, args.repeat)
            case["run_ms"] = statistics.median(anyio.run(whole_run, text, True) for _ in range(5))
            case["run_cut_ms"] = statistics.median(anyio.run(whole_run, text, False) for _ in range(5))
            case["sqlite"] = anyio.run(stored, f"sqlite:///{folder}/{shape}.db", text, args.repeat)
            if args.redis:
                case["redis"] = anyio.run(stored, args.redis, text, args.repeat)
            report["shapes"][shape] = case
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
