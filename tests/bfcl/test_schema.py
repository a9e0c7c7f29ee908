"""BFCL's types as JSON Schema (``bench/bfcl/schema.py``): its handlers' conversion, replicated."""

from __future__ import annotations

import pytest

from bench.bfcl.data import CATEGORIES, category_of, entry, load_category
from bench.bfcl.schema import cast_types, input_schema, language_hints, language_of, mcp_tool
from mcp_agent.tools.schema import compile_tool_schema

PYTHON = {
    "name": "math.factorial",
    "description": "Factorial.",
    "parameters": {
        "type": "dict",
        "properties": {
            "n": {"type": "integer", "description": "The number."},
            "scale": {"type": "float", "description": "A scale."},
            "pair": {"type": "tuple", "items": {"type": "float"}, "description": "Two."},
            "rows": {
                "type": "array",
                "items": {"type": "dict", "properties": {"k": {"type": "float", "description": "K."}}},
                "description": "Rows.",
            },
            "grid": {
                "type": "array",
                "items": {"type": "array", "items": {"type": "long"}},
                "description": "G",
            },
            "odd": {"type": "Bogus", "description": "Unknown type."},
            "bare": {"description": "No type."},
        },
        "required": ["n"],
    },
}


def test_python_types_become_json_schema_as_bfcl_sends_them() -> None:
    tool = mcp_tool(PYTHON, "simple_python")
    assert tool["name"] == "math.factorial"  # the BFCL name: the gateway maps it for the model
    assert tool["description"] == "Factorial. Note that the provided function is in Python 3 syntax."
    schema = tool["inputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["n"]
    props = schema["properties"]
    assert props["n"] == {"type": "integer", "description": "The number."}
    assert props["scale"] == {
        "type": "number",
        "format": "float",
        "description": "A scale. This is a float type value.",
    }
    assert props["pair"]["type"] == "array" and props["pair"]["items"] == {"type": "number"}
    assert props["rows"]["items"]["type"] == "object"
    assert props["rows"]["items"]["properties"]["k"]["type"] == "number"
    assert props["grid"]["items"] == {"type": "array", "items": {"type": "integer"}}
    assert props["odd"]["type"] == "string" and props["bare"]["type"] == "string"
    assert PYTHON["parameters"]["properties"]["scale"]["type"] == "float"  # the doc is not changed


def test_java_and_javascript_parameters_become_strings_in_that_syntax() -> None:
    doc = {
        "name": "Util.join",
        "description": "Joins.",
        "parameters": {
            "type": "dict",
            "properties": {
                "parts": {"type": "ArrayList", "items": {"type": "String"}, "description": "Parts."},
                "limit": {"type": "integer", "description": "Limit."},
                "x": {"type": "any", "description": "X."},
            },
            "required": ["parts"],
        },
    }
    java = input_schema(doc, "simple_java")["properties"]
    assert java["parts"] == {
        "type": "string",
        "description": "Parts. This is Java ArrayList type parameter in string representation."
        " The list elements are of type String; they are not in string representation.",
    }
    assert java["limit"]["description"].endswith(
        "This is Java integer type parameter in string representation."
    )
    assert java["x"]["description"].endswith("any type of Java object in string representation.")
    doc["parameters"]["properties"]["opts"] = {
        "type": "dict",
        "properties": {"a": {"type": "String"}},
        "description": "O.",
    }
    js = input_schema(doc, "simple_javascript")["properties"]
    assert js["opts"]["type"] == "string" and "properties" not in js["opts"]
    assert '{"a": {"type": "String"}}' in js["opts"]["description"]
    assert language_hints(doc, "simple_javascript")["description"].endswith("in JavaScript syntax.")


def test_cast_types_fills_a_missing_type_and_descends_into_objects() -> None:
    props = cast_types({"o": {"type": "dict", "properties": {"i": {"type": "short"}}}})
    assert props == {"o": {"type": "object", "properties": {"i": {"type": "integer"}}}}


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_function_of_every_category_compiles_without_a_fallback(category: str) -> None:
    """The gateway's compiler takes every schema the server offers (none dropped or emptied)."""
    for item in load_category(category):
        for function in item.functions:
            compiled = compile_tool_schema(mcp_tool(function, category)["inputSchema"])
            assert not any("could not be compiled" in change for change in compiled.changes), item.id


def test_ids_name_their_category() -> None:
    assert category_of("live_simple_12-3-4") == "live_simple"
    assert category_of("simple_python_7") == "simple_python"
    assert language_of(category_of("simple_java_0")) == "java"
    assert entry("parallel_multiple_3").category == "parallel_multiple"
    with pytest.raises(ValueError, match="not an id of a single-turn BFCL category"):
        category_of("multi_turn_base_0")
    sizes = {name: len(load_category(name)) for name in CATEGORIES}
    assert sizes["simple_python"] == 400 and sizes["live_multiple"] == 1053 and sizes["live_relevance"] == 16
