"""The tool index (pure): BM25F (Robertson's BM25 over weighted fields) over one tool list.

Written here rather than taken from a library: it is 40 lines and needs no numpy (``rank_bm25``
does), and the parts that matter for tools are ours anyway (``_text``). A tool's fields, by
weight: its name's words (the tool's 3, the server's 1), the title 2, the description's first
sentence 1.5 (what the tool does) and the rest 0.5 (how, caveats, other tools' names), the
parameters' names 1.5 and their descriptions and enum values 0.5, nested objects' too.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...messages import ToolSpec
from ._text import terms

__all__ = ["ToolIndex"]

_FIELD_WEIGHTS = {
    "name": 3.0,
    "server": 1.0,
    "title": 2.0,
    "summary": 1.5,
    "description": 0.5,
    "param": 1.5,
    "param_doc": 0.5,
}
_K1 = 1.2
_B = 0.75
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def _params(schema: object, names: list[str], docs: list[str], depth: int = 0) -> None:
    """The parameter names, descriptions and enum values of ``schema``'s properties, and of
    the objects nested in them (arrays of objects too), three levels deep."""
    if not isinstance(schema, Mapping) or depth > 3:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            names.append(str(name))
            if isinstance(sub, Mapping):
                if isinstance(sub.get("description"), str):
                    docs.append(sub["description"])
                enum = sub.get("enum")
                if isinstance(enum, list):
                    docs.extend(str(value) for value in enum if isinstance(value, str))
                _params(sub, names, docs, depth + 1)
    _params(schema.get("items"), names, docs, depth + 1)


def _fields(spec: ToolSpec) -> dict[str, str]:
    """The text of each of ``spec``'s fields, by field name."""
    server, _, tool = spec.name.rpartition("__")
    names: list[str] = []
    docs: list[str] = []
    _params(spec.parameters, names, docs)
    parts = _SENTENCE_END.split(" ".join(spec.description.split()), maxsplit=1)
    summary, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    return {
        "name": tool or spec.name,
        "server": " ".join(part for part in (server, spec.server) if part),
        "title": spec.title or "",
        "summary": summary,
        "description": rest,
        "param": " ".join(names),
        "param_doc": " ".join(docs),
    }


@dataclass(frozen=True)
class ToolIndex:
    """A BM25F index over one tool list (pure, built once per list).

    Attributes:
        names: the tools' exposed names, in list order.
        weights: per tool, each term's field-weighted frequency.
        lengths: per tool, its field-weighted length.
        idf: each term's inverse document frequency.
    """

    names: tuple[str, ...]
    weights: tuple[Mapping[str, float], ...]
    lengths: tuple[float, ...]
    idf: Mapping[str, float]
    average: float = 1.0

    @classmethod
    def build(cls, tools: Sequence[ToolSpec]) -> ToolIndex:
        weights: list[dict[str, float]] = []
        for spec in tools:
            tf: dict[str, float] = {}
            for name, text in _fields(spec).items():
                for term in terms(text):
                    tf[term] = tf.get(term, 0.0) + _FIELD_WEIGHTS[name]
            weights.append(tf)
        df = Counter(term for tf in weights for term in tf)
        n = len(tools)
        idf = {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}
        lengths = tuple(sum(tf.values()) for tf in weights)
        average = sum(lengths) / n if n else 1.0
        return cls(tuple(spec.name for spec in tools), tuple(weights), lengths, idf, average or 1.0)

    def scores(self, query: Mapping[str, float]) -> list[float]:
        """Each tool's BM25F score for ``query`` (term → weight), in list order."""
        out = []
        for tf, length in zip(self.weights, self.lengths, strict=True):
            norm = _K1 * (1 - _B + _B * length / self.average)
            score = 0.0
            for term, weight in query.items():
                f = tf.get(term)
                if f:
                    score += weight * self.idf[term] * f * (_K1 + 1) / (f + norm)
            out.append(score)
        return out

    def rank(self, query: Mapping[str, float]) -> list[str]:
        """The tools' names, best first; ties (and tools that match nothing) keep list order."""
        scores = self.scores(query)
        order = sorted(range(len(self.names)), key=lambda i: (-scores[i], i))
        return [self.names[i] for i in order]

    def matches(self, query: Mapping[str, float]) -> list[str]:
        """The tools that match ``query`` at all, best first."""
        scores = self.scores(query)
        order = sorted((i for i in range(len(self.names)) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return [self.names[i] for i in order]
