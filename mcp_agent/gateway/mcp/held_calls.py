"""Exposed calls of 2026-07-28 clients whose server asks the client something mid-call.

A 2026-07-28 request has no back channel: the gateway cannot send the server's
``sampling/createMessage``, ``elicitation/create`` or ``roots/list`` to the client while the
call runs. So an exposed call of a 2026 client (``tools/call``, and ``prompts/get`` and
``resources/read``, which make a server work as well) runs detached (``GatewayService.spawn``),
held here between the rounds of its questions, as ``ask_caller.ParkedRuns`` holds an
``agent_query`` run:

1. the call starts; its round answers with the call's result when it ends first, or with an
   ``InputRequiredResult`` carrying the server's question(s) as they were asked (``inputRequests``
   keyed ``q1``, ``q2``…) and an unguessable ``requestState`` bound to the caller, new each round;
2. the client retries its request with its ``inputResponses`` and the ``requestState``; each
   answer goes to the server's held request (an answer of the wrong kind is an error to the
   server), and the new round waits again for the result or the next question. A
   ``requestState`` of no held call (expired, of another caller, an earlier round's, or altered)
   is refused with the JSON-RPC error ``-32602``, as a server refuses a tampered one.

A round carries the questions held when it answers: a server that asks over its back channel
asks one request at a time as far as the gateway can tell, so questions asked one after another
come in rounds of their own (the keys are the gateway's: the server gave none).

The server's progress and logs go to the round open at the time (none between rounds). A client
that closes a round's response, or does not come back within ``RETRY_WINDOW_SECONDS``, is gone:
its call is cancelled on the server. Questions still open when the call ends are withdrawn.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp_types import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...tools.relay import Resume, ServerAnswer, ServerAsk, relaying_to
from ..callers import Caller
from ..service import GatewayService
from .query import text_result
from .relay import LogLevels, RequestChannel, answer_type

logger = logging.getLogger(__name__)

RETRY_WINDOW_SECONDS = 120.0
"""How long a 2026 client may take to come back with its answers before its call is cancelled."""
HELD_MAX = 1024
HELD_PREFIX = "mcp-agent.held."
"""Begins the ``requestState`` of a held call: a state without it is a server's own (a 2026
server's ``input_required`` relayed untouched), which goes back to that server."""

Answer = types.CallToolResult | types.GetPromptResult | types.ReadResourceResult | types.InputRequiredResult
Retry = types.CallToolRequestParams | types.GetPromptRequestParams | types.ReadResourceRequestParams
Fail = Callable[[str], Answer]
"""What a held call answers when it failed or was cancelled: a tool's error result
(``tool_failed``), or a JSON-RPC error raised for a prompt or a resource (``request_failed``)."""


def tool_failed(message: str) -> Answer:
    return text_result(message, is_error=True)


def request_failed(message: str) -> Answer:
    raise MCPError(INTERNAL_ERROR, message)


def may_be_asked(ctx: ServerRequestContext[Any]) -> bool:
    """Whether an exposed call's server could ask this request's client something that only an
    ``input_required`` round can carry: a 2026-07-28 request (no back channel) from a client
    that declared sampling, elicitation or roots."""
    session = ctx.session
    capabilities = session.client_capabilities
    if (
        ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        or session.can_send_request
        or capabilities is None
    ):
        return False  # a 2025 client without a back channel (stateless HTTP) knows no input_required
    return any(c is not None for c in (capabilities.sampling, capabilities.elicitation, capabilities.roots))


@dataclass
class Question:
    """One request of the server, waiting for the client's answer."""

    request: ServerAsk
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: ServerAnswer | types.ErrorData | None = None


class RoundChannel(RequestChannel):
    """The ``CallerChannel`` of a held call: the open round's request, and questions held for
    the next round's answer instead of sent on a back channel."""

    def __init__(
        self,
        held: HeldCall,
        ctx: ServerRequestContext[Any],
        caller: Caller,
        levels: LogLevels,
        resume: Resume | None = None,
    ) -> None:
        super().__init__(ctx, caller, levels, resume)
        self.held = held

    async def ask(self, request: ServerAsk) -> ServerAnswer | types.ErrorData:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        held = self.held
        held.count += 1
        key = f"q{held.count}"
        question = Question(request)
        held.questions[key] = question
        held.poke()
        async with anyio.create_task_group() as tg:

            async def withdraw() -> None:
                await held.done.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(withdraw)
            await question.answered.wait()
            tg.cancel_scope.cancel()
        held.questions.pop(key, None)
        if question.answer is None:
            return types.ErrorData(
                code=INTERNAL_ERROR, message=f"{request.method} withdrawn: the call has ended"
            )
        return question.answer


@dataclass
class HeldCall:
    """One exposed call of a 2026 client, between the rounds of its questions."""

    token: str
    caller: Caller
    method: str = "tools/call"
    """The request held (``tools/call``, ``prompts/get``, ``resources/read``): only a retry of
    the same method may carry its ``requestState``."""
    fail: Fail = tool_failed
    channel: RoundChannel | None = None
    questions: dict[str, Question] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)
    count: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Answer | None = None
    error: MCPError | None = None
    """What the call raised for the client (``-32021``: a capability the server needs is missing)."""
    failure: str = "the call was cancelled"
    """What ``fail`` says when the call ends with neither a result nor an error."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    last_seen: float = field(default_factory=time.monotonic)
    changed: anyio.Event = field(default_factory=anyio.Event)
    collected: anyio.Event = field(default_factory=anyio.Event)
    """Set when a round has carried the call's answer to the client."""

    def poke(self) -> None:
        """Wake the open round: a question came, or the call ended."""
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def answer(self, responses: Mapping[str, Any] | None) -> None:
        """Give each held question its answer (keys unknown or already answered are ignored)."""
        for key, response in (responses or {}).items():
            question = self.questions.get(key)
            if question is None or question.answered.is_set():
                continue
            question.answer = fitted(question.request, response)
            question.answered.set()


