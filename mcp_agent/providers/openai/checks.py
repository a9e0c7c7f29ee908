"""What a model server does with tools, found out with tiny requests (for ``doctor``).

- ``check_tools_kept``: the same short conversation asked twice without streaming, once with one
  small tool and once without, each for one token of answer; a server whose ``prompt_tokens`` do
  not grow with the tool leaves tools out of the prompt (a chat template without tool support:
  llama-cpp-python without ``--chat_format chatml-function-calling``, llama-server without
  ``--jinja``), so the model never sees them.
- ``check_stream_tools``: one streamed request with that tool; a server that answers with an
  empty stream, only comments, or an error cannot stream tool calls (llama-cpp-python raises
  "Automatic streaming tool choice is not supported" and sends an empty 200).

``tools_hint`` says what to do about dropped tools, for the server's own kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import anyio
import httpx

from ...exceptions import ProviderError
from ...messages import Message, ToolSpec
from ..base import ModelRequest
from ..http.answers import aiter_sse
from . import OpenAICompatProvider
from ._wire import build_chat_body

__all__ = ["PROBE_TOOL", "ToolsCheck", "check_stream_tools", "check_tools_kept", "tools_hint"]

PROBE_TOOL = ToolSpec(
    "get_current_time",
    "Tell the current time in a time zone.",
    {"type": "object", "properties": {"zone": {"type": "string", "description": "an IANA zone"}}},
)
_ASK = (Message.system("Answer in one word."), Message.user("Hi"))
STREAM_SECONDS = 10.0
"""How long ``check_stream_tools`` waits for a streamed answer to begin."""


@dataclass(frozen=True)
class ToolsCheck:
    """What ``check_tools_kept`` found.

    Attributes:
        dropped: True when the tool did not reach the prompt; None when it could not tell.
        without: ``prompt_tokens`` without the tool (None: not reported).
        with_tool: ``prompt_tokens`` with it.
        error: why it could not tell.
    """

    dropped: bool | None
    without: int | None = None
    with_tool: int | None = None
    error: str = ""


async def check_tools_kept(provider: OpenAICompatProvider) -> ToolsCheck:
    """Ask with and without ``PROBE_TOOL`` (not streamed, one token of answer each)."""
    llm = provider.llm.model_copy(update={"stream": False, "max_retries": 0})
    plain = OpenAICompatProvider(llm, client=provider.client, endpoint=provider.endpoint)
    plain.usage_estimator.judge_tools = False  # the two counts below decide, not an estimate's guess
    counts: list[int | None] = []
    for tools in ((), (PROBE_TOOL,)):
        try:
            turn = await plain.complete(ModelRequest(_ASK, tools, max_output_tokens=1, temperature=0))
        except ProviderError as exc:
            return ToolsCheck(None, error=str(exc))
        counts.append(None if turn.usage.estimated else turn.usage.prompt_tokens)
    without, with_tool = counts
    if without is None or with_tool is None:
        return ToolsCheck(None, without, with_tool, error="the server reported no token usage")
    return ToolsCheck(with_tool - without < 4, without, with_tool)


async def check_stream_tools(
    provider: OpenAICompatProvider, *, timeout: float = STREAM_SECONDS
) -> str | None:
    """None when a streamed request with a tool is answered with chunks; else what went wrong."""
    caps = replace(provider.endpoint.capabilities, stream_tools=True)
    request = ModelRequest(_ASK, (PROBE_TOOL,), max_output_tokens=8, temperature=0)
    body = build_chat_body(request, model=provider.llm.model, caps=caps, stream=True)
    headers = {"Accept": "text/event-stream", **provider.llm.headers}
    if provider.llm.api_key:
        headers["Authorization"] = f"Bearer {provider.llm.api_key}"
    try:
        with anyio.fail_after(timeout):
            async with provider.client.stream(
                "POST", provider.endpoint.chat_url, json=body, headers=headers
            ) as response:
                if response.status_code >= 400:
                    text = (await response.aread())[:200].decode("utf-8", "replace")
                    return f"HTTP {response.status_code}: {text}"
                async for event in aiter_sse(response.aiter_bytes()):
                    if event.is_done:
                        return "the stream ended with [DONE] and no chunk"
                    try:
                        chunk = json.loads(event.data)
                    except ValueError:
                        continue
                    if isinstance(chunk, dict) and chunk.get("choices"):
                        return None
                    if isinstance(chunk, dict) and chunk.get("error"):
                        return f"an error event: {str(chunk['error'])[:200]}"
        return "the stream was empty (200, no chunks)"
    except TimeoutError:
        return f"no streamed chunk in {timeout:g} s"
    except httpx.HTTPError as exc:
        return f"the stream failed: {exc}"


def tools_hint(kind: str) -> str:
    """What to do when ``kind``'s server drops tools."""
    return {
        "llama-cpp-python": "start llama-cpp-python with `--chat_format chatml-function-calling` "
        "(the GGUF's own template has no tools)",
        "llamacpp": "start llama-server with `--jinja` (and a chat template with tool support, "
        "`--chat-template-file` if the GGUF's has none)",
        "ollama": "use a model whose template takes tools (`ollama show MODEL` lists `tools` under "
        "Capabilities)",
        "lmstudio": "load a model with tool support (LM Studio marks them with a hammer)",
        "vllm": "start vLLM with `--enable-auto-tool-choice --tool-call-parser <parser>`",
    }.get(kind, 'or set `llm.toolCallStyle: "text"` to describe the tools in the system prompt instead')
