"""Tool schemas: normalisation, the four dialects, and the argument pipeline.

Table tests cover each hazard of mcp-sdk-2.md §2 and llm-wire.md §8; the corpus in
``schemas/`` holds real servers' shapes with sample calls; hypothesis checks the invariants.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_agent.tools.schema import (
    ArgumentCheck,
    ArgumentChecker,
    CompiledSchema,
    checker_for,
    compile_tool_schema,
    format_errors,
)
from mcp_agent.tools.schema import compile as schema_module

CORPUS = sorted((Path(__file__).parent / "schemas").glob("*.json"))
EMPTY = {"type": "object", "properties": {}}
GEMINI_KEYS = {
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "minimum",
    "maximum",
}
GEMINI_TYPES = {"string", "number", "integer", "boolean", "object", "array"}


def obj(properties: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties or {}, **extra}


def walk_nodes(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every subschema of a compiled schema, with its path."""
    yield path, node
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("properties", "patternProperties", "dependentSchemas") and isinstance(value, dict):
            for name, sub in value.items():
                yield from walk_nodes(sub, f"{path}.{key}.{name}")
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from walk_nodes(sub, f"{path}.{key}.{i}")
        elif key in (
            "items",
            "additionalProperties",
            "not",
            "if",
            "then",
            "else",
            "contains",
            "propertyNames",
            "unevaluatedProperties",
            "unevaluatedItems",
            "contentSchema",
        ):
            yield from walk_nodes(value, f"{path}.{key}")


def assert_invariants(compiled: CompiledSchema) -> None:
    params = compiled.parameters
    jsonschema.Draft202012Validator.check_schema(params)
    assert params["type"] == "object"
    assert isinstance(params["properties"], dict)
    for _, node in walk_nodes(params):
        if isinstance(node, dict):
            assert not node.keys() & {"$ref", "$defs", "definitions", "$schema", "$id", "nullable"}
    assert set(compiled.variants) <= {"openai", "openai_strict", "anthropic", "gemini"}
    assert {"openai", "anthropic", "gemini"} <= set(compiled.variants)
    for dialect, variant in compiled.variants.items():
        assert variant["type"] == "object", dialect
        jsonschema.Draft202012Validator.check_schema(variant) if dialect != "gemini" else None
    for dialect in ("openai", "anthropic", "gemini"):
        assert not compiled.variants[dialect].keys() & {"anyOf", "oneOf", "allOf"}, dialect
    assert not compiled.variants["openai"].keys() & {"enum", "not"}
    assert_gemini_subset(compiled.variants["gemini"])
    if "openai_strict" in compiled.variants:
        assert_strict_shape(compiled.variants["openai_strict"])


def assert_gemini_subset(schema: dict[str, Any]) -> None:
    for path, node in walk_nodes(schema):
        assert isinstance(node, dict), path
        assert node.keys() <= GEMINI_KEYS, (path, node.keys() - GEMINI_KEYS)
        assert not ("type" in node and "anyOf" in node), path
        if "anyOf" not in node:
            assert node.get("type") in GEMINI_TYPES, (path, node)
        for value in node.get("enum", []):
            assert isinstance(value, str) and value, (path, node["enum"])
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), path
        for name in node.get("required", []):
            assert name in node.get("properties", {}), path


def assert_strict_shape(schema: dict[str, Any]) -> None:
    for path, node in walk_nodes(schema):
        if path.endswith(".additionalProperties"):
            assert node is False, path
            continue
        assert isinstance(node, dict) and node, path
        assert not node.keys() & {"oneOf", "allOf", "not", "const", "if", "patternProperties", "minLength"}, (
            path
        )
        if node.get("type") == "object" or "properties" in node:
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
        assert node.get("default", 0) is not None, path


# --- the corpus ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus(path: Path) -> None:
    case = json.loads(path.read_text())
    compiled = compile_tool_schema(case["inputSchema"])
    assert_invariants(compiled)
    assert ("openai_strict" in compiled.variants) == case["strict"], compiled.changes
    assert compile_tool_schema(compiled.parameters).parameters == compiled.parameters  # idempotent
    checker = ArgumentChecker(compiled.parameters)
    for call in case["calls"]:
        check = checker.check(call["arguments"])
        if "coerced" in call:
            assert check.ok, check.errors
            assert check.arguments == call["coerced"]
        else:
            assert not check.ok
            assert sorted(e["path"] for e in check.errors) == sorted(call["error_paths"])


def test_corpus_covers_the_hazards() -> None:
    text = "\n".join(p.read_text() for p in CORPUS)
    for hazard in (
        '"$schema"',
        '"format": "uri"',
        '"minItems"',
        '"enum"',
        '"title"',
        '"$defs"',
        "#/properties/",
        '"default": null',
        '"exclusiveMinimum"',
        '"additionalProperties": false',
        '"nullable"',
        '"const"',
        '"type": ["string", "null"]',
        '"inputSchema": {}',
    ):
        assert hazard in text, hazard


