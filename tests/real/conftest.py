"""The real-server tier: fixtures for real model servers, the recording proxy, configs and samples.

Every test here is marked ``real``; ``make test`` leaves them out (pyproject's ``-m``), ``make
test-real`` builds the servers (``build.py``) and runs them. The servers start once per session
(each on a free loopback port); a test that breaks or kills its server starts its own.

What the tests assert is what the project controls: the requests it sends (seen at the
recording proxy), how it reads the answers, how runs end, the usage flags, timings, health and
``doctor``. Never the quality of a 135M model's answers.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .proxy import Exchange, RecordingProxy, Rewrite, recording_proxy
from .servers import GEMMA_TEMPLATE, REAL, Build, RealServer, llama_cpp_python, llama_server, load_build

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_SERVERS = ROOT / "tests" / "servers"
BUNDLED_SERVERS = ROOT / "servers"
SAMPLES = Path(os.environ.get("MCP_AGENT_REAL_SAMPLES", REAL / "samples"))
"""Where recorded wire samples go; ``MCP_AGENT_REAL_SAMPLES=tests/fakes/real_samples`` refreshes the
fast tier's fixtures."""

SYSTEM_PROMPT = "You are a careful assistant with tools. Use a tool when the question needs one; answer plainly and briefly."
"""Fixed here (not the project's default, which may change): at temperature 0 the same build and
prompt give the same answers, so a change in a run is a change in what the project sent."""

ENDINGS_OF_A_WORKING_LOOP = {"success", "max_rounds", "loop_detected"}
"""How a run that worked may end with a 135M model: it answers, or keeps calling tools."""


HANG_SECONDS = 900
"""The tier's "does not hang" bound per test, setup included: a shared run (``fc_runs``: eight
rounds of a real model) takes about 25 s on an idle 2-core machine and several times that on a
busy one; the fast suite's 120 s would fail a slow machine, not a hang."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.real)
            item.add_marker(pytest.mark.timeout(HANG_SECONDS))


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Session-wide, so that module-scoped async fixtures (runs shared by several checks) work."""
    return "asyncio"


@pytest.fixture(scope="session")
def build() -> Build:
    return load_build()


@pytest.fixture(scope="session")
def logs() -> Path:
    folder = REAL / "logs" / "servers"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def fc_server(build: Build, logs: Path) -> Iterator[RealServer]:
    """llama-cpp-python with ``--chat_format chatml-function-calling`` (tools; cannot stream them)."""
    with llama_cpp_python(build, logs, chat_format="chatml-function-calling") as server:
        yield server


@pytest.fixture(scope="session")
def template_server(build: Build, logs: Path) -> Iterator[RealServer]:
    """llama-cpp-python with the GGUF's own chat template (drops ``tools`` without a word)."""
    with llama_cpp_python(build, logs) as server:
        yield server


@pytest.fixture(scope="session")
def jinja_server(build: Build, logs: Path) -> Iterator[RealServer]:
    """Upstream llama.cpp ``llama-server --jinja``."""
    with llama_server(build, logs) as server:
        yield server


@pytest.fixture(scope="session")
def gemma_jinja_server(build: Build, logs: Path) -> Iterator[RealServer]:
    """Gemma 3 270M on ``llama-server --jinja`` with ``gemma3-tools.jinja`` (its GGUF has no template)."""
    with llama_server(build, logs, model=build.gemma, template=GEMMA_TEMPLATE) as server:
        yield server


@pytest.fixture(scope="session")
def gemma_fc_server(build: Build, logs: Path) -> Iterator[RealServer]:
    """Gemma 3 270M on llama-cpp-python with ``--chat_format chatml-function-calling``."""
    with llama_cpp_python(build, logs, chat_format="chatml-function-calling", model=build.gemma) as server:
        yield server


@pytest.fixture
def proxy_to() -> Iterator[Callable[..., RecordingProxy]]:
    """``proxy_to(server, rewrite=None, anonymous=False)``: a recording proxy in front of ``server``, for this test."""
    with _Proxies() as proxies:
        yield proxies.start


class _Proxies:
    def __init__(self) -> None:
        self._open: list[Any] = []

    def start(
        self, server: RealServer, rewrite: Rewrite | None = None, *, anonymous: bool = False
    ) -> RecordingProxy:
        context = recording_proxy(server.url, rewrite, anonymous=anonymous)
        proxy = context.__enter__()
        self._open.append(context)
        return proxy

    def __enter__(self) -> _Proxies:
        return self

    def __exit__(self, *exc: object) -> None:
        for context in reversed(self._open):
            context.__exit__(None, None, None)


def echo_server(**extra: Any) -> dict[str, Any]:
    """The fixture echo server (tests/servers/echo.py), its ``echo`` tool only."""
    return {
        "command": sys.executable,
        "args": [str(FIXTURE_SERVERS / "echo.py")],
        "allowTools": ["echo"],
        **extra,
    }


def system_server(**extra: Any) -> dict[str, Any]:
    """The bundled system server (servers/system.py), its ``memory_usage`` tool only (no arguments)."""
    return {
        "command": sys.executable,
        "args": [str(BUNDLED_SERVERS / "system.py")],
        "allowTools": ["memory_usage"],
        **extra,
    }


def agent_config(
    folder: Path,
    endpoint: str,
    model: str,
    *,
    servers: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    **top: Any,
) -> Path:
    """An agent.json for a real server: temperature 0, a short output cap, bounded waits."""
    config = {
        "systemPrompt": SYSTEM_PROMPT,
        "llm": {
            "endpoint": endpoint,
            "model": model,
            "provider": "openai",
            "temperature": 0,
            "maxOutputTokens": 64,
            "requestTimeoutSeconds": 120,
            "maxRetries": 1,
            **(llm or {}),
        },
        "limits": {"maxRounds": 3, "timeoutSeconds": 180, "toolTimeoutSeconds": 30, **(limits or {})},
        "mcpServers": {"echo": echo_server()} if servers is None else servers,
        **top,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


@pytest.fixture
def samples() -> Callable[[str, Exchange, str], Path]:
    """``save(name, exchange, note)``: keep a wire sample for the fast tier (see ``SAMPLES``)."""

    def save(name: str, exchange: Exchange, note: str = "") -> Path:
        SAMPLES.mkdir(parents=True, exist_ok=True)
        path = SAMPLES / f"{name}.json"
        path.write_text(
            json.dumps(exchange.to_sample(note), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return path

    return save
