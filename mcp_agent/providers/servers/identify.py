"""Which model server answers at ``llm.endpoint``, and what it serves: asked, not guessed from the port.

``identify_server(llm, client)`` asks at once, each with a short timeout, what only one kind of
server answers, then asks the identified kind for the model's context window:

| kind | recognised by | context window from |
|---|---|---|
| llama.cpp ``llama-server`` | ``GET /props`` (``default_generation_settings``, ``build_info``) | ``/props`` ``default_generation_settings.n_ctx`` |
| Ollama | ``GET /api/version`` ``{"version"}`` | ``/api/ps`` ``context_length`` (loaded), ``/api/show`` ``num_ctx``, else the model's ``context_length`` up to Ollama's 4096 default |
| LM Studio | ``GET /api/v0/models`` (``max_context_length``, ``compatibility_type``) | ``/api/v1/models`` loaded instance ``context_length``, else ``loaded_context_length`` / ``max_context_length`` |
| vLLM | ``GET /version`` ``{"version"}`` | ``/v1/models`` ``max_model_len`` |
| llama-cpp-python | ``GET /openapi.json`` title "llama.cpp Python API"; or a FastAPI 404 (``{"detail": "Not Found"}``, ``server: uvicorn``) and ``/v1/models`` with ``owned_by: "me"`` | not told (``n_ctx`` is not published) |

``/v1/models`` is asked only when an answer points at a server that names itself there (a FastAPI
404 behind uvicorn, ``Server: llama.cpp``) or the kind keeps its window there (vLLM, llama.cpp).

Each ``read_*`` function is pure: one answer in, a ``Found`` (or the window) out, None when the
answer is not that server's (LM Studio answers 200 with an error body to paths it does not know,
so shapes are checked, never statuses alone). ``identify_server`` never raises: a server that
does not answer, or answers nothing known, keeps the guess from host, path and port
(``endpoints.detect_server_kind``), with ``source`` "none" (no answer) or "port" (no match).
Hosted APIs (OpenAI, Groq, Anthropic, Gemini) are known by their host and not asked.

What a server is gets remembered on disk (``known_server``, ``remember``: asked once, not on
every ``mcp-agent query``); which models it serves is asked by ``list_models`` (for ``doctor``
and the gateway's start-up check).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx

from ..._redact import mask_secrets_in
from ...config import LLMConfig
from ...state.folder import write_private
from ..http.answers import read_body
from ..http.errors import classify_error, foreign_answer, map_transport_errors
from .endpoints import Endpoint, ServerKind, refused_message, resolve_endpoint
from .info import ServerInfo

__all__ = [
    "CACHE_FILE",
    "PROBE_SECONDS",
    "TTL_SECONDS",
    "Answer",
    "Found",
    "cache_key",
    "identify_server",
    "known_server",
    "load_cached",
    "native_root",
    "read_llamacpp_props",
    "read_lmstudio_models",
    "read_models_list",
    "read_ollama_ps",
    "read_ollama_show",
    "read_ollama_version",
    "read_openapi",
    "read_vllm_version",
    "remember",
    "store",
    "window_from_error",
]

logger = logging.getLogger(__name__)

PROBE_SECONDS = 2.0
"""The most one question may take; all of identification takes at most twice this."""
_MAX_PROBE_BYTES = 4 * 1024 * 1024
OLLAMA_DEFAULT_CONTEXT = 4096
"""Ollama's smallest default ``num_ctx`` (below 24 GiB of VRAM): assumed when nothing says more."""
_HOSTED: frozenset[str] = frozenset({"openai", "groq", "anthropic", "gemini"})


@dataclass(frozen=True)
class Answer:
    """One answer to a probe: the status (None: no answer at all), JSON body, ``server`` header."""

    status: int | None
    body: Any = None
    server: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def names_itself(self) -> bool:
        """A server worth asking for its model list: FastAPI's own 404 behind uvicorn
        (llama-cpp-python, vLLM), or llama-server's ``Server: llama.cpp`` on any answer."""
        server = self.server.lower()
        fastapi = self.status == 404 and self.body == {"detail": "Not Found"} and "uvicorn" in server
        return fastapi or "llama.cpp" in server


