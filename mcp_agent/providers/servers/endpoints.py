"""Where the model server is and what it is: URL normalisation, detection, capabilities, start hints.

Pure functions over ``LLMConfig``, no I/O:

- ``normalize_base_url``: ``localhost:11434``, ``http://localhost:11434/``, ``.../v1/`` and a pasted
  ``.../v1/chat/completions`` all become ``http://localhost:11434/v1``; Lemonade keeps ``/api/v1``,
  Groq gets ``/openai/v1``; Anthropic and Gemini get ``/v1`` and ``/v1beta``.
- ``detect_provider``: ``api.anthropic.com`` → anthropic, ``generativelanguage.googleapis.com`` →
  gemini, anything else → openai (Chat Completions), unless ``llm.provider`` says otherwise.
- ``detect_server_kind``: the OpenAI-compatible server, by host, then ``/api/v1`` (Lemonade), then
  the default port: Ollama 11434, LM Studio 1234, llama.cpp 8080, vLLM 8000, Lemonade 13305. Only
  a first guess: ``servers/identify.py`` asks the server what it is, and ``factory.open_provider`` gives
  the provider the capabilities of the kind found.
- ``capabilities_for``: what each kind accepts (``tool_choice``, ``parallel_tool_calls``,
  ``stream_options``, the max-tokens field, ...), overridable by ``llm.capabilities``.
- ``start_hint``/``refused_message``: what to tell a user when nothing listens at the endpoint.

Ports are a guess (anything can listen on 8000: llama-cpp-python does by default);
identification replaces it, and ``llm.capabilities`` overrides either.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from ...config import CapabilityOverrides, LLMConfig

__all__ = [
    "Capabilities",
    "Endpoint",
    "ProviderName",
    "ServerKind",
    "capabilities_for",
    "detect_provider",
    "detect_server_kind",
    "is_loopback",
    "normalize_base_url",
    "refused_message",
    "resolve_endpoint",
    "start_hint",
]

ProviderName = Literal["openai", "anthropic", "gemini"]
ServerKind = Literal[
    "ollama",
    "lmstudio",
    "llamacpp",
    "llama-cpp-python",
    "vllm",
    "lemonade",
    "openai",
    "groq",
    "anthropic",
    "gemini",
    "unknown",
]
SERVER_KINDS: frozenset[str] = frozenset(ServerKind.__args__)  # type: ignore[attr-defined]
"""Every ``ServerKind``, to check a kind read from elsewhere (the server-info cache)."""

SERVER_NAMES: dict[str, str] = {
    "ollama": "Ollama",
    "lmstudio": "LM Studio",
    "llamacpp": "llama.cpp (llama-server)",
    "llama-cpp-python": "llama-cpp-python (llama_cpp.server)",
    "vllm": "vLLM",
    "lemonade": "Lemonade Server",
    "openai": "OpenAI",
    "groq": "Groq",
    "anthropic": "Anthropic",
    "gemini": "Gemini",
    "unknown": "the model server",
}

_DEFAULT_PORTS: dict[int, ServerKind] = {
    11434: "ollama",
    1234: "lmstudio",
    8080: "llamacpp",
    8000: "vllm",
    13305: "lemonade",
}
_HOSTS: dict[str, ServerKind] = {
    "api.openai.com": "openai",
    "api.groq.com": "groq",
    "api.anthropic.com": "anthropic",
    "generativelanguage.googleapis.com": "gemini",
}
_PASTED_SUFFIXES = ("/chat/completions", "/completions", "/models", "/messages")


@dataclass(frozen=True)
class Capabilities:
    """What one OpenAI-compatible server accepts and how it wants history.

    Attributes:
        tool_choice: send ``tool_choice`` with tools (``llm.toolChoice``; Ollama ignores it; vLLM
            without ``--enable-auto-tool-choice`` rejects "auto"; llama-cpp-python's
            ``chatml-function-calling`` renders tools only when it is sent).
        tool_choice_required: the server takes ``tool_choice: "required"`` (llama-cpp-python
            accepts only "auto", "none" or a named tool: "required" is sent as "auto").
        parallel_tool_calls: send ``parallel_tool_calls: true`` (llama.cpp is off by default).
        stream_usage: send ``stream_options.include_usage`` when streaming.
        stream_tools: stream when tools are offered (else one plain request).
        max_tokens_field: ``max_tokens`` or ``max_completion_tokens`` (OpenAI's o-series).
        send_reasoning: replay earlier reasoning as ``reasoning_content``.
        null_content_with_calls: an assistant message with tool calls and no text gets
            ``content: null`` (OpenAI's own shape) rather than ``""`` (older llama.cpp builds
            reject a null or missing content).
        tool_result_name: add ``name`` to ``tool`` messages (local chat templates use it).
        description_cap: tool descriptions are cut to this many characters (0 = no cap).
    """

    tool_choice: bool = False
    tool_choice_required: bool = True
    parallel_tool_calls: bool = False
    stream_usage: bool = True
    stream_tools: bool = True
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    send_reasoning: bool = False
    null_content_with_calls: bool = False
    tool_result_name: bool = True
    description_cap: int = 0

    def tool_choice_value(self, wanted: str) -> str | None:
        """The ``tool_choice`` to send for ``llm.toolChoice`` = ``wanted``; None: send none."""
        if not self.tool_choice:
            return None
        if wanted == "required" and not self.tool_choice_required:
            return "auto"
        return wanted

    def with_overrides(self, overrides: CapabilityOverrides) -> Capabilities:
        """These capabilities with every field ``llm.capabilities`` sets replaced."""
        changes = {name: value for name, value in overrides.model_dump().items() if value is not None}
        return replace(self, **changes) if changes else self


_LOCAL = Capabilities()
_CAPABILITIES: dict[ServerKind, Capabilities] = {
    "ollama": _LOCAL,
    "lmstudio": replace(_LOCAL, tool_choice=True),
    "llamacpp": replace(_LOCAL, tool_choice=True, parallel_tool_calls=True),
    "llama-cpp-python": replace(_LOCAL, tool_choice=True, tool_choice_required=False, stream_tools=False),
    "vllm": replace(_LOCAL, null_content_with_calls=True),
    "lemonade": replace(_LOCAL, stream_usage=False),
    "openai": Capabilities(
        tool_choice=True,
        max_tokens_field="max_completion_tokens",
        null_content_with_calls=True,
        tool_result_name=False,
        description_cap=1024,
    ),
    "groq": Capabilities(tool_choice=True, null_content_with_calls=True, tool_result_name=False),
    "unknown": Capabilities(stream_usage=False, tool_result_name=False),
}


@dataclass(frozen=True)
class Endpoint:
    """The resolved model endpoint.

    Attributes:
        provider: which API to speak: ``openai`` (Chat Completions), ``anthropic`` or ``gemini``.
        kind: the server kind (decides capability defaults and start hints).
        base_url: the normalised base URL, without a trailing slash or query.
        query: the URL's query string (``api-version=...``), kept for every request, or "".
        capabilities: the kind's defaults with ``llm.capabilities`` applied.
        local: True when the host is this machine.
    """

    provider: ProviderName
    kind: ServerKind
    base_url: str
    query: str
    capabilities: Capabilities
    local: bool

    def url(self, path: str) -> str:
        """The full URL of ``path`` (``"/chat/completions"``) under the base URL."""
        full = self.base_url + path
        return f"{full}?{self.query}" if self.query else full

    @property
    def chat_url(self) -> str:
        """The Chat Completions URL (OpenAI-compatible servers)."""
        return self.url("/chat/completions")


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``127.x.x.x``, ``::1`` and ``0.0.0.0``."""
    host = host.strip("[]").lower()
    if host in ("localhost", "0.0.0.0", "::") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme, netloc, path, query) of a URL, adding ``http://`` when the scheme is missing."""
    url = url.strip()
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", url):
        url = "http://" + url
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc, parts.path, parts.query


