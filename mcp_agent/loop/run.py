"""The agent loop: ``run()``, one query end to end (``agent.py`` has the ``Agent`` that holds sessions).

``run`` is a stateless async function: prior messages and a query in, a ``RunResult`` out. Each
round follows DESIGN.md's "One query, end to end":

1. check the limits before the model call: cancellation, deadline, rounds (the token budget
   was checked after the previous model call, in step 4, so the run is never over it here);
2. call the model with the trimmed history and the tools still offered;
3. take the turn's tool calls (native, or parsed from text by the provider); none is the answer;
4. check cancellation, the deadline and the token budget again before anything is dispatched;
5. prepare each call: resolve the name, validate and coerce the arguments, fingerprint, gate;
   then the loop guard and the tool-call budget (a turn runs whole or not at all);
6. run the calls in parallel (bounded), each under its timeout;
7. append the results in call order; the failure ledger has marked failures.

Whatever happens, every tool call in the transcript gets exactly one result, and ``RunEnded`` is
emitted with the reason: on every ending, on the caller's own cancellation (then re-raised) and
on a programming error (re-raised as well; the event says ``terminal_error``, "internal error").
A ``cancel`` event ends the run ``cancelled``, the run's deadline ends it ``timeout``; both cut
off in-flight model and tool calls at once.

Choices made: a second context-length error (after the hard trim) ends the run
``terminal_error``, since trimming again cannot help; a failed or empty early-stop synthesis, or
one that writes the instruction back, keeps the reason that triggered it, with ``early_stopped``
False and the failure in ``detail``; an early-stop answer's ``detail`` names the stop; a turn
that answers in text ends ``success`` even when it used up the token budget (the budget guards
further spending, and none follows); an answer cut off at our output cap is continued once
(``_model.finish_answer``) and, if still cut off, ends ``success`` flagged ``truncated``.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import replace

import anyio

from .._plural import counted
from ..config import Limits
from ..events import (
    EventSink,
    ModelCallEnded,
    ModelCallStarted,
    ModelDelta,
    RoundEnded,
    RoundStarted,
    RunStarted,
)
from ..exceptions import ContextLengthError, ProviderError
from ..messages import Delta, Message, ToolCall, ToolSpec, Turn
from ..providers.base import ModelRequest, Provider, ToolChoice
from ..state.base import PageStore
from ..telemetry.base import TraceSettings
from ..telemetry.setup import start_trace
from ..tools.base import ToolSource
from ..tools.router import RoutedTools
from ._state import Ending, RunState, as_sinks, cancelled_by, sole
from .approvals import ApprovalQueue, Gate
from .cancel import CancelSwitch
from .history import hard_trim, history_chars
from .provenance import ProvenancePolicy
from .result import RunResult, TerminationReason

logger = logging.getLogger(__name__)

R = TerminationReason


async def run(
    query: str,
    *,
    provider: Provider,
    tools: ToolSource,
    limits: Limits | None = None,
    system_prompt: str | None = None,
    history: Sequence[Message] = (),
    events: EventSink | Sequence[EventSink] | None = None,
    cancel: CancelSwitch | None = None,
    gate: Gate | None = None,
    approvals: ApprovalQueue | None = None,
    run_id: str | None = None,
    session_id: str | None = None,
    temperature: float | None = None,
    max_output_tokens: int | None = None,
    input_error: str | None = None,
    caller: str | None = None,
    tool_choice: ToolChoice = "auto",
    pages: PageStore | None = None,
    telemetry: TraceSettings | None = None,
    policy: ProvenancePolicy | None = None,
) -> RunResult:
    """Answer ``query`` with the model and the tools, within ``limits``.

    Args:
        query: the user's question.
        provider: the model server.
        tools: the tools on offer.
        limits: budgets and guards (0 = off for every number); the defaults when None.
        system_prompt: put first, unless ``history`` already starts with a system message.
        history: the conversation so far (a session's transcript); it must be valid.
        events: one sink or several; each gets every event of the run.
        cancel: when set, the run ends ``cancelled`` and in-flight calls are cut off.
        gate: decides which calls may run; None allows all.
        approvals: where calls that need approval wait (without it they are denied).
        policy: the trust of results and the check of calls with side effects after untrusted
            text (``loop/provenance.py``); None records provenance and checks nothing.
        run_id: this run's id (a new one when None); every event carries it.
        session_id: the conversation this run belongs to, carried into events and the result.
        temperature: passed on to the model server.
        max_output_tokens: passed on to the model server.
        input_error: the caller found the input unusable: the run starts and ends at once as
            ``terminal_error`` with this detail. A query that is not a string or cannot be
            encoded (a lone surrogate) ends the same way by itself.
        caller: who asked (the gateway's caller name): carried in every event and approval.
        tool_choice: ``llm.toolChoice``; ``required`` applies to the first round only.
        pages: where long results are kept for ``read_result`` (``loop/pages.py``): with a
            session, the state's store, so the session's next run can read them (in any process
            sharing it); without, the Agent's in-memory store, released when the run ends. None:
            a store of this run's own.
        telemetry: what the run's spans say and whether they carry content (``telemetry/base.py``);
            spans are made only when a TracerProvider is installed.

    Returns:
        The RunResult, for every ending. Only a programming error or the caller's own
        cancellation propagate (after ``RunEnded`` has been emitted).
    """
    run_id = run_id or secrets.token_hex(8)
    trace = start_trace(
        run_id=run_id,
        session_id=session_id,
        caller=caller,
        query=query if isinstance(query, str) else "",
        settings=telemetry,
    )
    r = RunState(
        query,
        provider=provider,
        tools=tools,
        limits=limits or Limits(),
        system_prompt=system_prompt,
        history=history,
        sinks=as_sinks(events),
        cancel=cancel,
        gate=gate,
        approvals=approvals,
        run_id=run_id,
        session_id=session_id,
        request=dict(temperature=temperature, max_output_tokens=max_output_tokens, tool_choice=tool_choice),
        input_error=input_error,
        caller=caller,
        pages=pages,
        policy=policy,
        trace=trace,
    )
    try:
        return await _run(r, cancel)
    finally:
        if r.pages is not None:  # a run without a session frees its pages
            with anyio.CancelScope(shield=True):
                await r.pages.close()


async def _run(r: RunState, cancel: CancelSwitch | None) -> RunResult:
    r.emit(RunStarted, query=r.query, limits=r.limits.model_dump(by_alias=True), tools=len(r.offered))
    ending: Ending | None = r.invalid_input()
    if ending is not None:
        return r.result(ending)
    try:
        async with cancelled_by(cancel):
            with anyio.move_on_after(r.limits.timeout_seconds or None):
                trigger = await _rounds(r)
                ending = await _early_stop(r, trigger) if r.wants_early_stop(trigger) else trigger
    except BaseException as exc:  # the caller cancelled us, or a bug: still end the run visibly
        inner = sole(exc)
        r.end_abruptly(inner)
        if inner is exc:
            raise
        raise inner from None
    return r.result(ending or r.interrupted() or r.timed_out())


async def _rounds(r: RunState) -> Ending:
    """The rounds of one run, until an answer or a guard ends it."""
    while True:
        # 1. the limits, before the model call (tokens were checked after the last one, in 4)
        if stop := r.interrupted() or r.out_of_rounds():
            return stop
        r.rounds += 1
        r.emit(RoundStarted, round=r.rounds, max_rounds=r.limits.max_rounds)
        calls: tuple[ToolCall, ...] = ()
        try:
            # 2. the model call, on the trimmed history, offering the tools not withdrawn
            r.offered = r.dispatcher.offered()
            turn = await call_model(r, _routed(r))
            if isinstance(turn, Ending):
                return turn
            # 3. the calls (native, or parsed from text by the provider); none: the answer
            calls = r.name_calls(turn.tool_calls)
            if not calls:  # the answer (continued once if our output cap cut it off)
                return await finish_answer(r, turn)
            # 4. cancellation, deadline and token budget again: a late turn starts nothing
            if stop := r.interrupted() or r.out_of_tokens():
                r.commit(turn, r.dispatcher.unprepared(calls, r.rounds))
                return stop
            # 5. per call: resolve, validate and coerce, fingerprint, gate; then the turn's guards
            plan = await r.dispatcher.prepare(
                calls, round=r.rounds, tainted=r.tainted, offered=r.offered, exposure=r.exposure
            )
            r.commit(turn, plan)
            if stop := r.loop_detected(plan) or r.out_of_tool_calls(plan):
                return stop
            # 6. the calls, in parallel (bounded), each under its timeout
            await r.dispatcher.execute(plan)
            # 7. the results, in call order (the ledger has marked failures)
            r.close_turn("")
        finally:
            r.emit(RoundEnded, round=r.rounds, tool_calls=len(calls))


def _routed(r: RunState) -> list[ToolSpec]:
    """The tools this round offers the model: all offered ones, unless a ``RoutedTools`` picks.

    The rest stay callable: a call to a real tool that was not offered this round still runs.
    """
    tools = r.dispatcher.tools
    if not isinstance(tools, RoutedTools):
        return r.offered
    used = {record.name for record in r.dispatcher.records if record.verdict == "run"}
    return tools.select(r.offered, r.messages, used)


async def _early_stop(r: RunState, trigger: Ending) -> Ending:
    """DESIGN guard 9: one more model call, without tools, for a best-effort answer.

    A reply that writes the instruction back (a small model parroted "[SYSTEM: The run was
    stopped ...]") is no answer: the run keeps the reason that triggered the stop.
    """
    r.close_turn(trigger.why)  # every call answered first: the request must be a valid transcript
    ask = Message.user(EARLY_STOP_PROMPT.format(detail=trigger.detail))
    turn = await call_model(r, (), extra=[ask])
    if isinstance(turn, Ending):
        return replace(trigger, detail=f"{trigger.detail}; early-stop synthesis failed: {turn.detail}")
    if not turn.content.strip():
        return replace(trigger, detail=f"{trigger.detail}; early-stop synthesis gave no answer")
    if echoes_instruction(turn.content, trigger.detail):
        logger.warning("the early-stop answer repeats the loop's instruction; dropped: %.200r", turn.content)
        return replace(trigger, detail=f"{trigger.detail}; early-stop synthesis repeated its instruction")
    r.add(Message.assistant(turn.content, reasoning=turn.reasoning))
    detail = (
        f"stopped early ({trigger.detail}); the answer was written from the work so far, without more tools"
    )
    truncated = turn.finish_reason == "length"
    if truncated:
        detail += "; it was cut off at the length limit"
    return replace(
        trigger, answer=turn.content.strip(), early_stopped=True, detail=detail, truncated=truncated
    )


# The model calls of the loop: one call between its events, the context-length
# retry, the continuation of an answer cut off at the output cap, and the loop's own instructions.
#
# - ``call_model``: one call on the trimmed history; a ``ContextLengthError`` trims hard and tries
#   once more; a provider failure is an ``Ending`` (failures are data here).
# - ``finish_answer``: a text answer that ended with ``finish_reason: "length"`` is continued ONCE
#   when the cap it hit was ours (the request's ``max_output_tokens``, and the answer used all of
#   it): the partial answer goes back as an assistant message followed by ``CONTINUE_PROMPT``, no
#   tools offered, and the final answer is the two joined; the transcript keeps one assistant
#   message with the whole answer. Chosen over a provider's native prefill (a trailing assistant
#   message that the model extends) because only some servers support that, and a server that
#   does not answers it as a new turn. An answer cut off by something else (a full context
#   window: fewer tokens than the cap) is not continued. Either way, an answer still cut off is
#   flagged ``truncated`` and ``detail`` says so.
# - ``echoes_instruction``: a small model may write the loop's own instruction back (the
#   early-stop "[SYSTEM: The run was stopped ...]" came back as the answer); such a reply is
#   dropped, never shown as the answer.

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
    cut = f"the answer was cut off at the output cap ({counted(cap, 'token')})"
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