# --- normalisation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected", "change"),
    [
        (None, EMPTY, "no inputSchema"),
        ({}, EMPTY, "no inputSchema"),
        (True, EMPTY, "no inputSchema"),
        ("a string", EMPTY, "inputSchema was str"),
        ([{"type": "object"}], EMPTY, "inputSchema was list"),
        ({"type": "object"}, EMPTY, None),
        ({"properties": {"a": {"type": "string"}}}, obj({"a": {"type": "string"}}), "added type: object"),
        # TS servers put $schema on every tool; $id and $comment go too; description stays
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "$id": "urn:x",
                "$comment": "c",
                "type": "object",
                "description": "d",
                "properties": {},
            },
            {"type": "object", "description": "d", "properties": {}},
            "removed $schema",
        ),
        (
            {"type": "object", "properties": {"a": {"$schema": "x", "type": "string"}}},
            obj({"a": {"type": "string"}}),
            "removed $schema at properties.a",
        ),
        # non-object roots are wrapped
        (
            {"type": "string", "description": "q"},
            obj({"value": {"type": "string", "description": "q"}}, required=["value"]),
            "wrapped",
        ),
        (
            {"type": "array", "items": {"type": "integer"}},
            obj({"value": {"type": "array", "items": {"type": "integer"}}}, required=["value"]),
            "wrapped",
        ),
        (
            {"items": {"type": "integer"}},
            obj({"value": {"items": {"type": "integer"}}}, required=["value"]),
            "wrapped",
        ),
        ({"type": ["object", "null"], "properties": {}}, EMPTY, "narrowed to object"),
        (
            {"type": ["string", "null"]},
            obj({"value": {"type": ["string", "null"]}}, required=["value"]),
            "wrapped",
        ),
        # OpenAPI and old-draft spellings
        (
            {"type": "object", "properties": {"a": {"type": "integer", "nullable": True}}},
            obj({"a": {"type": ["integer", "null"]}}),
            "nullable",
        ),
        (
            {"type": "object", "properties": {"a": {"enum": ["x"], "type": "string", "nullable": True}}},
            obj({"a": {"enum": ["x", None], "type": ["string", "null"]}}),
            "nullable",
        ),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}], "nullable": True}}},
            obj({"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}),
            "nullable",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "nullable": False}}},
            obj({"a": {"type": "integer"}}),
            "removed nullable",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
            },
            obj({"a": {"type": "number", "exclusiveMinimum": 0}}),
            "draft-04",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "number", "maximum": 5, "exclusiveMaximum": False}},
            },
            obj({"a": {"type": "number", "maximum": 5}}),
            "draft-04",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "array", "items": [{"type": "string"}], "additionalItems": False}
                },
            },
            obj({"a": {"type": "array", "prefixItems": [{"type": "string"}], "items": False}}),
            "prefixItems",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "array", "additionalItems": False}}},
            obj({"a": {"type": "array"}}),
            "removed additionalItems",
        ),
        (
            {"type": "object", "properties": {}, "dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
            obj(dependentRequired={"a": ["b"]}, dependentSchemas={"c": {"required": ["d"]}}),
            "dependencies",
        ),
        (
            {
                "type": "object",
                "properties": {},
                "$defs": {"S": {"type": "string"}},
                "dependencies": {"a": {"properties": {"b": {"$ref": "#/$defs/S"}}, "$defs": {}}},
            },
            obj(dependentSchemas={"a": {"properties": {"b": {"type": "string"}}}}),
            "inlined $ref #/$defs/S",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "required": True}, "b": {"required": False}},
            },
            obj({"a": {"type": "string"}, "b": {}}, required=["a"]),
            "property-level required",
        ),
        # type names in odd spellings
        (
            {
                "type": "object",
                "properties": {"a": {"type": "String"}, "b": {"type": "int"}, "c": {"type": "dict"}},
            },
            obj({"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "object"}}),
            "read as",
        ),
        ({"type": "object", "properties": {"a": {"type": "any"}}}, obj({"a": {}}), "dropped unknown type"),
        (
            {"type": "object", "properties": {"a": {"type": ["string", "string"]}}},
            obj({"a": {"type": "string"}}),
            "read as",
        ),
        ({"type": "object", "properties": {"a": "string"}}, obj({"a": {"type": "string"}}), "shorthand"),
        # keyword values the meta-schema rejects are dropped
        (
            {"type": "object", "properties": {"a": {"type": "string", "minLength": -1, "maxLength": "5"}}},
            obj({"a": {"type": "string"}}),
            "dropped invalid minLength at properties.a",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}},
            obj({"a": {"type": "string"}}),
            "dropped invalid pattern",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "\\p{L}+"}}},
            obj({"a": {"type": "string"}}),
            "dropped invalid pattern",
        ),
        (
            {"type": "object", "properties": {"a": {"minimum": True, "multipleOf": 0, "description": 5}}},
            obj({"a": {}}),
            "dropped invalid",
        ),
        ({"type": "object", "properties": {}, "required": ["a", "a", 3]}, obj(required=["a"]), None),
        ({"type": "object", "properties": {}, "required": "a"}, EMPTY, "dropped invalid required"),
        ({"type": "object", "properties": {"a": {"enum": []}}}, obj({"a": {}}), "dropped empty enum"),
        ({"type": "object", "properties": {"a": {"anyOf": []}}}, obj({"a": {}}), "dropped invalid anyOf"),
        ({"type": "object", "properties": {"a": {"minItems": 2.0}}}, obj({"a": {"minItems": 2}}), None),
        (
            {"type": "object", "properties": {"a": {"maximum": float("nan")}}},
            obj({"a": {}}),
            "dropped invalid",
        ),
        (
            {"type": "object", "patternProperties": {"(": {}, "^x": {"type": "string"}}, "properties": {}},
            obj(patternProperties={"^x": {"type": "string"}}),
            None,
        ),
        # an enum of elements written on the array (BFCL live_simple_71-35-0, real users' schemas)
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"type": "string"}, "enum": ["x", "y"]}},
            },
            obj({"a": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}}}),
            "enum of the elements moved into items at properties.a",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "array", "enum": [1, 2]}}},
            obj({"a": {"type": "array", "items": {"enum": [1, 2]}}}),
            "enum of the elements moved into items",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"enum": ["z"]}, "enum": ["x"]}},
            },
            obj({"a": {"type": "array", "items": {"enum": ["z"]}}}),
            "dropped an enum of no arrays on an array",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "array", "enum": [["x"], ["y", "z"]]}}},
            obj({"a": {"type": "array", "enum": [["x"], ["y", "z"]]}}),
            None,
        ),
        # boolean subschemas
        ({"type": "object", "properties": {"a": True, "b": False}}, obj({"a": {}, "b": {"not": {}}}), None),
        (
            {"type": "object", "properties": {}, "additionalProperties": False},
            obj(additionalProperties=False),
            None,
        ),
        ({"type": "object", "properties": {"a": 5}}, obj({"a": {}}), "invalid subschema at properties.a"),
        # data positions are never treated as schemas
        (
            {"type": "object", "properties": {"a": {"default": {"$ref": "#/x"}, "enum": [{"$ref": "y"}]}}},
            obj({"a": {"default": {"$ref": "#/x"}, "enum": [{"$ref": "y"}]}}),
            None,
        ),
    ],
)
def test_normalise(raw: Any, expected: dict[str, Any], change: str | None) -> None:
    compiled = compile_tool_schema(raw)
    assert compiled.parameters == expected
    if change is None:
        assert not any("could not be compiled" in c for c in compiled.changes)
    else:
        assert any(change in c for c in compiled.changes), compiled.changes
    assert_invariants(compiled)


ADDRESS = {"type": "object", "properties": {"street": {"type": "string"}}, "required": ["street"]}


