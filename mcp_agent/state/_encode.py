"""How the backends write values as text: JSON that never fails on a lone surrogate.

A tool's output decoded from JSON may hold a lone surrogate (``"\\ud800"``), which UTF-8 cannot
encode. ``to_json`` keeps such text exact (escaped, as plain JSON does) instead of failing the
save; ``clean_text`` gives a column that is only searched a UTF-8-safe copy.
"""

from __future__ import annotations

import json
from typing import Any


def to_json(value: Any) -> str:
    """Compact JSON, UTF-8 as is; ``\\uXXXX`` escapes only when the text has lone surrogates."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


def clean_text(text: str) -> str:
    """``text`` with anything UTF-8 cannot encode replaced (``?``)."""
    return text.encode("utf-8", "replace").decode("utf-8")
