"""How the state store is doing, as the gateway sees it: ``GET /api/v1/health`` shows it, and a
store that stays broken longer than ``state.maxOutageSeconds`` ends the gateway.

The heartbeat (``lifespan.keep_state``) calls ``worked`` or ``failed`` after each beat, every
third of ``state.leaseSeconds``; a request that meets a ``StateError`` calls ``failed`` at once.
Only a beat says the store works again: a request that happened to need nothing broken proves
little. Why a bound at all: a gateway whose store stays broken can only answer errors; exiting
(non-zero, ``GatewayService.give_up``) lets its supervisor restart it, which reconnects (a Redis
that failed over to another address) or stops at start-up with an error saying what is wrong with
the store (a file emptied or deleted), where a process left running would look alive and serve
nothing. Shorter outages are ridden out in place, running queries and all.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .._redact import redact_text
from ..exceptions import LeaseLost, SessionTooLarge
from ..messages import JSONObject

__all__ = ["StoreHealth", "is_outage"]


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the store failed, rather than a run's own trouble with it (its lock
    lapsed, its conversation too big to keep)."""
    return not isinstance(exc, (LeaseLost, SessionTooLarge))


class StoreHealth:
    """The store's health: ``ok`` until a failure, ``ok`` again after a good beat.

    Args:
        max_outage: seconds of failing after which ``outage_over`` says to give up (0: never).
        clock: monotonic seconds (tests give their own).
    """

    def __init__(self, max_outage: float = 0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_outage = max_outage
        self.error: str | None = None
        self.failing_since: float | None = None
        self._clock = clock

    @property
    def ok(self) -> bool:
        return self.failing_since is None

    def failed(self, exc: BaseException) -> bool:
        """Note a failure of the store; True when it is news (the store worked until now)."""
        news = self.failing_since is None
        if news:
            self.failing_since = self._clock()
        self.error = str(exc) or type(exc).__name__
        return news

    def worked(self) -> float | None:
        """Note that the store works; how long it had failed, when it had."""
        if self.failing_since is None:
            return None
        down = self._clock() - self.failing_since
        self.failing_since, self.error = None, None
        return down

    def failing_for(self) -> float:
        """Seconds since the store began to fail (0 while it works)."""
        return 0.0 if self.failing_since is None else self._clock() - self.failing_since

    def outage_over(self) -> bool:
        """Whether the store has failed for longer than ``max_outage`` (never when that is 0)."""
        return self.max_outage > 0 and not self.ok and self.failing_for() >= self.max_outage

    def to_dict(self) -> JSONObject:
        """What health shows: ``{"ok", "error", "failing_seconds"}`` (secrets in the error masked)."""
        return {
            "ok": self.ok,
            "error": redact_text(self.error) if self.error else None,
            "failing_seconds": round(self.failing_for(), 1) if not self.ok else None,
        }