@dataclass(frozen=True)
class Found:
    """What one answer told: the kind, and the version and context window when it said."""

    kind: ServerKind
    evidence: str
    version: str | None = None
    context_window: int | None = None
    context_source: str = ""


def _count(value: Any) -> int | None:
    """A positive integer, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _same_model(name: Any, wanted: str) -> bool:
    if not isinstance(name, str):
        return False

    def norm(text: str) -> str:
        return text.removesuffix(":latest").lower()

    return norm(name) == norm(wanted)


def read_llamacpp_props(answer: Answer) -> Found | None:
    """llama.cpp's ``GET /props``: ``default_generation_settings.n_ctx`` (the slot's window)."""
    body = answer.body
    if not answer.ok or not isinstance(body, Mapping):
        return None
    settings = body.get("default_generation_settings")
    if not isinstance(settings, Mapping) and not ("build_info" in body and "total_slots" in body):
        return None
    window = _count(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    source = "/props default_generation_settings.n_ctx" if window else ""
    if window is None and _count(body.get("n_ctx")):  # older builds
        window, source = _count(body.get("n_ctx")), "/props n_ctx"
    build = body.get("build_info")
    version = build if isinstance(build, str) and build else None
    return Found("llamacpp", f"GET /props: llama.cpp {version or ''}".rstrip(), version, window, source)


def read_ollama_version(answer: Answer) -> Found | None:
    """Ollama's ``GET /api/version``: ``{"version": "0.12.3"}``."""
    body = answer.body
    if not answer.ok or not isinstance(body, Mapping) or "error" in body:
        return None
    version = body.get("version")
    if not isinstance(version, str) or not version:
        return None
    return Found("ollama", f"GET /api/version: Ollama {version}", version)


def read_ollama_ps(body: Any, model: str) -> int | None:
    """The window of ``model`` if Ollama has it loaded (``GET /api/ps`` ``context_length``)."""
    models = body.get("models") if isinstance(body, Mapping) else None
    for entry in models if isinstance(models, list) else []:
        if not isinstance(entry, Mapping):
            continue
        if _same_model(entry.get("name"), model) or _same_model(entry.get("model"), model):
            return _count(entry.get("context_length"))
    return None


def read_ollama_show(body: Any) -> tuple[int | None, str]:
    """The window from ``POST /api/show``: the Modelfile's ``num_ctx``, else the model's own
    ``<arch>.context_length`` up to ``OLLAMA_DEFAULT_CONTEXT`` (what Ollama loads it with unless
    ``num_ctx`` or ``OLLAMA_CONTEXT_LENGTH`` say more). Returns (window, where it was read)."""
    if not isinstance(body, Mapping):
        return None, ""
    parameters = body.get("parameters")
    if isinstance(parameters, str) and (
        match := re.search(r"^\s*num_ctx\s+(\d+)\s*$", parameters, re.MULTILINE)
    ):
        return int(match.group(1)), "/api/show parameters num_ctx"
    info = body.get("model_info")
    if isinstance(info, Mapping):
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length") and (trained := _count(value)):
                return min(
                    trained, OLLAMA_DEFAULT_CONTEXT
                ), f"/api/show {key} ({trained}), at most Ollama's default"
    return None, ""


def read_lmstudio_models(answer: Answer, model: str) -> Found | None:
    """LM Studio's ``GET /api/v0/models``: entries with ``max_context_length`` or
    ``compatibility_type``; the window of ``model`` is its ``loaded_context_length`` when loaded,
    else its ``max_context_length``."""
    body = answer.body
    data = body.get("data") if answer.ok and isinstance(body, Mapping) else None
    if not isinstance(data, list):
        return None
    entries = [entry for entry in data if isinstance(entry, Mapping)]
    if not any("max_context_length" in entry or "compatibility_type" in entry for entry in entries):
        return None
    window, source = None, ""
    for entry in entries:
        if _same_model(entry.get("id"), model):
            for key in ("loaded_context_length", "max_context_length"):
                if window := _count(entry.get(key)):
                    source = f"/api/v0/models {key}"
                    break
    return Found("lmstudio", "GET /api/v0/models: LM Studio", None, window, source)


