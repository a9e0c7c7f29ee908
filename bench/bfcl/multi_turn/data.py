"""BFCL's multi-turn entries, their ground truth, and each API class's functions as MCP tools.

All of it is read from the installed ``bfcl_eval`` package (``bfcl_eval/data``): the entries
(``BFCL_v4_<category>.json``, JSON lines), the ground truth (``possible_answer/``: per turn a list
of calls such as ``"cd(folder='document')"``; an empty turn is one where the model should not
act) and the function docs of each API class (``multi_turn_func_doc/``).

What a model is offered follows BFCL's handlers (``base_handler.inference_multi_turn_FC`` and
``utils.populate_test_cases_with_predefined_functions``): the functions of the entry's involved
classes, less its ``excluded_function``; a ``missed_function`` is withheld until its turn (a turn
without a user message, for which BFCL sends ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``).
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.resources
import inspect
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from bench.bfcl.schema import mcp_tool

CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
MISSING = "BFCL is not installed in this Python: run `make test` (it installs bfcl-eval --no-deps)"


def _data() -> Any:
    try:
        return importlib.resources.files("bfcl_eval") / "data"
    except ModuleNotFoundError as exc:
        raise SystemExit(MISSING) from exc


def _lines(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Entry:
    """One multi-turn entry and its ground truth."""

    raw: dict[str, Any]
    ground_truth: list[list[str]]

    @property
    def id(self) -> str:
        return str(self.raw["id"])

    @property
    def category(self) -> str:
        return self.id.rsplit("_", 1)[0]

    @property
    def classes(self) -> list[str]:
        return list(self.raw["involved_classes"])

    @property
    def long_context(self) -> bool:
        """Whether BFCL loads the classes with their long-context data (as its checker decides)."""
        return "long_context" in self.category or "composite" in self.category

    @property
    def excluded(self) -> frozenset[str]:
        return frozenset(self.raw.get("excluded_function") or ())

    @property
    def missed(self) -> dict[int, list[str]]:
        """Functions withheld until a turn: turn index -> names."""
        return {int(turn): list(names) for turn, names in (self.raw.get("missed_function") or {}).items()}

    def config(self, class_name: str) -> dict[str, Any]:
        return copy.deepcopy(self.raw.get("initial_config", {}).get(class_name, {}))

    def turns(self) -> list[str]:
        """Each turn's query for ``agent_query``: its user messages, or BFCL's prompt for a turn
        that only brings new functions."""
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

        queries = []
        for index, messages in enumerate(self.raw["question"]):
            if index in self.missed:
                queries.append(DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)
            else:
                queries.append("\n\n".join(str(message["content"]) for message in messages))
        return queries

    def hidden(self, turn: int) -> dict[str, frozenset[str]]:
        """Per involved class, the functions not offered at ``turn``."""
        withheld = {name for at, names in self.missed.items() if at > turn for name in names}
        return {
            class_name: frozenset(
                name for name in function_names(class_name) if name in self.excluded or name in withheld
            )
            for class_name in self.classes
        }


def load_entries(category: str) -> list[Entry]:
    """Every entry of ``category`` (one of ``CATEGORIES``), with its ground truth."""
    if category not in CATEGORIES:
        raise SystemExit(f"unknown multi-turn category {category!r}: choose from {', '.join(CATEGORIES)}")
    data = _data()
    answers = {
        row["id"]: row["ground_truth"]
        for row in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")
    }
    return [Entry(row, answers[row["id"]]) for row in _lines(data / f"BFCL_v4_{category}.json")]


@cache
def function_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """BFCL's function docs of one API class."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    if class_name not in MULTI_TURN_FUNC_DOC_FILE_MAPPING:
        raise SystemExit(f"unknown BFCL API class {class_name!r}")
    path = _data() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return tuple(_lines(path))


def function_names(class_name: str) -> list[str]:
    return [doc["name"] for doc in function_docs(class_name)]


def api_class(class_name: str) -> type:
    """The Python class BFCL executes for ``class_name``."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
    return getattr(module, class_name)  # type: ignore[no-any-return]


def to_mcp_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function doc as an MCP tool, converted as for every BFCL category
    (``bench/bfcl/schema.py``: BFCL's language hint, its type names as JSON Schema); the doc's
    ``response`` part, which BFCL never shows a model, is left out."""
    return mcp_tool(doc, "multi_turn")


def parse_call(call: str, class_names: list[str]) -> tuple[str, dict[str, Any]]:
    """A ground-truth call string as a tool call: its name and its arguments by name (BFCL writes
    some positionally, ``sort('final_report.pdf')``; the method's signature names them)."""
    node = ast.parse(call, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {call!r}")
    name = node.func.id
    arguments = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords if keyword.arg}
    if node.args:
        owner = next((c for c in class_names if name in function_names(c)), None)
        if owner is None:
            raise ValueError(f"no involved class has {name!r}: {call!r}")
        parameters = [p for p in inspect.signature(getattr(api_class(owner), name)).parameters if p != "self"]
        for parameter, value in zip(parameters, node.args, strict=False):
            arguments[parameter] = ast.literal_eval(value)
    return name, arguments


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """A call as BFCL writes a model's decoded call (``model_handler.utils.convert_to_function_call``)."""
    return f"{name}({','.join(f'{key}={value!r}' for key, value in arguments.items())})"
