"""Globs that match nothing: the pure check behind the start-up warnings and ``doctor``'s failures.

``approvals.require``, ``allowTools`` and ``denyTools`` (and ``query --approve``) take fnmatch globs,
matched case-sensitively. A glob with a typo matches nothing and would be accepted silently (a
write tool then runs unapproved), so each one that matches none of the names it is meant for is
reported with the nearest names: first those the glob matches when case is ignored, then those
that contain the glob's literal text, then the closest by ``difflib``.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

_WILDCARDS = re.compile(r"[*?]|\[[^\]]*\]")


@dataclass(frozen=True)
class UnmatchedGlob:
    """A glob that matches none of the names, and the names nearest to it."""

    pattern: str
    nearest: tuple[str, ...] = ()

    def describe(self, where: str) -> str:
        """One line: ``<where>: '<glob>' matches no tool; nearest: a, b``."""
        near = f"nearest: {', '.join(self.nearest)}" if self.nearest else "no tool name is close"
        return f"{where}: {self.pattern!r} matches no tool; {near}"


def unmatched_globs(patterns: Iterable[str], names: Iterable[str], *, n: int = 3) -> list[UnmatchedGlob]:
    """Each of ``patterns`` (in order, once) that matches none of ``names``, with up to ``n``
    nearest names."""
    known = list(dict.fromkeys(names))
    return [
        UnmatchedGlob(pattern, nearest_names(pattern, known, n=n))
        for pattern in dict.fromkeys(patterns)
        if not any(fnmatch.fnmatchcase(name, pattern) for name in known)
    ]


def nearest_names(pattern: str, names: Iterable[str], *, n: int = 3) -> tuple[str, ...]:
    """Up to ``n`` of ``names`` nearest to the glob ``pattern``, nearest first."""
    by_lower: dict[str, str] = {}
    for name in names:
        by_lower.setdefault(name.lower(), name)
    lowered = pattern.lower()
    literal = _WILDCARDS.sub("", lowered).strip("_-.")
    found = [name for low, name in by_lower.items() if fnmatch.fnmatchcase(low, lowered)]
    if len(literal) >= 3:
        found += sorted((name for low, name in by_lower.items() if literal in low), key=len)
    close = difflib.get_close_matches(_WILDCARDS.sub("", lowered), list(by_lower), n=n, cutoff=0.5)
    found += [by_lower[low] for low in close]
    return tuple(list(dict.fromkeys(found))[:n])
