"""BFCL v4's single-turn data as shipped in ``bfcl-eval`` (offline): entries and possible answers.

Entries (``BFCL_v4_<category>.json``, JSON lines): ``id``, ``question`` (a list of turns, each a
list of chat messages) and ``function`` (BFCL function docs: ``name``, ``description``,
``parameters`` in BFCL's own type names). Possible answers (``possible_answer/...``): ``id`` and
``ground_truth``, a list of ``{function name: {parameter: [acceptable values...]}}`` where ``""``
among the values means the parameter may be left out. The irrelevance and relevance categories
have no possible answers: a model should call nothing (irrelevance) or anything (relevance).

The version is pinned by the Makefile (``bfcl-eval==2026.3.23``).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass, field
from typing import Any

VERSION = "BFCL_v4"
CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
)
"""The single-turn categories, in BFCL's order."""
NO_CALL = ("irrelevance", "live_irrelevance")
"""Categories where the right answer calls nothing."""
ANY_CALL = ("live_relevance",)
"""Categories where the right answer calls something, whatever it is."""


@dataclass(frozen=True)
class Entry:
    """One single-turn entry with its possible answer (empty for irrelevance and relevance)."""

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, dict[str, list[Any]]]] = field(default_factory=list)


def category_of(entry_id: str) -> str:
    """``live_simple_12-3-4`` -> ``live_simple``; ``simple_python_7`` -> ``simple_python``."""
    head = entry_id.split("-", 1)[0]
    category, _, number = head.rpartition("_")
    if category not in CATEGORIES or not number.isdigit():
        raise ValueError(f"not an id of a single-turn BFCL category: {entry_id!r}")
    return category


def _lines(*parts: str) -> list[dict[str, Any]]:
    root = importlib.resources.files("bfcl_eval") / "data"
    for part in parts:
        root = root / part
    return [json.loads(line) for line in root.read_text(encoding="utf-8").splitlines() if line.strip()]


@functools.cache
def load_category(category: str) -> tuple[Entry, ...]:
    """Every entry of ``category``, in the file's order, with its possible answer."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; choose from {', '.join(CATEGORIES)}")
    name = f"{VERSION}_{category}.json"
    answers: dict[str, Any] = {}
    if category not in NO_CALL + ANY_CALL:
        answers = {row["id"]: row["ground_truth"] for row in _lines("possible_answer", name)}
    return tuple(
        Entry(
            id=row["id"],
            category=category,
            question=row["question"],
            functions=row["function"],
            ground_truth=answers.get(row["id"], []),
        )
        for row in _lines(name)
    )


@functools.cache
def _index(category: str) -> dict[str, Entry]:
    return {entry.id: entry for entry in load_category(category)}


def entry(entry_id: str) -> Entry:
    """The entry of that id (``KeyError`` when its category has none such)."""
    return _index(category_of(entry_id))[entry_id]
