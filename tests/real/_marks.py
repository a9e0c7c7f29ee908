"""Checks of behaviours that colleagues are fixing (issue 10): strict xfail until their work lands.

Each mark names the item of issue 10 it waits for. When the fix lands the test passes, the strict
mark turns that into a failure (XPASS), and the mark must be removed: the tier then guards it.
"""

from __future__ import annotations

import pytest


def waits_for(item: int, what: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"issue 10 item {item}: {what}")


TOOL_CHOICE = pytest.mark.xfail(strict=True, reason="llm.toolChoice (issue 10)")
PHANTOM_CALLS = waits_for(1, "read function_call only when there are no tool_calls")
OUTPUT_CAP = waits_for(2, "always send an output cap")
REMEMBER_STREAMING = waits_for(3, "remember that streaming with tools fails")
CONTEXT_OVERFLOW = waits_for(4, "context overflow in disguise")
TRUNCATED = waits_for(5, "finish_reason length -> truncated")
USAGE = waits_for(6, "usage marked estimated / tokenizer-based")
IDENTIFY = waits_for(7, "server identification, context window, doctor")
ENDINGS = waits_for(8, "endings that say what happened")
