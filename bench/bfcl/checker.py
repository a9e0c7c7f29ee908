"""BFCL's own checker, importable without the model SDKs: the judge of every single-turn entry.

``bfcl_eval.eval_checker.ast_eval.ast_checker`` imports ``bfcl_eval.constants.model_config``,
which imports every model vendor's SDK (anthropic, openai, google, ...: not installed here, on
purpose: ``make test`` installs ``bfcl-eval --no-deps``). The checker reads one thing of it,
``MODEL_CONFIG_MAPPING[model_name].underscore_to_dot`` (``convert_func_name``: whether a model
turned ``math.factorial`` into ``math_factorial``). So a stand-in module takes its place in
``sys.modules`` before the import, mapping our one model name (``MODEL``) to
``underscore_to_dot=False``: the calls judged are the ones that reached the MCP server, under the
server's own (BFCL's) names. If the real module was imported already, it is left alone.

``judge`` applies what BFCL's ``eval_runner`` does per category: the AST checker with the
category's language for the categories with possible answers; for ``irrelevance`` and
``live_irrelevance`` an entry passes when no call was made, for ``live_relevance`` when one was
(``_evaluate_single_relevance_entry``: an empty output is no call).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any

from .data import ANY_CALL, NO_CALL, Entry
from .schema import language_of

MODEL = "mcp-agent"
"""The model name the checker is given (no ``_``: ``convert_func_name`` reads ``_`` as ``/``)."""
_CONFIG = "bfcl_eval.constants.model_config"


@dataclass(frozen=True)
class _Config:
    underscore_to_dot: bool = False


def _stand_in() -> None:
    if _CONFIG in sys.modules:
        return
    module = types.ModuleType(_CONFIG, "Stand-in for BFCL's model table (bench/bfcl/checker.py).")
    module.MODEL_CONFIG_MAPPING = {MODEL: _Config()}  # type: ignore[attr-defined]
    sys.modules[_CONFIG] = module


_stand_in()

from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402

_LANGUAGES = {"java": Language.JAVA, "javascript": Language.JAVASCRIPT, "python": Language.PYTHON}

Call = tuple[str, dict[str, Any]]
"""A call as it reached the tool: ``(name, arguments)``."""


@dataclass(frozen=True)
class Verdict:
    """BFCL's verdict on one entry: passed, and else its error type and messages."""

    passed: bool
    error_type: str = ""
    error: tuple[str, ...] = ()


def judge(entry: Entry, calls: list[Call]) -> Verdict:
    """BFCL's verdict on the calls that reached the tools for ``entry``."""
    if entry.category in NO_CALL:
        if calls:
            return Verdict(
                False,
                "irrelevance_error:decoder_success",
                ("Valid syntax. Successfully decode AST when it should not.",),
            )
        return Verdict(True)
    if entry.category in ANY_CALL:
        if not calls:
            return Verdict(False, "relevance_error:decoder_failed", ("No function call.",))
        return Verdict(True)
    output = [{name: dict(arguments)} for name, arguments in calls]
    try:
        result = ast_checker(
            entry.functions,
            output,
            entry.ground_truth,
            _LANGUAGES[language_of(entry.category)],
            entry.category,
            MODEL,
        )
    except Exception as error:  # BFCL's checker raising on an output is a failed entry, said so
        return Verdict(False, "checker_raised", (f"{type(error).__name__}: {error}",))
    if result["valid"]:
        return Verdict(True)
    return Verdict(False, str(result.get("error_type", "")), tuple(str(e) for e in result.get("error", ())))
