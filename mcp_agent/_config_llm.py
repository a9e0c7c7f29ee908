"""The ``llm`` section of agent.json: the model server, what it supports, and its fallbacks.

``LLMConfig`` says where the model server is and how to talk to it; ``CapabilityOverrides``
overrides what is known about that kind of server; each ``FallbackConfig`` in ``llm.fallbacks``
is another model tried when this one fails (``providers/fallback.py``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ._config_model import ConfigModel


class CapabilityOverrides(ConfigModel):
    """What the model server supports. ``None`` means "as known for this kind of server"."""

    tool_choice: bool | None = None
    """Send ``tool_choice`` (Ollama ignores it; most others accept it)."""
    parallel_tool_calls: bool | None = None
    """Send ``parallel_tool_calls: true`` (llama.cpp needs it to emit several calls at once)."""
    stream_usage: bool | None = None
    """Send ``stream_options.include_usage`` so a stream reports token usage."""
    stream_tools: bool | None = None
    """Stream when tools are offered (set false for servers that drop streamed tool calls)."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    """The name of the output-token cap in requests."""
    send_reasoning: bool | None = None
    """Send earlier reasoning back as ``reasoning_content`` (GLM, Kimi, DeepSeek templates)."""


class LLMConfig(ConfigModel):
    """The model server."""

    endpoint: str = "http://localhost:11434/v1"
    """Base URL of an OpenAI-compatible server, with or without ``/v1``; Anthropic and Gemini
    URLs are recognised."""
    model: str = "qwen3:8b"
    provider: Literal["auto", "openai", "anthropic", "gemini"] = "auto"
    """``auto`` picks by the endpoint's host."""
    api_key: str | None = None
    tool_call_style: Literal["auto", "native", "text"] = "auto"
    """``native``: only structured tool calls; ``text``/``auto``: tool calls written as text in the
    answer are also accepted when a turn has no structured calls."""
    tool_choice: Literal["auto", "required", "none"] = "auto"
    """``required``: the first round must call a tool (later rounds are ``auto``); ``none``: the
    model may not call tools. Sent only where the server takes ``tool_choice`` (capabilities);
    llama-server with ``--jinja`` then constrains the answer to a well-formed call."""
    stream: bool = True
    temperature: float | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    request_timeout_seconds: float = Field(default=300, ge=0)
    """Read timeout for one model call (0 = none). Ollama loads models inside the request, so
    keep it long."""
    connect_timeout_seconds: float = Field(default=10, ge=0)
    max_retries: int = Field(default=2, ge=0)
    max_response_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """The most bytes one model response may take, streamed or not (0 = no limit). Beyond it the
    response is abandoned and the run ends ``llm_error``."""
    max_tool_argument_chars: int = Field(default=1_000_000, ge=0)
    """A tool call whose argument text is longer is not parsed: the model gets an error result."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers for every model request."""
    capabilities: CapabilityOverrides = Field(default_factory=CapabilityOverrides)
    vision: bool | Literal["auto"] = "auto"
    """Send the images tools return to the model. ``auto``: for models known to read images
    (hosted: OpenAI gpt-4o/4.1/5, o-series, Claude 3 and later, Gemini; local names that say so:
    llava, qwen2.5-vl, ``-vl``, vision, gemma3, minicpm-v, pixtral...). Off, the model reads a
    placeholder such as ``[image: image/png, 4.0 kB]``."""
    tool_budget: Annotated[int, Field(strict=True, ge=0)] | Annotated[float, Field(gt=0, lt=1)] | Literal["auto"] = (
        "auto"
    )
    """How many tools one round may offer before the tool router picks them (``tools/router/``):
    a count (``find_tools`` included; 0 = never route), a share of the model's context window
    (0.25: the offered definitions take at most a quarter of it), or ``auto``: 9 tools when the
    model server is local (llama.cpp, Ollama, LM Studio, Lemonade) or the window is at most
    16,384 tokens, every tool otherwise."""
    pinned_tools: list[str] = Field(default_factory=list)
    """Globs on exposed names (``time__*``) of tools offered in every round while routing."""
    fallbacks: list[FallbackConfig] = Field(default_factory=list)
    """Models tried in order when this one fails with a connection error, a 5xx or a rate limit
    (after its retries). Each entry takes any ``llm`` key but ``fallbacks``; a key it leaves out
    is the primary's, except the server's own (``provider``, ``apiKey``, ``headers``,
    ``capabilities``) when the entry names an endpoint on another server."""

    @field_validator("api_key")
    @classmethod
    def _empty_key_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("tool_budget", mode="before")
    @classmethod
    def _one_budget(cls, value: Any) -> Any:
        count = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        share = isinstance(value, float) and 0 < value < 1
        if not (count or share or value == "auto"):
            raise ValueError(
                f"expected a count of tools (0 = never route), a share of the context window "
                f'between 0 and 1, or "auto"; got {value!r}'
            )
        return value


class FallbackConfig(LLMConfig):
    """One entry of ``llm.fallbacks``: the keys of ``llm`` it sets (``providers/fallback.py``
    fills in the rest from the primary)."""

    @model_validator(mode="after")
    def _not_nested(self) -> FallbackConfig:
        if self.fallbacks:
            raise ValueError("a fallback entry cannot have fallbacks of its own: list them all in llm.fallbacks")
        return self


LLMConfig.model_rebuild()
