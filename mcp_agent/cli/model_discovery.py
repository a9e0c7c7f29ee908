"""Which model servers run on this machine and which of their models takes tools, for ``mcp-agent init``.

``find_servers`` asks 127.0.0.1 only, on the usual ports of local servers (``DEFAULT_PORTS``:
Ollama 11434, LM Studio 1234, llama.cpp 8080, vLLM and older Lemonade 8000, Lemonade 13305;
``$MCP_AGENT_INIT_PORTS``, comma-separated, replaces the list), every port at once, each
within a bounded time. A port is identified the way ``doctor`` and ``query`` identify a server
(``servers/identify.py``); one that answers nothing known there is asked for Lemonade's
``/api/v1/models``, then a plain OpenAI-compatible ``/v1/models``.

Which model takes tools, as each server tells it (pure readers):

- Ollama: ``POST /api/show`` lists ``"tools"`` among the model's ``capabilities``;
- LM Studio: ``GET /api/v0/models`` lists ``"tool_use"`` among the entry's ``capabilities``
  (an ``embeddings`` entry never does);
- the others do not tell: their model is offered as "not known" (``doctor`` then checks that
  offered tools reach it), an embedding model (``embed`` in its name) never.

``choose`` takes the first model said to take tools, else the first not known, and says why;
``get_model_hint`` says how to get one when none fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import httpx

from ..config import LLMConfig
from ..providers.servers.endpoints import SERVER_NAMES, ServerKind, start_hint
from ..providers.servers.identify import PROBE_SECONDS, identify_server, list_models

__all__ = [
    "DEFAULT_PORTS",
    "PORTS_VARIABLE",
    "SUGGESTED_MODEL",
    "Candidate",
    "FoundServer",
    "choose",
    "find_servers",
    "get_model_hint",
    "lmstudio_tools",
    "ollama_tools",
    "ports_from",
]

DEFAULT_PORTS = (11434, 1234, 8080, 8000, 13305)
PORTS_VARIABLE = "MCP_AGENT_INIT_PORTS"
SUGGESTED_MODEL = "qwen3:8b"
"""What to pull when no model takes tools: small, and good at calling tools."""
_MAX_SHOWN = 32
"""At most this many of a server's models are asked about (one request each)."""


def ports_from(environ: Mapping[str, str]) -> tuple[int, ...]:
    """``$MCP_AGENT_INIT_PORTS`` as ports, else ``DEFAULT_PORTS``.

    Raises:
        ValueError: the variable holds something that is not a port (the message names it).
    """
    text = environ.get(PORTS_VARIABLE, "").strip()
    if not text:
        return DEFAULT_PORTS
    ports = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not 0 < int(part) < 65536:
            raise ValueError(f"${PORTS_VARIABLE}: {part!r} is not a port (1..65535); write e.g. 11434,1234")
        ports.append(int(part))
    return tuple(ports)


@dataclass(frozen=True)
class Candidate:
    """A model a server serves, and whether it takes tools (None: the server does not say)."""

    name: str
    tools: bool | None
    why: str


@dataclass
class FoundServer:
    """A model server that answered on ``port``."""

    port: int
    kind: ServerKind
    endpoint: str
    """What ``llm.endpoint`` should say."""
    evidence: str
    models: list[Candidate] = field(default_factory=list)

    @property
    def name(self) -> str:
        return SERVER_NAMES.get(self.kind, "an OpenAI-compatible server")


def ollama_tools(body: Any) -> bool | None:
    """Whether Ollama's ``/api/show`` answer lists ``tools`` among the capabilities (None: no list)."""
    capabilities = body.get("capabilities") if isinstance(body, Mapping) else None
    if not isinstance(capabilities, list):
        return None
    return "tools" in capabilities


