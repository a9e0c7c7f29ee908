"""Values written as Java or JavaScript source text: the arguments of BFCL's Java/JS categories.

In ``simple_java`` and ``simple_javascript`` every parameter is sent as a ``string`` holding a
value in the language's syntax (``bfcl/schema.py``), and BFCL's checker reads it back with its
own converters (``java_type_converter``, ``js_type_converter``) before comparing it with the
possible answer. ``literal`` writes a value so, for the oracle model: it tries the spellings the
converters read (``new ArrayList<>(Arrays.asList(...))``, ``new int[]{...}``,
``new HashMap<String, Object>() {{ put(...); }}``, ``[1, 2]``, ``{'k': 'v'}``, ``3.0f``,
``5L``, ``7n``...) and returns the first that BFCL's converter turns back into the value; when
none does, the first spelling (the checker then says what it read).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter import java_type_converter
from bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter import js_type_converter

_JAVA_ELEMENT = {"integer": "int", "String": "String", "double": "double", "float": "float", "long": "long"}


def _bool(value: Any) -> str:
    return "true" if value is True else "false" if value is False else str(value)


def _java_scalar(value: Any) -> str:
    """A value as ``parse_java_value`` reads it (inside collections)."""
    if isinstance(value, bool):
        return _bool(value)
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def _java_typed(value: Any, kind: str | None) -> str:
    """One value of a declared Java type as ``java_type_converter`` reads it."""
    if kind == "long" and isinstance(value, int) and not isinstance(value, bool):
        return f"{value}L"
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{float(value)!r}f"
    if kind == "double" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    if isinstance(value, bool):
        return _bool(value)
    return str(value)


def _java_spellings(value: Any, kind: str, nested: str | None) -> Iterator[str]:
    if kind in ("Array", "ArrayList") and isinstance(value, list):
        quoted = [_java_scalar(v) for v in value] if nested in ("String", "char", None) else []
        typed = [_java_typed(v, nested) for v in value]
        if kind == "ArrayList":
            if not value:
                yield "new ArrayList<>()"
            for items in (quoted, typed):
                if value and items:
                    yield f"new ArrayList<>(Arrays.asList({', '.join(items)}))"
        else:
            element = _JAVA_ELEMENT.get(nested or "", "Object")
            for items in (typed, quoted):
                yield f"new {element}[]{{{', '.join(items)}}}"
        return
    if kind == "HashMap" and isinstance(value, dict):
        if not value:
            yield "new HashMap<>()"
        puts = " ".join(f"put({json.dumps(str(k))}, {_java_scalar(v)});" for k, v in value.items())
        yield f"new HashMap<String, Object>() {{{{ {puts} }}}}"
        return
    if isinstance(value, (dict, list)):
        yield json.dumps(value)
    yield _java_typed(value, kind)


def _js_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return _bool(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_js_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{k}': {_js_dict_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _js_dict_value(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else _js_scalar(value)


def _js_spellings(value: Any, kind: str) -> Iterator[str]:
    if isinstance(value, str):  # a variable's name, or a string
        yield value
        yield json.dumps(value)
        return
    if kind in ("array", "dict") or isinstance(value, (list, dict)):
        yield _js_scalar(value)
        yield json.dumps(value)
        return
    if kind == "Bigint" and isinstance(value, int) and not isinstance(value, bool):
        yield f"{value}n"
    yield _js_scalar(value)


def _same(read: Any, value: Any) -> bool:
    return bool(read == value and type(read) is type(value)) or (
        isinstance(read, (int, float)) and isinstance(value, (int, float)) and read == value
    )


def literal(value: Any, language: str, kind: str, nested: str | None = None) -> str:
    """``value`` written in ``language`` (``java``/``javascript``) for a parameter of BFCL type
    ``kind`` (list element type ``nested``), as BFCL's converter reads it back."""
    if language == "java":
        spellings = list(_java_spellings(value, kind, nested))

        def read(text: str) -> Any:
            return java_type_converter(text, kind, nested) if nested else java_type_converter(text, kind)
    else:
        spellings = list(_js_spellings(value, kind))

        def read(text: str) -> Any:
            return js_type_converter(text, kind, nested) if nested else js_type_converter(text, kind)

    for text in spellings:
        try:
            if _same(read(text), value):
                return text
        except Exception:  # the converters raise on spellings they do not take: try the next
            continue
    return spellings[0]