def read_lmstudio_loaded(body: Any, model: str) -> int | None:
    """The window of a loaded instance of ``model`` in LM Studio's ``GET /api/v1/models`` (0.4+)."""
    models = body.get("models") if isinstance(body, Mapping) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, Mapping) and _same_model(entry.get("key"), model):
            for instance in entry.get("loaded_instances") or []:
                config = instance.get("config") if isinstance(instance, Mapping) else None
                if isinstance(config, Mapping) and (window := _count(config.get("context_length"))):
                    return window
    return None


def read_vllm_version(answer: Answer) -> Found | None:
    """vLLM's ``GET /version``: ``{"version": "0.10.1"}``."""
    body = answer.body
    if not answer.ok or not isinstance(body, Mapping) or not isinstance(body.get("version"), str):
        return None
    return Found("vllm", f"GET /version: vLLM {body['version']}", body["version"])


def read_openapi(answer: Answer) -> Found | None:
    """llama-cpp-python's ``GET /openapi.json`` (FastAPI): title "🦙 llama.cpp Python API"."""
    info = answer.body.get("info") if answer.ok and isinstance(answer.body, Mapping) else None
    if not isinstance(info, Mapping) or "llama.cpp python" not in str(info.get("title", "")).lower():
        return None
    version = info.get("version") if isinstance(info.get("version"), str) else None
    return Found("llama-cpp-python", f"GET /openapi.json: llama-cpp-python {version or ''}".rstrip(), version)


def read_models_list(answer: Answer, model: str) -> Found | None:
    """``GET /v1/models`` of a server that owns up to itself: vLLM (``owned_by: "vllm"``,
    ``max_model_len``), llama.cpp (``owned_by: "llamacpp"``, ``meta.n_ctx``), llama-cpp-python
    (``owned_by: "me"``, ``permissions``, the id a GGUF path, behind uvicorn)."""
    body = answer.body
    data = body.get("data") if answer.ok and isinstance(body, Mapping) else None
    entries = [entry for entry in data if isinstance(entry, Mapping)] if isinstance(data, list) else []
    if not entries:
        return None
    mine = [entry for entry in entries if _same_model(entry.get("id"), model)] or entries[:1]
    owner = entries[0].get("owned_by")
    if owner == "vllm":
        window = _count(mine[0].get("max_model_len"))
        source = "/v1/models max_model_len" if window else ""
        return Found("vllm", "GET /v1/models: owned_by vllm", None, window, source)
    if owner == "llamacpp":
        meta = mine[0].get("meta")
        window = _count(meta.get("n_ctx")) if isinstance(meta, Mapping) else None
        source = "/v1/models meta.n_ctx" if window else ""
        return Found("llamacpp", "GET /v1/models: owned_by llamacpp", None, window, source)
    if owner == "me" and "permissions" in entries[0] and "uvicorn" in answer.server.lower():
        return Found("llama-cpp-python", "GET /v1/models: owned_by me (a GGUF path), server uvicorn")
    return None


_WINDOW_IN_ERROR = (
    re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE),  # OpenAI, vLLM, llama-cpp-python
    re.compile(r"context size \((\d+) tokens\)", re.IGNORECASE),  # llama.cpp
    re.compile(r"\bn_ctx\b\W{0,4}(\d+)"),  # llama.cpp's n_ctx field, LM Studio's "n_ctx: 4096"
    re.compile(r"context length of only (\d+) tokens", re.IGNORECASE),  # LM Studio
)


def window_from_error(text: str) -> int | None:
    """The context window a context-length error states (``"... maximum context length is 512
    tokens ..."``), or None. Servers that do not publish their window (llama-cpp-python) say it
    there."""
    for pattern in _WINDOW_IN_ERROR:
        if match := pattern.search(text):
            return int(match.group(1)) or None
    return None


def native_root(base_url: str) -> str:
    """Where a server's own routes live: the base URL without its ``/v1`` (or ``/api/v1``)."""
    for suffix in ("/api/v1", "/v1"):
        if base_url.endswith(suffix):
            return base_url[: -len(suffix)]
    return base_url


