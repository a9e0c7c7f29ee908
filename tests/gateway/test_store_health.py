"""``StoreHealth``: what health says of the state store, and when a failing one is given up on."""

from __future__ import annotations

import pytest

from mcp_agent.exceptions import LeaseLost, SessionTooLarge, StateError
from mcp_agent.gateway.store_health import StoreHealth, is_outage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failure_is_news_once_and_a_good_beat_says_how_long_it_lasted() -> None:
    clock = Clock()
    store = StoreHealth(30, clock=clock)
    assert store.ok and store.to_dict() == {"ok": True, "error": None, "failing_seconds": None}
    assert store.failed(
        StateError("state.url 'sqlite:////x/state.db': OperationalError: database or disk is full")
    )
    clock.now += 12.5
    assert not store.failed(
        StateError("state.url 'sqlite:////x/state.db': disk I/O error")
    )  # still the same outage
    assert store.to_dict() == {
        "ok": False,
        "error": "state.url 'sqlite:////x/state.db': disk I/O error",
        "failing_seconds": 12.5,
    }
    assert store.worked() == 12.5 and store.ok and store.worked() is None


@pytest.mark.parametrize(
    ("max_outage", "after", "over"), [(30, 29.9, False), (30, 30, True), (0, 10_000, False)]
)
def test_the_outage_is_over_at_max_outage_and_never_with_0(
    max_outage: float, after: float, over: bool
) -> None:
    clock = Clock()
    store = StoreHealth(max_outage, clock=clock)
    assert not store.outage_over()
    store.failed(StateError("gone"))
    clock.now += after
    assert store.outage_over() is over


def test_secrets_in_the_error_are_masked() -> None:
    store = StoreHealth()
    store.failed(StateError("state.url redis://:hunter2secret@127.0.0.1:6379/0: Redis failed"))
    assert "hunter2secret" not in str(store.to_dict())


def test_a_runs_own_trouble_with_the_store_is_no_outage() -> None:
    assert is_outage(StateError("disk full"))
    assert not is_outage(LeaseLost("s1")) and not is_outage(SessionTooLarge("s1", 10, 5))