def fitted(request: ServerAsk, response: Any) -> ServerAnswer | types.ErrorData:
    """The client's answer as the type ``request`` wants (the wire's union may have read it as
    another), or an error for the server when it is not one."""
    wanted = answer_type(request)
    if isinstance(response, wanted):
        return response
    try:
        raw = (
            response.model_dump(by_alias=True, exclude_none=True)
            if hasattr(response, "model_dump")
            else response
        )
        return wanted.model_validate(raw)
    except Exception:
        return types.ErrorData(
            code=types.INVALID_PARAMS,
            message=f"the client answered {request.method} with something else ({type(response).__name__})",
        )


class HeldCalls:
    """The held calls, by token (see the module docstring)."""

    def __init__(
        self, service: GatewayService, levels: LogLevels, *, retry_window: float = RETRY_WINDOW_SECONDS
    ) -> None:
        self.service = service
        self.levels = levels
        self.retry_window = retry_window
        self._calls: dict[str, HeldCall] = {}

    def __len__(self) -> int:
        return len(self._calls)

    async def start(
        self,
        ctx: ServerRequestContext[Any],
        caller: Caller,
        call: Callable[[], Awaitable[Any]],
        *,
        resume: Resume | None = None,
        method: str = "tools/call",
        fail: Fail = tool_failed,
    ) -> Answer:
        """Start ``call`` (a request of ``method``, whose answer is an ``Answer``) detached, and
        answer its first round (``resume``: the client's retry of its server's own
        ``input_required`` round, for the server; ``fail``: what a call that failed answers)."""
        if len(self._calls) >= HELD_MAX:
            return fail(f"too many calls wait for their callers' answers ({HELD_MAX})")
        held = HeldCall(HELD_PREFIX + secrets.token_urlsafe(24), caller, method, fail)
        channel = RoundChannel(held, ctx, caller, self.levels, resume)
        held.channel = channel
        self._calls[held.token] = held

        async def run() -> None:
            try:
                with held.scope, relaying_to(channel):
                    held.result = await call()
            except MCPError as exc:  # for the client, as a JSON-RPC error
                held.error = exc
            except Exception as exc:  # a programming error: the client is told, not left waiting
                logger.error("held call failed: %r", exc)
                held.failure = f"the call failed: {type(exc).__name__}: {exc}"
            finally:
                channel.end()
                held.done.set()
                held.poke()

        self.service.spawn(run)
        self.service.spawn(lambda: self._watch(held))
        return await self._round(ctx, held)

    def holds(self, request_state: str | None) -> bool:
        """Whether ``request_state`` is a held call's, held or expired (else a server's own)."""
        return request_state is not None and request_state.startswith(HELD_PREFIX)

    async def retry(
        self, ctx: ServerRequestContext[Any], caller: Caller, params: Retry, method: str = "tools/call"
    ) -> Answer:
        """A client's retry (a request of ``method``) with its answers: they go to the server,
        and the next round is answered."""
        held = self._calls.get(params.request_state or "")
        if held is None or held.caller.name != caller.name or held.method != method:
            raise MCPError(  # a protocol error, as a server's own
                types.INVALID_PARAMS,
                "unknown or expired request_state: the call it belonged to has ended, or the state "
                f"is not one this gateway gave for {method}; make the request again",
            )
        held.answer(params.input_responses)
        return await self._round(ctx, held)

    async def _round(self, ctx: ServerRequestContext[Any], held: HeldCall) -> Answer:
        assert held.channel is not None
        held.channel.ctx = ctx  # progress and logs go to the open round
        held.last_seen = time.monotonic()
        finished = False
        try:
            while True:
                changed = held.changed
                fresh = {key: q.request for key, q in held.questions.items() if key not in held.asked}
                if fresh:
                    held.asked.update(fresh)
                    finished = True
                    return types.InputRequiredResult(input_requests=fresh, request_state=self._rekeyed(held))
                if held.done.is_set():
                    self._calls.pop(held.token, None)
                    held.collected.set()
                    finished = True
                    if held.error is not None:
                        raise held.error
                    return held.result or held.fail(held.failure)
                await changed.wait()
        finally:
            held.last_seen = time.monotonic()
            if not finished:  # the client closed the round's response: it is gone
                held.scope.cancel()
                self._calls.pop(held.token, None)

    def _rekeyed(self, held: HeldCall) -> str:
        """A new token for ``held``'s next round (each round's ``requestState`` is its own, and
        good for one retry), in place of the last."""
        self._calls.pop(held.token, None)
        held.token = HELD_PREFIX + secrets.token_urlsafe(24)
        self._calls[held.token] = held
        return held.token

    async def _watch(self, held: HeldCall) -> None:
        """Cancel the call of a client that does not come back within ``retry_window``."""
        while not held.done.is_set():
            waiting = any(not q.answered.is_set() for q in held.questions.values())
            if waiting and time.monotonic() - held.last_seen > self.retry_window:
                logger.info("the caller of a held call did not come back with its answers; cancelling it")
                held.scope.cancel()
                self._calls.pop(held.token, None)
                return
            with anyio.move_on_after(min(1.0, self.retry_window / 4)):
                await held.done.wait()
        with anyio.move_on_after(self.retry_window):  # a result nobody collects is forgotten
            await held.collected.wait()
        self._calls.pop(held.token, None)
