"""The real-server tier's own machinery, checked in the fast tier: the recording proxy (against the
fake model server) and when ``tests/real/build.py`` builds again. The tier itself (``tests/real``)
runs in ``make test-real`` only."""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import httpx

from tests.fakes.model_server import Reply, running_model_server
from tests.fakes.openai_shapes import completion
from tests.real.build import PINS, PORTABLE_CMAKE_ARGS, Builder
from tests.real.proxy import PREFILL, prefill_when_required, recording_proxy

ROOT = Path(__file__).resolve().parent.parent


def _chat(tools: bool = True, tool_result: bool = False) -> dict[str, object]:
    messages: list[dict[str, object]] = [{"role": "user", "content": "hi"}]
    if tool_result:
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]  # fmt: skip
    body: dict[str, object] = {"model": "m", "messages": messages, "stream": False}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]
    return body


def test_the_proxy_relays_and_records_a_whole_answer_and_rewrites_a_required_call() -> None:
    with running_model_server() as server:
        server.enqueue(Reply.json(completion(content="one")), Reply.json(completion(content="two")))
        with recording_proxy(server.url, prefill_when_required) as proxy:
            required = {**_chat(), "tool_choice": "required"}
            first = httpx.post(f"{proxy.base_url}/chat/completions", json=required, timeout=10)
            second = httpx.post(
                f"{proxy.base_url}/chat/completions", json=_chat(tool_result=True), timeout=10
            )
    assert first.json()["choices"][0]["message"]["content"] == "one"
    assert second.json()["choices"][0]["message"]["content"] == "two"
    one, two = proxy.chats
    assert one.request_json["messages"][-1]["role"] == "user" and one.sent_json["messages"][-1] == PREFILL
    assert server.requests[0].json["messages"][-1] == PREFILL  # what the server got
    assert two.sent_json == two.request_json  # no tool_choice "required": left as it was
    assert one.status == 200 and one.json()["choices"][0]["message"]["content"] == "one"
    assert one.t_start <= one.t_end and one.server_ms >= 0


def test_the_proxy_relays_a_stream_as_it_comes() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}
    end = {
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    with running_model_server() as server:
        server.enqueue(Reply.sse([chunk, chunk, end], chunk_delay=0.05))
        body = {**_chat(), "stream": True}
        with (
            recording_proxy(server.url) as proxy,
            httpx.stream("POST", f"{proxy.base_url}/chat/completions", json=body, timeout=10) as response,
        ):
            pieces = [piece for piece in response.iter_raw() if piece]
    [exchange] = proxy.chats
    assert exchange.streamed and len(pieces) >= 3  # chunk by chunk, not one body at the end
    assert [d["choices"][0]["delta"] for d in exchange.sse_data()] == [{"content": "a"}, {"content": "a"}, {}]
    assert exchange.reported_usage() == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    assert exchange.t_first_byte is not None and exchange.t_end - exchange.t_first_byte >= 0.05
    sample = exchange.to_sample("note")
    assert sample["response"]["headers"]["content-type"].startswith("text/event-stream")
    assert json.dumps(sample)


def test_a_client_that_leaves_mid_stream_closes_the_upstream_request() -> None:
    with running_model_server() as server:
        server.enqueue(Reply.endless(": ping\n\n"))
        with recording_proxy(server.url) as proxy:
            with httpx.stream(
                "POST", f"{proxy.base_url}/chat/completions", json={**_chat(), "stream": True}, timeout=10
            ) as response:
                next(response.iter_raw())
            deadline = time.monotonic() + 5
            while (
                not (proxy.chats and proxy.chats[0].client_gone and server.disconnects)
                and time.monotonic() < deadline
            ):
                time.sleep(0.02)
    assert proxy.chats[0].client_gone and server.disconnects == 1


def test_a_dead_upstream_drops_the_connection() -> None:
    with running_model_server() as server:
        dead = server.url
    with recording_proxy(dead) as proxy:
        try:
            httpx.post(f"{proxy.base_url}/chat/completions", json=_chat(), timeout=5)
        except httpx.HTTPError:
            pass
        else:
            raise AssertionError("the proxy answered for a server that is gone")
    assert proxy.chats[0].error


def test_a_part_is_built_again_only_when_its_pin_changes(tmp_path: Path) -> None:
    builder = Builder(tmp_path)
    pin = PINS[0]
    assert not builder.up_to_date(pin)
    (tmp_path / pin.name).mkdir()
    (tmp_path / pin.name / ".pin").write_text(pin.key() + "\n")
    assert builder.up_to_date(pin)
    assert replace(pin, requirement="llama-cpp-python==0.3.37").key() != pin.key()
    assert replace(pin, cmake_args="").key() != pin.key()  # the flags are part of the pin
    assert all("-DGGML_NATIVE=OFF" in p.cmake_args for p in PINS if p.build)
    assert PORTABLE_CMAKE_ARGS.startswith("-DGGML_NATIVE=OFF")


def test_make_test_leaves_the_real_tier_out() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = options["addopts"]
    assert "not real" in addopts[addopts.index("-m") + 1].split(" and ")
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest-real:", 1)[1].split("\n\n", 1)[0]
    assert "tests/real/build.py" in recipe and "-m real tests/real" in recipe
    assert "make test-real" in (ROOT / ".ci" / "run").read_text()


def test_an_anonymous_proxy_hides_the_server_but_relays_its_chats() -> None:
    """``anonymous``: every path but the chat route is a bare 404, and no ``server`` header comes
    back, so the agent cannot tell which server answers."""
    with running_model_server() as server:
        server.enqueue(Reply.json(completion(content="one"), headers={"server": "llama.cpp"}))
        with recording_proxy(server.url, anonymous=True) as proxy:
            props = httpx.get(f"{proxy.url}/props", timeout=10)
            models = httpx.get(f"{proxy.base_url}/models", timeout=10)
            chat = httpx.post(f"{proxy.base_url}/chat/completions", json=_chat(), timeout=10)
    assert props.status_code == models.status_code == 404 and props.text == "not found"
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] == "one"
    assert "server" not in chat.headers
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] and not server.probes