def _host_port(netloc: str, scheme: str) -> tuple[str, int]:
    hostport = netloc.rsplit("@", 1)[-1]
    parts = urlsplit(f"{scheme}://{hostport}")
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return host, port if port is not None else (443 if scheme == "https" else 80)


def detect_provider(url: str, configured: str = "auto") -> ProviderName:
    """The API to speak: ``llm.provider`` unless ``auto``, else by host (Anthropic, Gemini, else openai)."""
    if configured in ("openai", "anthropic", "gemini"):
        return configured  # type: ignore[return-value]
    scheme, netloc, path, _ = _split(url)
    host, _ = _host_port(netloc, scheme)
    if host == "api.anthropic.com" or host.endswith(".anthropic.com"):
        return "anthropic"
    if host == "generativelanguage.googleapis.com" and "/openai" not in path:  # not Gemini's OpenAI layer
        return "gemini"
    return "openai"


def detect_server_kind(url: str) -> ServerKind:
    """The kind of server at ``url``: by known host, then a local ``/api/v1`` (Lemonade), then port."""
    scheme, netloc, path, _ = _split(url)
    host, port = _host_port(netloc, scheme)
    if host in _HOSTS:
        return _HOSTS[host]
    lemonade_path = path.rstrip("/").endswith("/api/v1") or "/api/v1/" in path
    if lemonade_path and (is_loopback(host) or port in (8000, 13305)):
        return "lemonade"
    return _DEFAULT_PORTS.get(port, "unknown")


