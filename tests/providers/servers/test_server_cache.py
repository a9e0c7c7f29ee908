"""What a server is, remembered on disk (server_cache.py), and handed to the provider (factory.py)."""

from __future__ import annotations

import json
import logging
import secrets
import stat
from pathlib import Path

import httpx
import pytest

from mcp_agent._redact import remember_secrets
from mcp_agent.assembly import open_agent
from mcp_agent.config import AgentConfig, LLMConfig, parse_config
from mcp_agent.providers.factory import open_provider
from mcp_agent.providers.fallback import FallbackProvider
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.providers.servers.identify import (
    CACHE_FILE,
    TTL_SECONDS,
    cache_key,
    known_server,
    load_cached,
    remember,
    store,
)
from mcp_agent.providers.servers.info import ServerInfo, history_chars_for, server_info_of, sized_for_server
from tests.fakes.model_server import FakeModelServer, running_model_server
from tests.fakes.server_shapes import llama_cpp_python_routes, llamacpp_routes

pytestmark = pytest.mark.anyio

INFO = ServerInfo(kind="llamacpp", version="b1", context_window=4096, source="probe", evidence="GET /props")


def test_store_and_load_until_the_entry_is_stale(tmp_path: Path) -> None:
    path = tmp_path / "state" / CACHE_FILE
    store(path, "k", INFO, now=1000.0)
    cached = load_cached(path, "k", now=1000.0 + TTL_SECONDS - 1)
    assert cached is not None and cached.source == "cache"
    assert (cached.kind, cached.version, cached.context_window) == ("llamacpp", "b1", 4096)
    assert load_cached(path, "k", now=1000.0 + TTL_SECONDS + 1) is None
    assert load_cached(path, "other", now=1000.0) is None
    store(path, "k2", INFO, now=1000.0 + TTL_SECONDS + 5)  # the stale entry is dropped on write
    assert set(json.loads(path.read_text())["entries"]) == {"k2"}


@pytest.mark.parametrize(
    "content",
    ["", "not json", "[]", '{"version": 2, "entries": {}}', '{"version": 1, "entries": {"k": {"at": "x"}}}'],
)
def test_a_broken_cache_is_asked_again_never_an_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / CACHE_FILE
    path.write_text(content)
    assert load_cached(path, "k") is None
    store(path, "k", INFO)
    assert load_cached(path, "k") is not None


def test_mistyped_entries_keep_only_what_is_right(tmp_path: Path) -> None:
    path = tmp_path / CACHE_FILE
    entry = {
        "at": 1000.0,
        "info": {"kind": "ollama", "context_window": "big", "tools_dropped": "yes", "x": 1},
    }
    path.write_text(json.dumps({"version": 1, "entries": {"k": entry}}))
    cached = load_cached(path, "k", now=1000.0)
    assert cached == ServerInfo(kind="ollama", source="cache")


def test_an_unwritable_cache_is_only_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING, logger="mcp_agent.providers.servers.identify"):
        store(blocker / CACHE_FILE, "k", INFO)  # a file where the folder should be: no error
    [record] = [r for r in caplog.records if "cannot write the server-info cache" in r.getMessage()]
    assert record.levelno == logging.WARNING and str(blocker / CACHE_FILE) in record.getMessage()


def test_the_key_is_the_normalised_endpoint_and_the_model() -> None:
    a = cache_key(LLMConfig(endpoint="localhost:8080", model="m"))
    assert a == cache_key(LLMConfig(endpoint="http://localhost:8080/v1/", model="m"))
    assert a != cache_key(LLMConfig(endpoint="http://localhost:8080/v1", model="n"))


