"""OpenAI-compatible model servers (Chat Completions): the provider, its request and response wire."""

from __future__ import annotations

from .provider import TEXT_TOOL_MODELS, OpenAICompatProvider, prefers_text_tools

__all__ = ["TEXT_TOOL_MODELS", "OpenAICompatProvider", "prefers_text_tools"]
