"""When a crashed tool server is started again: exponential backoff inside a restart budget."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    """When a crashed server is started again.

    Attributes:
        first_delay: seconds before the first restart; each further one doubles it.
        max_delay: the longest wait between restarts.
        max_restarts: restarts allowed within ``window_seconds``; one more crash and the server
            stays failed.
        window_seconds: the window of the restart budget.
    """

    first_delay: float = 0.5
    max_delay: float = 30.0
    max_restarts: int = 5
    window_seconds: float = 300.0

    def delay(self, restart: int) -> float:
        """The wait before the ``restart``-th restart of the window (1-based)."""
        return float(min(self.max_delay, self.first_delay * 2.0 ** max(0, restart - 1)))


class RestartBudget:
    """The restarts of one server within its policy's window."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._recent: collections.deque[float] = collections.deque()

    @property
    def used(self) -> int:
        """The restarts within the window, as of the last ``spend``."""
        return len(self._recent)

    def spend(self) -> float | None:
        """Count one more restart: the wait before it, or None when the budget is spent."""
        now = time.monotonic()
        while self._recent and now - self._recent[0] > self.policy.window_seconds:
            self._recent.popleft()
        if len(self._recent) >= self.policy.max_restarts:
            return None
        self._recent.append(now)
        return self.policy.delay(len(self._recent))
