"""When a crashed tool server is started again: exponential backoff inside a restart budget."""

from __future__ import annotations

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