async def test_a_fresh_entry_spares_the_questions(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    model_server.routes.update(llamacpp_routes(n_ctx=4096))
    llm = LLMConfig(endpoint=model_server.base_url, model="smollm2")
    first = await known_server(llm, http_client, state_dir=tmp_path)
    asked = len(model_server.probes)
    second = await known_server(llm, http_client, state_dir=tmp_path)
    assert (first.source, second.source) == ("probe", "cache")
    assert second.context_window == first.context_window == 4096
    assert len(model_server.probes) == asked
    third = await known_server(llm, http_client, state_dir=tmp_path, refresh=True)
    assert third.source == "probe" and len(model_server.probes) > asked
    remember(tmp_path / CACHE_FILE, llm, tools_dropped=True)
    assert (await known_server(llm, http_client, state_dir=tmp_path)).tools_dropped is True


async def test_the_file_keeps_no_credential_and_is_the_users_alone(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    password = f"pw{secrets.token_hex(8)}"
    remember_secrets([password])  # as parse_config does for a URL's password
    model_server.routes.update(llamacpp_routes(n_ctx=4096))
    endpoint = model_server.base_url.replace("http://", f"http://agent:{password}@")
    llm = LLMConfig(endpoint=endpoint, model="smollm2")
    first = await known_server(llm, http_client, state_dir=tmp_path / "state")
    assert first.source == "probe" and first.tokenize_url == endpoint.removesuffix("/v1") + "/tokenize"
    path = tmp_path / "state" / CACHE_FILE
    text = path.read_text()
    assert password not in text and "agent:" not in text
    assert list(json.loads(text)["entries"]) == [f"{model_server.base_url} | smollm2"]  # no user info
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    cached = await known_server(llm, http_client, state_dir=tmp_path / "state")
    assert (
        cached.source == "cache" and cached.tokenize_url == first.tokenize_url
    )  # the credential is put back


async def test_a_server_that_did_not_answer_is_not_remembered(
    http_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    llm = LLMConfig(endpoint="http://127.0.0.1:9/v1", model="m")
    assert (await known_server(llm, http_client, state_dir=tmp_path)).source == "none"
    assert not (tmp_path / CACHE_FILE).exists()


# ---------------------------------------------------------------------------------- wiring


async def test_the_provider_takes_the_identified_kinds_capabilities(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.routes.update(llama_cpp_python_routes())
    llm = LLMConfig(endpoint=model_server.base_url, model="models/x.gguf")
    async with open_provider(llm, state_dir=tmp_path) as provider:
        assert isinstance(provider, OpenAICompatProvider)
        assert provider.server_info.kind == "llama-cpp-python"
        caps = provider.endpoint.capabilities
        assert (provider.endpoint.kind, caps.tool_choice, caps.stream_tools) == (
            "llama-cpp-python",
            True,
            False,
        )
    overridden = llm.model_copy(
        update={"capabilities": llm.capabilities.model_copy(update={"stream_tools": True})}
    )
    async with open_provider(overridden, state_dir=tmp_path) as provider:
        assert isinstance(provider, OpenAICompatProvider)
        assert provider.server_info.source == "cache"
        assert provider.endpoint.capabilities.stream_tools is True  # llm.capabilities still wins


async def test_a_server_seen_not_to_stream_tools_is_asked_unstreamed(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.routes.update(llamacpp_routes())
    llm = LLMConfig(endpoint=model_server.base_url, model="smollm2")
    async with open_provider(llm, state_dir=tmp_path) as provider:
        assert isinstance(provider, OpenAICompatProvider) and provider.endpoint.capabilities.stream_tools
    remember(tmp_path / CACHE_FILE, llm, stream_tools=False)
    async with open_provider(llm, state_dir=tmp_path) as provider:
        assert isinstance(provider, OpenAICompatProvider)
        assert provider.endpoint.capabilities.stream_tools is False
        assert provider.endpoint.capabilities.tool_choice  # the rest of llama.cpp's stay
    forced = llm.model_copy(
        update={"capabilities": llm.capabilities.model_copy(update={"stream_tools": True})}
    )
    async with open_provider(forced, state_dir=tmp_path) as provider:
        assert isinstance(provider, OpenAICompatProvider) and provider.endpoint.capabilities.stream_tools


async def test_identification_can_be_left_out(model_server: FakeModelServer, tmp_path: Path) -> None:
    model_server.routes.update(llamacpp_routes())
    async with open_provider(LLMConfig(endpoint=model_server.base_url), identify=False) as provider:
        assert server_info_of(provider) == ServerInfo.unknown()
    assert model_server.probes == []


async def test_a_fallback_chain_answers_for_its_primary(tmp_path: Path) -> None:
    with running_model_server() as primary, running_model_server() as backup:
        primary.routes.update(llamacpp_routes(n_ctx=8192))
        backup.routes.update(llama_cpp_python_routes())
        llm = LLMConfig(endpoint=primary.base_url, model="smollm2", fallbacks=[{"endpoint": backup.base_url}])
        async with open_provider(llm, state_dir=tmp_path) as provider:
            assert isinstance(provider, FallbackProvider)
            assert provider.server_info.context_window == 8192
            kinds = [server_info_of(candidate.provider).kind for candidate in provider.candidates]
            assert kinds == ["llamacpp", "llama-cpp-python"]


def test_history_fits_the_window_unless_the_file_sets_it() -> None:
    config = AgentConfig()
    small = ServerInfo(kind="llamacpp", context_window=4096, source="probe")
    assert sized_for_server(config, small).limits.max_history_chars == history_chars_for(4096) == 10528
    assert sized_for_server(config, ServerInfo(context_window=1_000_000)).limits.max_history_chars == 80_000
    assert sized_for_server(config, ServerInfo()) is config
    chosen = parse_config({"limits": {"maxHistoryChars": 50_000}})
    assert sized_for_server(chosen, small).limits.max_history_chars == 50_000
    off = parse_config({"limits": {"maxHistoryChars": 0}})
    assert sized_for_server(off, small).limits.max_history_chars == 0
    capped = parse_config({"llm": {"maxOutputTokens": 256}})
    assert sized_for_server(capped, small).limits.max_history_chars == int((4096 - 256 - 64) * 3.5)


async def test_the_agent_trims_history_to_the_servers_window(model_server: FakeModelServer) -> None:
    model_server.routes.update(llamacpp_routes(n_ctx=4096))
    config = parse_config({"llm": {"endpoint": model_server.base_url, "model": "smollm2"}})
    async with open_agent(config, record_children=False) as agent:
        assert agent.config.limits.max_history_chars == 10528
        assert server_info_of(agent.provider).context_source == "/props default_generation_settings.n_ctx"


async def test_a_lesson_the_provider_learns_outlives_the_process(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    """Learning that streamed tools fail cost one wasted request per process: now once per cache life."""
    model_server.routes.update(llamacpp_routes(n_ctx=4096))
    llm = LLMConfig(endpoint=model_server.base_url, model="smollm2")
    async with open_provider(llm, state_dir=tmp_path) as provider:
        assert isinstance(provider, OpenAICompatProvider) and provider.streams_tools
        provider.learned.learn(stream_tools=False)  # as the provider does after an empty stream
    async with open_provider(llm, state_dir=tmp_path) as again:  # a new process, say
        assert isinstance(again, OpenAICompatProvider)
        assert again.server_info.stream_tools is False and not again.streams_tools
