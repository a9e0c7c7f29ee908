"""``doctor`` says what the model server is and what it does with tools (providers/openai/checks.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from mcp_agent.cli.doctor import run_doctor
from mcp_agent.config import parse_config
from mcp_agent.providers.servers.identify import CACHE_FILE, cache_key, load_cached
from mcp_agent.state.folder import state_dir
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import completion, openai_stream
from tests.fakes.server_shapes import SAMPLES, llama_cpp_python_routes, llamacpp_routes

pytestmark = pytest.mark.anyio


def chat(*, drops_tools: bool, streams_tools: bool = True) -> object:
    """A model server's chat route: prompt_tokens grow with tools unless ``drops_tools``."""

    def answer(request: RecordedRequest) -> Reply:
        body = request.json
        if body.get("stream"):
            if body.get("tools") and not streams_tools:
                return Reply.sse([], done=False)  # llama-cpp-python: an empty 200 stream
            return Reply.sse(openai_stream(content="Hi"))
        prompt = 25 + (0 if drops_tools or not body.get("tools") else 120)
        return Reply.json(completion(content="Hi", usage=(prompt, 1)))

    return answer


async def doctor(server: FakeModelServer, model: str = "smollm2") -> str:
    config = parse_config({"llm": {"endpoint": server.base_url, "model": model}})
    out = io.StringIO()
    await run_doctor(config, out)
    return out.getvalue()


async def test_a_llama_cpp_python_that_drops_tools_is_named_with_its_own_hint() -> None:
    with running_model_server() as server:
        server.routes.update(llama_cpp_python_routes())
        model = json.loads((SAMPLES / "models-B.json").read_text())["data"][0]["id"]
        server.handler = chat(drops_tools=True)  # type: ignore[assignment]
        text = await doctor(server, model)
        assert "server identified: llama-cpp-python (llama_cpp.server) 0.3.36" in text
        assert "context window: llama-cpp-python (llama_cpp.server) does not say" in text
        assert (
            "the server drops the tools it is offered (prompt_tokens 25 without a tool, 25 with one)" in text
        )
        assert "--chat_format chatml-function-calling" in text and "--jinja" not in text
        assert "cannot stream tool calls: asked without streaming" in text
        cached = load_cached(
            state_dir() / CACHE_FILE,
            cache_key(parse_config({"llm": {"endpoint": server.base_url, "model": model}}).llm),
        )
        assert cached is not None and cached.tools_dropped is True
        assert not [r for r in server.requests if r.json.get("stream")]  # no 20 s wait on its empty stream


async def test_a_llama_server_whose_tools_arrive_and_stream() -> None:
    with running_model_server() as server:
        server.routes.update(llamacpp_routes(n_ctx=4096))
        server.handler = chat(drops_tools=False)  # type: ignore[assignment]
        text = await doctor(server)
        assert "server identified: llama.cpp (llama-server) b6500-1a2b3c4d (GET /props" in text
        assert (
            "context window: 4096 tokens (/props default_generation_settings.n_ctx); history kept to" in text
        )
        assert "tools reach the model (prompt_tokens 25 without a tool, 145 with one)" in text
        assert "cannot stream" not in text
        first = server.requests[0].json
        assert first["max_tokens"] == 1 and "tools" not in first and server.requests[1].json["tools"]


async def test_a_server_that_cannot_stream_tools_is_warned_about() -> None:
    with running_model_server() as server:
        server.routes.update(llamacpp_routes())
        server.handler = chat(drops_tools=False, streams_tools=False)  # type: ignore[assignment]
        text = await doctor(server)
        assert "the server cannot stream tool calls (the stream was empty" in text
        assert "llm.capabilities.streamTools" in text
        llm = parse_config({"llm": {"endpoint": server.base_url, "model": "smollm2"}}).llm
        cached = load_cached(state_dir() / CACHE_FILE, cache_key(llm))
        assert cached is not None and cached.stream_tools is False


async def test_a_server_that_says_nothing_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    with running_model_server() as server:
        server.handler = lambda request: (  # type: ignore[assignment]
            Reply.json({"object": "list", "data": [{"id": "m", "object": "model"}]})
            if request.path.endswith("/models")
            else Reply.json({"error": {"message": "unexpected"}}, status=404)
        )
        text = await doctor(server, "m")
        assert "server not identified (no known answer" in text
        assert "could not check that tools reach the model" in text
        assert "all checks passed" in text or "no tool servers" in text


async def test_an_explicit_history_size_larger_than_a_4096_token_window_is_warned_about() -> None:
    """The bundled config once set ``maxHistoryChars: 30000``: an explicit value wins over sizing
    from the window, so doctor says it does not fit, with the numbers."""
    with running_model_server() as server:
        server.routes.update(llamacpp_routes(n_ctx=4096))
        server.handler = chat(drops_tools=False)  # type: ignore[assignment]
        llm = {"endpoint": server.base_url, "model": "smollm2"}
        out = io.StringIO()
        await run_doctor(parse_config({"llm": llm, "limits": {"maxHistoryChars": 30000}}), out)
        text = out.getvalue()
        assert "history kept to 30000 characters" in text
        assert (
            "[warn] context window: limits.maxHistoryChars is 30000 characters (about 8571 tokens), "
            "more than the 4096-token window holds after the answer's room: 10528 characters" in text
        )
        out = io.StringIO()
        await run_doctor(parse_config({"llm": {**llm, "maxOutputTokens": 4000}}), out)
        assert (
            "[warn] context window: llm.maxOutputTokens is 4000: a 4096-token window then leaves 32 tokens"
            in (out.getvalue())
        )
        out = io.StringIO()
        await run_doctor(parse_config({"llm": llm, "limits": {"maxHistoryChars": 9000}}), out)
        sized = out.getvalue()  # fits: no warning
        assert "history kept to 9000 characters" in sized and "[warn] context window" not in sized
        out = io.StringIO()
        await run_doctor(parse_config({"llm": llm}), out)
        assert "history kept to 10528 characters" in out.getvalue()  # sized from the window


def test_the_bundled_config_leaves_history_to_the_window_and_the_limits_to_their_defaults() -> None:
    from mcp_agent.config import Limits, load_config

    config = load_config(Path(__file__).parents[2] / "agent.json", environ={})
    assert config.limits == Limits() and not config.limits.model_fields_set


async def test_tools_that_reach_the_model_are_never_also_said_to_be_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server that counts an offered tool in few tokens (25 -> 45): the estimate of the
    prompt with the tool (about 198) is far from that, but the direct measure decides."""

    def answer(request: RecordedRequest) -> Reply:
        body = request.json
        if body.get("stream"):
            return Reply.sse(openai_stream(content="Hi"))
        return Reply.json(completion(content="Hi", usage=(45 if body.get("tools") else 25, 1)))

    with running_model_server() as server:
        server.routes.update(llamacpp_routes(n_ctx=4096))
        server.handler = answer  # type: ignore[assignment]
        with caplog.at_level("WARNING"):
            text = await doctor(server)
    assert "[  ok] tools reach the model (prompt_tokens 25 without a tool, 45 with one)" in text
    assert "drop the tools" not in caplog.text
