"""``tests/_missing.py``: a missing tool skips a test, except under CI, where it fails."""

from __future__ import annotations

import pytest

from tests._missing import missing


def test_it_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        missing("thing is not installed")


def test_it_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"thing is not installed \(CI=true"):
        missing("thing is not installed", module_level=True)
