"""The known exceptions (``known.json``) and what makes a ground truth undeliverable by anyone.

``known.json`` maps a BFCL id to the reason its ground truth cannot pass through the gateway: a
``BFCL:`` reason when the ground truth contradicts its own schema or fails BFCL's own checker
(nothing a gateway should bend for), a ``gateway design:`` reason when the gateway does on
purpose what makes it fail. ``contradictions`` finds the first kind without the gateway: the
oracle's calls checked against the entry's schemas (JSON Schema 2020-12, as the server offers
them) and judged by BFCL's checker; ``tests/bfcl/test_known.py`` checks every ``BFCL:`` entry
against it.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from .checker import judge
from .data import Entry
from .oracle import planned_calls
from .schema import mcp_tool

KNOWN = Path(__file__).resolve().parent / "known.json"


def known_exceptions() -> dict[str, str]:
    """BFCL ids with the reason their ground truth fails through the gateway."""
    rows = json.loads(KNOWN.read_text(encoding="utf-8"))
    return {str(key): str(value) for key, value in rows.items()}


def contradictions(entry: Entry) -> list[str]:
    """Why the oracle's calls for ``entry`` are wrong by BFCL's own measure ([]: they are not)."""
    calls = planned_calls(entry)
    docs = {function["name"]: function for function in entry.functions}
    found: list[str] = []
    for name, arguments in calls:
        if name not in docs:
            found.append(f"its answer calls {name}, which is not among its functions")
            continue
        schema = mcp_tool(docs[name], entry.category)["inputSchema"]
        found += [
            f"its answer gives {name} the parameter {key!r}, which the function does not have"
            for key in arguments
            if key not in schema.get("properties", {})
        ]
        validator = jsonschema.Draft202012Validator(schema)
        for error in validator.iter_errors(arguments):
            where = "/".join(str(part) for part in error.absolute_path) or "(root)"
            found.append(f"{name} {where}: {error.message[:160]}")
    verdict = judge(entry, calls)
    if not verdict.passed:
        found.append(
            f"BFCL's own checker refuses it: {verdict.error[0] if verdict.error else verdict.error_type}"
        )
    return found