@pytest.mark.parametrize(
    ("raw", "expected", "change"),
    [
        (
            {"$defs": {"A": ADDRESS}, "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
            obj({"a": ADDRESS}),
            "inlined $ref #/$defs/A",
        ),
        (
            {
                "definitions": {"A": ADDRESS},
                "type": "object",
                "properties": {"a": {"$ref": "#/definitions/A"}},
            },
            obj({"a": ADDRESS}),
            "inlined $ref #/definitions/A",
        ),
        # zod: a pointer into the properties
        (
            {"type": "object", "properties": {"a": ADDRESS, "b": {"$ref": "#/properties/a"}}},
            obj({"a": ADDRESS, "b": ADDRESS}),
            "inlined $ref #/properties/a",
        ),
        # siblings win over the target; properties and required are merged
        (
            {
                "$defs": {"A": ADDRESS},
                "type": "object",
                "properties": {
                    "a": {
                        "$ref": "#/$defs/A",
                        "description": "home",
                        "properties": {"zip": {}},
                        "required": ["zip"],
                    }
                },
            },
            obj(
                {
                    "a": {
                        **ADDRESS,
                        "properties": {"street": {"type": "string"}, "zip": {}},
                        "required": ["street", "zip"],
                        "description": "home",
                    }
                }
            ),
            "inlined",
        ),
        # a whole root that is a $ref
        (
            {
                "$ref": "#/$defs/Args",
                "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}}},
            },
            obj({"q": {"type": "string"}}),
            "inlined $ref #/$defs/Args",
        ),
        # escaped and percent-encoded pointers
        (
            {
                "$defs": {"a/b": {"type": "string"}, "c~d": {"type": "integer"}, "e f": {"type": "boolean"}},
                "type": "object",
                "properties": {
                    "x": {"$ref": "#/$defs/a~1b"},
                    "y": {"$ref": "#/$defs/c~0d"},
                    "z": {"$ref": "#/$defs/e%20f"},
                },
            },
            obj({"x": {"type": "string"}, "y": {"type": "integer"}, "z": {"type": "boolean"}}),
            "inlined",
        ),
        # a pointer through an array
        (
            {
                "type": "object",
                "properties": {
                    "a": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "b": {"$ref": "#/properties/a/anyOf/1"},
                },
            },
            obj({"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "b": {"type": "integer"}}),
            "inlined",
        ),
        # anchors and a base $id
        (
            {
                "$defs": {"A": {"$anchor": "addr", **ADDRESS}},
                "type": "object",
                "properties": {"a": {"$ref": "#addr"}},
            },
            obj({"a": ADDRESS}),
            "inlined $ref #addr",
        ),
        (
            {
                "$id": "https://x.test/s.json",
                "$defs": {"A": ADDRESS},
                "type": "object",
                "properties": {"a": {"$ref": "https://x.test/s.json#/$defs/A"}},
            },
            obj({"a": ADDRESS}),
            "inlined",
        ),
        # what cannot be resolved becomes {}
        (
            {"type": "object", "properties": {"a": {"$ref": "https://elsewhere.test/s.json#/A"}}},
            obj({"a": {}}),
            "unresolvable $ref https://elsewhere.test/s.json#/A at properties.a replaced by {}",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}},
            obj({"a": {}}),
            "unresolvable",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/properties/a/0"}}},
            obj({"a": {}}),
            "unresolvable",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/S"}}, "$defs": {"S": "string"}},
            obj({"a": {}}),
            "unresolvable",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/T"}, "b": {"$ref": "#/$defs/F"}},
                "$defs": {"T": True, "F": False},
            },
            obj({"a": {}, "b": {"not": {}}}),
            None,
        ),
        ({"type": "object", "properties": {"a": {"$dynamicRef": "#meta"}}}, obj({"a": {}}), "unresolvable"),
        # recursion is cut, with the target's type
        (
            {
                "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
                "type": "object",
                "properties": {"head": {"$ref": "#/$defs/Node"}},
            },
            obj({"head": {"type": "object", "properties": {"next": {"type": "object"}}}}),
            "recursive $ref #/$defs/Node cut at properties.head.properties.next",
        ),
        (
            {
                "$defs": {
                    "J": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/J"}}]}
                },
                "type": "object",
                "properties": {"j": {"$ref": "#/$defs/J"}},
            },
            obj({"j": {"anyOf": [{"type": "string"}, {"type": "array", "items": {}}]}}),
            "recursive",
        ),
        (
            {"type": "object", "properties": {"self": {"$ref": "#"}}},
            obj({"self": {"type": "object", "properties": {"self": {"type": "object"}}}}),
            "recursive $ref #",
        ),
        # mutual recursion
        (
            {
                "$defs": {
                    "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
                    "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
                },
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/A"}},
            },
            obj(
                {
                    "a": {
                        "type": "object",
                        "properties": {"b": {"type": "object", "properties": {"a": {"type": "object"}}}},
                    }
                }
            ),
            "recursive $ref #/$defs/A",
        ),
    ],
)
def test_refs(raw: dict[str, Any], expected: dict[str, Any], change: str | None) -> None:
    compiled = compile_tool_schema(raw)
    assert compiled.parameters == expected
    if change:
        assert any(change in c for c in compiled.changes), compiled.changes
    assert_invariants(compiled)


def test_ref_blow_up_is_bounded() -> None:
    # each definition uses the next one twice: 2**40 copies if inlined naively
    defs = {
        f"D{i}": {
            "type": "object",
            "properties": {"x": {"$ref": f"#/$defs/D{i + 1}"}, "y": {"$ref": f"#/$defs/D{i + 1}"}},
        }
        for i in range(40)
    }
    defs["D40"] = {"type": "string"}
    compiled = compile_tool_schema(
        {"$defs": defs, "type": "object", "properties": {"d": {"$ref": "#/$defs/D0"}}}
    )
    assert len(json.dumps(compiled.parameters)) < 200_000
    assert any("not inlined: the schema is too large" in c for c in compiled.changes), compiled.changes
    assert len(compiled.changes) <= 101
    assert not any("could not be compiled" in c for c in compiled.changes)
    assert all(v["type"] == "object" for v in compiled.variants.values())


def test_long_ref_chains_are_cut() -> None:
    defs = {
        f"D{i}": {"type": "object", "properties": {"next": {"$ref": f"#/$defs/D{i + 1}"}}} for i in range(30)
    }
    defs["D30"] = {"type": "string"}
    compiled = compile_tool_schema(
        {"$defs": defs, "type": "object", "properties": {"d": {"$ref": "#/$defs/D0"}}}
    )
    assert any(
        "$ref #/$defs/D16" in c and "not inlined: more than 16 $refs deep" in c for c in compiled.changes
    )
    assert_invariants(compiled)


def test_changes_are_capped_at_100() -> None:
    raw = obj({f"p{i:03}": {"$schema": "x", "type": "string"} for i in range(150)})
    changes = compile_tool_schema(raw).changes
    assert len(changes) == 101
    assert changes[0] == "removed $schema at properties.p000"
    assert re.fullmatch(r"\.\.\. and 5[0-9] more changes", changes[-1])


def test_deep_nesting_is_cut_not_fatal() -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(400):
        node = {"type": "object", "properties": {"a": node}}
    compiled = compile_tool_schema(node)
    assert any("levels" in c for c in compiled.changes)
    assert not any("could not be compiled" in c for c in compiled.changes)
    assert_invariants(compiled)


def test_input_is_not_mutated() -> None:
    raw = json.loads((Path(__file__).parent / "schemas" / "pydantic_defs.json").read_text())["inputSchema"]
    before = json.dumps(raw)
    compile_tool_schema(raw)
    assert json.dumps(raw) == before


def test_non_json_values_are_tolerated() -> None:
    compiled = compile_tool_schema(
        {
            "type": "object",
            "properties": {"a": {"enum": (1, 2)}, 3: {"type": "string"}},
            "x-extension": object(),
        }
    )
    assert compiled.parameters["properties"] == {"a": {"enum": [1, 2]}, "3": {"type": "string"}}
    assert_invariants(compiled)


