"""The pure guards: budgets, failure classification, the ledger, fingerprints, cutting."""

from __future__ import annotations

import copy

import pytest

from mcp_agent.loop.guards import (
    FAILURE_HINT,
    CallBook,
    FailureLedger,
    cut_parts,
    cut_text,
    fingerprint,
    is_failure,
    is_loop,
    rounds_exhausted,
    tokens_exhausted,
    tool_calls_fit,
)


@pytest.mark.parametrize(
    ("done", "limit", "expected"),
    [(0, 0, False), (100, 0, False), (0, 1, False), (1, 1, True), (2, 3, False), (3, 3, True), (4, 3, True)],
)
def test_rounds_exhausted(done: int, limit: int, expected: bool) -> None:
    assert rounds_exhausted(done, limit) is expected


@pytest.mark.parametrize(
    ("used", "limit", "expected"),
    [(10**9, 0, False), (99, 100, False), (100, 100, True), (110, 100, True), (0, 1, False)],
)
def test_tokens_exhausted(used: int, limit: int, expected: bool) -> None:
    assert tokens_exhausted(used, limit) is expected


@pytest.mark.parametrize(
    ("used", "wanted", "limit", "expected"),
    [
        (0, 3, 2, False),  # three calls against two remaining run none
        (0, 2, 2, True),
        (1, 1, 2, True),
        (2, 1, 2, False),
        (2, 0, 2, True),  # nothing to run always fits
        (500, 500, 0, True),  # 0 is off
    ],
)
def test_tool_calls_fit(used: int, wanted: int, limit: int, expected: bool) -> None:
    assert tool_calls_fit(used, wanted, limit) is expected


@pytest.mark.parametrize(("count", "threshold", "expected"), [(2, 3, False), (3, 3, True), (9, 0, False)])
def test_is_loop(count: int, threshold: int, expected: bool) -> None:
    assert is_loop(count, threshold) is expected


@pytest.mark.parametrize(
    ("text", "is_error", "expected"),
    [
        ("Port 8000 is free", False, False),
        ("Port 8000: idle", False, False),  # short is fine
        ("", False, True),
        ("   \n\t", False, True),
        ("error: no such file", False, True),
        ("ERROR: boom", False, True),
        ("  Error: leading whitespace", False, True),
        ('{"error": "bad"}', False, True),
        ('{"ERROR": "bad"}', False, True),
        ("No results found", False, True),
        ("no results", False, True),
        ("There were no errors", False, False),  # prose mentioning errors is not a failure
        ("errors: 0", False, False),
        ('{"result": "error: x"}', False, False),
        ("all good", True, True),  # isError wins
    ],
)
def test_is_failure(text: str, is_error: bool, expected: bool) -> None:
    assert is_failure(text, is_error) is expected


# the ledger as a table of sequences: (outcome per call, expected (hint, disabled) per call)
F, S = "fail", "ok"


@pytest.mark.parametrize(
    ("hint_after", "disable_after", "outcomes", "expected"),
    [
        (2, 3, [F, F, F], [(False, False), (True, False), (True, True)]),
        (2, 3, [F, S, F, S, F], [(False, False)] * 5),  # success resets
        (2, 3, [F, F, S, F], [(False, False), (True, False), (False, False), (False, False)]),
        (0, 0, [F, F, F, F], [(False, False)] * 4),  # 0 is off
        (1, 0, [F, F], [(True, False), (True, False)]),
        (0, 2, [F, F, F], [(False, False), (False, True), (False, False)]),  # withdrawn once
    ],
)
def test_ledger_sequences(
    hint_after: int, disable_after: int, outcomes: list[str], expected: list[tuple[bool, bool]]
) -> None:
    ledger = FailureLedger(hint_after, disable_after)
    got = []
    for outcome in outcomes:
        mark = ledger.record("t", "error: boom" if outcome == F else "fine")
        got.append((mark.hint, mark.disabled))
    assert got == expected


def test_ledger_is_per_tool_and_reports_the_last_error() -> None:
    ledger = FailureLedger(2, 2)
    ledger.record("a", "error: first")
    ledger.record("b", "fine")
    assert ledger.disabled_reason("a") is None
    assert ledger.record("a", "error: second\nmore detail").disabled
    assert ledger.disabled == frozenset({"a"})
    assert ledger.disabled_reason("a") == "disabled for this run after 2 failures: error: second"
    assert ledger.disabled_reason("b") is None


