"""The loop's model calls (used by ``run.run``): one call between its events, the context-length
retry, the continuation of an answer cut off at the output cap, and the loop's own instructions.

- ``call_model``: one call on the trimmed history; a ``ContextLengthError`` trims hard and tries
  once more; a provider failure is an ``Ending`` (failures are data here).
- ``finish_answer``: a text answer that ended with ``finish_reason: "length"`` is continued ONCE
  when the cap it hit was ours (the request's ``max_output_tokens``, and the answer used all of
  it): the partial answer goes back as an assistant message followed by ``CONTINUE_PROMPT``, no
  tools offered, and the final answer is the two joined; the transcript keeps one assistant
  message with the whole answer. Chosen over a provider's native prefill (a trailing assistant
  message that the model extends) because only some servers support that, and a server that
  does not answers it as a new turn. An answer cut off by something else (a full context
  window: fewer tokens than the cap) is not continued. Either way, an answer still cut off is
  flagged ``truncated`` and ``detail`` says so.
- ``echoes_instruction``: a small model may write the loop's own instruction back (the
  early-stop "[SYSTEM: The run was stopped ...]" came back as the answer); such a reply is
  dropped, never shown as the answer.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import replace

from ..events import ModelCallEnded, ModelCallStarted, ModelDelta
from ..exceptions import ContextLengthError, ProviderError
from ..messages import Delta, Message, ToolSpec, Turn
from ..providers.base import ModelRequest
from ._state import Ending, RunState
from .history import hard_trim, history_chars
from .result import TerminationReason

logger = logging.getLogger(__name__)

R = TerminationReason

EARLY_STOP_PROMPT = (
    "[SYSTEM: The run was stopped ({detail}). Based on the work done so far, give your best "
    "final answer to the user now. Do NOT call any tools.]"
)
CONTINUE_PROMPT = (
    "[SYSTEM: Your answer was cut off at the length limit. Continue it exactly where it stopped: "
    "do not repeat anything, do not start over, add no preamble. Do NOT call any tools.]"
)

_ECHO = re.compile(
    r"\[\s*system\s*:|give your best final answer to the user now|continue it exactly where it stopped",
    re.IGNORECASE,
)
_NO_SPACE_BEFORE = tuple(".,;:!?)]}%'\"’”…")
_NO_SPACE_AFTER = ("-", "(", "[", "{")


async def call_model(r: RunState, tools: Sequence[ToolSpec], extra: Sequence[Message] = ()) -> Turn | Ending:
    """One model call on the trimmed history; a context-length error trims hard and retries once."""
    messages = r.history()
    for attempt in (1, 2):
        try:
            return await _model_call(r, [*messages, *extra], tools)
        except ContextLengthError as exc:
            trimmed = hard_trim(messages)
            if attempt == 2 or history_chars(trimmed) >= history_chars(messages):
                return Ending(
                    R.TERMINAL_ERROR,
                    f"the conversation does not fit the model's context "
                    f"even after trimming (round {r.rounds}): {exc}",
                )
            logger.warning("context length exceeded; retrying with the history trimmed to half: %s", exc)
            messages, r.history_cap = trimmed, history_chars(trimmed)
        except ProviderError as exc:
            reason = R.TERMINAL_ERROR if exc.terminal else R.LLM_ERROR
            return Ending(reason, f"model call failed (round {r.rounds}): {exc}")
    raise AssertionError("unreachable")


async def _model_call(r: RunState, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
    """``provider.complete`` between ModelCallStarted and ModelCallEnded; usage is summed."""
    r.emit(ModelCallStarted, round=r.rounds, messages=len(messages), tools=len(tools))
    options = r.request
    span = r.trace.model_call(
        messages,
        round=r.rounds,
        max_output_tokens=options.get("max_output_tokens"),
        temperature=options.get("temperature"),
    )
    start = time.perf_counter()
    first_delta: float | None = None
    turn: Turn | None = None
    error = "interrupted"
    failure: ProviderError | None = None

    def on_delta(delta: Delta) -> None:
        nonlocal first_delta
        if first_delta is None:
            first_delta = time.perf_counter()
        r.emit(ModelDelta, round=r.rounds, kind=delta.kind, text=delta.text, name=delta.name)

    try:
        if options.get("tool_choice") == "required" and (r.rounds > 1 or not tools):  # the first round only
            options = {**options, "tool_choice": "auto"}
        with span.current():  # when traced, the chat span is current (the HTTP calls are its children)
            turn = await r.provider.complete(
                ModelRequest(messages, tools, **options, notes=span.notes), on_delta
            )
        r.usage += turn.usage
        r.model = turn.model or r.model
        return turn
    except ProviderError as exc:
        error, failure = str(exc), exc
        if exc.usage is not None:  # a stream that broke off still cost tokens
            r.usage += exc.usage
        raise
    finally:
        if turn is None and error == "interrupted":  # cut off from outside: say by what
            error = r.cut_off_by()
        ttft_ms = None if first_delta is None else (first_delta - start) * 1000
        r.emit(
            ModelCallEnded,
            round=r.rounds,
            ok=turn is not None,
            error="" if turn is not None else error,
            usage=turn.usage.to_dict() if turn is not None else {},
            ms=(time.perf_counter() - start) * 1000,
            ttft_ms=ttft_ms,
            tool_calls=[call.name for call in turn.tool_calls] if turn is not None else [],
            finish_reason=turn.finish_reason if turn is not None else None,
            model=turn.model if turn is not None else None,
            streamed=span.notes.stream,
            retries=span.notes.retries,
        )
        span.ended(turn, error=error, exc=failure, ttft_ms=ttft_ms)


# --------------------------------------------------------------------------------------------
# answers cut off at the output cap


def output_cap_of(turn: Turn, r: RunState) -> int | None:
    """The cap ``turn`` was cut off at, when it was ours; None when it was not cut off by it."""
    if turn.finish_reason != "length":
        return None
    cap = turn.max_output_tokens or r.request.get("max_output_tokens")
    if not isinstance(cap, int) or cap <= 0:
        return None
    used = turn.usage.completion_tokens
    if not turn.usage.estimated and 0 < used < cap:
        return None  # stopped short of our cap: the context window is full
    return cap


def join_continuation(partial: str, rest: str) -> str:
    """The cut-off answer and its continuation as one text.

    Providers strip both, so a space is put between them unless the continuation starts with
    punctuation or white space of its own, or the partial ends with a hyphen or an opening bracket.
    """
    partial, rest = partial.rstrip(), rest.rstrip()
    if not rest.strip():
        return partial
    glued = rest[0].isspace() or rest.startswith(_NO_SPACE_BEFORE) or partial.endswith(_NO_SPACE_AFTER)
    if not partial or glued:
        return partial + rest
    return f"{partial} {rest}"


def echoes_instruction(text: str, detail: str = "") -> bool:
    """Whether ``text`` writes back one of the loop's own instructions: a ``[SYSTEM:`` block (in
    any case), a sentence of one, or the first 40 characters of the stop's ``detail``. Words of
    its own about the stop ("the run was stopped before I could...") are an answer."""
    if _ECHO.search(text):
        return True
    probe = " ".join(detail.split())[:40].lower()
    return len(probe) >= 20 and probe in " ".join(text.split()).lower()


async def finish_answer(r: RunState, turn: Turn) -> Ending:
    """The ending for a turn that answers in text, continuing it once if our cap cut it off."""
    if turn.finish_reason != "length" or not turn.content.strip():
        return r.answer(turn)
    cap = output_cap_of(turn, r)
    if cap is None:
        why = "the answer was cut off short of the output cap (a full context window)"
        return r.answer(turn, truncated=why)
    cut = f"the answer was cut off at the output cap ({cap} tokens)"
    if stop := r.interrupted() or r.out_of_tokens():
        return r.answer(turn, truncated=f"{cut}; not continued: {stop.detail}")
    r.partial = turn.content.strip()  # kept if the deadline or a cancel cuts the continuation off
    ask = [turn.to_message(), Message.user(CONTINUE_PROMPT)]
    more = await call_model(r, (), extra=ask)
    if isinstance(more, Ending):
        why = f"continuing it failed: {more.detail}"
    elif not more.content.strip() or echoes_instruction(more.content):
        why = "continuing it gave nothing usable"
    else:
        joined = replace(turn, content=join_continuation(turn.content, more.content))
        if more.finish_reason != "length":
            return r.answer(joined)
        return r.answer(joined, truncated=f"{cut}, and again after one continuation")
    return r.answer(turn, truncated=f"{cut}; {why}")