def lmstudio_tools(body: Any) -> dict[str, bool | None]:
    """From LM Studio's ``/api/v0/models``: each model id, and whether it takes tools."""
    data = body.get("data") if isinstance(body, Mapping) else None
    told: dict[str, bool | None] = {}
    for entry in data if isinstance(data, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            continue
        capabilities = entry.get("capabilities")
        if entry.get("type") == "embeddings":
            told[entry["id"]] = False
        elif isinstance(capabilities, list):
            told[entry["id"]] = "tool_use" in capabilities
        else:
            told[entry["id"]] = None
    return told


def choose(server: FoundServer) -> Candidate | None:
    """The model to write: the first said to take tools, else the first not known; None: none fits."""
    for wanted in (True, None):
        for model in server.models:
            if model.tools is wanted:
                return model
    return None


def get_model_hint(kind: ServerKind) -> str:
    """How to get a model that takes tools on a running server of ``kind``."""
    hints = {
        "ollama": f"pull one that takes tools: `ollama pull {SUGGESTED_MODEL}`",
        "lmstudio": "download one that takes tools: `lms get qwen3-8b` (or LM Studio's Discover tab)",
        "lemonade": "get one that takes tools: `lemonade-server pull Qwen3-8B-GGUF`",
    }
    return hints.get(kind, f"restart it with a model that takes tools ({start_hint(kind, SUGGESTED_MODEL)})")


async def find_servers(ports: Sequence[int], *, timeout: float = PROBE_SECONDS) -> list[FoundServer]:
    """Every model server answering on 127.0.0.1 at ``ports``, in the order of ``ports``; each
    port is given at most about ``3 * timeout`` seconds. Never raises for what a port answers."""
    found: dict[int, FoundServer] = {}
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout), trust_env=False) as client:

        async def one(port: int) -> None:
            with anyio.move_on_after(3 * timeout + 1):
                server = await _at(port, client, timeout)
                if server is not None:
                    found[port] = server

        async with anyio.create_task_group() as group:
            for port in dict.fromkeys(ports):
                group.start_soon(one, port)
    return [found[port] for port in dict.fromkeys(ports) if port in found]


async def _models(endpoint: str, client: httpx.AsyncClient) -> list[str] | None:
    try:
        return await list_models(LLMConfig(endpoint=endpoint, max_retries=0), client)
    except Exception:  # nothing there, or not this API
        return None


async def _at(port: int, client: httpx.AsyncClient, timeout: float) -> FoundServer | None:
    root = f"http://127.0.0.1:{port}"
    info = await identify_server(LLMConfig(endpoint=root), client, timeout=timeout)
    if info.source == "none":
        return None
    kind: ServerKind
    if info.source == "probe" and info.kind != "lemonade":
        kind, endpoint, evidence = cast(ServerKind, info.kind), f"{root}/v1", info.evidence
        names = await _models(endpoint, client) or []
    elif (lemonade := await _models(f"{root}/api/v1", client)) is not None:
        kind, endpoint, evidence, names = "lemonade", f"{root}/api/v1", "GET /api/v1/models", lemonade
    elif (listed := await _models(f"{root}/v1", client)) is not None:
        kind, endpoint, evidence, names = "unknown", f"{root}/v1", "GET /v1/models", listed
    else:
        return None
    server = FoundServer(port, kind, endpoint, evidence)
    server.models = await _told(server, names[:_MAX_SHOWN], client)
    return server


async def _told(server: FoundServer, names: list[str], client: httpx.AsyncClient) -> list[Candidate]:
    """The models with what ``server`` tells of their tool support."""
    root = f"http://127.0.0.1:{server.port}"
    if server.kind == "ollama":
        told: dict[str, bool | None] = {}

        async def show(name: str) -> None:
            try:
                response = await client.post(f"{root}/api/show", json={"model": name})
                told[name] = ollama_tools(response.json())
            except (httpx.HTTPError, ValueError):
                told[name] = None

        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(show, name)
        source = "Ollama's /api/show lists"
    elif server.kind == "lmstudio":
        try:
            told = lmstudio_tools((await client.get(f"{root}/api/v0/models")).json())
        except (httpx.HTTPError, ValueError):
            told = {}
        source = "LM Studio's /api/v0/models lists"
    else:
        told, source = {}, ""
    candidates = []
    for name in names:
        tools = told.get(name)
        if tools is None and "embed" in name.lower():
            tools = False
        if tools:
            why = f"{source} tools among its capabilities"
        elif tools is None:
            why = f"{server.name} does not say which models take tools (`mcp-agent doctor` checks that they reach it)"
        else:
            why = "it does not take tools"
        candidates.append(Candidate(name, tools, why))
    return candidates