def test_a_failure_inside_the_compiler_falls_back_to_no_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(schema_module, "_gemini", broken)
    compiled = compile_tool_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert compiled.parameters == EMPTY
    assert compiled.changes == ("schema could not be compiled (RuntimeError): no parameters",)
    assert set(compiled.variants) == {"openai", "anthropic", "gemini"}


# --- dialects: openai and anthropic ----------------------------------------------------------

ROOT_ANYOF = {
    "type": "object",
    "description": "Open a file or a URL.",
    "properties": {"mode": {"type": "string"}},
    "anyOf": [
        {
            "properties": {"path": {"type": "string"}, "mode": {"type": "string"}},
            "required": ["path", "mode"],
        },
        {
            "properties": {"url": {"type": "string", "format": "uri"}, "mode": {"type": "string"}},
            "required": ["url", "mode"],
        },
    ],
}


def test_root_anyof_is_lifted_for_openai_and_anthropic() -> None:
    compiled = compile_tool_schema(ROOT_ANYOF)
    assert compiled.parameters["anyOf"] == ROOT_ANYOF["anyOf"]  # validation keeps the real rule
    for dialect in ("openai", "anthropic", "gemini"):
        variant = compiled.variants[dialect]
        assert "anyOf" not in variant
        assert set(variant["properties"]) == {"mode", "path", "url"}
        assert variant["required"] == ["mode"]  # required by every alternative
        assert variant["description"] == (
            "Open a file or a URL. Arguments must match one of: (1) path, mode; (2) url, mode"
        )
    assert "openai_strict" not in compiled.variants
    assert "openai: lifted the top-level anyOf (2 alternatives) into properties" in compiled.changes
    assert "openai_strict: not offered (top-level anyOf)" in compiled.changes
    checker = ArgumentChecker(compiled.parameters)
    assert checker.check({"path": "a", "mode": "r"}).ok
    assert not checker.check({"mode": "r"}).ok


def test_root_oneof_with_conflicting_property_schemas() -> None:
    compiled = compile_tool_schema(
        {
            "type": "object",
            "oneOf": [
                {"properties": {"id": {"type": "integer"}}, "required": ["id"]},
                {"properties": {"id": {"type": "string"}}, "required": ["id"]},
                {"properties": {}},
            ],
        }
    )
    variant = compiled.variants["openai"]
    assert variant["properties"] == {"id": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}
    assert "required" not in variant
    assert variant["description"].endswith("(1) id; (2) id; (3) no arguments")


def test_root_allof_is_merged() -> None:
    compiled = compile_tool_schema(
        {
            "type": "object",
            "allOf": [
                {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ],
        }
    )
    for dialect in ("openai", "anthropic"):
        assert compiled.variants[dialect] == obj(
            {"a": {"type": "string"}, "b": {"type": "integer"}}, required=["a", "b"]
        )


@pytest.mark.parametrize("key", ["enum", "not"])
def test_openai_drops_root_enum_and_not_anthropic_keeps_them(key: str) -> None:
    value = [{"a": 1}] if key == "enum" else {"required": ["a", "b"]}
    compiled = compile_tool_schema(obj({"a": {}, "b": {}}, **{key: value}))
    assert key not in compiled.variants["openai"]
    assert compiled.variants["anthropic"][key] == value
    assert f"openai: dropped the top-level {key}" in compiled.changes


def test_openai_adds_properties_to_every_object() -> None:
    compiled = compile_tool_schema(
        obj({"opts": {"type": "object"}, "list": {"type": "array", "items": {"type": "object"}}})
    )
    props = compiled.variants["openai"]["properties"]
    assert props["opts"] == {"type": "object", "properties": {}}
    assert props["list"]["items"] == {"type": "object", "properties": {}}
    assert compiled.parameters["properties"]["opts"] == {"type": "object"}


def test_openai_and_anthropic_keep_everything_else() -> None:
    raw = obj(
        {
            "url": {"type": "string", "format": "uri", "minLength": 1, "title": "Url", "default": "x"},
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "m": {"type": "object", "additionalProperties": {"type": "string"}, "properties": {}},
        }
    )
    compiled = compile_tool_schema(raw)
    assert compiled.variants["openai"] == raw
    assert compiled.variants["anthropic"] == raw
    assert compiled.parameters == raw


def test_variants_do_not_share_objects_with_parameters() -> None:
    compiled = compile_tool_schema(obj({"a": {"type": "string", "enum": ["x"]}}))
    compiled.variants["openai"]["properties"]["a"]["enum"].append("y")
    compiled.variants["anthropic"]["properties"]["a"]["type"] = "integer"
    assert compiled.parameters == obj({"a": {"type": "string", "enum": ["x"]}})


# --- dialects: openai strict ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # an empty object schema gets properties, required and additionalProperties
        ({}, {"type": "object", "properties": {}, "required": [], "additionalProperties": False}),
        (
            {"type": "object"},
            {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
        ),
        # optional properties become required and nullable, in each way a schema can say so
        (
            obj({"a": {"type": "string"}, "b": {"type": "integer"}}, required=["a"]),
            obj(
                {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}},
                required=["a", "b"],
                additionalProperties=False,
            ),
        ),
        (
            obj({"e": {"type": "string", "enum": ["x", "y"]}}),
            obj(
                {"e": {"type": ["string", "null"], "enum": ["x", "y", None]}},
                required=["e"],
                additionalProperties=False,
            ),
        ),
        (
            obj({"u": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}),
            obj(
                {"u": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}},
                required=["u"],
                additionalProperties=False,
            ),
        ),
        # git's Optional[str] = None: already nullable, default null removed
        (
            obj({"s": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "S"}}),
            obj(
                {"s": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "S"}},
                required=["s"],
                additionalProperties=False,
            ),
        ),
        (
            obj({"s": {"type": ["string", "null"]}}),
            obj({"s": {"type": ["string", "null"]}}, required=["s"], additionalProperties=False),
        ),
        # a non-null default on a property that does not allow null is kept (null → dropped → default)
        (
            obj({"n": {"type": "integer", "default": 10}}),
            obj(
                {"n": {"type": ["integer", "null"], "default": 10}},
                required=["n"],
                additionalProperties=False,
            ),
        ),
        # oneOf → anyOf, one-element allOf folded, const → enum, enum without type gets one
        (
            obj({"o": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}, required=["o"]),
            obj(
                {"o": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                required=["o"],
                additionalProperties=False,
            ),
        ),
        (
            obj({"f": {"allOf": [{"type": "string", "description": "d"}]}}, required=["f"]),
            obj({"f": {"type": "string", "description": "d"}}, required=["f"], additionalProperties=False),
        ),
        (
            obj({"c": {"const": "fast"}}, required=["c"]),
            obj({"c": {"enum": ["fast"], "type": "string"}}, required=["c"], additionalProperties=False),
        ),
        (
            obj({"c": {"enum": [1, 2]}}, required=["c"]),
            obj({"c": {"enum": [1, 2], "type": "integer"}}, required=["c"], additionalProperties=False),
        ),
        # constraints strict mode lacks become hints; supported formats stay
        (
            obj(
                {"u": {"type": "string", "format": "uri", "minLength": 1, "description": "URL"}},
                required=["u"],
            ),
            obj(
                {"u": {"type": "string", "description": "URL (at least 1 character; format: uri)"}},
                required=["u"],
                additionalProperties=False,
            ),
        ),
        (
            obj(
                {
                    "d": {"type": "string", "format": "date-time"},
                    "l": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
                },
                required=["d", "l"],
            ),
            obj(
                {
                    "d": {"type": "string", "format": "date-time"},
                    "l": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": 3,
                        "description": "(items must be unique)",
                    },
                },
                required=["d", "l"],
                additionalProperties=False,
            ),
        ),
        # nested objects are closed too; annotations strict mode does not know are dropped
        (
            obj(
                {
                    "p": obj(
                        {"x": {"type": "number", "examples": [1], "x-internal": True}},
                        required=["x"],
                        additionalProperties=False,
                    )
                },
                required=["p"],
            ),
            obj(
                {"p": obj({"x": {"type": "number"}}, required=["x"], additionalProperties=False)},
                required=["p"],
                additionalProperties=False,
            ),
        ),
    ],
)
def test_strict_variant(raw: dict[str, Any], expected: dict[str, Any]) -> None:
    compiled = compile_tool_schema(raw)
    assert compiled.variants.get("openai_strict") == expected, compiled.changes
    assert_strict_shape(compiled.variants["openai_strict"])


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (obj({"env": {"type": "object", "additionalProperties": {"type": "string"}}}), "open map"),
        (obj({"env": {"type": "object", "properties": {}, "additionalProperties": True}}), "open map"),
        (obj({"a": {}}), "any type at properties.a"),
        (obj({"a": {"description": "anything"}}), "any type"),
        (obj({"o": {"type": "object"}}), "an object of any shape at properties.o"),
        (obj({"a": {"type": "array"}}), "an array of any items"),
        (obj({"a": {"type": "array", "items": {}}}), "an array of any items"),
        (obj({"a": {"type": ["string", "integer"]}}), "several types"),
        (obj({"a": {"enum": [1, "x"]}}), "an enum of mixed types"),
        (obj({"a": {"type": "string", "not": {"enum": ["x"]}}}), "not at properties.a"),
        (obj({"a": {"type": "string"}}, patternProperties={"^x": {}}), "patternProperties at the root"),
        (obj({"a": {"type": "string"}}, **{"if": {"required": ["a"]}, "then": {"required": ["b"]}}), "if"),
        (obj({"a": {"type": "string"}}, minProperties=1), "minProperties"),
        (obj({"a": {"type": "array", "prefixItems": [{"type": "string"}], "items": False}}), "prefixItems"),
        (obj({"a": {"type": "string"}}, anyOf=[{"required": ["a"]}]), "top-level anyOf"),
        (obj({"a": {"type": "string"}}, const={"a": "x"}), "top-level const"),
        (obj({"a": {"type": "string"}}, required=["a", "b"]), "required names an undeclared property"),
        (obj({"s": {"type": ["string", "null"], "default": "main"}}), "allows null and has a default"),
        (obj({"f": {"allOf": [{"type": "string"}, {"type": "integer"}]}}), "an allOf that cannot be merged"),
        (obj({"e": {"type": "string", "enum": [str(i) for i in range(1001)]}}), "more than 1000 enum values"),
        (
            obj({"o": {"type": "string", "oneOf": [{"minLength": 1}], "anyOf": [{"maxLength": 3}]}}),
            "oneOf next to anyOf",
        ),
    ],
)
def test_strict_variant_is_left_out_when_it_would_change_the_meaning(
    raw: dict[str, Any], reason: str
) -> None:
    compiled = compile_tool_schema(raw)
    assert "openai_strict" not in compiled.variants
    assert any(c.startswith("openai_strict: not offered") and reason in c for c in compiled.changes), (
        compiled.changes
    )


