"""Images from tools reach the model: ``llm.vision``, the bounds, each API's wire shape, and a
whole run over real HTTP (a tool returns an image, the next model request carries it)."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.run import run
from mcp_agent.messages import Image, Message, ToolCall, ToolResult
from mcp_agent.providers.anthropic import AnthropicProvider
from mcp_agent.providers.anthropic import _wire as _anthropic_wire
from mcp_agent.providers.factory import create_provider
from mcp_agent.providers.gemini import GeminiProvider
from mcp_agent.providers.gemini import _wire as _gemini_wire
from mcp_agent.providers.history import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES_PER_MESSAGE,
    MAX_REQUEST_BYTES,
    MAX_REQUEST_IMAGES,
    accepts_images,
    fit_images,
    vision_model,
)
from mcp_agent.providers.openai._wire import to_openai_messages
from mcp_agent.providers.servers.endpoints import Capabilities
from mcp_agent.state import open_state
from mcp_agent.tools.memory import MemoryToolSource
from tests.fakes import anthropic_shapes, gemini_shapes
from tests.fakes import openai_shapes as shapes
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.openai_shapes import Call

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 92).decode()  # 100 bytes
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x00" * 96).decode()


def png(size: int = 100) -> Image:
    return Image("image/png", base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * (size - 8)).decode())


CALL = ToolCall("call_1", "cam__shot", {})


def conversation(*images: Image, text: str = "[image: image/png, 100 B]") -> list[Message]:
    return [
        Message.system("sys"),
        Message.user("look"),
        Message.assistant(tool_calls=[CALL]),
        Message.tool(CALL, text, images=images),
    ]


# --------------------------------------------------------------------------------------------
# llm.vision


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o", "gpt-4o-mini", "gpt-4.1-nano", "gpt-5", "o3", "o4-mini", "chatgpt-4o-latest",
        "llava:7b", "bakllava", "qwen2.5vl:7b", "Qwen/Qwen2.5-VL-7B-Instruct", "qwen3-vl:8b",
        "llama3.2-vision:11b", "minicpm-v:8b", "gemma3:4b", "google/gemma-3-27b-it", "pixtral-12b",
        "moondream", "mistral-small3.1", "granite3.2-vision", "llama4:scout", "internvl3",
        "smolvlm", "deepseek-vl2", "claude-sonnet-4", "gemini-2.5-flash",
    ],
)  # fmt: skip
def test_model_names_that_read_images(model: str) -> None:
    assert vision_model(model)


@pytest.mark.parametrize(
    "model",
    [
        "qwen3:8b", "llama3.1:8b", "gpt-3.5-turbo", "o3-mini", "o1-mini", "gemma3:1b", "gemma3:270m",
        "gemma3n:e4b", "mistral-nemo", "phi4", "deepseek-r1:8b", "gpt-oss:20b", "llama3.2:3b",
        "qwen2.5-coder:7b", "devstral",
    ],
)  # fmt: skip
def test_model_names_that_do_not(model: str) -> None:
    assert not vision_model(model)


@pytest.mark.parametrize(
    ("vision", "provider", "model", "expected"),
    [
        ("auto", "openai", "qwen3:8b", False),
        ("auto", "openai", "qwen2.5vl:7b", True),
        ("auto", "anthropic", "claude-3-5-haiku-latest", True),
        ("auto", "anthropic", "claude-2.1", False),
        ("auto", "gemini", "gemini-2.0-flash", True),
        (True, "openai", "qwen3:8b", True),
        (False, "gemini", "gemini-2.5-pro", False),
    ],
)
def test_llm_vision_resolves(vision: Any, provider: Any, model: str, expected: bool) -> None:
    assert accepts_images(LLMConfig(model=model, vision=vision), provider) is expected


def test_llm_vision_accepts_only_auto_true_false() -> None:
    assert LLMConfig.model_validate({"vision": True}).vision is True
    assert LLMConfig.model_validate({"vision": "auto"}).vision == "auto"
    with pytest.raises(ValueError):
        LLMConfig.model_validate({"vision": "sometimes"})


# --------------------------------------------------------------------------------------------
# bounds


def test_images_off_drops_them_without_notes() -> None:
    messages = conversation(png())
    out = fit_images(messages, enabled=False)
    assert out[-1].images == () and out[-1].content == messages[-1].content
    assert messages[-1].images  # the input is untouched


def test_images_on_and_within_bounds_pass_unchanged() -> None:
    messages = conversation(png(), png())
    assert fit_images(messages, enabled=True) == messages


def test_per_result_count_type_and_size_are_bounded_with_notes() -> None:
    big = Image("image/png", "A" * (MAX_IMAGE_BYTES * 6 // 5 * 4 // 3))
    svg = Image("image/svg+xml", "PHN2Zz48L3N2Zz4=")
    images = (svg, big, *[png()] * (MAX_IMAGES_PER_MESSAGE - 1))
    [*_, result] = fit_images(conversation(*images), enabled=True)
    assert len(result.images) == MAX_IMAGES_PER_MESSAGE - 2  # two of the first four were refused
    assert result.content.splitlines()[1:] == [
        "[image 1 not sent: image/svg+xml is not a type models read (PNG, JPEG, GIF, WebP)]",
        "[image 2 not sent: 6.0 MB is over the 5.0 MB an image may have]",
        f"[image 5 not sent: at most {MAX_IMAGES_PER_MESSAGE} images of one tool result are sent]",
    ]


def test_per_request_count_keeps_the_newest() -> None:
    messages: list[Message] = [Message.user("look")]
    for n in range(MAX_REQUEST_IMAGES + 2):  # one image per round
        call = ToolCall(f"c{n}", "cam__shot", {})
        messages += [Message.assistant(tool_calls=[call]), Message.tool(call, f"shot {n}", images=[png()])]
    out = fit_images(messages, enabled=True)
    sent = [m.content for m in out if m.images]
    assert len(sent) == MAX_REQUEST_IMAGES and sent[0] == "shot 2"
    assert (
        out[2].content
        == "shot 0\n[image 1 not sent: a request carries at most 8 images, and newer ones came first]"
    )


def test_per_request_bytes_keep_the_newest() -> None:
    size = MAX_REQUEST_BYTES // 3 + 1000  # three do not fit, two do
    messages: list[Message] = [Message.user("look")]
    for n in range(3):
        call = ToolCall(f"c{n}", "cam__shot", {})
        messages += [
            Message.assistant(tool_calls=[call]),
            Message.tool(call, f"shot {n}", images=[png(size)]),
        ]
    out = fit_images(messages, enabled=True)
    assert [bool(m.images) for m in out if m.role == "tool"] == [False, True, True]
    assert "at most 10.0 MB of images" in out[2].content


def test_images_round_trip_through_to_dict() -> None:
    message = conversation(png(), Image("image/jpeg", JPEG))[-1]
    data = message.to_dict()
    assert data["images"] == [
        {"mime_type": "image/png", "data": png().data},
        {"mime_type": "image/jpeg", "data": JPEG},
    ]
    assert Message.from_dict(data) == message
    assert "images" not in Message.user("hi").to_dict()


# --------------------------------------------------------------------------------------------
# wire shapes


def test_openai_results_stay_text_and_one_user_message_carries_the_images() -> None:
    call2 = ToolCall("call_2", "cam__other", {})
    messages = [
        Message.user("look"),
        Message.assistant(tool_calls=[CALL, call2]),
        Message.tool(CALL, "[image: image/png, 100 B]", images=[png()]),
        Message.tool(call2, "no image here"),
        Message.user("and now?"),
    ]
    wire = to_openai_messages(messages, Capabilities())
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert wire[2]["content"] == "[image: image/png, 100 B]" and wire[3]["content"] == "no image here"
    assert wire[4]["content"] == [
        {"type": "text", "text": "[images returned by cam__shot]"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png().data}"}},
    ]
    assert wire[5] == {"role": "user", "content": "and now?"}


def test_openai_text_style_puts_the_images_in_the_tool_response_message() -> None:
    wire = to_openai_messages(conversation(png()), Capabilities(), text_tools=True)
    last = wire[-1]
    assert last["role"] == "user" and last["content"][0]["type"] == "text"
    assert "<tool_response>" in last["content"][0]["text"]
    assert last["content"][2]["image_url"]["url"].startswith("data:image/png;base64,")


def test_anthropic_images_go_inside_the_tool_result() -> None:
    _, wire = _anthropic_wire.to_anthropic_messages(conversation(png()))
    [block] = wire[-1]["content"]
    assert block == {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": [
            {"type": "text", "text": "[image: image/png, 100 B]"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png().data}},
        ],
    }


def test_anthropic_without_tools_sends_the_result_as_text_then_its_images() -> None:
    _, wire = _anthropic_wire.to_anthropic_messages(conversation(png()), tools_offered=False)
    assert [b["type"] for b in wire[-1]["content"]] == ["text", "image"]


def test_gemini_images_follow_the_function_responses_in_the_same_turn() -> None:
    _, contents = _gemini_wire.to_gemini_contents(conversation(png()))
    last = contents[-1]
    assert last["role"] == "user"
    assert [next(iter(p)) for p in last["parts"]] == ["functionResponse", "text", "inlineData"]
    assert last["parts"][2] == {"inlineData": {"mimeType": "image/png", "data": png().data}}


# --------------------------------------------------------------------------------------------
# whole runs over real HTTP


def _tools() -> MemoryToolSource:
    tools = MemoryToolSource()
    content = ({"type": "text", "text": "here:"}, {"type": "image", "data": PNG, "mimeType": "image/png"})
    tools.add(
        "cam__shot",
        lambda: ToolResult("here:\n[image: image/png, 100 B]", content=content),
        description="takes a picture",
    )
    return tools


def _openai_replies(server: FakeModelServer) -> None:
    server.enqueue(
        Reply.json(shapes.completion(calls=[Call("cam__shot", {}, id="call_a")])),
        Reply.json(shapes.completion(content="a black square")),
    )


@pytest.mark.parametrize(
    ("model", "vision", "sent"),
    [("llava:7b", "auto", True), ("qwen3:8b", "auto", False), ("qwen3:8b", True, True)],
)
async def test_a_tool_image_reaches_an_openai_compatible_model(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, model: str, vision: Any, sent: bool
) -> None:
    _openai_replies(model_server)
    llm = LLMConfig(endpoint=model_server.base_url, model=model, stream=False, vision=vision)
    result = await run(
        "what does the camera see?", provider=create_provider(llm, http_client), tools=_tools()
    )
    assert result.answer == "a black square"
    second = model_server.requests[1].json["messages"]
    tool = next(m for m in second if m["role"] == "tool")
    assert tool["content"] == "here:\n[image: image/png, 100 B]"
    image_messages = [m for m in second if m["role"] == "user" and isinstance(m["content"], list)]
    if sent:
        assert second[-1] is image_messages[0]
        assert image_messages[0]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    else:
        assert image_messages == [] and "base64" not in model_server.requests[1].body.decode()
    assert result.transcript[-2].images == (Image("image/png", PNG),)


async def test_images_survive_a_stored_session(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, tmp_path: Any
) -> None:
    """A session written to disk and read back by a new store still sends the image."""
    _openai_replies(model_server)
    model_server.enqueue(Reply.json(shapes.completion(content="still a black square")))
    llm = LLMConfig(endpoint=model_server.base_url, model="gpt-4o", stream=False)
    state = await open_state(f"sqlite:///{tmp_path}/state.db")
    agent = Agent(create_provider(llm, http_client), _tools(), state=state)
    await agent.query("what does the camera see?", session_id="s1")
    await state.aclose()
    state = await open_state(f"sqlite:///{tmp_path}/state.db")  # as a new process would
    agent = Agent(create_provider(llm, http_client), _tools(), state=state)
    result = await agent.query("and the colour?", session_id="s1")
    await state.aclose()
    assert result.answer == "still a black square"
    third = model_server.requests[2].json["messages"]
    assert [m["content"][1]["image_url"]["url"] for m in third if isinstance(m["content"], list)] == [
        f"data:image/png;base64,{PNG}"
    ]


async def test_a_tool_image_reaches_claude(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(
        Reply.json(anthropic_shapes.message(calls=[("toolu_1", "cam__shot", {})])),
        Reply.json(anthropic_shapes.message("a black square")),
    )
    llm = LLMConfig(
        provider="anthropic", endpoint=model_server.base_url, model="claude-sonnet-4", stream=False
    )
    provider = AnthropicProvider(llm, client=http_client)
    result = await run("what does the camera see?", provider=provider, tools=_tools())
    assert result.answer == "a black square"
    [result_block] = model_server.requests[1].json["messages"][-1]["content"]
    assert result_block["content"][1]["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}


async def test_a_tool_image_reaches_gemini(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(
        Reply.json(gemini_shapes.response(calls=[("cam__shot", {})])),
        Reply.json(gemini_shapes.response("a black square")),
    )
    llm = LLMConfig(
        provider="gemini", endpoint=model_server.url + "/v1beta", model="gemini-2.5-flash", stream=False
    )
    provider = GeminiProvider(llm, client=http_client)
    result = await run("what does the camera see?", provider=provider, tools=_tools())
    assert result.answer == "a black square"
    parts = model_server.requests[1].json["contents"][-1]["parts"]
    assert parts[-1] == {"inlineData": {"mimeType": "image/png", "data": PNG}}
