"""What a run returns: RunResult and the stable TerminationReason enum."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..messages import JSONObject, JSONSchema, Message, Usage


class TerminationReason(StrEnum):
    """Why a run ended. The values are a stable public contract (metrics, JSON, CLI)."""

    SUCCESS = "success"
    MAX_ROUNDS = "max_rounds"
    TOKEN_BUDGET = "token_budget"
    TOOL_BUDGET = "tool_budget"
    TIMEOUT = "timeout"
    LOOP_DETECTED = "loop_detected"
    EMPTY_RESPONSE = "empty_response"
    LLM_ERROR = "llm_error"
    TERMINAL_ERROR = "terminal_error"
    CANCELLED = "cancelled"


RETRYABLE_REASONS = frozenset(
    {
        TerminationReason.TIMEOUT,
        TerminationReason.EMPTY_RESPONSE,
        TerminationReason.LLM_ERROR,
        TerminationReason.CANCELLED,
    }
)
"""The endings that the same query may not meet again: a busy or flaky model server, a run cut off
from outside. The budget and loop stops would happen again (only tighter questions or looser
limits help), and ``terminal_error`` is about the request or the configuration."""

EARLY_STOP_REASONS = frozenset(
    {
        TerminationReason.MAX_ROUNDS,
        TerminationReason.TOKEN_BUDGET,
        TerminationReason.TOOL_BUDGET,
        TerminationReason.LOOP_DETECTED,
    }
)
"""The endings after which ``earlyStop`` asks the model for a best-effort answer."""


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of a run, as reported to callers."""

    name: str
    ok: bool
    ms: float
    error: str = ""
    verdict: str = "run"
    pages: int = 0
    """The result was paged into this many pages (0: it was not)."""
    total_chars: int = 0
    """The whole length of a paged result."""

    def to_dict(self) -> JSONObject:
        data: JSONObject = {"name": self.name, "ok": self.ok, "ms": round(self.ms, 1)}
        if self.error:
            data["error"] = self.error
        if self.pages:
            data["paged"] = {"pages": self.pages, "total_chars": self.total_chars}
        return data


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run.

    Attributes:
        answer: the model's final answer ("" when the run ended without one).
        termination_reason: why the run ended.
        early_stopped: the answer was synthesised after a budget or loop stop.
        truncated: the answer was cut off at the length limit (``finish_reason: "length"``) and is
            incomplete, even after the one continuation the loop asks for; ``detail`` says how.
        detail: what happened, for endings other than success ("reached max rounds (10)"), for
            an early-stop answer (which stop) and for a truncated answer; "" for a whole answer.
        rounds: model calls made for the loop (the early-stop synthesis is not counted).
        tool_calls: every call the model asked for, in order, with its outcome.
        usage: tokens summed over every model call of the run.
        elapsed_ms: wall time of the run.
        transcript: the whole conversation after the run, system prompt first; every tool call
            has its result, so it can be sent to a strict server as the next request's history.
        session_id: the conversation this run belongs to, if any.
        run_id: this run's id (events carry it).
        model: the model that answered last (with ``llm.fallbacks``, which one did); None when
            no model answered or the provider does not say.
    """

    answer: str
    termination_reason: TerminationReason
    early_stopped: bool = False
    truncated: bool = False
    detail: str = ""
    rounds: int = 0
    tool_calls: tuple[ToolCallRecord, ...] = ()
    usage: Usage = field(default_factory=Usage)
    elapsed_ms: float = 0.0
    transcript: tuple[Message, ...] = ()
    session_id: str | None = None
    run_id: str = ""
    model: str | None = None

    @property
    def ok(self) -> bool:
        """True for success and for an early-stop synthesis; False for every other ending."""
        return self.termination_reason is TerminationReason.SUCCESS or self.early_stopped

    @property
    def retryable(self) -> bool:
        """Whether asking again may end better (see ``RETRYABLE_REASONS``); False on success."""
        return not self.ok and self.termination_reason in RETRYABLE_REASONS

    def error_text(self) -> str:
        """The text callers see for an ending other than success."""
        return f"Agent terminated ({self.termination_reason.value}): {self.detail or 'no detail'}"

    def shown_answer(self) -> str:
        """The answer, or for a run that failed the reason (and any partial answer after it).

        Many agent frameworks show their model only ``answer``; an empty one for a failed run
        would hide why it failed.
        """
        if self.ok:
            return self.answer
        hint = "retrying may help" if self.retryable else "retrying the same query will not help"
        text = f"{self.error_text()} ({hint})"
        return f"{text}\n\n{self.answer}" if self.answer else text

    def to_structured(self) -> JSONObject:
        """The ``structuredContent`` of ``agent_query`` (and ``query --json``).

        Besides DESIGN.md's fields it carries ``detail`` (why the run ended; "" for a whole answer),
        ``truncated`` (the answer was cut off at the length limit), ``retryable``, ``run_id`` (its
        record in ``GET /api/v1/runs/{run_id}``) and ``model`` (the model that answered last: with
        ``llm.fallbacks``, which one did); for a failed run
        ``answer`` says why (``shown_answer``), so a caller reading only the structured result, or
        only its answer, still learns what went wrong.
        """
        return {
            "answer": self.shown_answer(),
            "retryable": self.retryable,
            "termination_reason": self.termination_reason.value,
            "early_stopped": self.early_stopped,
            "truncated": self.truncated,
            "detail": self.detail,
            "rounds": self.rounds,
            "tool_calls": [record.to_dict() for record in self.tool_calls],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "total_tokens": self.usage.total_tokens,
                **({"estimated": True} if self.usage.estimated else {}),
                **({"clamped": True} if self.usage.clamped else {}),
            },
            "elapsed_ms": round(self.elapsed_ms, 1),
            "session_id": self.session_id,
            "run_id": self.run_id,
            "model": self.model,
        }


RESULT_SCHEMA: JSONSchema = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "the answer; for a run that failed, why it failed"},
        "retryable": {"type": "boolean", "description": "whether asking again may end better"},
        "termination_reason": {"type": "string", "enum": [reason.value for reason in TerminationReason]},
        "early_stopped": {"type": "boolean"},
        "truncated": {
            "type": "boolean",
            "description": "the answer was cut off at the length limit and is incomplete (detail says how)",
        },
        "detail": {
            "type": "string",
            "description": "why the run ended, which stop an early-stop answer followed, or how the answer "
            "was cut off; empty for a whole answer",
        },
        "rounds": {"type": "integer"},
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "ok": {"type": "boolean"},
                    "ms": {"type": "number"},
                    "error": {"type": "string"},
                    "paged": {
                        "type": "object",
                        "description": "the result was long and paged (read_result), not cut",
                        "properties": {"pages": {"type": "integer"}, "total_chars": {"type": "integer"}},
                        "required": ["pages", "total_chars"],
                    },
                },
                "required": ["name", "ok", "ms"],
            },
        },
        "usage": {
            "type": "object",
            "properties": {
                "prompt_tokens": {"type": "integer"},
                "completion_tokens": {"type": "integer"},
                "total_tokens": {"type": "integer"},
                "estimated": {
                    "type": "boolean",
                    "description": "present (true) when the model server did not report some of the "
                    "counts (a stream without usage, a stream that broke off) and they were estimated",
                },
                "clamped": {
                    "type": "boolean",
                    "description": "present (true) when the model server reported counts that could "
                    "not be trusted and they were repaired",
                },
            },
            "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
        },
        "elapsed_ms": {"type": "number"},
        "session_id": {"type": ["string", "null"]},
        "run_id": {
            "type": "string",
            "description": "this run's id: its record is GET /api/v1/runs/{run_id}",
        },
        "model": {
            "type": ["string", "null"],
            "description": "the model that answered last (with llm.fallbacks, which one did)",
        },
    },
    "required": [
        "answer",
        "retryable",
        "termination_reason",
        "early_stopped",
        "truncated",
        "detail",
        "rounds",
        "tool_calls",
        "usage",
        "elapsed_ms",
        "session_id",
        "model",
    ],
}
"""The ``outputSchema`` of ``agent_query``: the shape of ``RunResult.to_structured()``."""