def _default_path(provider: ProviderName, kind: ServerKind) -> str:
    if provider == "anthropic":
        return "/v1"
    if provider == "gemini":
        return "/v1beta"
    if kind == "lemonade":
        return "/api/v1"
    if kind == "groq":
        return "/openai/v1"
    return "/v1"


def normalize_base_url(url: str, provider: ProviderName = "openai", kind: ServerKind | None = None) -> str:
    """The base URL without trailing slashes, pasted endpoint paths or query, with its API path.

    A URL with no path gets the default one (``/v1``; Lemonade ``/api/v1``; Groq ``/openai/v1``;
    Anthropic ``/v1``; Gemini ``/v1beta``). Ollama's native ``/api`` becomes ``/v1``. Any other
    path (a proxy's prefix) is kept as it is.
    """
    scheme, netloc, path, _ = _split(url)
    kind = kind or detect_server_kind(url)
    path = path.rstrip("/")
    changed = True
    while changed:
        changed = False
        for suffix in _PASTED_SUFFIXES:
            if path.endswith(suffix):
                path = path[: -len(suffix)].rstrip("/")
                changed = True
    if provider == "openai" and kind == "ollama" and path in ("/api", "/api/chat"):
        path = "/v1"
    if not path:
        path = _default_path(provider, kind)
    return urlunsplit((scheme, netloc, path, "", ""))


def capabilities_for(kind: ServerKind, overrides: CapabilityOverrides | None = None) -> Capabilities:
    """The capability defaults of ``kind``, with ``llm.capabilities`` applied."""
    caps = _CAPABILITIES.get(kind, _CAPABILITIES["unknown"])
    return caps.with_overrides(overrides) if overrides is not None else caps


def resolve_endpoint(llm: LLMConfig, *, kind: ServerKind | None = None) -> Endpoint:
    """Everything about ``llm.endpoint`` that the providers need.

    Args:
        llm: the ``llm`` section of agent.json.
        kind: force the server kind (tests; a server on an unusual port).
    """
    provider = detect_provider(llm.endpoint, llm.provider)
    kind = kind or detect_server_kind(llm.endpoint)
    scheme, netloc, _, query = _split(llm.endpoint)
    host, _ = _host_port(netloc, scheme)
    return Endpoint(
        provider=provider,
        kind=kind,
        base_url=normalize_base_url(llm.endpoint, provider, kind),
        query=query,
        capabilities=capabilities_for(kind, llm.capabilities),
        local=is_loopback(host),
    )


def start_hint(kind: ServerKind, model: str = "", config_file: str = "agent.json") -> str:
    """How to start a server of ``kind`` (and get ``model``), as one sentence fragment; for an
    unknown kind it names ``config_file``, where ``llm.endpoint`` is set."""
    model_text = model or "<model>"
    hints = {
        "ollama": f"start it with `ollama serve` and pull the model with `ollama pull {model_text}`",
        "lmstudio": f"start it with `lms server start` (or the Developer tab of LM Studio) and load the model "
        f"with `lms load {model_text}`",
        "llamacpp": "start it with `llama-server -m <model.gguf> --jinja --port 8080`",
        "llama-cpp-python": "start it with `python -m llama_cpp.server --model <model.gguf> "
        "--chat_format chatml-function-calling`",
        "vllm": f"start it with `vllm serve {model_text} --enable-auto-tool-choice --tool-call-parser hermes`",
        "lemonade": f"start it with `lemonade-server serve` and get the model with `lemonade-server pull {model_text}`",
        "openai": "check the network connection and any proxy settings",
        "groq": "check the network connection and any proxy settings",
        "anthropic": "check the network connection and any proxy settings",
        "gemini": "check the network connection and any proxy settings",
    }
    return hints.get(
        kind,
        "start a model server there (Ollama: `ollama serve`; LM Studio: `lms server start`; llama.cpp: "
        f"`llama-server -m <model.gguf> --jinja`; vLLM: `vllm serve <model>`) or set `llm.endpoint` in {config_file}",
    )


def refused_message(endpoint: Endpoint, model: str = "", config_file: str = "agent.json") -> str:
    """The message for a refused connection: which server, where, and how to start it.

    >>> refused_message(resolve_endpoint(LLMConfig()), "qwen3:8b")  # doctest: +ELLIPSIS
    'Ollama is not running at http://localhost:11434/v1: start it with `ollama serve` and pull ...'
    """
    if endpoint.kind == "unknown":
        return f"No model server is listening at {endpoint.base_url}: {start_hint('unknown', model, config_file)}"
    name = SERVER_NAMES[endpoint.kind]
    if not endpoint.local:
        return f"Cannot reach {name} at {endpoint.base_url}: {start_hint(endpoint.kind, model)}"
    return f"{name} is not running at {endpoint.base_url}: {start_hint(endpoint.kind, model)}"