class _Asker:
    """Probes of one server, each with the short timeout; an answer is never an exception."""

    def __init__(self, llm: LLMConfig, client: httpx.AsyncClient, timeout: float) -> None:
        self.client = client
        self.timeout = httpx.Timeout(timeout)
        self.headers = dict(llm.headers)
        if llm.api_key:
            self.headers["Authorization"] = f"Bearer {llm.api_key}"
        self.reached = False

    async def ask(self, url: str, body: Any = None) -> Answer:
        method = "GET" if body is None else "POST"
        try:
            async with self.client.stream(
                method, url, json=body, headers=self.headers, timeout=self.timeout
            ) as response:
                self.reached = True
                content = await read_body(response, _MAX_PROBE_BYTES)
        except Exception as exc:  # a probe never fails identification
            logger.debug("probe %s %s: %s", method, url, exc)
            return Answer(None)
        try:
            parsed = json.loads(content) if content else None
        except ValueError:
            parsed = None
        return Answer(response.status_code, parsed, response.headers.get("server", ""))


async def _gather(asker: _Asker, requests: Mapping[str, tuple[str, Any]]) -> dict[str, Answer]:
    """Ask every ``name: (url, body)`` at once."""
    answers: dict[str, Answer] = {}

    async def one(name: str, url: str, body: Any) -> None:
        answers[name] = await asker.ask(url, body)

    async with anyio.create_task_group() as group:
        for name, (url, body) in requests.items():
            group.start_soon(one, name, url, body)
    return answers


async def identify_server(
    llm: LLMConfig, client: httpx.AsyncClient, *, timeout: float = PROBE_SECONDS
) -> ServerInfo:
    """What answers at ``llm.endpoint`` (see the module docstring). Never raises."""
    endpoint = resolve_endpoint(llm)
    if endpoint.provider != "openai" or endpoint.kind in _HOSTED:
        return ServerInfo(kind=endpoint.kind, source="host", evidence=f"the host of {endpoint.base_url}")
    if endpoint.kind == "lemonade":  # recognised by its /api/v1 path
        return ServerInfo(kind="lemonade", source="port", evidence="the /api/v1 path")
    try:
        with anyio.fail_after(2 * timeout + 0.5):
            return await _identify(llm, endpoint, _Asker(llm, client, timeout))
    except Exception as exc:  # never raises: the guess stands
        logger.debug("identifying the model server failed: %r", exc)
        return ServerInfo(
            kind=endpoint.kind, source="none", evidence=f"no answer in time ({type(exc).__name__})"
        )


async def _identify(llm: LLMConfig, endpoint: Endpoint, asker: _Asker) -> ServerInfo:
    root, model = native_root(endpoint.base_url), llm.model
    first = await _gather(
        asker,
        {
            "props": (f"{root}/props", None),
            "ollama": (f"{root}/api/version", None),
            "lmstudio": (f"{root}/api/v0/models", None),
            "vllm": (f"{root}/version", None),
            "openapi": (f"{root}/openapi.json", None),
        },
    )
    if not asker.reached:
        return ServerInfo(kind=endpoint.kind, source="none", evidence=f"nothing answered at {root}")
    found = (
        read_llamacpp_props(first["props"])
        or read_ollama_version(first["ollama"])
        or read_lmstudio_models(first["lmstudio"], model)
        or read_openapi(first["openapi"])
        or read_vllm_version(first["vllm"])
    )
    if found is None and any(answer.names_itself for answer in first.values()):
        found = read_models_list(await asker.ask(endpoint.url("/models")), model)
    if found is None:
        return ServerInfo(kind=endpoint.kind, source="port", evidence=f"no known answer at {root}")
    found = await _window(found, asker, root, endpoint, model)
    tokenize = {"llamacpp": f"{root}/tokenize", "llama-cpp-python": f"{root}/extras/tokenize/count"}
    return ServerInfo(
        kind=found.kind,
        version=found.version,
        context_window=found.context_window,
        tokenize_url=tokenize.get(found.kind),
        source="probe",
        evidence=found.evidence,
        context_source=found.context_source,
    )