def test_strict_nesting_limit() -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(10):
        node = obj({"a": node}, required=["a"])
    assert "openai_strict" in compile_tool_schema(node).variants
    node = obj({"a": node}, required=["a"])
    assert "openai_strict" not in compile_tool_schema(node).variants


def test_strict_nulls_are_dropped_by_the_checker() -> None:
    """The promise behind optional → nullable: the tool never sees the null."""
    raw = obj({"q": {"type": "string"}, "limit": {"type": "integer", "default": 10}}, required=["q"])
    compiled = compile_tool_schema(raw)
    strict = compiled.variants["openai_strict"]
    model_output = {"q": "x", "limit": None}
    jsonschema.validate(model_output, strict)  # what strict decoding may produce
    check = ArgumentChecker(compiled.parameters).check(model_output)
    assert check.ok and check.arguments == {"q": "x"}


# --- dialects: gemini -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prop", "expected", "change"),
    [
        ({"type": ["string", "null"]}, {"type": "string", "nullable": True}, "turned into nullable"),
        (
            {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "N"},
            {"type": "integer", "nullable": True, "title": "N"},
            "anyOf with null turned into nullable",
        ),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            {"anyOf": [{"type": "string"}, {"type": "integer"}], "nullable": True},
            "anyOf with null",
        ),
        (
            {"type": ["string", "integer"], "minLength": 2, "minimum": 1},
            {"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer", "minimum": 1}]},
            "turned into anyOf",
        ),
        ({"type": "null"}, {"type": "string", "nullable": True}, "nullable string"),
        (
            {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "oneOf turned into anyOf",
        ),
        (
            {"type": "string", "anyOf": [{"minLength": 1}, {"format": "date-time"}]},
            {"anyOf": [{"type": "string", "minLength": 1}, {"type": "string", "format": "date-time"}]},
            None,
        ),
        (
            {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}},
                ]
            },
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                "required": ["a"],
            },
            "merged allOf",
        ),
        ({"const": "fast"}, {"type": "string", "enum": ["fast"]}, "const turned into enum"),
        ({"enum": [True, False]}, {"type": "string", "enum": ["true", "false"]}, "enum values sent as"),
        ({"type": "integer", "enum": [1, 2, 3]}, {"type": "string", "enum": ["1", "2", "3"]}, "enum values"),
        ({"type": "string", "enum": ["", "a", "b"]}, {"type": "string", "enum": ["a", "b"]}, "non-empty"),
        ({"type": "string", "enum": [""]}, {"type": "string"}, None),
        (
            {"type": ["string", "null"], "enum": ["a", None]},
            {"type": "string", "enum": ["a"], "nullable": True},
            None,
        ),
        (
            {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False},
            {"type": "object", "properties": {"x": {"type": "string"}}},
            "dropped additionalProperties",
        ),
        (
            {"type": "string", "default": "x", "examples": ["a", "b"]},
            {"type": "string", "example": "a"},
            "dropped default, examples",
        ),
        (
            {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000000},
            {"type": "integer", "minimum": 1, "maximum": 999999},
            "exclusiveMinimum turned into minimum",
        ),
        ({"type": "number", "exclusiveMinimum": 0.5, "minimum": 1}, {"type": "number", "minimum": 1}, None),
        ({"type": "number", "exclusiveMaximum": 2.5}, {"type": "number", "maximum": 2.5}, None),
        ({"type": "string", "format": "uri"}, {"type": "string"}, "dropped format uri"),
        ({"type": "string", "format": "date-time"}, {"type": "string", "format": "date-time"}, None),
        ({"type": "integer", "format": "int64"}, {"type": "integer", "format": "int64"}, None),
        ({"type": "number", "format": "int64"}, {"type": "number"}, "dropped format"),
        ({}, {"type": "string"}, "missing type set to string"),
        ({"description": "d"}, {"description": "d", "type": "string"}, "missing type"),
        (
            {"properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"a": {"type": "string"}}},
            "missing type set to object",
        ),
        ({"items": {"type": "string"}}, {"type": "array", "items": {"type": "string"}}, "set to array"),
        ({"minimum": 1}, {"type": "number", "minimum": 1}, "set to number"),
        ({"type": "array"}, {"type": "array", "items": {"type": "string"}}, None),
        (
            {"type": "array", "items": {"type": "object"}},
            {"type": "array", "items": {"type": "string", "description": "(a JSON object, as text)"}},
            "object without properties",
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}, "description": "env"},
            {"type": "string", "description": "env (a JSON object, as text)"},
            "sent as JSON text",
        ),
        (
            {"type": "object", "properties": {"a": {}}, "required": ["a", "b"]},
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            None,
        ),
        (
            {"type": "string", "not": {"enum": ["x"]}, "pattern": "^a", "title": "T"},
            {"type": "string", "pattern": "^a", "title": "T"},
            "dropped not",
        ),
        (
            {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
            {"type": "array", "items": {"type": "string"}},
            "dropped prefixItems",
        ),
        (
            {"type": "string", "required": ["a"], "properties": {"a": {}}, "items": {"type": "string"}},
            {"type": "string"},
            None,
        ),
    ],
)
def test_gemini(prop: dict[str, Any], expected: dict[str, Any], change: str | None) -> None:
    compiled = compile_tool_schema(obj({"p": prop}))
    gemini = compiled.variants["gemini"]
    assert gemini["properties"]["p"] == expected, compiled.changes
    if change:
        assert any(c.startswith("gemini: ") and change in c for c in compiled.changes), compiled.changes
    assert_gemini_subset(gemini)


