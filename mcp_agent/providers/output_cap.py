"""The cap on an answer's length that every model request carries.

Without one, some servers write until the context window is full: llama-cpp-python's default is
"unlimited" (one call wrote 3,071 tokens in 288 s into a 4,096-token window, long after the
run's deadline, and went on after the client left). So a cap is always sent:

1. ``llm.maxOutputTokens`` (or the request's own cap) when set;
2. else a quarter of the model's context window when the server told it
   (``ServerInfo.context_window``), within ``MIN_OUTPUT_TOKENS``..``MAX_OUTPUT_TOKENS``: the
   prompt keeps the larger share, and servers that count the cap against the window (vLLM, older
   OpenAI models) still take a prompt of three quarters of it;
3. else ``UNKNOWN_WINDOW_LOCAL`` (2048) for a server on this machine, whose window may be as
   small as 2048-4096 tokens, or ``UNKNOWN_WINDOW_REMOTE`` (4096) for a hosted API (windows of
   8k and more; Anthropic requires a value and takes 4096 from every model).

Gemini's default is ``GEMINI_OUTPUT_TOKENS`` (8192): its thinking tokens count against the cap.
A reasoning model on a hosted API may need more than these defaults: set ``llm.maxOutputTokens``.
An answer cut off at the cap ends with ``finish_reason: "length"``; the loop continues it once.
"""

from __future__ import annotations

__all__ = [
    "GEMINI_OUTPUT_TOKENS",
    "MAX_OUTPUT_TOKENS",
    "MIN_OUTPUT_TOKENS",
    "UNKNOWN_WINDOW_LOCAL",
    "UNKNOWN_WINDOW_REMOTE",
    "output_cap",
]

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
