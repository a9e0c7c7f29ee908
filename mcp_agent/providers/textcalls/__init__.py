"""Tool calls written as text, and reasoning split off (pure): the public API of the parser
(``_extract``), its helpers (``_values``, ``_calls``, ``_scan`` with ``_cursor`` and
``_tag_readers``, ``_harmony``) and the ``<think>`` stream filter."""

from __future__ import annotations

from ._extract import (
    MAX_MARKERS,
    MAX_SCAN_CHARS,
    TextExtraction,
    convert_value,
    extract_tool_calls,
    split_reasoning,
)

__all__ = [
    "MAX_MARKERS",
    "MAX_SCAN_CHARS",
    "TextExtraction",
    "convert_value",
    "extract_tool_calls",
    "split_reasoning",
]