def test_gemini_root_without_parameters_stays_an_object() -> None:
    assert compile_tool_schema({}).variants["gemini"] == EMPTY
    assert compile_tool_schema({"type": "object", "additionalProperties": False}).variants["gemini"] == EMPTY


def test_gemini_stringified_enums_are_coerced_back() -> None:
    raw = obj(
        {
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "flag": {"enum": [True, False]},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
        }
    )
    compiled = compile_tool_schema(raw)
    gemini_output = {
        "level": "2",
        "flag": "false",
        "env": '{"A": "1"}',
    }  # what the gemini variant makes a model send
    check = ArgumentChecker(compiled.parameters).check(gemini_output)
    assert check.ok and check.arguments == {"level": 2, "flag": False, "env": {"A": "1"}}


# --- the argument pipeline ------------------------------------------------------------------

INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
STR = {"type": "string"}


@pytest.mark.parametrize(
    ("prop", "value", "expected"),
    [
        (INT, "3000", 3000),
        (INT, " 42 ", 42),
        (INT, "-7", -7),
        (INT, "2.0", 2),
        (INT, 3, 3),
        (NUM, "2.5", 2.5),
        (NUM, "3", 3),
        (NUM, "1e3", 1000.0),
        (NUM, ".5", 0.5),
        (BOOL, "true", True),
        (BOOL, "False", False),
        (BOOL, " TRUE ", True),
        (STR, 3, "3"),
        (STR, 2.5, "2.5"),
        (STR, True, "true"),
        ({"type": ["integer", "null"]}, "null", None),
        ({"type": "array", "items": INT}, "[1, 2]", [1, 2]),
        ({"type": "array", "items": INT}, ["1", "2"], [1, 2]),
        ({"type": "array", "items": INT}, "3", [3]),
        ({"type": "array", "items": STR}, "a,b", ["a,b"]),
        ({"type": "array", "items": obj({"n": INT})}, {"n": "1"}, [{"n": 1}]),
        ({"type": "array", "items": {"type": "array", "items": INT}}, "5", [[5]]),
        (obj({"n": INT}), '{"n": "4"}', {"n": 4}),
        (obj({"n": INT}), {"n": "4", "extra": "x"}, {"n": 4, "extra": "x"}),
        ({"type": "object", "additionalProperties": INT}, {"a": "1", "b": 2}, {"a": 1, "b": 2}),
        ({"anyOf": [INT, {"type": "null"}]}, "5", 5),
        ({"oneOf": [BOOL, INT]}, "7", 7),
        ({"type": ["integer", "boolean"]}, "false", False),
        ({"allOf": [INT, {"minimum": 1}]}, "3", 3),
        ({"type": "array", "prefixItems": [INT, BOOL]}, ["1", "true"], [1, True]),
        # enum values by their text, and string enums but for case (only when unique)
        ({"enum": [1, 2, 3]}, "2", 2),
        ({"enum": [True, False]}, "true", True),
        ({"enum": [None, "x"]}, "null", None),
        ({"type": "string", "enum": ["name", "size"]}, "SIZE", "size"),
        ({"const": "fast"}, "Fast", "fast"),
        # values that already validate are never touched
        (STR, "123", "123"),
        ({"type": ["string", "integer"]}, "7", "7"),
        ({"type": ["boolean", "string"]}, "true", "true"),
        ({"anyOf": [STR, INT]}, "5", "5"),
        ({}, "5", "5"),
        # no coercion applies: left as it is (validation reports it)
        (INT, "2.5", "2.5"),
        (INT, "abc", "abc"),
        (INT, "1_000", "1_000"),
        (NUM, "nan", "nan"),
        (NUM, "inf", "inf"),
        (NUM, "1e999", "1e999"),
        (NUM, "0x10", "0x10"),
        (BOOL, "yes", "yes"),
        (BOOL, 1, 1),
        (INT, True, True),
        (STR, {"a": 1}, {"a": 1}),
        (STR, [1], [1]),
        (INT, "9" * 2000, "9" * 2000),
        ({"type": "string", "enum": ["a", "A"]}, "b", "b"),
        ({"type": "string", "enum": ["ab", "AB"]}, "Ab", "Ab"),  # ambiguous: no guess
        (obj({"n": INT}), "{not json", "{not json"),
        (obj({"n": INT}), "[1]", "[1]"),
    ],
)
def test_coercion(prop: dict[str, Any], value: Any, expected: Any) -> None:
    check = ArgumentChecker(obj({"v": prop}, required=["v"])).check({"v": value})
    assert check.arguments == {"v": expected}
    assert type(check.arguments["v"]) is type(expected)


