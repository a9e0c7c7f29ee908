"""BFCL function docs -> MCP tools: what an OpenAI-style function-calling handler of BFCL sends.

BFCL writes parameters in its own type names (``dict``, ``float``, ``tuple``, Java's
``ArrayList``, JavaScript's ``Bigint``...). Its handlers turn them into JSON Schema in two steps,
replicated here as pure functions because the modules that hold them do not import with what
``bfcl-eval --no-deps`` brings (``bfcl_eval/utils.py`` needs ``filelock``,
``bfcl_eval/model_handler/utils.py`` needs ``tree_sitter``); the type table itself is BFCL's
(``bfcl_eval.constants.type_mappings.GORILLA_TO_OPENAPI``):

1. ``language_hints`` = ``bfcl_eval/utils.py: _func_doc_language_specific_pre_processing``
   (what ``load_dataset_entry`` applies before inference): a sentence naming the language is
   added to every description, and in the Java and JavaScript categories every parameter
   becomes a ``string`` holding a value in that language's syntax (``new ArrayList<>(...)``,
   ``[1, 2]``), its type named in its description.
2. ``cast_types`` = ``bfcl_eval/model_handler/utils.py: _cast_to_openai_type`` (what
   ``convert_to_tool`` applies for ``ModelStyle.OPENAI_COMPLETIONS``): the top-level type is
   ``object``, each property's type goes through ``GORILLA_TO_OPENAPI`` (unknown: ``string``),
   ``float`` also gets ``format: float`` and a sentence, and nested ``properties`` and ``items``
   are cast the same way.

One difference on purpose: ``convert_to_tool`` also replaces ``.`` in names by ``_`` (OpenAI
refuses dots). Here the MCP tool keeps its BFCL name (``math.factorial``): making a name fit a
model API is the gateway's job (``mcp_agent/tools/presentation.py``), and part of what the bench
tests. Where BFCL's code would fail on a doc (a missing description, a nested type its table does
not know) these functions go on as it evidently means to: an empty description, ``string``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

JAVA = ("simple_java",)
JAVASCRIPT = ("simple_javascript",)


def language_of(category: str) -> str:
    """``java``, ``javascript`` or ``python``: the syntax the category's arguments are in."""
    if category in JAVA:
        return "java"
    if category in JAVASCRIPT:
        return "javascript"
    return "python"


_HINTS = {
    "java": " Note that the provided function is in Java 8 SDK syntax.",
    "javascript": " Note that the provided function is in JavaScript syntax.",
    "python": " Note that the provided function is in Python 3 syntax.",
}
_LANGUAGE_NAMES = {"java": "Java", "javascript": "JavaScript"}


def language_hints(function: dict[str, Any], category: str) -> dict[str, Any]:
    """Step 1 on a copy of one function doc (``_func_doc_language_specific_pre_processing``)."""
    item = copy.deepcopy(function)
    language = language_of(category)
    item["description"] = item.get("description", "") + _HINTS[language]
    if language == "python":
        return item
    name = _LANGUAGE_NAMES[language]
    for value in item["parameters"].get("properties", {}).values():
        kind = value.get("type")
        described = value.get("description", "")
        if kind == "any":
            described += f" This parameter can be of any type of {name} object in string representation."
        else:
            described += f" This is {name} {kind} type parameter in string representation."
        listed = ("ArrayList", "Array") if language == "java" else ("array",)
        if kind in listed and "items" in value:
            described += (
                f" The list elements are of type {value['items'].get('type')};"
                " they are not in string representation."
            )
            del value["items"]
        if language == "javascript" and kind == "dict" and "properties" in value:
            described += (
                " The dictionary entries have the following schema; they are not in string"
                f" representation. {json.dumps(value['properties'])}"
            )
            del value["properties"]
        value["description"] = described
        value["type"] = "string"
    return item


def _mapped(kind: Any) -> str:
    return GORILLA_TO_OPENAPI.get(kind, "string") if isinstance(kind, str) else "string"


def cast_types(properties: dict[str, Any]) -> dict[str, Any]:
    """Step 2 on ``properties`` in place (``_cast_to_openai_type``); returns them."""
    for value in properties.values():
        if "type" not in value:
            value["type"] = "string"
        else:
            kind = value["type"]
            if kind == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + " This is a float type value."
            value["type"] = _mapped(kind)
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = cast_types(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = _mapped(items.get("type"))
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = _mapped(items["items"].get("type"))
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = cast_types(items["properties"])
    return properties


def input_schema(function: dict[str, Any], category: str) -> dict[str, Any]:
    """The JSON Schema of one BFCL function's parameters, as BFCL's OpenAI handler sends it."""
    parameters = language_hints(function, category)["parameters"]
    parameters["type"] = "object"
    parameters["properties"] = cast_types(parameters.get("properties", {}))
    return parameters


def mcp_tool(function: dict[str, Any], category: str) -> dict[str, Any]:
    """One BFCL function as an MCP tool (wire JSON), under its BFCL name."""
    hinted = language_hints(function, category)
    return {
        "name": function["name"],
        "description": hinted["description"],
        "inputSchema": input_schema(function, category),
    }
