"""Shared type aliases: JSON values and JSON Schemas."""

from __future__ import annotations

from typing import Any, TypeAlias

JSON: TypeAlias = Any
"""Any JSON value: dict, list, str, int, float, bool or None."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object, such as a tool call's arguments."""

JSONSchema: TypeAlias = dict[str, Any]
"""A JSON Schema document (always an object schema once normalised)."""
