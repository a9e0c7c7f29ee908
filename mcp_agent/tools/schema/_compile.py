"""Tool schemas, public face: compile an MCP ``inputSchema`` once, check a model's arguments (pure).

``compile_tool_schema`` turns any ``inputSchema`` into a ``CompiledSchema``: one normalised
Draft 2020-12 object schema with every ``$ref`` inlined (``_normalize``,
``_refs``), its wire form for each provider dialect (``_dialects``,
``_strict``) and a note of each change made. ``ArgumentChecker.check`` (shared per schema
through ``checker_for``) is the argument pipeline: it coerces by schema before it validates
(``_coerce``), and never touches arguments that already validate; then ``jsonschema`` validates
(Draft 2020-12, formats not checked: the server has the last word on those) and every violation
is reported with its JSON-pointer path (``_errors``); ``format_errors`` writes the
report the model reads. Neither compiling nor checking ever raises.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ...messages import JSONObject, JSONSchema, canonical_json
from ._coerce import Coercer
from ._dialects import compile_variants
from ._errors import MAX_LISTED, describe, shorten
from ._nodes import Notes
from ._normalize import EMPTY, normalise

logger = logging.getLogger(__name__)

DIALECTS = ("openai", "openai_strict", "anthropic", "gemini")
"""The wire forms ``CompiledSchema.variants`` may hold (``openai_strict`` only when safe)."""


@dataclass(frozen=True)
class CompiledSchema:
    """A tool's input schema, normalised and compiled for each provider dialect.

    Attributes:
        parameters: the normalised schema: what arguments are validated against, and the wire
            form for servers with no dialect of their own (local OpenAI-compatible ones use
            ``variants["openai"]``).
        variants: the wire form per dialect (:data:`DIALECTS`); ``openai_strict`` is present only
            when the strict form keeps the schema's meaning.
        changes: what was changed, as short sentences; dialect ones start with the dialect.
    """

    parameters: JSONSchema
    variants: dict[str, JSONSchema] = field(default_factory=dict)
    changes: tuple[str, ...] = ()


def compile_tool_schema(schema: Any) -> CompiledSchema:
    """Normalise an MCP ``inputSchema`` and compile it for every dialect.

    Args:
        schema: the tool's ``inputSchema`` exactly as the server sent it (anything at all).

    Returns:
        The compiled schema. Never raises: whatever cannot be kept is dropped and noted.
    """
    notes = Notes()
    try:
        parameters = normalise(schema, notes)
        variants = compile_variants(parameters, notes)
    except Exception as exc:  # a bug here must not cost the tool: fall back to no parameters
        logger.exception("could not compile a tool schema")
        empty = copy.deepcopy(EMPTY)
        return CompiledSchema(
            parameters=empty,
            variants={d: copy.deepcopy(EMPTY) for d in DIALECTS if d != "openai_strict"},
            changes=(f"schema could not be compiled ({type(exc).__name__}): no parameters",),
        )
    return CompiledSchema(parameters=parameters, variants=variants, changes=tuple(notes))


@dataclass(frozen=True)
class ArgumentCheck:
    """The outcome of the argument pipeline.

    Attributes:
        arguments: the arguments after coercion: what is sent to the tool when ``ok``.
        errors: one dict per violation: ``path`` (a JSON pointer, ``""`` for the arguments
            object itself), ``message``, ``expected`` and, except for a missing property,
            ``received`` (the value found, shortened to a note when large).
    """

    arguments: JSONObject
    errors: tuple[JSONObject, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the arguments are valid."""
        return not self.errors


class ArgumentChecker:
    """Coerces and validates arguments against one tool's schema.

    The schema is normalised and its validator compiled once, here; ``check`` is then cheap,
    and cheapest for arguments that are already valid. Use :func:`checker_for` to share one
    checker per schema.

    Args:
        schema: the tool's input schema, raw or already normalised (``CompiledSchema.parameters``).
    """

    def __init__(self, schema: JSONSchema) -> None:
        self.schema = normalise(schema, Notes())
        self._validator = jsonschema.Draft202012Validator(self.schema)
        self._coercer = Coercer(self._validator)

    def check(self, arguments: JSONObject) -> ArgumentCheck:
        """Coerce ``arguments`` by the schema, then validate them.

        Never raises: when the validator itself fails on an odd schema, the arguments pass
        unchanged and the server judges them.
        """
        if not isinstance(arguments, dict):
            return ArgumentCheck(
                {},
                (
                    {
                        "path": "",
                        "message": "the arguments must be a JSON object",
                        "expected": "object",
                        "received": shorten(arguments),
                    },
                ),
            )
        try:
            if self._validator.is_valid(arguments):
                return ArgumentCheck(arguments)
            coerced = self._coercer.coerce(arguments, self.schema, known_invalid=True)
            errors = describe(self._validator.iter_errors(coerced))
        except Exception:
            logger.warning(
                "argument validation failed on schema %s", canonical_json(self.schema)[:200], exc_info=True
            )
            return ArgumentCheck(arguments)
        return ArgumentCheck(coerced, errors)


def format_errors(name: str, check: ArgumentCheck) -> str:
    """The tool-result text the model reads when its arguments are invalid.

    Args:
        name: the tool's exposed name.
        check: a failed check.

    Returns:
        One line per violation (at most 20 listed), then what to do; ``""`` when ``check`` is ok.
    """
    if check.ok:
        return ""
    count = len(check.errors)
    lines = [f"Invalid arguments for {name} ({count} problem{'s' if count != 1 else ''}):"]
    for error in check.errors[:MAX_LISTED]:
        line = f"- {error['path'] or '(arguments)'}: {error['message']}; expected {error['expected']}"
        if "received" in error:
            line += f"; received {canonical_json(error['received'])}"
        lines.append(line)
    if count > MAX_LISTED:
        lines.append(f"- ... and {count - MAX_LISTED} more")
    lines.append("Call the tool again with corrected arguments.")
    return "\n".join(lines)


_CACHE: OrderedDict[str, ArgumentChecker] = OrderedDict()
_CACHE_SIZE = 512


def checker_for(schema: JSONSchema) -> ArgumentChecker:
    """The shared :class:`ArgumentChecker` for ``schema`` (an LRU cache of 512, keyed by content)."""
    try:
        key = canonical_json(schema)
    except (TypeError, ValueError, RecursionError):
        return ArgumentChecker(schema)
    checker = _CACHE.get(key)
    if checker is None:
        checker = _CACHE[key] = ArgumentChecker(schema)
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return checker
