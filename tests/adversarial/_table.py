"""The outcome table of the adversarial suite: input class -> outcome -> how many were tried.

Every fuzz test records each input it tried (``record``); the suite's conftest prints the table
at the end of the run, so a reader sees what was thrown at the gateway and how it answered.
"""

from __future__ import annotations

import collections

TABLE: collections.Counter[tuple[str, str]] = collections.Counter()


def record(kind: str, outcome: str) -> None:
    TABLE[(kind, outcome)] += 1


def render() -> list[str]:
    """The table as lines: input class, count tried, outcomes with their counts."""
    if not TABLE:
        return []
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for (kind, outcome), count in TABLE.items():
        by_kind[kind][outcome] += count
    width = max(len(kind) for kind in by_kind)
    lines = [f"{'input class'.ljust(width)}  {'tried':>6}  outcomes"]
    for kind in sorted(by_kind):
        outcomes = by_kind[kind]
        shown = ", ".join(f"{outcome} {count}" for outcome, count in outcomes.most_common())
        lines.append(f"{kind.ljust(width)}  {sum(outcomes.values()):>6}  {shown}")
    return lines