def test_failure_hint_is_exact() -> None:
    assert FAILURE_HINT == (
        "[SYSTEM: This tool has failed multiple times. Do NOT retry it. "
        "Answer using your own knowledge instead.]"
    )


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        (("t", {"a": 1, "b": 2}), ("t", {"b": 2, "a": 1}), True),  # key order does not matter
        (("t", {"a": 1}), ("u", {"a": 1}), False),
        (("t", {"a": 1}), ("t", {"a": "1"}), False),
        (("t", {}), ("t", {}), True),
        (("t", {"x": [1, {"b": 1, "a": 2}]}), ("t", {"x": [1, {"a": 2, "b": 1}]}), True),
        (("t", {"s": "é"}), ("t", {"s": "e"}), False),
    ],
)
def test_fingerprint(left: tuple[str, dict], right: tuple[str, dict], same: bool) -> None:
    assert (fingerprint(*left) == fingerprint(*right)) is same
    assert len(fingerprint(*left)) == 64


def test_call_book_counts_anywhere_in_the_run_not_only_consecutive() -> None:
    book = CallBook()
    seq = [("A", 1), ("B", 2), ("A", 3), ("B", 4), ("A", 5)]
    sightings = [book.see(fp, rnd) for fp, rnd in seq]
    assert [s.count for s in sightings] == [1, 1, 2, 2, 3]
    assert [s.previous_round for s in sightings] == [None, None, 1, 2, 3]
    assert is_loop(sightings[-1].count, 3)


def test_call_book_counts_a_turn_once() -> None:
    book = CallBook()
    assert book.see("A", 1).count == 1
    assert book.see("A", 1).count == 1  # the same round: an in-turn duplicate
    second = book.see("A", 2)
    assert (second.count, second.previous_round) == (2, 1)
    assert book.see("A", 2) == second


@pytest.mark.parametrize(
    ("text", "limit", "head", "truncated"),
    [
        ("hello", 0, "hello", False),
        ("hello", 5, "hello", False),
        ("hello world", 5, "hello", True),
        ("😀😀😀😀", 2, "😀😀", True),  # code points, never split
        ("ééé", 1, "é", True),
    ],
)
def test_cut_text(text: str, limit: int, head: str, truncated: bool) -> None:
    out, was_cut = cut_text(text, limit)
    assert was_cut is truncated
    assert out.startswith(head)
    if truncated:
        assert out[len(head) :].startswith("\n[... truncated: ")
        assert f"{len(text) - limit} of {len(text)} characters cut" in out
        out.encode("utf-8")  # still valid text
    else:
        assert out == text


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


IMAGE = {"type": "image", "data": "AAAA" * 1000, "mimeType": "image/png"}
LINK = {"type": "resource_link", "uri": "file:///x", "name": "x"}


def _embedded(text: str) -> dict[str, object]:
    return {"type": "resource", "resource": {"uri": "demo://a", "mimeType": "text/plain", "text": text}}


@pytest.mark.parametrize(
    ("parts", "limit", "expected"),
    [
        ([_text("hello")], 0, [_text("hello")]),
        ([_text("hello"), IMAGE], 5, [_text("hello"), IMAGE]),
        # the text shares the budget in order; media and links pass whole, wherever they stand
        (
            [_text("aaaa"), IMAGE, _text("bbbb"), LINK, _text("cccc")],
            6,
            [_text("aaaa"), IMAGE, _text("bb"), LINK, _text("[... truncated: 6 of 12 characters cut]")],
        ),
        # embedded text resources count too, and keep their other fields
        (
            [_embedded("x" * 10), _text("y")],
            4,
            [_embedded("xxxx"), _text("[... truncated: 7 of 11 characters cut]")],
        ),
        (
            [_text("😀😀😀")],
            2,
            [_text("😀😀"), _text("[... truncated: 1 of 3 characters cut]")],
        ),  # code points
        ([IMAGE, {"type": "resource", "resource": {"uri": "b", "blob": "AAAA"}}], 1, None),  # nothing to cut
        (
            [{"type": "text"}, {"type": "odd"}, _text("ab")],
            1,
            [{"type": "text"}, {"type": "odd"}, _text("a"), _text("[... truncated: 1 of 2 characters cut]")],
        ),
    ],
)
def test_cut_parts(
    parts: list[dict[str, object]], limit: int, expected: list[dict[str, object]] | None
) -> None:
    before = copy.deepcopy(parts)
    out, truncated = cut_parts(parts, limit)
    assert list(out) == (expected if expected is not None else parts)
    assert truncated is (expected is not None and expected != parts)
    assert parts == before  # the input is not changed
