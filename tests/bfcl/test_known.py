"""The known exceptions (``bench/bfcl/known.json``): each names a real entry, and each ``BFCL:``
one really is BFCL's (its ground truth contradicts its schema or fails its own checker)."""

from __future__ import annotations

import pytest

from bench.bfcl.data import entry
from bench.bfcl.known import contradictions, known_exceptions

KNOWN = known_exceptions()


@pytest.mark.parametrize("entry_id", sorted(KNOWN))
def test_each_known_exception_is_explained(entry_id: str) -> None:
    reason = KNOWN[entry_id]
    assert reason.startswith(("BFCL: ", "gateway design")), reason
    found = contradictions(entry(entry_id))
    if reason.startswith("BFCL: "):
        assert found, f"{entry_id}: its ground truth is fine by BFCL's own measure; not BFCL's defect"
    else:
        assert not found


def test_a_sound_ground_truth_has_no_contradictions() -> None:
    assert contradictions(entry("simple_python_0")) == []
    assert contradictions(entry("live_simple_71-35-0")) != []  # an enum of elements on the array:
    # read as written by JSON Schema it fails; the gateway reads it as meant and delivers it
