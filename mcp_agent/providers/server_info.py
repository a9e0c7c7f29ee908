"""What a model server is, learned from what it answers rather than guessed from its port.

``ServerInfo`` is the seam between identifying a server (``identify.py`` asks it: llama.cpp
``/props``, Ollama ``/api/version`` and ``/api/show``, LM Studio ``/api/v0/models``, vLLM
``/version``, llama-cpp-python's ``/openapi.json`` and ``/v1/models`` shape) and the code that acts
on what was found: capabilities by kind, the output cap and history size derived from
``context_window``, token counts from a tokenizer endpoint. Until a server is identified,
``ServerInfo.unknown()`` stands in and every field says "not known".

Sizing from the context window (pure): ``history_chars_for`` turns a window of tokens into the
``limits.maxHistoryChars`` that fits it, at ``CHARS_PER_TOKEN`` characters a token (a low figure:
English prose runs at about four characters a token on Llama, Qwen and SmolLM tokenizers, JSON and
code nearer three, so 3.5 errs towards keeping less), after the room kept for the answer
(``default_output_tokens``) and the tools' definitions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..config import AgentConfig
from ..messages import ToolSpec
from .output_cap import output_cap

__all__ = [
    "CHARS_PER_TOKEN",
    "MIN_HISTORY_CHARS",
    "ServerInfo",
    "default_output_tokens",
    "history_chars_for",
    "server_info_of",
    "sized_for_server",
    "tool_chars",
]

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3.5
"""Characters per token assumed when sizing history from a context window (see the docstring)."""
MIN_HISTORY_CHARS = 2_000
"""The least history a derived ``maxHistoryChars`` keeps (a tiny window still needs the question)."""
_OVERHEAD_TOKENS = 64
"""Tokens a chat template adds around the messages (role markers, the generation prompt)."""


@dataclass(frozen=True)
class ServerInfo:
    """A model server as identified.

    Attributes:
        kind: ``llamacpp``, ``llama-cpp-python``, ``ollama``, ``lmstudio``, ``vllm``, ``lemonade``,
            a hosted API's name, or ``unknown``.
        version: the server's version, when it says.
        context_window: the model's context window in tokens, when the server tells it.
        tokenize_url: a tokenizer endpoint for exact token counts, when the server has one.
        source: how it was learned: ``probe`` (asked just now), ``cache`` (asked before, see
            ``server_cache.py``), ``host`` (a hosted API, known by its host name), ``port`` (a
            guess from the port: nothing that answered said more), ``none``.
        evidence: what gave it away, for ``doctor`` (``"GET /props: llama.cpp b4567"``).
        context_source: where the context window was read (``"/props n_ctx"``), for ``doctor``.
        tools_dropped: True when the server was seen to drop offered tools (offered tools did
            not raise ``prompt_tokens``: a chat template without tool support); None: not checked.
        stream_tools: False when the server was seen not to stream tool calls (an empty stream
            when tools were offered): requests with tools are then not streamed, unless
            ``llm.capabilities.streamTools`` says otherwise; None: not seen.
    """

    kind: str = "unknown"
    version: str | None = None
    context_window: int | None = None
    tokenize_url: str | None = None
    source: str = "none"
    evidence: str = ""
    context_source: str = ""
    tools_dropped: bool | None = None
    stream_tools: bool | None = None

    @classmethod
    def unknown(cls) -> ServerInfo:
        return cls()

    @property
    def known(self) -> bool:
        """Whether the server said what it is (not a guess from the port, not unknown)."""
        return self.source in ("probe", "cache", "host") and self.kind != "unknown"

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values (for the on-disk cache and ``doctor --json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerInfo:
        """A ServerInfo from ``to_dict``'s output; unknown keys and mistyped values are ignored."""
        values: dict[str, Any] = {}
        for spec in fields(cls):
            value = data.get(spec.name)
            if spec.name == "context_window":
                ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
            elif spec.name in ("tools_dropped", "stream_tools"):
                ok = isinstance(value, bool)
            else:
                ok = isinstance(value, str)
            if ok:
                values[spec.name] = value
        return cls(**values)


def default_output_tokens(context_window: int) -> int:
    """The output cap a window leaves room for when ``llm.maxOutputTokens`` is not set: the cap
    requests carry (``output_cap``: a quarter of the window, within 256..8192 tokens)."""
    return output_cap(None, context_window=context_window)


def history_chars_for(
    context_window: int,
    *,
    output_tokens: int | None = None,
    tool_chars: int = 0,
    ceiling: int | None = None,
) -> int:
    """The ``maxHistoryChars`` that fits ``context_window`` tokens (pure).

    Args:
        context_window: the window in tokens, as the server said.
        output_tokens: the room kept for the answer (``llm.maxOutputTokens``); None:
            ``default_output_tokens``.
        tool_chars: the size of the tools' definitions as sent (names, descriptions, schemas).
        ceiling: never more than this (the configured default); None: no ceiling.

    >>> history_chars_for(4096)  # SmolLM2 under llama-cpp-python --n_ctx 4096
    10528
    """
    output = default_output_tokens(context_window) if output_tokens is None else output_tokens
    room = context_window - output - _OVERHEAD_TOKENS - int(tool_chars / CHARS_PER_TOKEN)
    chars = max(MIN_HISTORY_CHARS, int(room * CHARS_PER_TOKEN))
    return min(chars, ceiling) if ceiling else chars


def server_info_of(provider: object) -> ServerInfo:
    """What ``provider``'s server is, for any Provider: its ``server_info`` when it has one (the
    OpenAI-compatible provider; a ``FallbackProvider`` answers for its primary), else unknown."""
    info = getattr(provider, "server_info", None)
    return info if isinstance(info, ServerInfo) else ServerInfo.unknown()


def tool_chars(tools: Sequence[ToolSpec]) -> int:
    """The size of the tools' definitions as a server reads them: names, descriptions, schemas."""
    return sum(
        len(spec.name)
        + len(spec.description)
        + len(json.dumps(spec.schema_for("openai"), ensure_ascii=False))
        for spec in tools
    )


def sized_for_server(config: AgentConfig, info: ServerInfo, tools: Sequence[ToolSpec] = ()) -> AgentConfig:
    """``config`` with ``limits.maxHistoryChars`` fitted to the server's context window, unless the
    file sets it or the window is not known. The fitted size never exceeds the default: a large
    window keeps the default, a small one (4096 tokens: about 10,000 characters) shrinks it so
    the server does not have to cut or refuse the conversation."""
    limits = config.limits
    if not info.context_window or "max_history_chars" in limits.model_fields_set:
        return config
    size = history_chars_for(
        info.context_window,
        output_tokens=config.llm.max_output_tokens,
        tool_chars=tool_chars(tools),
        ceiling=limits.max_history_chars,
    )
    if size == limits.max_history_chars:
        return config
    logger.info(
        "history trimmed to %d characters to fit the model's context window of %d tokens (%s)",
        size,
        info.context_window,
        info.context_source or info.kind,
    )
    return config.model_copy(update={"limits": limits.model_copy(update={"max_history_chars": size})})