@pytest.mark.parametrize(
    ("schema", "arguments", "expected"),
    [
        # a null for an optional property whose schema does not allow null is dropped
        (obj({"a": STR, "b": INT}, required=["a"]), {"a": "x", "b": None}, {"a": "x"}),
        (
            obj({"a": STR, "b": obj({"c": INT, "d": STR}, required=["c"])}),
            {"a": None, "b": {"c": "1", "d": None}},
            {"b": {"c": 1}},
        ),
        # ... and so is "" where the schema cannot take it
        (obj({"a": STR, "b": INT}), {"a": "", "b": ""}, {"a": ""}),
        (obj({"a": {"type": "string", "minLength": 1}}), {"a": ""}, {}),
        # kept when the schema allows it
        (obj({"b": {"type": ["integer", "null"]}}), {"b": None}, {"b": None}),
        (obj({"b": {"anyOf": [INT, {"type": "null"}]}}), {"b": None}, {"b": None}),
        (obj({"b": {}}), {"b": None}, {"b": None}),
        # already valid: returned as they are
        (obj({"a": STR}), {"a": "x", "zzz": None}, {"a": "x", "zzz": None}),
    ],
)
def test_null_dropping(schema: dict[str, Any], arguments: dict[str, Any], expected: dict[str, Any]) -> None:
    check = ArgumentChecker(schema).check(arguments)
    assert check.ok, check.errors
    assert check.arguments == expected


def test_required_null_is_not_dropped() -> None:
    check = ArgumentChecker(obj({"a": STR}, required=["a"])).check({"a": None})
    assert check.arguments == {"a": None}
    assert [(e["path"], e["expected"], e["received"]) for e in check.errors] == [("/a", "string", None)]


def test_valid_arguments_are_returned_as_they_are() -> None:
    arguments = {"a": "x"}
    assert ArgumentChecker(obj({"a": STR})).check(arguments).arguments is arguments


def test_coercion_does_not_mutate_the_input() -> None:
    arguments = {"a": "1", "b": None, "c": ["2"]}
    ArgumentChecker(obj({"a": INT, "b": INT, "c": {"type": "array", "items": INT}})).check(arguments)
    assert arguments == {"a": "1", "b": None, "c": ["2"]}


def test_checker_accepts_a_raw_schema() -> None:
    raw = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$defs": {"N": INT},
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/N"}, "d": {"type": "integer", "nullable": True}},
    }
    check = ArgumentChecker(raw).check({"n": "1", "d": None})
    assert check.ok and check.arguments == {"n": 1, "d": None}


def test_formats_are_not_checked() -> None:
    check = ArgumentChecker(
        obj({"u": {"type": "string", "format": "uri"}, "e": {"type": "string", "format": "email"}})
    ).check({"u": "not a uri", "e": "nobody"})
    assert check.ok


@pytest.mark.parametrize(
    ("prop", "value", "error"),
    [
        (
            INT,
            "abc",
            {"path": "/v", "message": "wrong type (string)", "expected": "integer", "received": "abc"},
        ),
        ({"type": ["integer", "null"]}, "x", {"path": "/v", "expected": "integer or null"}),
        (
            {"enum": ["a", "b"]},
            "c",
            {"path": "/v", "message": "not an allowed value", "expected": 'one of "a", "b"', "received": "c"},
        ),
        ({"const": 1}, 2, {"path": "/v", "expected": "exactly 1", "received": 2}),
        (
            {"type": "integer", "minimum": 1},
            0,
            {"path": "/v", "message": "out of bounds (minimum 1)", "expected": ">= 1", "received": 0},
        ),
        ({"type": "integer", "exclusiveMaximum": 1000000}, 1000000, {"path": "/v", "expected": "< 1000000"}),
        ({"type": "integer", "exclusiveMinimum": 0}, 0, {"path": "/v", "expected": "> 0"}),
        ({"type": "integer", "maximum": 100}, 101, {"path": "/v", "expected": "<= 100"}),
        ({"type": "string", "minLength": 3}, "ab", {"path": "/v", "expected": "at least 3 characters"}),
        ({"type": "string", "maxLength": 1}, "ab", {"path": "/v", "expected": "at most 1 character"}),
        (
            {"type": "array", "minItems": 1},
            [],
            {"path": "/v", "expected": "at least 1 item", "received": []},
        ),
        ({"type": "array", "maxItems": 1}, [1, 2], {"path": "/v", "expected": "at most 1 item"}),
        (
            {"type": "string", "pattern": "^[a-z]+$"},
            "A1",
            {"path": "/v", "message": "does not match the pattern", "expected": "a string matching ^[a-z]+$"},
        ),
        ({"type": "number", "multipleOf": 5}, 7, {"path": "/v", "expected": "a multiple of 5"}),
        ({"type": "array", "uniqueItems": True}, [1, 1], {"path": "/v", "message": "items are not unique"}),
        (
            {"anyOf": [INT, {"type": "array", "items": STR}]},
            {"x": 1},
            {
                "path": "/v",
                "message": "matches none of the allowed shapes",
                "expected": "integer | array of string",
            },
        ),
        (
            {"oneOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "const": "a"}]},
            "a",
            {"path": "/v", "message": "must match exactly one of the allowed shapes"},
        ),
        ({"type": "array", "items": INT}, [1, "x"], {"path": "/v/1", "expected": "integer", "received": "x"}),
        (
            {"type": "array", "prefixItems": [INT], "items": False},
            [1, 2],
            {"path": "/v", "message": "too many items", "expected": "at most 1 item"},
        ),
        ({"type": "string", "not": {"const": "x"}}, "x", {"path": "/v", "expected": 'not: {"const":"x"}'}),
        (obj({"a/b~c": INT}), {"a/b~c": "x"}, {"path": "/v/a~1b~0c"}),
        (INT, "x" * 500, {"path": "/v", "received": '"' + "x" * 199 + "... (502 characters in all)"}),
    ],
)
def test_errors(prop: dict[str, Any], value: Any, error: dict[str, Any]) -> None:
    check = ArgumentChecker(obj({"v": prop}, required=["v"])).check({"v": value})
    assert not check.ok
    assert len(check.errors) == 1, check.errors
    found = check.errors[0]
    assert {k: found.get(k) for k in error} == error, found
    assert {"path", "message", "expected"} <= found.keys()


def test_missing_required_properties_each_get_an_error_without_received() -> None:
    schema = obj(
        {"url": {"type": "string", "format": "uri"}, "n": INT, "o": obj({"p": STR}, required=["p"])},
        required=["url", "n", "o"],
    )
    check = ArgumentChecker(schema).check({"o": {}})
    assert check.errors == (
        {"path": "/n", "message": "required property is missing", "expected": "integer"},
        {"path": "/o/p", "message": "required property is missing", "expected": "string"},
        {"path": "/url", "message": "required property is missing", "expected": "string (format uri)"},
    )


def test_unknown_properties_each_get_an_error_with_a_suggestion() -> None:
    schema = obj({"path": STR, "recursive": BOOL}, additionalProperties=False, patternProperties={"^x-": {}})
    check = ArgumentChecker(schema).check({"pth": "a", "foo": 1, "x-trace": 1})
    assert check.errors == (
        {
            "path": "/foo",
            "message": "unknown property",
            "expected": "one of the known properties: path, recursive",
            "received": 1,
        },
        {
            "path": "/pth",
            "message": "unknown property (did you mean 'path'?)",
            "expected": "one of the known properties: path, recursive",
            "received": "a",
        },
    )


def test_arguments_that_are_not_an_object() -> None:
    check = ArgumentChecker(obj({"a": STR})).check(["a"])  # type: ignore[arg-type]
    assert check.arguments == {}
    assert check.errors == (
        {
            "path": "",
            "message": "the arguments must be a JSON object",
            "expected": "object",
            "received": ["a"],
        },
    )


def test_root_level_errors_have_the_empty_pointer() -> None:
    check = ArgumentChecker(obj({"a": STR}, minProperties=1)).check({})
    assert [e["path"] for e in check.errors] == [""]


def test_a_value_that_breaks_the_validator_passes_to_the_server() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    check = ArgumentChecker(obj({"a": STR}, required=["a"])).check({"a": deep})
    assert isinstance(check, ArgumentCheck)


def test_format_errors() -> None:
    schema = obj(
        {"url": {"type": "string"}, "max_length": {"type": "integer", "minimum": 1}}, required=["url"]
    )
    check = ArgumentChecker(schema).check({"max_length": "zero"})
    assert format_errors("fetch__fetch", check) == (
        "Invalid arguments for fetch__fetch (2 problems):\n"
        '- /max_length: wrong type (string); expected integer; received "zero"\n'
        "- /url: required property is missing; expected string\n"
        "Call the tool again with corrected arguments."
    )


def test_format_errors_for_the_root_and_for_many_errors() -> None:
    check = ArgumentChecker(obj({f"p{i:02}": INT for i in range(25)})).check(
        {f"p{i:02}": "x" for i in range(25)}
    )
    text = format_errors("t", check)
    lines = text.splitlines()
    assert lines[0] == "Invalid arguments for t (25 problems):"
    assert len(lines) == 1 + 20 + 1 + 1
    assert lines[-2] == "- ... and 5 more"
    assert lines[-1] == "Call the tool again with corrected arguments."
    one = ArgumentChecker(obj({"a": STR}, minProperties=1)).check({})
    assert format_errors("t", one).splitlines()[1].startswith("- (arguments): ")
    assert format_errors("t", ArgumentCheck({})) == ""


def test_checker_for_shares_one_checker_per_schema() -> None:
    a = checker_for(obj({"a": STR}))
    assert checker_for(obj({"a": STR})) is a  # equal content, another dict
    assert checker_for(obj({"a": INT})) is not a


def test_checker_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_module, "_CACHE", type(schema_module._CACHE)())
    first = checker_for(obj({"n0": STR}))
    for i in range(1, schema_module._CACHE_SIZE + 1):
        checker_for(obj({f"n{i}": STR}))
    assert len(schema_module._CACHE) == schema_module._CACHE_SIZE
    assert checker_for(obj({"n0": STR})) is not first


