"""The loop's guards as pure values and functions: budgets, the failure ledger, call fingerprints.

Nothing here does I/O or awaits; the loop (``loop/run.py``, ``loop/_dispatch.py``) asks these
questions at its commit points and acts on the answers. Every numeric limit follows the config
rule: **0 means off**.

- Budgets (DESIGN guard 1): ``rounds_exhausted`` before a model call, ``tokens_exhausted`` after
  a model call and before dispatch, ``tool_calls_fit`` before a turn is dispatched (a turn runs
  whole or not at all).
- The failure ledger (guard 5): a failure is an error result, or text that starts with
  ``error:`` / ``{"error"`` / ``no results`` (case-insensitive, after whitespace), or is empty.
  A success resets a tool's count. At ``hint_after`` consecutive failures the result gets
  ``FAILURE_HINT`` at its very end; at ``disable_after`` the tool is withdrawn for the run.
- Fingerprints (guard 6): sha256 of the exposed name and the canonical JSON of the (coerced)
  arguments. ``CallBook`` counts each fingerprint **once per turn** (identical calls in one turn
  run once and share the result, so they are one occurrence) and remembers the latest round it
  was seen in; the ``threshold``-th occurrence anywhere in the run is a loop.
- ``cut_text`` (guard 7): cut by characters (code points, so never inside one) with a note.
  ``cut_parts`` applies the same budget to a result's raw MCP content parts (for callers that
  get the parts, the gateway's ``exposeTools``): the text of ``text`` parts and of embedded text
  resources shares ``max_chars`` in order; binary parts (images, audio, blobs) and resource links
  pass whole, since a cut would corrupt them and ``maxMessageBytes`` already bounds them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._plural import counted
from ..messages import JSONObject, canonical_json

FAILURE_HINT = (
    "[SYSTEM: This tool has failed multiple times. Do NOT retry it. Answer using your own knowledge instead.]"
)
"""Appended, exactly, to a result after ``failureHintAfter`` consecutive failures of its tool."""

_FAILURE_PREFIXES = ("error:", '{"error"', "no results")


# --------------------------------------------------------------------------------------------
# budgets


def rounds_exhausted(rounds_done: int, max_rounds: int) -> bool:
    """True when no further model call is allowed (checked before each model call)."""
    return bool(max_rounds) and rounds_done >= max_rounds


def tokens_exhausted(tokens_used: int, max_tokens: int) -> bool:
    """True when the token budget is spent: nothing more may be dispatched or asked."""
    return bool(max_tokens) and tokens_used >= max_tokens


def tool_calls_fit(used: int, wanted: int, max_tool_calls: int) -> bool:
    """True when ``wanted`` more tool calls fit the budget (a turn runs whole or not at all)."""
    return not max_tool_calls or used + wanted <= max_tool_calls


def is_loop(occurrences: int, threshold: int) -> bool:
    """True when a call seen ``occurrences`` times in the run trips the loop guard."""
    return bool(threshold) and occurrences >= threshold


# --------------------------------------------------------------------------------------------
# failure ledger


def is_failure(text: str, is_error: bool = False) -> bool:
    """Whether a tool result counts as a failure for the ledger."""
    if is_error:
        return True
    head = text.lstrip()[:16].lower()
    return not head or head.startswith(_FAILURE_PREFIXES)


def first_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters (for short reports)."""
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


@dataclass(frozen=True)
class LedgerMark:
    """What the ledger decided about one result.

    Attributes:
        failed: the result counts as a failure.
        hint: the result must end with ``FAILURE_HINT``.
        disabled: this failure withdrew the tool for the rest of the run.
    """

    failed: bool = False
    hint: bool = False
    disabled: bool = False


