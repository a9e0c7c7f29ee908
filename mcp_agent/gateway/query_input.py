"""The input of a query, ``{query, session_id?, limits?}``, parsed and checked (pure, no I/O).

The same rules serve ``agent_query``'s arguments and the body of ``POST /api/v1/query``: a
missing, empty or too long query, a malformed session id, unknown limit keys and wrongly typed
values are refused with a message that names the field and says what is expected. ``null`` for
an optional member (and ``""`` for ``session_id``) means absent: clients in a "strict" tool mode
send every property. Limit keys
are accepted in the file's camelCase or in snake_case; types are checked strictly (``"3"`` is
not a number, ``true`` is not an integer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..config import Limits
from ..messages import JSONObject
from ..state.records import valid_session_id


class QueryInputError(ValueError):
    """The arguments of a query are invalid; the message says which and why."""


@dataclass(frozen=True)
class QueryInput:
    """A validated query request (MCP arguments or REST body)."""

    query: str
    session_id: str | None = None
    limits: Limits | None = None


def _format_errors(prefix: str, exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        where = f"{prefix}.{loc}" if loc else prefix
        message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def unencodable_at(text: str) -> int | None:
    """The index of the first character UTF-8 cannot encode (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def parse_query_input(data: Any, *, max_query_chars: int = 0) -> QueryInput:
    """Validate ``{query, session_id?, limits?}``.

    Raises:
        QueryInputError: a missing, empty or too long query, a bad session id, unknown or
            mistyped limits, unknown keys.
    """
    if not isinstance(data, Mapping):
        raise QueryInputError("arguments must be an object with a 'query' string")
    unknown = sorted(set(data) - {"query", "session_id", "limits"})
    if unknown:
        raise QueryInputError(
            f"unknown argument(s): {', '.join(unknown)} (expected query, session_id, limits)"
        )
    query = data.get("query")
    if query is None:
        raise QueryInputError("'query' is required: the question or instruction for the agent")
    if not isinstance(query, str):
        raise QueryInputError(f"'query' must be a string, not {type(query).__name__}")
    if not query.strip():
        raise QueryInputError("'query' must not be empty")
    if (bad := unencodable_at(query)) is not None:
        raise QueryInputError(
            f"'query' is not valid Unicode text: a lone surrogate (U+{ord(query[bad]):04X}) at character {bad}"
        )
    if max_query_chars and len(query) > max_query_chars:
        raise QueryInputError(
            f"'query' is {len(query)} characters long; the limit is {max_query_chars} (gateway.maxQueryChars)"
        )
    session_id = data.get("session_id")
    if session_id == "":  # strict-mode clients fill what they do not need: absent
        session_id = None
    if session_id is not None:
        if not isinstance(session_id, str):
            raise QueryInputError(f"'session_id' must be a string, not {type(session_id).__name__}")
        if not valid_session_id(session_id):
            raise QueryInputError(
                "'session_id' must be 1-128 characters of letters, digits and . _ : @ - (starting with a "
                "letter or digit)"
            )
    raw_limits = data.get("limits")
    limits = None
    if raw_limits is not None:
        if not isinstance(raw_limits, Mapping):
            raise QueryInputError(f"'limits' must be an object, not {type(raw_limits).__name__}")
        given = {key: value for key, value in raw_limits.items() if value is not None}  # null: absent
        try:
            limits = Limits.model_validate(given, strict=True) if given else None
        except ValidationError as exc:
            raise QueryInputError(_format_errors("limits", exc)) from None
    return QueryInput(query=query, session_id=session_id, limits=limits)


def limits_schema() -> JSONObject:
    """The JSON Schema of ``agent_query``'s ``limits`` argument, from the Limits model."""
    properties: JSONObject = {}
    for name, info in Limits.model_fields.items():
        key = info.alias or name
        if info.annotation is bool:
            schema: JSONObject = {"type": ["boolean", "null"]}
        elif info.annotation is int:
            schema = {"type": ["integer", "null"], "minimum": 0}
        else:
            schema = {"type": ["number", "null"], "minimum": 0}
        if info.description:
            schema["description"] = " ".join(info.description.split())
        properties[key] = schema
    return {
        "type": ["object", "null"],
        "description": (
            "Tighter limits for this query (they can only lower the server's; 0 means off; null or "
            "a missing member: the server's)."
        ),
        "properties": properties,
        "additionalProperties": False,
    }