# --- properties ------------------------------------------------------------------------------

KEYWORDS = [
    "type",
    "properties",
    "items",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "enum",
    "const",
    "$ref",
    "$defs",
    "definitions",
    "required",
    "additionalProperties",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "format",
    "pattern",
    "nullable",
    "default",
    "if",
    "then",
    "description",
    "title",
    "minLength",
    "minItems",
    "prefixItems",
    "dependencies",
    "patternProperties",
    "$schema",
    "examples",
    "multipleOf",
    "uniqueItems",
    "$anchor",
    "$id",
]
atoms = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats()
    | st.text(max_size=4)
    | st.sampled_from(
        [
            "string",
            "integer",
            "number",
            "object",
            "array",
            "null",
            "boolean",
            "Str",
            "any",
            "#",
            "#/$defs/A",
            "#/properties/a",
            "#/definitions/B",
            "#a",
            "(",
            "^x",
            "uri",
            "date-time",
        ]
    )
)


def schemas_from(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "A", "B"])
    return st.dictionaries(
        st.sampled_from(KEYWORDS),
        children | st.lists(children, max_size=3) | st.dictionaries(names, children, max_size=3),
        max_size=6,
    )


any_schema = st.recursive(
    atoms, lambda children: schemas_from(children) | st.lists(children, max_size=2), max_leaves=30
)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
plain_schema = st.recursive(
    st.builds(lambda t: {"type": t}, type_names | st.lists(type_names, min_size=1, max_size=3)),
    lambda children: (
        st.builds(
            lambda p, r: {"type": "object", "properties": p, "required": r},
            st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
            st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
        )
        | st.builds(lambda i: {"type": "array", "items": i}, children)
        | st.builds(lambda bs: {"anyOf": bs}, st.lists(children, min_size=1, max_size=3))
        | st.builds(lambda s: {**s, "nullable": True}, children)
    ),
    max_leaves=12,
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.sampled_from(["1", "2.5", "true", "null", "[1]", '{"a": 1}', ""]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3)
    ),
    max_leaves=15,
)


@settings(max_examples=150, deadline=None)
@given(any_schema)
def test_compile_never_raises_and_keeps_its_promises(raw: Any) -> None:
    compiled = compile_tool_schema(raw)
    assert not any("could not be compiled" in c for c in compiled.changes), compiled.changes
    assert_invariants(compiled)


@settings(max_examples=100, deadline=None)
@given(plain_schema | any_schema)
def test_compile_is_idempotent(raw: Any) -> None:
    parameters = compile_tool_schema(raw).parameters
    again = compile_tool_schema(parameters)
    assert again.parameters == parameters


@settings(max_examples=100, deadline=None)
@given(plain_schema)
def test_plain_schemas_compile_cleanly(raw: dict[str, Any]) -> None:
    assert_invariants(compile_tool_schema(raw))


@settings(max_examples=150, deadline=None)
@given(
    plain_schema | any_schema,
    st.dictionaries(st.sampled_from(["a", "b", "c", "value"]), json_values, max_size=4),
)
def test_check_never_raises_and_only_passes_valid_arguments(raw: Any, arguments: dict[str, Any]) -> None:
    checker = ArgumentChecker(raw)
    check = checker.check(arguments)
    validator = jsonschema.Draft202012Validator(checker.schema)
    if check.ok:
        assert validator.is_valid(check.arguments)
    if validator.is_valid(arguments):
        assert check.arguments is arguments
    for error in check.errors:
        assert {"path", "message", "expected"} <= error.keys()
        assert error["path"] == "" or error["path"].startswith("/")
    assert isinstance(format_errors("t", check), str)
