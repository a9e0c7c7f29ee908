"""Knowing the server by what it answers (identify.py), on any port, with its context window."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.providers.servers.identify import (
    Answer,
    identify_server,
    native_root,
    read_llamacpp_props,
    read_lmstudio_models,
    read_models_list,
    read_ollama_ps,
    read_ollama_show,
    read_ollama_version,
    read_openapi,
    read_vllm_version,
    window_from_error,
)
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.server_shapes import (
    SAMPLES,
    llama_cpp_python_routes,
    llamacpp_props,
    llamacpp_routes,
    lmstudio_routes,
    ollama_routes,
    vllm_routes,
)

pytestmark = pytest.mark.anyio


def ok(body: Any, server: str = "") -> Answer:
    return Answer(200, body, server)


# ---------------------------------------------------------------------------------- parsers


def test_llamacpp_props_give_the_slot_window_and_build() -> None:
    found = read_llamacpp_props(ok(llamacpp_props(n_ctx=8192, build="b6500-1a2b")))
    assert found is not None
    assert (found.kind, found.version, found.context_window) == ("llamacpp", "b6500-1a2b", 8192)
    assert found.context_source == "/props default_generation_settings.n_ctx"


@pytest.mark.parametrize(
    "answer",
    [
        Answer(404, {"detail": "Not Found"}, "uvicorn"),
        ok({"error": "Unexpected endpoint or method. (GET /props)"}),  # LM Studio: 200 with an error
        ok({"version": "0.12.3"}),
        Answer(200, None),
        ok(["default_generation_settings"]),
    ],
)
def test_props_of_other_servers_are_not_llamacpp(answer: Answer) -> None:
    assert read_llamacpp_props(answer) is None


def test_ollama_version_and_window_sources() -> None:
    found = read_ollama_version(ok({"version": "0.12.3"}))
    assert found is not None and (found.kind, found.version) == ("ollama", "0.12.3")
    assert read_ollama_version(ok({"error": "Unexpected endpoint", "version": "x"})) is None
    assert read_ollama_version(Answer(404, {"version": "1"})) is None
    show = ollama_routes(num_ctx=16384)["/api/show"]
    assert read_ollama_show(json.loads(show.body)) == (16384, "/api/show parameters num_ctx")
    trained_only = json.loads(ollama_routes(trained=40960)["/api/show"].body)
    window, source = read_ollama_show(trained_only)
    assert window == 4096 and "qwen3.context_length (40960)" in source
    ps = json.loads(ollama_routes(loaded=32768)["/api/ps"].body)
    assert read_ollama_ps(ps, "qwen3:8b") == 32768
    assert read_ollama_ps(ps, "qwen3:8b:latest".removesuffix(":latest")) == 32768
    assert read_ollama_ps(ps, "llama3.2") is None


def test_lmstudio_models_give_the_loaded_or_the_maximum_window() -> None:
    body = json.loads(lmstudio_routes(max_context=32768)["/api/v0/models"].body)
    found = read_lmstudio_models(ok(body), "qwen3-8b")
    assert found is not None and (found.kind, found.context_window) == ("lmstudio", 32768)
    body["data"][0]["loaded_context_length"] = 8192
    found = read_lmstudio_models(ok(body), "qwen3-8b")
    assert found is not None and found.context_window == 8192
    assert read_lmstudio_models(ok({"object": "list", "data": [{"id": "m", "object": "model"}]}), "m") is None


def test_vllm_and_llama_cpp_python_and_plain_model_lists() -> None:
    found = read_vllm_version(ok({"version": "0.10.1"}))
    assert found is not None and (found.kind, found.version) == ("vllm", "0.10.1")
    listed = read_models_list(
        ok(json.loads(vllm_routes(max_model_len=16384)["/v1/models"].body)), "Qwen/Qwen3-8B"
    )
    assert listed is not None and (listed.kind, listed.context_window) == ("vllm", 16384)
    recorded = json.loads((SAMPLES / "models-A.json").read_text())
    python = read_models_list(ok(recorded, "uvicorn"), "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert python is not None and python.kind == "llama-cpp-python"
    assert read_models_list(ok(recorded, ""), "x") is None  # owned_by "me" alone is not enough
    assert (
        read_models_list(ok({"object": "list", "data": [{"id": "gpt-4o", "owned_by": "openai"}]}), "x")
        is None
    )
    openapi = read_openapi(ok({"info": {"title": "🦙 llama.cpp Python API", "version": "0.3.36"}}))
    assert openapi is not None and (openapi.kind, openapi.version) == ("llama-cpp-python", "0.3.36")
    assert read_openapi(ok({"info": {"title": "FastAPI", "version": "0.1.0"}})) is None


def test_the_window_a_context_error_states() -> None:
    recorded = (SAMPLES / "C-ctx-error.txt").read_text().split("\n\n", 1)[1]
    assert window_from_error(json.loads(recorded)["error"]["message"]) == 512
    assert (
        window_from_error("request (13392 tokens) exceeds the available context size (8192 tokens)") == 8192
    )
    assert window_from_error('{"error":{"code":400,"n_prompt_tokens":5000,"n_ctx":4096}}') == 4096
    assert window_from_error("(n_keep: 10247 >= n_ctx: 4096)") == 4096
    assert window_from_error("Internal Server Error") is None


def test_native_root() -> None:
    assert native_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert native_root("http://box/proxy/v1") == "http://box/proxy"
    assert native_root("http://localhost:13305/api/v1") == "http://localhost:13305"


# ---------------------------------------------------------------------------------- asking a server


async def identify(server: FakeModelServer, model: str, client: httpx.AsyncClient, **llm: Any) -> Any:
    return await identify_server(LLMConfig(endpoint=server.base_url, model=model, **llm), client)


@pytest.mark.parametrize(
    ("routes", "model", "kind", "version", "window"),
    [
        (llamacpp_routes(n_ctx=4096), "smollm2", "llamacpp", "b6500-1a2b3c4d", 4096),
        (llamacpp_routes(n_ctx=2048, props=False), "smollm2", "llamacpp", None, 2048),
        (ollama_routes(loaded=32768), "qwen3:8b", "ollama", "0.12.3", 32768),
        (ollama_routes(num_ctx=16384), "qwen3:8b", "ollama", "0.12.3", 16384),
        (ollama_routes(trained=2048), "qwen3:8b", "ollama", "0.12.3", 2048),
        (lmstudio_routes(max_context=32768), "qwen3-8b", "lmstudio", None, 32768),
        (lmstudio_routes(max_context=32768, loaded=8192), "qwen3-8b", "lmstudio", None, 8192),
        (vllm_routes(max_model_len=16384), "Qwen/Qwen3-8B", "vllm", "0.10.1", 16384),
        (
            llama_cpp_python_routes(),
            "models/SmolLM2-135M-Instruct.Q4_1.gguf",
            "llama-cpp-python",
            "0.3.36",
            None,
        ),
        (llama_cpp_python_routes(openapi=False), "models/x.gguf", "llama-cpp-python", None, None),
    ],
)
async def test_each_server_is_known_on_any_port(
    model_server: FakeModelServer,
    http_client: httpx.AsyncClient,
    routes: dict[str, Any],
    model: str,
    kind: str,
    version: str | None,
    window: int | None,
) -> None:
    model_server.routes.update(routes)
    info = await identify(model_server, model, http_client)
    assert (info.kind, info.version, info.context_window, info.source) == (kind, version, window, "probe")
    assert info.evidence
    assert model_server.requests == []  # the API's own queue was never touched


async def test_tokenizer_endpoints_are_named(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.routes.update(llama_cpp_python_routes())
    info = await identify(model_server, "m", http_client)
    assert info.tokenize_url == f"{model_server.url}/extras/tokenize/count"
    model_server.routes.clear()
    model_server.routes.update(llamacpp_routes())
    info = await identify(model_server, "m", http_client)
    assert info.tokenize_url == f"{model_server.url}/tokenize"


async def test_a_server_that_answers_nothing_known_keeps_the_port_guess(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    info = await identify(model_server, "m", http_client)
    assert (info.kind, info.source) == ("unknown", "port")
    assert [request.path for request in model_server.probes] and model_server.requests == []


async def test_nothing_listening_is_source_none(http_client: httpx.AsyncClient) -> None:
    info = await identify_server(LLMConfig(endpoint="http://127.0.0.1:9/v1", model="m"), http_client)
    assert (info.source, info.kind) == ("none", "unknown")
    info = await identify_server(
        LLMConfig(endpoint="http://127.0.0.1:8080/v1", model="m"), http_client, timeout=0.5
    )
    if info.source == "none":  # nothing on 8080 here: the port's guess stands
        assert info.kind == "llamacpp"


async def test_a_hung_server_costs_at_most_the_probe_timeout(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.routes["/props"] = Reply.json(llamacpp_props(), delay=5)
    info = await identify(model_server, "m", http_client)  # the other probes answered 404
    assert info.source == "port"


async def test_hosted_apis_are_not_asked() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"asked {request.url}")

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        for endpoint, kind in (
            ("https://api.openai.com/v1", "openai"),
            ("https://api.groq.com/openai/v1", "groq"),
            ("https://api.anthropic.com", "anthropic"),
            ("https://generativelanguage.googleapis.com", "gemini"),
        ):
            info = await identify_server(LLMConfig(endpoint=endpoint, model="m"), client)
            assert (info.kind, info.source) == (kind, "host")


async def test_probes_carry_the_configured_key_and_headers(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.routes.update(llamacpp_routes())
    await identify(model_server, "m", http_client, api_key="k", headers={"X-Team": "a"})
    props = next(request for request in model_server.probes if request.path == "/props")
    assert props.headers["authorization"] == "Bearer k" and props.headers["x-team"] == "a"
