"""What the Agent writes into the state: the limits from agent.json, run records, and a failing
store kept from costing a run its answer.

A store that fails (``StateError``) is logged and never ends a run: a run record that cannot be
written is lost (the run still answers), a transcript that cannot be saved is said in the
result's ``detail`` (``note_unsaved``).

What is kept shows no known secret (``_redact``: the API keys, tokens, secret headers and env,
URL passwords of the config and the environment), whatever the backend: a run record is masked
in ``quietly``, the one way records are written, and a transcript in ``kept_transcript``, the
one way the Agent saves one. The values stay what they were (a masked transcript is a valid
transcript, sent to the model on the session's next run with ``***`` where a secret was); only
the secrets' text becomes ``***``. (Approvals mask their arguments in ``ApprovalQueue.submit``,
pages their text in ``Pages.page``.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from .._redact import mask_secrets_in
from ..config import AgentConfig
from ..exceptions import StateError
from ..messages import JSONObject, Message
from ..state import state_limits
from ..state.memory import MemoryState
from ..state.records import RunRecord
from .result import RunResult

logger = logging.getLogger(__name__)


def memory_state(config: AgentConfig) -> MemoryState:
    """The state of an Agent built without one: in this process's memory."""
    return MemoryState(state_limits(config))


def begun(
    run_id: str, query: object, *, session_id: str | None, caller: str | None, replica: str
) -> RunRecord:
    """The record of a run about to start."""
    text = query if isinstance(query, str) else f"(not text: {type(query).__name__})"
    return RunRecord(
        run_id, session_id=session_id, caller=caller, query=text, started=time.time(), replica=replica
    )


def finished(record: RunRecord, result: RunResult, timeline: tuple[JSONObject, ...] = ()) -> RunRecord:
    """The record of a run that ended with ``result`` (and its spans, ``loop/_timeline.py``)."""
    return replace(
        record,
        session_id=result.session_id or record.session_id,
        ended=time.time(),
        termination_reason=result.termination_reason.value,
        answer=result.answer,
        detail=result.detail,
        early_stopped=result.early_stopped,
        truncated=result.truncated,
        usage=result.usage,
        tool_calls=tuple(call.to_dict() for call in result.tool_calls),
        rounds=result.rounds,
        elapsed_ms=result.elapsed_ms,
        model=result.model,
        timeline=timeline,
    )


def broken_off(
    record: RunRecord, exc: BaseException, *, cancelled: bool, timeline: tuple[JSONObject, ...] = ()
) -> RunRecord:
    """The record of a run that raised (the caller's cancellation, or a programming error)."""
    now = time.time()
    return replace(
        record,
        ended=now,
        termination_reason="cancelled" if cancelled else "terminal_error",
        detail="the caller went away" if cancelled else f"internal error: {type(exc).__name__}",
        elapsed_ms=(now - record.started) * 1000,
        timeline=timeline,
    )


async def quietly(write: Callable[[RunRecord], Awaitable[None]], record: RunRecord) -> None:
    """Write a run record, its known secrets masked; a failing store is logged, never raised."""
    data = record.to_dict()
    masked = mask_secrets_in(data)
    try:
        await write(record if masked == data else RunRecord.from_dict(masked))
    except StateError as exc:
        logger.warning("run %s: could not record it: %s", record.id, exc)


def kept_transcript(transcript: Sequence[Message]) -> tuple[Message, ...]:
    """``transcript`` as the state keeps it: each message with its known secrets masked."""
    kept = []
    for message in transcript:
        data = message.to_dict()
        masked = mask_secrets_in(data)
        kept.append(message if masked == data else Message.from_dict(masked))
    return tuple(kept)


def note_unsaved(result: RunResult, why: str) -> RunResult:
    """``result`` with ``detail`` saying the conversation was not saved, and why."""
    note = f"the conversation could not be saved: {why}"
    logger.warning("session %s: %s", result.session_id, note)
    return replace(result, detail=f"{result.detail}; {note}" if result.detail else note)
