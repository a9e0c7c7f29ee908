"""Tool schemas (pure): compile an MCP ``inputSchema`` once (``compile``: normalised and
``$ref`` inlined in ``normalize``, then per-dialect forms), and check a model's arguments
(coerce and report in ``arguments``)."""

from __future__ import annotations

from .compile import (
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
