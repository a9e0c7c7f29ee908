"""Endpoint normalisation, provider and server-kind detection, capabilities, start hints."""

from __future__ import annotations

import pytest

from mcp_agent.config import CapabilityOverrides, LLMConfig
from mcp_agent.providers.servers.endpoints import (
    capabilities_for,
    detect_provider,
    detect_server_kind,
    is_loopback,
    normalize_base_url,
    refused_message,
    resolve_endpoint,
    start_hint,
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:11434/v1", "http://localhost:11434/v1"),
        ("http://localhost:11434/v1/", "http://localhost:11434/v1"),
        ("http://localhost:11434", "http://localhost:11434/v1"),
        ("http://localhost:11434/", "http://localhost:11434/v1"),
        ("localhost:11434", "http://localhost:11434/v1"),
        ("  http://localhost:11434/v1//  ", "http://localhost:11434/v1"),
        ("http://localhost:11434/api", "http://localhost:11434/v1"),  # Ollama's native path
        ("http://localhost:11434/v1/chat/completions", "http://localhost:11434/v1"),  # pasted
        ("http://localhost:1234/v1/models", "http://localhost:1234/v1"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://localhost:13305", "http://localhost:13305/api/v1"),  # Lemonade ≥ 10.1
        ("http://localhost:13305/api/v1/", "http://localhost:13305/api/v1"),
        ("http://localhost:8000/api/v1", "http://localhost:8000/api/v1"),  # Lemonade < 10.1
        ("http://localhost:8000", "http://localhost:8000/v1"),  # vLLM
        ("https://api.openai.com", "https://api.openai.com/v1"),
        ("https://api.openai.com/v1?x=1", "https://api.openai.com/v1"),
        ("https://api.groq.com", "https://api.groq.com/openai/v1"),
        ("https://api.groq.com/openai/v1", "https://api.groq.com/openai/v1"),
        ("https://proxy.example.com/llm/openai", "https://proxy.example.com/llm/openai"),  # a prefix is kept
        ("HTTP://Box:9000/v1", "http://Box:9000/v1"),
    ],
)
def test_normalize_base_url(url: str, expected: str) -> None:
    assert normalize_base_url(url) == expected


