"""What we know about a model server: what it answered, what follows from that, what talking to it taught.

``ServerInfo`` is the seam between identifying a server (``servers/identify.py`` asks it: llama.cpp
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

What follows from the window for every request: the cap on an answer's length (``output_cap``).
What a provider learns while it talks to the server (that it cannot stream tools) is kept in
``Learned``, which may outlive the process through the cache of ``servers/identify.py``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..._plural import counted
from ...config import AgentConfig
from ...messages import ToolSpec

__all__ = [
    "CHARS_PER_TOKEN",
    "GEMINI_OUTPUT_TOKENS",
    "MAX_OUTPUT_TOKENS",
    "MIN_HISTORY_CHARS",
    "MIN_OUTPUT_TOKENS",
    "UNKNOWN_WINDOW_LOCAL",
    "UNKNOWN_WINDOW_REMOTE",
    "Learned",
    "ServerInfo",
    "default_output_tokens",
    "history_chars_for",
    "output_cap",
    "server_info_of",
    "sized_for_server",
    "tool_chars",
    "window_overruns",
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
            ``servers/identify.py``), ``host`` (a hosted API, known by its host name), ``port`` (a
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


def window_overruns(config: AgentConfig, info: ServerInfo) -> list[str]:
    """What ``config`` sets explicitly that the server's context window cannot hold (pure), one
    sentence each with the numbers; empty when the window is not known or everything fits.

    An explicit ``limits.maxHistoryChars`` wins over sizing from the window, so one larger than
    ``history_chars_for`` the window (or 0, "never trim") lets the conversation outgrow it; an
    explicit ``llm.maxOutputTokens`` that leaves less than ``MIN_HISTORY_CHARS`` of history
    leaves the prompt no room.
    """
    window = info.context_window
    if not window:
        return []
    out: list[str] = []
    limits, llm = config.limits, config.llm
    fits = history_chars_for(window, output_tokens=llm.max_output_tokens)
    if "max_history_chars" in limits.model_fields_set and (
        not limits.max_history_chars or limits.max_history_chars > fits
    ):
        set_to = (
            f"{limits.max_history_chars} characters (about "
            f"{int(limits.max_history_chars / CHARS_PER_TOKEN)} tokens)"
            if limits.max_history_chars
            else "0 (never trimmed)"
        )
        out.append(
            f"limits.maxHistoryChars is {set_to}, more than the {window}-token window holds "
            f"after the answer's room: {fits} characters; remove it to size history from the "
            f"window, or set it to {fits} or less"
        )
    if llm.max_output_tokens:
        room = window - llm.max_output_tokens - _OVERHEAD_TOKENS
        if room * CHARS_PER_TOKEN < MIN_HISTORY_CHARS:
            out.append(
                f"llm.maxOutputTokens is {llm.max_output_tokens}: a {window}-token window then "
                f"leaves {counted(max(room, 0), 'token')} for the prompt (at least "
                f"{int(MIN_HISTORY_CHARS / CHARS_PER_TOKEN)} are needed); set it to "
                f"{default_output_tokens(window)} or remove it"
            )
    return out


# --------------------------------------------------------------------------------------------
# the cap on an answer's length that every model request carries
#
# Without one, some servers write until the context window is full: llama-cpp-python's default is
# "unlimited" (one call wrote 3,071 tokens in 288 s into a 4,096-token window, long after the
# run's deadline, and went on after the client left). So a cap is always sent:
#
# 1. ``llm.maxOutputTokens`` (or the request's own cap) when set;
# 2. else a quarter of the model's context window when the server told it
#    (``ServerInfo.context_window``), within ``MIN_OUTPUT_TOKENS``..``MAX_OUTPUT_TOKENS``: the
#    prompt keeps the larger share, and servers that count the cap against the window (vLLM, older
#    OpenAI models) still take a prompt of three quarters of it;
# 3. else ``UNKNOWN_WINDOW_LOCAL`` (2048) for a server on this machine, whose window may be as
#    small as 2048-4096 tokens, or ``UNKNOWN_WINDOW_REMOTE`` (4096) for a hosted API (windows of
#    8k and more; Anthropic requires a value and takes 4096 from every model).
#
# Gemini's default is ``GEMINI_OUTPUT_TOKENS`` (8192): its thinking tokens count against the cap.
# A reasoning model on a hosted API may need more than these defaults: set ``llm.maxOutputTokens``.
# An answer cut off at the cap ends with ``finish_reason: "length"``; the loop continues it once.

UNKNOWN_WINDOW_LOCAL = 2048
"""The cap for a server on this machine whose context window is not known."""
UNKNOWN_WINDOW_REMOTE = 4096
"""The cap for a hosted API whose context window is not known (Anthropic's default too)."""
GEMINI_OUTPUT_TOKENS = 8192
"""Gemini's cap when none is configured (thinking tokens count against it)."""
MIN_OUTPUT_TOKENS = 256
MAX_OUTPUT_TOKENS = 8192
"""The bounds of a cap derived from a known context window."""


def output_cap(configured: int | None, *, context_window: int | None = None, local: bool = True) -> int:
    """The ``max_tokens`` to send (see the module docstring for the rule).

    >>> output_cap(None, context_window=4096), output_cap(None), output_cap(300, context_window=4096)
    (1024, 2048, 300)
    """
    if configured:
        return configured
    if context_window and context_window > 0:
        return max(MIN_OUTPUT_TOKENS, min(context_window // 4, MAX_OUTPUT_TOKENS))
    return UNKNOWN_WINDOW_LOCAL if local else UNKNOWN_WINDOW_REMOTE


# --------------------------------------------------------------------------------------------
# what a provider learned about its model server by talking to it, kept for the process's life
#
# A provider holds one ``Learned`` and reads it before each request; ``None`` in a field means
# "not learned: go by configuration and the server's kind". It is the hook for keeping the lesson
# longer than the process: whatever caches what a server is (``known_server``) may save these
# fields and set them again on a new provider before its first request.


@dataclass
class Learned:
    """Lessons about one model server (mutable: the provider sets them as it learns).

    Attributes:
        stream_tools: False once a streamed request with tools came back with nothing (an empty
            200 stream, or only keep-alive pings until the server closed it) and the same request
            without streaming answered: llama-cpp-python with ``tool_choice: auto`` fails like
            that every time. Requests with tools are then sent without streaming. None: not
            learned; True is never set by the provider itself (a saved lesson may say it).
    """

    stream_tools: bool | None = None
    keep: Callable[..., Any] = field(default=lambda **lesson: None, repr=False)
    """Called with each lesson as it is learned (``stream_tools=False``), to keep it beyond the
    process (the factory points it at the server-info cache)."""

    def learn(self, **lesson: Any) -> None:
        """Take ``lesson`` (field=value) now, and hand it to ``keep``."""
        for name, value in lesson.items():
            setattr(self, name, value)
        with contextlib.suppress(Exception):  # keeping it is a bonus: the lesson holds here regardless
            self.keep(**lesson)
