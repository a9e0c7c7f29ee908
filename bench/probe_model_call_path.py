"""The files one model call crosses, from ``Agent.query`` to the HTTP request; prints JSON.

An Agent is opened on a config with the OpenAI-compatible provider and no tool servers; httpx's
``AsyncClient.send`` is replaced by a stand-in that records the Python stack when the model
request goes out and answers with a canned Chat Completions body (nothing leaves the process).
``stack_at_send``: the package's files on that stack, outermost first (the path from the query
to the wire). ``whole_query``: every package file whose code runs during ``agent.query`` (one
model call, no tools: all a reader follows from the query to the answer), and ``climbs``: the
calls from a module into one that imports it (a step back up the import graph, read from each
module's own imports), named in ``climbs_are``.

    .venv/bin/python bench/probe_model_call_path.py
"""

from __future__ import annotations

import ast
import itertools
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcp_agent"


def _imports_of(path: Path) -> set[str]:
    """The package modules (as file paths) that ``path`` imports, relative imports resolved."""
    tree = ast.parse(path.read_text())
    package = path.parent
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package
            for _ in range(node.level - 1):
                base = base.parent
            target = base.joinpath(*(node.module or "").split(".")) if node.module else base
            for name in [alias.name for alias in node.names] + [""]:
                for candidate in (target / name, target):
                    for file in (candidate.with_suffix(".py"), candidate / "__init__.py"):
                        if file.is_file():
                            found.add(str(file.relative_to(ROOT)))
    return found


async def main() -> dict[str, Any]:
    stacks: list[list[str]] = []

    async def send(self: httpx.AsyncClient, request: httpx.Request, **_: Any) -> httpx.Response:
        stack = [frame.filename for frame in traceback.extract_stack()]
        stacks.append([str(Path(f).relative_to(ROOT)) for f in stack if f.startswith(str(PACKAGE))])
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
        return httpx.Response(200, json=body, request=request)

    httpx.AsyncClient.send = send  # type: ignore[method-assign,assignment]
    config = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m", "stream": False},
        "mcpServers": {},
    }
    import mcp_agent
    from mcp_agent.config import parse_config

    parsed = parse_config(config)
    opener = getattr(mcp_agent, "open_agent", None)
    if opener is None:  # before the house issue: the classmethod
        from mcp_agent.loop.agent import Agent

        opener = Agent.from_config
    entered: list[str] = []
    edges: set[tuple[str, str]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(str(PACKAGE)):
            return
        file = str(Path(frame.f_code.co_filename).relative_to(ROOT))
        if file not in entered:
            entered.append(file)
        caller = frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(str(PACKAGE)):
            caller = caller.f_back
        if caller is not None:
            edges.add((str(Path(caller.f_code.co_filename).relative_to(ROOT)), file))

    async with opener(parsed, record_children=False) as agent:
        sys.setprofile(profile)
        try:
            result = await agent.query("hello")
        finally:
            sys.setprofile(None)
    assert result.answer == "hi", result
    path = max(stacks, key=len)
    files: list[str] = []
    for file in path:
        if not files or files[-1] != file:
            files.append(file)
    climbs = sum(1 for caller, callee in itertools.pairwise(files) if caller in _imports_of(ROOT / callee))
    up = sorted(f"{a} -> {b}" for a, b in edges if a != b and a in _imports_of(ROOT / b))
    return {
        "stack_at_send": {"files": files, "crossed": len(set(files)), "climbs": climbs},
        "whole_query": {"files": entered, "crossed": len(entered), "climbs": len(up), "climbs_are": up},
    }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main), indent=1))
    sys.exit(0)
