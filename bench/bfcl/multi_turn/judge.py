"""BFCL's own checkers applied to what reached the API servers during a replay.

Two verdicts per entry, both BFCL's code, both required:

- ``live``: the servers' live instances after each turn against instances that executed the
  ground truth up to that turn (``execute_multi_turn_func_call``), compared by BFCL's
  ``state_checker``; and the results the servers returned so far by BFCL's ``response_checker``
  (every ground-truth result of the turn must be among them) — the two checks
  ``multi_turn_checker`` makes after each turn whose ground truth is not empty. It judges the
  state the gateway's calls actually produced.
- ``bfcl``: BFCL's ``multi_turn_checker`` itself, given the calls that reached the servers as
  decoded model output (each call one step, as a model answering one call per round), exactly as
  BFCL's evaluation runner gives it a model's calls: it re-executes them on fresh instances.

BFCL keeps the instances it executes in its module's globals, named after the model and the
entry; each judgement uses a name of its own (``tag``) and ``forget`` removes them afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bench.bfcl.multi_turn.data import Entry, call_text


@dataclass
class Turn:
    """What one turn left on the servers."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    """In the order they ran: ``{"name", "arguments", "result", "error", "at"}``."""
    instances: dict[str, Any] = field(default_factory=dict)
    """Class name -> the live instance after the turn (unpickled from its server)."""


def _short(result: dict[str, Any]) -> str:
    text = f"{result.get('error_type', '')}: {result.get('error_message', '')}"
    details = result.get("details") or {}
    if "differences" in details:
        text += f" differences: {details['differences']!r}"
    if "missing_items" in details:
        text += f" missing: {details['missing_items']!r}"
    return text[:600]


def live_verdict(entry: Entry, turns: list[Turn], tag: str) -> str | None:
    """None when every turn's live state and results pass BFCL's checks; else why not."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    results_so_far: list[str] = []
    for index, ground_truth in enumerate(entry.ground_truth):
        turn = turns[index] if index < len(turns) else Turn()
        expected_results, expected = execute_multi_turn_func_call(
            func_call_list=ground_truth,
            initial_config=entry.raw["initial_config"],
            involved_classes=entry.classes,
            model_name=f"{tag}_ground_truth",
            test_entry_id=entry.id,
            long_context=entry.long_context,
            is_evaL_run=True,
        )
        results_so_far.extend(call["result"] for call in turn.calls)
        if not ground_truth:
            continue
        if not turn.calls:
            return f"turn {index}: no call reached a server (expected {len(ground_truth)})"
        if set(turn.instances) != set(expected):
            return f"turn {index}: live classes {sorted(turn.instances)} != {sorted(expected)}"
        checked = state_checker(turn.instances, expected)
        if not checked["valid"]:
            return f"turn {index}: {_short(checked)}"
        checked = response_checker(results_so_far, expected_results, index)
        if not checked["valid"]:
            return f"turn {index}: {_short(checked)}"
    return None


def bfcl_verdict(entry: Entry, turns: list[Turn], tag: str) -> str | None:
    """None when BFCL's ``multi_turn_checker`` passes the calls that reached the servers."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    decoded = [[[call_text(call["name"], call["arguments"])] for call in turn.calls] for turn in turns]
    if len(decoded) != len(entry.ground_truth):
        return f"{len(decoded)} turns ran, the ground truth has {len(entry.ground_truth)}"
    checked = multi_turn_checker(decoded, entry.ground_truth, entry.raw, entry.category, tag)
    return None if checked["valid"] else _short(checked)


def forget(tag: str) -> None:
    """Drop the instances BFCL's executor kept for judgements named ``tag``."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    prefix = re.sub(r"[-./:]", "_", f"{tag}_")
    kept = vars(multi_turn_utils)
    for name in [name for name in kept if name.startswith(prefix)]:
        del kept[name]
