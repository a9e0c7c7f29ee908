"""Tool schemas (pure): compile an MCP ``inputSchema`` once (``_compile``: normalise in
``_normalize``, inline ``$ref`` in ``_refs``, per-dialect forms in ``_dialects`` and ``_strict``),
and check a model's arguments (coerce in ``_coerce``, report in ``_errors``)."""

from __future__ import annotations

from ._compile import (
    DIALECTS,
    ArgumentCheck,
    ArgumentChecker,
    CompiledSchema,
    checker_for,
    compile_tool_schema,
    format_errors,
)

__all__ = [
    "DIALECTS",
    "ArgumentCheck",
    "ArgumentChecker",
    "CompiledSchema",
    "checker_for",
    "compile_tool_schema",
    "format_errors",
]