async def _window(found: Found, asker: _Asker, root: str, endpoint: Endpoint, model: str) -> Found:
    """``found`` with the context window the second round of questions tells, when the first did not."""
    maximum_only = found.kind == "lmstudio" and "max_context_length" in found.context_source
    if found.context_window is not None and not maximum_only:
        return found
    window, source = None, ""
    if found.kind == "ollama":
        second = await _gather(
            asker, {"ps": (f"{root}/api/ps", None), "show": (f"{root}/api/show", {"model": model})}
        )
        if (loaded := read_ollama_ps(second["ps"].body, model)) is not None:
            window, source = loaded, "/api/ps context_length (loaded)"
        else:
            window, source = read_ollama_show(second["show"].body)
    elif found.kind == "lmstudio":
        if (
            loaded := read_lmstudio_loaded((await asker.ask(f"{root}/api/v1/models")).body, model)
        ) is not None:
            window, source = loaded, "/api/v1/models loaded_instances context_length"
    elif found.kind in ("vllm", "llamacpp"):
        listed = read_models_list(await asker.ask(endpoint.url("/models")), model)
        if listed is not None and listed.context_window is not None:
            window, source = listed.context_window, listed.context_source
    if window is None:
        return found
    return Found(found.kind, found.evidence, found.version, window, source)


# --------------------------------------------------------------------------------------------
# which models a server serves (for ``doctor`` and the gateway's start-up check)
#
# One GET per API: ``/models`` (OpenAI-compatible), ``/models`` with ``x-api-key`` (Anthropic),
# ``/models`` with ``x-goog-api-key`` (Gemini, names without the ``models/`` prefix). The answer is
# read within ``llm.maxResponseBytes`` like any other. An answer that is no API's (a web page: the
# endpoint is another web server) is an error that says so, without the page (``http/errors.py``).
def _headers(llm: LLMConfig, endpoint: Endpoint) -> dict[str, str]:
    headers = dict(llm.headers)
    if llm.api_key:
        if endpoint.provider == "anthropic":
            headers.update({"x-api-key": llm.api_key, "anthropic-version": "2023-06-01"})
        elif endpoint.provider == "gemini":
            headers["x-goog-api-key"] = llm.api_key
        else:
            headers["Authorization"] = f"Bearer {llm.api_key}"
    return headers


def model_ids(provider: str, body: Any) -> list[str]:
    """The model names in a models-list answer of ``provider``'s API."""
    if not isinstance(body, dict):
        return []
    if provider == "gemini":
        items = body.get("models") or []
        return [str(m.get("name", "")).removeprefix("models/") for m in items if isinstance(m, dict)]
    items = body.get("data") or body.get("models") or []
    return [str(m.get("id") or m.get("name") or "") for m in items if isinstance(m, dict)]


def model_present(wanted: str, available: list[str]) -> bool:
    """Whether ``wanted`` is served; Ollama's ``name`` and ``name:latest`` are the same model."""

    def norm(name: str) -> str:
        return name.removesuffix(":latest").lower()

    return norm(wanted) in {norm(name) for name in available}


async def list_models(llm: LLMConfig, client: httpx.AsyncClient) -> list[str]:
    """The models the configured server offers.

    Raises:
        ProviderError: unreachable (the message says how to start it), an error status, or an
            answer over ``llm.maxResponseBytes``.
    """
    endpoint = resolve_endpoint(llm)
    url = endpoint.url("/models")
    with map_transport_errors(refused_message=refused_message(endpoint, llm.model, llm.config_file)):
        async with client.stream("GET", url, headers=_headers(llm, endpoint)) as response:
            content = await read_body(response, llm.max_response_bytes)
    foreign = foreign_answer(response.status_code, response.headers, content, url=url, api=endpoint.provider)
    if foreign is not None:
        raise foreign
    if response.status_code >= 400:
        raise classify_error(response.status_code, content, response.headers)
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    return model_ids(endpoint.provider, body)


# --------------------------------------------------------------------------------------------
# what each model server is, remembered on disk so that ``mcp-agent query`` does not ask every time
#
# One JSON file in the state folder (``_paths.state_dir()``), ``server-info.json``::
#
#     {"version": 1, "entries": {"http://127.0.0.1:8080/v1 | qwen3:8b": {"at": 1796123509.2, "info": {...}}}}
#
# keyed by the normalised base URL without its user info and the model (the context window is the
# model's), each entry good for ``TTL_SECONDS`` (a server restarted with another ``--ctx-size`` is
# asked again soon). Only what a server answered is kept: a server that did not answer at all is
# asked again next time. Reading and writing never raise: a missing, corrupt or unwritable file
# only means asking again (logged). Writes go to a temporary file renamed into place, so a reader
# never sees half a file, and the file is the user's alone (``_paths.write_private``).
#
# No credential is written: the key and a stored tokenizer URL carry no user info (a loaded entry
# gets the endpoint's back, ``known_server``), and every other known secret in an entry (a
# server's evidence quoting its URL) is masked (``_redact.mask_secrets_in``).
#
# ``known_server`` is the one call the rest uses: the cached entry while it is fresh, else
# ``identify_server`` and store. ``remember`` adds what was learned later (``doctor``'s
# check that a server drops tools) to a fresh entry.


