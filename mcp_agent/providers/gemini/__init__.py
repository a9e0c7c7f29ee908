"""The native Gemini API (generateContent): the provider and its wire format."""

from __future__ import annotations

from .provider import GeminiProvider

__all__ = ["GeminiProvider"]
