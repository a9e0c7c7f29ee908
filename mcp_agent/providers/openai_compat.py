"""The OpenAI-compatible provider, importable from where it always was (it lives in ``openai/``)."""

from __future__ import annotations

from .openai.provider import TEXT_TOOL_MODELS, OpenAICompatProvider, prefers_text_tools

__all__ = ["TEXT_TOOL_MODELS", "OpenAICompatProvider", "prefers_text_tools"]
