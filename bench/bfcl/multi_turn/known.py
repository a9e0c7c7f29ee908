"""The multi-turn entries whose ground truth BFCL's own rules forbid: named, with the reason.

Two kinds of ground-truth call cannot go through any gateway that honours the tools it lists and
their schemas, while BFCL's executor runs them anyway (it ``eval``s the call on the instance,
whatever the model was offered and whatever the doc's types say):

- a call whose arguments the function's own doc rejects (``close_ticket(ticket_id='ticket_001')``:
  ``ticket_id`` is an ``integer``); the gateway refuses it before the tool, with the schema's
  error for the model to read;
- a call of a function BFCL itself withholds at that turn (a ``missed_function`` used before its
  turn); the gateway does not list it yet, so it refuses it as an unknown tool.

``scan`` finds both kinds in the data; ``KNOWN`` is its result, checked in so that a report
names them, and checked against ``scan`` by ``tests/bfcl/test_multi_turn_known.py``.
"""

from __future__ import annotations

from typing import Any

from bench.bfcl.multi_turn.data import CATEGORIES, function_docs, load_entries, parse_call, to_mcp_tool

_TICKET = (
    "BFCL's ground truth calls close_ticket(ticket_id='ticket_001') but its doc types ticket_id as "
    "integer: the gateway refuses the call before the tool (BFCL's executor runs it and it changes nothing)"
)
KNOWN: dict[str, str] = {
    "multi_turn_base_173": _TICKET,
    "multi_turn_miss_func_173": _TICKET,
    "multi_turn_miss_param_173": _TICKET,
    "multi_turn_long_context_173": _TICKET,
    "multi_turn_miss_func_49": (
        "BFCL's ground truth calls tail at turn 1, but the entry withholds tail until turn 3 "
        "(missed_function): the gateway does not offer it yet and refuses it"
    ),
}


def scan(categories: tuple[str, ...] = CATEGORIES) -> dict[str, list[str]]:
    """Entry id -> what in its ground truth breaks BFCL's own docs or its own withholding."""
    import jsonschema

    schemas: dict[str, Any] = {}
    found: dict[str, list[str]] = {}
    for category in categories:
        for entry in load_entries(category):
            for index, calls in enumerate(entry.ground_truth):
                hidden = entry.hidden(index)
                for call in calls:
                    name, arguments = parse_call(call, entry.classes)
                    owner = next(c for c in entry.classes if any(d["name"] == name for d in function_docs(c)))
                    if name in hidden[owner]:
                        found.setdefault(entry.id, []).append(
                            f"turn {index}: {call} is withheld at this turn"
                        )
                        continue
                    if name not in schemas:
                        doc = next(d for d in function_docs(owner) if d["name"] == name)
                        schemas[name] = to_mcp_tool(doc)["inputSchema"]
                    problem = next(
                        iter(jsonschema.Draft202012Validator(schemas[name]).iter_errors(arguments)), None
                    )
                    if problem is not None:
                        found.setdefault(entry.id, []).append(f"turn {index}: {call}: {problem.message}")
    return found