@pytest.mark.parametrize(
    ("url", "provider", "expected"),
    [
        ("https://api.anthropic.com", "anthropic", "https://api.anthropic.com/v1"),
        ("https://api.anthropic.com/v1/messages", "anthropic", "https://api.anthropic.com/v1"),
        (
            "https://generativelanguage.googleapis.com",
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta",
        ),
        (
            "https://generativelanguage.googleapis.com/v1beta/",
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta",
        ),
    ],
)
def test_normalize_other_providers(url: str, provider: str, expected: str) -> None:
    assert normalize_base_url(url, provider) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "configured", "expected"),
    [
        ("https://api.anthropic.com/v1", "auto", "anthropic"),
        ("https://generativelanguage.googleapis.com/v1beta", "auto", "gemini"),
        ("https://generativelanguage.googleapis.com/v1beta/openai/", "auto", "openai"),  # its OpenAI layer
        ("http://localhost:11434/v1", "auto", "openai"),
        ("https://api.openai.com/v1", "auto", "openai"),
        ("https://my-proxy.example.com/anthropic", "anthropic", "anthropic"),
        ("https://api.anthropic.com/v1", "openai", "openai"),
    ],
)
def test_detect_provider(url: str, configured: str, expected: str) -> None:
    assert detect_provider(url, configured) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:11434/v1", "ollama"),
        ("http://ollama:11434", "ollama"),
        ("http://localhost:1234/v1", "lmstudio"),
        ("http://localhost:8080/v1", "llamacpp"),
        ("http://localhost:8000/v1", "vllm"),
        ("http://localhost:8000/api/v1", "lemonade"),
        ("http://localhost:13305/api/v1", "lemonade"),
        ("http://localhost:13305/v1", "lemonade"),
        ("https://api.openai.com/v1", "openai"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://api.anthropic.com", "anthropic"),
        ("http://localhost:9999/v1", "unknown"),
        ("https://openrouter.ai/api/v1", "unknown"),  # /api/v1 means Lemonade only on this machine
        ("http://box.lan:8000/api/v1", "lemonade"),
        ("http://user:pw@localhost:1234/v1", "lmstudio"),
        ("http://localhost:bad/v1", "unknown"),
    ],
)
def test_detect_server_kind(url: str, expected: str) -> None:
    assert detect_server_kind(url) == expected


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", True),
        ("10.0.0.5", False),
        ("example.com", False),
        ("api.openai.com", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_capability_defaults() -> None:
    ollama, llamacpp, openai = (
        capabilities_for("ollama"),
        capabilities_for("llamacpp"),
        capabilities_for("openai"),
    )
    assert not ollama.tool_choice and not ollama.parallel_tool_calls and ollama.stream_usage
    assert llamacpp.tool_choice and llamacpp.parallel_tool_calls
    assert openai.max_tokens_field == "max_completion_tokens" and openai.description_cap == 1024
    assert openai.null_content_with_calls and not ollama.null_content_with_calls
    assert not capabilities_for("vllm").tool_choice
    assert not capabilities_for("unknown").stream_usage
    assert capabilities_for("gemini") == capabilities_for("unknown")


def test_capability_overrides() -> None:
    overrides = CapabilityOverrides(
        tool_choice=True, max_tokens_field="max_completion_tokens", stream_tools=False
    )
    caps = capabilities_for("ollama", overrides)
    assert caps.tool_choice and caps.max_tokens_field == "max_completion_tokens" and not caps.stream_tools
    assert caps.stream_usage  # untouched
    assert capabilities_for("ollama", CapabilityOverrides()) == capabilities_for("ollama")


def test_resolve_endpoint() -> None:
    llm = LLMConfig(endpoint="http://localhost:11434", capabilities=CapabilityOverrides(send_reasoning=True))
    endpoint = resolve_endpoint(llm)
    assert (endpoint.provider, endpoint.kind, endpoint.base_url, endpoint.local) == (
        "openai",
        "ollama",
        "http://localhost:11434/v1",
        True,
    )
    assert endpoint.chat_url == "http://localhost:11434/v1/chat/completions"
    assert endpoint.capabilities.send_reasoning

    azure = resolve_endpoint(
        LLMConfig(endpoint="https://x.example.com/openai/deployments/d?api-version=2024-06-01")
    )
    assert (
        azure.chat_url == "https://x.example.com/openai/deployments/d/chat/completions?api-version=2024-06-01"
    )
    assert azure.kind == "unknown" and not azure.local

    forced = resolve_endpoint(LLMConfig(endpoint="http://127.0.0.1:5555/v1"), kind="llamacpp")
    assert forced.kind == "llamacpp" and forced.capabilities.parallel_tool_calls


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        (
            "http://localhost:11434/v1",
            "Ollama is not running at http://localhost:11434/v1: start it with `ollama serve` and pull the model "
            "with `ollama pull qwen3:8b`",
        ),
        (
            "http://localhost:1234/v1",
            "LM Studio is not running at http://localhost:1234/v1: start it with `lms server start`",
        ),
        (
            "http://127.0.0.1:8080",
            "llama.cpp (llama-server) is not running at http://127.0.0.1:8080/v1: start it with "
            "`llama-server",
        ),
        (
            "http://localhost:8000/v1",
            "vLLM is not running at http://localhost:8000/v1: start it with `vllm serve qwen3:8b",
        ),
        (
            "http://localhost:13305/api/v1",
            "Lemonade Server is not running at http://localhost:13305/api/v1: start it "
            "with `lemonade-server serve`",
        ),
        (
            "http://localhost:9999/v1",
            "No model server is listening at http://localhost:9999/v1: start a model server "
            "there (Ollama: `ollama serve`",
        ),
        ("https://api.openai.com/v1", "Cannot reach OpenAI at https://api.openai.com/v1: check the network"),
    ],
)
def test_refused_message_names_the_server_and_how_to_start_it(endpoint: str, expected: str) -> None:
    message = refused_message(resolve_endpoint(LLMConfig(endpoint=endpoint, model="qwen3:8b")), "qwen3:8b")
    assert message.startswith(expected)


def test_start_hint_without_model() -> None:
    assert "ollama pull <model>" in start_hint("ollama")
    assert "llm.endpoint" in start_hint("unknown")
