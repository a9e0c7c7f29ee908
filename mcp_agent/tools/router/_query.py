"""The conversation as a query (pure): which words, weighted by where they stand.

The latest user message counts most, earlier user messages less the older they are, the
assistant's words since the latest user message little, and tool results not at all unless
weighted in. Within a message, quoted text counts less (it is what a tool should work on, not
which tool), and each word adds its related tool words (``_text.expansions``) at a share of its
own weight. A term keeps the largest weight it gets anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...messages import Message
from ._text import expansions, terms

__all__ = ["query_terms", "text_query"]

LATEST_USER = 1.0
EARLIER_USER = 0.4
ASSISTANT = 0.3
TOOL_RESULTS = 0.0
"""Tool results are left out of the query by default: measured on the labelled set with a
2,000-character unrelated result after each question, recall@8 is 0.992 at 0 and at 0.1 and
0.975 at 0.3 (``bench/bench_router.py``), and the set has no question that a result would help."""
_RESULT_CHARS = 2_000
_LOOKBACK = 12
RELATED = 0.7
"""A related word (``expansions``) counts this share of the word that suggested it: ``make a
folder`` asks for ``create`` and ``directory``, but a tool that says ``folder`` itself fits better."""
QUOTED = 0.3
"""Quoted text (``'fix login bug'``) is what a tool should work on, not which tool: its words
count this share of the message's."""
_QUOTE = re.compile(r"""(?<!\w)(['"`\u2018\u201c])(.+?)(?:\1|[\u2019\u201d])(?!\w)""")


def text_query(text: str, weight: float = 1.0, into: dict[str, float] | None = None) -> dict[str, float]:
    """``text`` as a weighted query (term → weight), merged into ``into`` keeping each term's
    largest weight: its terms (``terms``) at ``weight``, quoted text at ``QUOTED`` of it, and the
    related words of each at ``RELATED`` of what their word got."""
    query = {} if into is None else into

    def put(term: str, value: float) -> None:
        if query.get(term, 0.0) < value:
            query[term] = value

    quoted = " ".join(match.group(2) for match in _QUOTE.finditer(text))
    plain = _QUOTE.sub(" ", text)
    for part, share in ((plain, 1.0), (quoted, QUOTED)):
        if not part or weight * share <= 0:
            continue
        for term in terms(part, expand=True):
            put(term, weight * share)
            for related in expansions(term):
                put(related, weight * share * RELATED)
    return query


def query_terms(
    messages: Sequence[Message], *, tool_results: float = TOOL_RESULTS, earlier: float = EARLIER_USER
) -> dict[str, float]:
    """The conversation as a weighted query: term → weight (the largest weight it appears with).

    The latest user message counts ``LATEST_USER``; earlier user messages ``earlier`` (halved for
    each older one); the assistant's words since the latest user message ``ASSISTANT``; the
    first ``_RESULT_CHARS`` of each tool result since then ``tool_results`` (0, the default, leaves
    them out). Each message is read by ``text_query``.
    Only the last ``_LOOKBACK`` user messages are read.
    """
    query: dict[str, float] = {}

    def add(text: str, weight: float) -> None:
        if weight > 0:
            text_query(text, weight, query)

    latest = True
    seen_users = 0
    for message in reversed(messages):
        if message.role == "user":
            add(message.content, LATEST_USER if latest else earlier * 0.5 ** (seen_users - 1))
            latest = False
            seen_users += 1
            if seen_users >= _LOOKBACK:
                break
        elif latest and message.role == "assistant":
            add(message.content, ASSISTANT)
            for call in message.tool_calls:
                add(call.name, ASSISTANT)
        elif latest and message.role == "tool":
            add(message.content[:_RESULT_CHARS], tool_results)
    return query
