"""Token counts as a model server reports them, trusted only when they make sense (pure).

The counts feed ``limits.maxTokens`` and every report, so a server must not be able to defeat
the budget with a negative count, or fill a report with a 309-digit one. The wire parsers read
each reported field with ``token_count``: a count that is negative or not an integer (a bool, a
float, a string) becomes ``UNTRUSTED``; ``reported_usage`` builds the ``Usage``. The last step
every provider shares (``_turns.finish_turn``) then calls ``trusted_usage``: an untrusted count
is replaced by the estimate for that field (``_turns.estimate_usage``), a count above
``MAX_TOKENS_PER_CALL`` is cut to it, ``total_tokens`` is made at least prompt + completion, and
a Usage repaired in any of these ways is flagged ``clamped`` (and a warning is logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..messages import Usage

__all__ = ["MAX_TOKENS_PER_CALL", "UNTRUSTED", "reported_usage", "sum_counts", "token_count", "trusted_usage"]

logger = logging.getLogger(__name__)

MAX_TOKENS_PER_CALL = 10_000_000
"""The most tokens one model call is believed to use, per field (the largest context windows
hold a few million)."""
UNTRUSTED = -1
"""A reported count that cannot be trusted. Only the wire parsers and ``trusted_usage`` see it:
no Usage leaves a provider with it."""


def token_count(value: Any) -> int:
    """A reported count: 0 when absent, the count when it is a non-negative integer (never a
    bool), ``UNTRUSTED`` otherwise."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return UNTRUSTED


def sum_counts(*counts: int) -> int:
    """The sum of counts read with ``token_count``; ``UNTRUSTED`` when any of them is."""
    return UNTRUSTED if any(count < 0 for count in counts) else sum(counts)


def reported_usage(prompt: int, completion: int, total: int = 0) -> Usage:
    """A Usage of counts read with ``token_count``; a total of 0 (not reported) is the sum."""
    if total == 0:
        total = sum_counts(prompt, completion)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def trusted_usage(usage: Usage, estimate: Callable[[], Usage]) -> Usage:
    """``usage`` with every count it cannot be trusted with repaired, flagged ``clamped`` if so.

    Args:
        usage: as the wire parser built it (``UNTRUSTED`` fields allowed).
        estimate: the estimated usage of the call, asked for only when a field needs it.
    """
    problems: list[str] = []
    estimated: Usage | None = None
    counts: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens"):
        count: int = getattr(usage, name)
        if count < 0:
            estimated = estimated or estimate()
            count = getattr(estimated, name)
            problems.append(f"{name} is not a count (negative or not an integer): estimated as {count}")
        elif count > MAX_TOKENS_PER_CALL:
            count = MAX_TOKENS_PER_CALL
            problems.append(f"{name} is above {MAX_TOKENS_PER_CALL}: cut to it")
        counts[name] = count
    total = usage.total_tokens
    least = counts["prompt_tokens"] + counts["completion_tokens"]
    if total < 0:
        problems.append("total_tokens is not a count (negative or not an integer)")
    elif total > max(MAX_TOKENS_PER_CALL, least):
        problems.append(f"total_tokens is above {MAX_TOKENS_PER_CALL}: cut to it")
        total = MAX_TOKENS_PER_CALL
    elif total < least:
        problems.append("total_tokens is less than prompt + completion")
    total = max(total, least)
    if not problems:
        return usage
    logger.warning("the model server reported token counts that cannot be trusted: %s", "; ".join(problems))
    return replace(
        usage,
        prompt_tokens=counts["prompt_tokens"],
        completion_tokens=counts["completion_tokens"],
        total_tokens=total,
        clamped=True,
    )