CACHE_FILE = "server-info.json"
TTL_SECONDS = 600.0
"""How long an identification is trusted (ten minutes)."""
_MAX_ENTRIES = 64


def cache_key(llm: LLMConfig) -> str:
    """The key of ``llm``'s server and model: the normalised base URL (without user info) and the model name."""
    return f"{_without_userinfo(resolve_endpoint(llm).base_url)} | {llm.model}"


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])) if "@" in parts.netloc else url


def _with_userinfo_of(url: str, base_url: str) -> str:
    """``url`` (stored without user info) with the user info of ``base_url``, the endpoint's now."""
    userinfo = urlsplit(base_url).netloc.rpartition("@")[0]
    parts = urlsplit(url)
    if not userinfo or "@" in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("ignoring the server-info cache %s: %s", path, exc)
        return {}
    entries = data.get("entries") if isinstance(data, dict) and data.get("version") == 1 else None
    return entries if isinstance(entries, dict) else {}


def load_cached(
    path: Path, key: str, *, now: float | None = None, ttl: float = TTL_SECONDS
) -> ServerInfo | None:
    """The fresh entry for ``key`` in the cache file at ``path`` (``source`` "cache"), else None."""
    entry = _read(path).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), int | float):
        return None
    now = time.time() if now is None else now
    if not 0 <= now - entry["at"] <= ttl or not isinstance(entry.get("info"), dict):
        return None
    return replace(ServerInfo.from_dict(entry["info"]), source="cache")


def store(
    path: Path, key: str, info: ServerInfo, *, now: float | None = None, ttl: float = TTL_SECONDS
) -> None:
    """Keep ``info`` for ``key`` (dropping stale entries); never raises."""
    now = time.time() if now is None else now
    entries = {
        name: entry
        for name, entry in _read(path).items()
        if isinstance(entry, dict)
        and isinstance(entry.get("at"), int | float)
        and 0 <= now - entry["at"] <= ttl
    }
    if info.tokenize_url is not None:
        info = replace(info, tokenize_url=_without_userinfo(info.tokenize_url))
    entries[key] = {"at": now, "info": info.to_dict()}
    newest = sorted(entries.items(), key=lambda item: item[1]["at"])[-_MAX_ENTRIES:]
    try:
        write_private(path, json.dumps(mask_secrets_in({"version": 1, "entries": dict(newest)})))
    except OSError as exc:
        logger.warning("cannot write the server-info cache %s: %s", path, exc)


def remember(path: Path, llm: LLMConfig, **changes: Any) -> None:
    """Add what was learned about ``llm``'s server (``tools_dropped=True``) to its fresh entry."""
    key = cache_key(llm)
    cached = load_cached(path, key)
    if cached is not None:
        store(path, key, replace(cached, **changes))


async def known_server(
    llm: LLMConfig, client: httpx.AsyncClient, *, state_dir: Path | None, refresh: bool = False
) -> ServerInfo:
    """What ``llm``'s server is: from the cache in ``state_dir`` while fresh, else asked (and kept).

    Args:
        llm: the ``llm`` section (endpoint, model, headers).
        client: the HTTP client to ask with.
        state_dir: the state folder; None: no cache.
        refresh: ask even when a fresh entry exists (``doctor``).
    """
    path = state_dir / CACHE_FILE if state_dir is not None else None
    key = cache_key(llm)
    if path is not None and not refresh and (cached := load_cached(path, key)) is not None:
        if cached.tokenize_url is not None:
            cached = replace(
                cached, tokenize_url=_with_userinfo_of(cached.tokenize_url, resolve_endpoint(llm).base_url)
            )
        return cached
    info = await identify_server(llm, client)
    if path is not None and info.source in ("probe", "port"):
        store(path, key, info)
    return info
