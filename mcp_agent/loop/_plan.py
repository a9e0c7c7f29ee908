"""The prepared tool calls of one turn: a ``Plan`` of ``Slot`` values, one per call, in call order.

A ``Slot`` carries one call through the dispatch (``loop/_dispatch.py``): its verdict, its
deadline, whether it waits for approval or shares an identical call's result, and once known
its answer (text, error flag, timing, paging, images) and its span. The run reads the plan's
loop-guard finding and its cost in executions (``loop/_state.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..messages import Image, ToolCall, ToolResult, ToolSpec
from ..telemetry.base import NULL_TOOL_SPAN, ToolSpan


@dataclass
class Slot:
    """One call of a turn and, once known, its answer.

    ``verdict`` follows ``ToolCallEnded``: ``run``, ``shared``, ``unknown_tool``,
    ``invalid_arguments``, ``denied``, ``disabled``, ``skipped``.
    """

    call: ToolCall
    verdict: str = "run"
    timeout: float | None = None
    text: str = ""
    is_error: bool = False
    ok: bool = False
    done: bool = False
    started: bool = False
    executed: bool = False
    needs_approval: bool = False
    result: ToolResult | None = None
    primary: int | None = None
    repeat_of: int | None = None
    ms: float = 0.0
    truncated: bool = False
    pages: int = 0
    total_chars: int = 0
    handle: str = ""
    images: tuple[Image, ...] = ()
    spec: ToolSpec | None = None
    span: ToolSpan = NULL_TOOL_SPAN

    def answer(self, text: str, verdict: str, *, is_error: bool = True, ok: bool = False) -> None:
        self.text, self.verdict, self.is_error, self.ok, self.done = text, verdict, is_error, ok, True

    @property
    def pending(self) -> bool:
        """Would run (or wait for approval) and has no answer yet."""
        return self.verdict == "run" and not self.done


@dataclass
class Plan:
    """The prepared calls of one turn.

    Attributes:
        round: the round the turn belongs to.
        slots: one per call, in the model's order.
        loop: ``(name, occurrences)`` when a call trips the loop guard.
        tainted: tool output was in the context when the calls were made (the gate's ``tainted``).
    """

    round: int
    slots: list[Slot]
    loop: tuple[str, int] | None = None
    tainted: bool = False

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(slot.call for slot in self.slots)

    @property
    def wanted(self) -> int:
        """How many executions this turn would cost (shared and rejected calls cost none)."""
        return sum(1 for slot in self.slots if slot.pending)
