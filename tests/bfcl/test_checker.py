"""BFCL's checker behind its stand-in model table (``bench/bfcl/checker.py``), and the Java and
JavaScript spellings the oracle writes (``bench/bfcl/literals.py``) read back by BFCL's converters."""

from __future__ import annotations

import sys

import pytest

from bench.bfcl.checker import MODEL, judge
from bench.bfcl.data import entry
from bench.bfcl.literals import literal
from bench.bfcl.oracle import planned_calls


def test_the_stand_in_takes_the_place_of_the_model_table() -> None:
    table = sys.modules["bfcl_eval.constants.model_config"]
    assert "bench/bfcl/checker.py" in (table.__doc__ or "")
    assert table.MODEL_CONFIG_MAPPING[MODEL].underscore_to_dot is False
    assert "openai" not in sys.modules and "anthropic" not in sys.modules  # no SDK was imported


def test_ground_truth_passes_and_a_changed_call_fails() -> None:
    item = entry("simple_python_0")
    [(name, arguments)] = planned_calls(item)
    assert name == "calculate_triangle_area" and arguments == {"base": 10, "height": 5, "unit": "units"}
    assert judge(item, [(name, arguments)]).passed
    wrong = judge(item, [(name, {**arguments, "base": 11})])
    assert not wrong.passed and wrong.error_type == "value_error:others"
    assert judge(item, []).error_type == "simple_function_checker:wrong_count"


def test_dotted_names_are_judged_under_bfcl_names() -> None:
    item = entry("simple_python_3")
    calls = planned_calls(item)
    assert "." in calls[0][0] and judge(item, calls).passed
    assert not judge(item, [(calls[0][0].replace(".", "_"), calls[0][1])]).passed


def test_irrelevance_passes_without_calls_and_relevance_with_one() -> None:
    irrelevant = entry("irrelevance_0")
    assert judge(irrelevant, []).passed
    assert judge(irrelevant, [("x", {})]).error_type == "irrelevance_error:decoder_success"
    relevant = entry("live_relevance_0-0-0")
    [(name, arguments)] = planned_calls(relevant)
    assert name == "search_engine.query" and set(arguments) == {"prompt"}
    assert judge(relevant, [(name, arguments)]).passed
    assert judge(relevant, []).error_type == "relevance_error:decoder_failed"


@pytest.mark.parametrize(
    ("value", "language", "kind", "nested", "expected"),
    [
        (True, "java", "boolean", None, "true"),
        (5, "java", "long", None, "5L"),
        (2.5, "java", "float", None, "2.5f"),
        (["a", "b"], "java", "ArrayList", "String", 'new ArrayList<>(Arrays.asList("a", "b"))'),
        ([1, 2], "java", "Array", "integer", "new int[]{1, 2}"),
        ({"k": 1}, "java", "HashMap", None, 'new HashMap<String, Object>() {{ put("k", 1); }}'),
        ("myVar", "java", "any", None, "myVar"),
        ([1, 2], "javascript", "array", None, "[1, 2]"),
        ("myList", "javascript", "array", None, "myList"),
        ({"a": "x", "b": 2}, "javascript", "dict", None, "{'a': 'x', 'b': 2}"),
        (7, "javascript", "Bigint", None, "7n"),
        (False, "javascript", "Boolean", None, "false"),
    ],
)
def test_literals_read_back_by_bfcl(
    value: object, language: str, kind: str, nested: str | None, expected: str
) -> None:
    assert literal(value, language, kind, nested) == expected


def test_java_and_javascript_ground_truth_passes_as_source_text() -> None:
    for entry_id in ("simple_java_1", "simple_java_2", "simple_javascript_2", "simple_javascript_3"):
        item = entry(entry_id)
        calls = planned_calls(item)
        assert all(isinstance(v, str) for _, arguments in calls for v in arguments.values())
        assert judge(item, calls).passed, entry_id
