"""Pure JSON helpers shared by the providers, the schema pipeline and the loop's guards.

- ``parse_arguments``: a model's tool-call arguments, parsed tolerantly (``""`` → ``{}``, an
  object taken as is, JSON repaired when it is nearly right, double-encoded JSON unwrapped);
  argument text longer than ``llm.maxToolArgumentChars`` is not read at all
  (``arguments_too_long`` says so).
- ``canonical_json``: one spelling per value (sorted keys, no whitespace), for fingerprints and
  for replaying arguments to servers that need a JSON string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._types import JSONObject


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


DEFAULT_MAX_ARGUMENT_CHARS = 1_000_000
"""``llm.maxToolArgumentChars`` unless the config says otherwise."""
KEPT_ARGUMENT_CHARS = 200
"""How much of refused argument text a call keeps (as ``raw_arguments``) to show the model."""


def arguments_too_long(size: int, limit: int) -> str:
    """Why a call's arguments were not read: ``size`` characters against ``limit``."""
    return f"arguments of {size} characters exceed the limit of {limit} (llm.maxToolArgumentChars)"


def json_chars(value: Any) -> int:
    """The length of ``value``'s compact JSON text."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


_REPAIR_MAX_CHARS = 32_000
_REPAIR_MAX_DEPTH = 32


def _repair(text: str) -> Any:
    """Repair nearly-valid JSON; None when the text is too big or too deep to try safely.

    json_repair slows down sharply on deep nesting (``"{" * 8000`` takes seconds), so a model's
    garbage must not stall a turn: beyond the bounds the arguments are simply invalid.
    """
    if len(text) > _REPAIR_MAX_CHARS:
        return None
    depth = deepest = 0
    for char in text:
        if char in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "}]":
            depth -= 1
    if deepest > _REPAIR_MAX_DEPTH:
        return None
    # json_repair costs ~60 ms to import: only pay it on the rare broken input.
    import json_repair

    return json_repair.loads(text)


def parse_arguments(
    raw: str | Mapping[str, Any] | None, *, max_chars: int = 0
) -> tuple[JSONObject, str | None]:
    """Parse tool-call arguments as a model sent them.

    Args:
        raw: the argument text, or an object the wire already parsed.
        max_chars: text longer than this is not parsed (nor repaired): the error says so
            (0 = no limit). An object is taken as it is (``_turns.bound_arguments`` sizes it).

    Returns:
        ``(arguments, error)``. ``error`` is None on success; otherwise it says why the text could
        not be read as a JSON object, and ``arguments`` is ``{}``.
    """
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if max_chars and len(raw) > max_chars:
        return {}, arguments_too_long(len(raw), max_chars)
    text = raw.strip()
    if not text:
        return {}, None
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        try:
            value = _repair(text)
        except Exception:  # json_repair gives up with assorted errors
            value = None
        if not isinstance(value, dict):
            return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    # double-encoded: "{\"a\": 1}"
    if isinstance(value, str) and value.strip().startswith("{"):
        inner, error = parse_arguments(value, max_chars=max_chars)
        if error is None:
            return inner, None
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None
