"""The tool router: which tools each round offers when there are too many to offer them all.

Small models read every tool definition in every round: with the 50-odd tools of six ordinary
MCP servers that is thousands of prompt tokens before the question, and they choose worse among
many tools. When the tools exceed ``llm.toolBudget``, each round offers the best-ranked tools for
the conversation so far, the pinned and used ones, and ``find_tools(query)``, with which the
model pulls in any other tool.

The parts, each pure but the last:

- ``ranker``: the stop words and the related-words table (data); words, stems, shapes (a URL
  says ``url``) and related words of a text; ``ToolIndex``, BM25F over a tool list's weighted
  fields; ``query_terms``, the conversation as a weighted query.
- ``routing``: the budget rule, ``ToolRouter`` (one per agent, caching the index) and
  ``RoutedTools`` (one run's tools: what a round offers, ``find_tools``' answers).

Measured by ``bench/bench_router.py`` on ``tests/tools/router/``'s labelled, held-out and fresh sets.
"""

from __future__ import annotations

from .ranker import (
    QUOTED,
    RELATED,
    ToolIndex,
    expansions,
    query_terms,
    shapes,
    stem,
    terms,
    text_query,
    words,
)
from .routing import (
    AUTO_BUDGET,
    FIND_TOOLS,
    LOCAL_KINDS,
    SMALL_WINDOW,
    Budget,
    RoutedTools,
    ToolRouter,
    definition_tokens,
    find_tools_spec,
)

__all__ = [
    "AUTO_BUDGET",
    "FIND_TOOLS",
    "LOCAL_KINDS",
    "QUOTED",
    "RELATED",
    "SMALL_WINDOW",
    "Budget",
    "RoutedTools",
    "ToolIndex",
    "ToolRouter",
    "definition_tokens",
    "expansions",
    "find_tools_spec",
    "query_terms",
    "shapes",
    "stem",
    "terms",
    "text_query",
    "words",
]