class FailureLedger:
    """Consecutive failures per tool, for one run.

    Args:
        hint_after: consecutive failures after which results carry ``FAILURE_HINT`` (0 = never).
        disable_after: consecutive failures after which the tool is withdrawn (0 = never).
    """

    def __init__(self, hint_after: int = 2, disable_after: int = 3) -> None:
        self.hint_after = hint_after
        self.disable_after = disable_after
        self._streak: dict[str, int] = {}
        self._last_error: dict[str, str] = {}
        self._disabled: dict[str, str] = {}

    def record(self, name: str, text: str, *, is_error: bool = False) -> LedgerMark:
        """Record one executed call's result and say what follows from it."""
        if not is_failure(text, is_error):
            self._streak[name] = 0
            return LedgerMark()
        streak = self._streak.get(name, 0) + 1
        self._streak[name] = streak
        self._last_error[name] = first_line(text) or "(empty result)"
        hint = bool(self.hint_after) and streak >= self.hint_after
        disabled = bool(self.disable_after) and streak >= self.disable_after and name not in self._disabled
        if disabled:
            self._disabled[name] = f"disabled for this run after {streak} failures: {self._last_error[name]}"
        return LedgerMark(failed=True, hint=hint, disabled=disabled)

    def disabled_reason(self, name: str) -> str | None:
        """The text answering a call to a withdrawn tool, or None when the tool is usable."""
        return self._disabled.get(name)

    @property
    def disabled(self) -> frozenset[str]:
        """The tools withdrawn for the rest of the run."""
        return frozenset(self._disabled)


# --------------------------------------------------------------------------------------------
# fingerprints


def fingerprint(name: str, arguments: JSONObject) -> str:
    """sha256 of the exposed name and the canonical JSON of the arguments."""
    return hashlib.sha256(f"{name}\x00{canonical_json(arguments)}".encode()).hexdigest()


@dataclass(frozen=True)
class Sighting:
    """One call's fingerprint as the book saw it.

    Attributes:
        count: occurrences in the run so far, this one included (a turn counts once).
        previous_round: the latest earlier round with the same call, or None for a first call.
    """

    count: int
    previous_round: int | None = None


class CallBook:
    """The fingerprints of one run's calls: how often, and in which round last."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, int, int | None]] = {}  # fp -> (count, round, previous)

    def see(self, fp: str, round: int) -> Sighting:
        """Count ``fp`` in ``round``; a second sighting in the same round is not counted again."""
        count, last, previous = self._seen.get(fp, (0, 0, None))
        if count and last == round:
            return Sighting(count, previous)
        previous = last or None
        self._seen[fp] = (count + 1, round, previous)
        return Sighting(count + 1, previous)


# --------------------------------------------------------------------------------------------
# results


def cut_text(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to ``max_chars`` characters with a note of what was cut (0 = no cut).

    Python strings index code points, so a cut never splits one. Returns ``(text, truncated)``.
    """
    if not max_chars or len(text) <= max_chars:
        return text, False
    cut = len(text) - max_chars
    return f"{text[:max_chars]}\n[... truncated: {cut} of {counted(len(text), 'character')} cut]", True


def cut_parts(parts: Sequence[JSONObject], max_chars: int) -> tuple[tuple[JSONObject, ...], bool]:
    """MCP content parts (wire dicts) with their text cut to ``max_chars`` in all (0 = no cut).

    The text of ``text`` parts and of embedded text resources (``resource.text``) counts, in
    order; the part that crosses the budget is cut, later text parts are dropped, and a last
    ``text`` part says how much was cut. Other parts are kept whole. Returns
    ``(parts, truncated)``.
    """
    if not max_chars:
        return tuple(parts), False
    left, total, cut = max_chars, 0, 0
    kept: list[JSONObject] = []
    for part in parts:
        text, put = _part_text(part)
        if text is None or put is None:
            kept.append(part)
            continue
        total += len(text)
        if len(text) <= left:
            left -= len(text)
            kept.append(part)
            continue
        cut += len(text) - left
        if left:
            kept.append(put(text[:left]))
        left = 0
    if not cut:
        return tuple(parts), False
    note = {"type": "text", "text": f"[... truncated: {cut} of {counted(total, 'character')} cut]"}
    return (*kept, note), True


def _part_text(part: JSONObject) -> tuple[str | None, Callable[[str], JSONObject] | None]:
    """A part's text and how to build the part with other text, or ``(None, None)``."""
    if part.get("type") == "text" and isinstance(part.get("text"), str):
        return part["text"], lambda text: {**part, "text": text}
    resource = part.get("resource")
    if (
        part.get("type") == "resource"
        and isinstance(resource, dict)
        and isinstance(resource.get("text"), str)
    ):
        return resource["text"], lambda text: {**part, "resource": {**resource, "text": text}}
    return None, None
