"""What a model server is, learned from what it answers rather than guessed from its port.

``ServerInfo`` is the seam between identifying a server (which asks it: llama.cpp ``/props``,
Ollama ``/api/version`` and ``/api/show``, LM Studio ``/api/v0/models``, vLLM ``/version``,
llama-cpp-python's ``/v1/models`` shape) and the code that acts on what was found: the output cap
and history size derived from ``context_window``, token counts from a tokenizer endpoint.
Until a server is identified, ``ServerInfo.unknown()`` stands in and every field says "not known".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerInfo:
    """A model server as identified.

    Attributes:
        kind: ``llamacpp``, ``llama-cpp-python``, ``ollama``, ``lmstudio``, ``vllm``, ``lemonade``,
            a hosted API's name, or ``unknown``.
        version: the server's version, when it says.
        context_window: the model's context window in tokens, when the server tells it.
        tokenize_url: a tokenizer endpoint for exact token counts, when the server has one.
        source: how it was learned (``probe``, ``cache``, ``port``), for ``doctor``.
    """

    kind: str = "unknown"
    version: str | None = None
    context_window: int | None = None
    tokenize_url: str | None = None
    source: str = "none"

    @classmethod
    def unknown(cls) -> ServerInfo:
        return cls()
