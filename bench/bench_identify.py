"""What knowing the server costs a query; prints one JSON object.

Against the fake model server (real HTTP on 127.0.0.1) dressed as each kind
(``tests/fakes/server_shapes.py``), and against a port where nothing listens:

- ``probe_ms``: ``identify_server`` asking afresh (median of ``--repeat``, each on a new client so
  that connecting is counted, as in a fresh ``mcp-agent query``);
- ``requests``: how many questions that took;
- ``cached_ms``: ``known_server`` answered from the cache file (what every later ``query`` within
  ten minutes pays);
- ``open_provider_ms``: ``open_provider`` with identification (cache cold) less without it.

Run: ``.venv/bin/python bench/bench_identify.py [--repeat 20]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

from mcp_agent.config import LLMConfig
from mcp_agent.providers.factory import open_provider
from mcp_agent.providers.servers.identify import identify_server, known_server
from tests.fakes.model_server import running_model_server
from tests.fakes.server_shapes import (
    llama_cpp_python_routes,
    llamacpp_routes,
    lmstudio_routes,
    ollama_routes,
    vllm_routes,
)

KINDS: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "llamacpp": (llamacpp_routes, "smollm2"),
    "llama-cpp-python": (llama_cpp_python_routes, "models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    "ollama": (lambda: ollama_routes(), "qwen3:8b"),
    "lmstudio": (lambda: lmstudio_routes(loaded=8192), "qwen3-8b"),
    "vllm": (lambda: vllm_routes(), "Qwen/Qwen3-8B"),
    "unknown": (dict, "m"),
}


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


async def _case(base_url: str, model: str, repeat: int, probes: Callable[[], int]) -> dict[str, Any]:
    llm = LLMConfig(endpoint=base_url, model=model)
    probe: list[float] = []
    asked = probes()
    for _ in range(repeat):
        async with httpx.AsyncClient(trust_env=False) as client:
            start = time.perf_counter()
            info = await identify_server(llm, client)
            probe.append(time.perf_counter() - start)
    requests = (probes() - asked) // repeat
    cached: list[float] = []
    with_identify: list[float] = []
    without: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        async with httpx.AsyncClient(trust_env=False) as client:
            await known_server(llm, client, state_dir=Path(folder))
            for _ in range(repeat):
                start = time.perf_counter()
                await known_server(llm, client, state_dir=Path(folder))
                cached.append(time.perf_counter() - start)
        for _ in range(repeat):
            start = time.perf_counter()
            async with open_provider(llm, identify=False):
                without.append(time.perf_counter() - start)
            start = time.perf_counter()
            async with open_provider(llm, state_dir=None):
                with_identify.append(time.perf_counter() - start)
    return {
        "identified_as": info.kind,
        "source": info.source,
        "context_window": info.context_window,
        "probe_ms": _ms(probe),
        "requests": requests,
        "cached_ms": _ms(cached),
        "open_provider_ms": round(_ms(with_identify) - _ms(without), 2),
    }


async def main(repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for kind, (routes, model) in KINDS.items():
        with running_model_server() as server:
            server.routes.update(routes())
            results[kind] = await _case(server.base_url, model, repeat, lambda: len(server.probes))
    results["nothing listening"] = await _case("http://127.0.0.1:9/v1", "m", repeat, lambda: 0)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    print(json.dumps(anyio.run(main, parser.parse_args().repeat), indent=1))
