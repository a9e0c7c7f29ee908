"""What a tool server sends back during a call, relayed to the client whose call caused it.

An exposed call (``gateway.exposeTools``) reaches its server through the loop's guards, which
know nothing of MCP clients. So the gateway puts the downstream side of the call, a
``CallerChannel``, in a context variable (``relaying_to``) around the call; the call's tasks
inherit it, and ``ServerConnection.call`` registers it in its server's ``ServerRelay`` for as long
as the call runs. A call the loop makes for ``agent_query`` carries no channel: nothing of it is
relayed.

- **Progress** has a token on the wire: the SDK hands each call's progress to that call's
  callback, and the channel sends it to its client under the client's own token.
- **Logs** (``notifications/message``) carry no request id on a 2025 server's wire, and the
  session to a server is shared by every caller. A log is relayed only when it can be attributed
  without leaking: to the calls in flight on that server when they all belong to ONE caller
  (each of that caller's calls gets it once; the channel filters by the level its client set).
  With calls of several callers in flight, or none, it goes to the gateway's own debug log only:
  a caller never reads a log that may come from another caller's call, nor a log of a server it
  has no call on.
- **Requests** (``sampling/createMessage``, ``elicitation/create``, ``roots/list``) need one
  answer, so they go to the caller only when exactly one call with a channel is in flight on
  that server; otherwise the server gets an error that says why (never a hang). A client that did
  not declare the capability gets the server the error ``-32021`` (missing required client
  capability); the channel checks that.
- **``input_required``** (a 2026-07-28 server's answer instead of a result, with ``inputRequests``
  and an opaque ``requestState``): the channel decides (``input_required``). A 2026 client gets
  the result untouched and retries with its ``inputResponses`` and the ``requestState``, which the
  channel carries back to the same server untouched (``resume``); a 2025 client with a back
  channel is asked each request, and the call is retried with its answers, at most
  ``MAX_INPUT_ROUNDS`` rounds. A call without a channel (the agent's own loop) gets an error result.
- **Log level** (``log_level``): what a 2026 server is asked for in the request's ``_meta``
  (``io.modelcontextprotocol/logLevel``): the level the call's client reads.
- **Client capabilities** (``capabilities``): what a 2026 server is told the client can answer
  (sampling, elicitation, roots) in the request's ``_meta``: what the call's client declared and
  its channel can carry, so that the server asks only what its client can answer
  (``server/caller_capabilities.py``).
- **Waiting for a person** (``call_deadline``, ``not_counted``): the time a channel takes to get
  a round's answers from its client (a person filling an elicitation form) does not count against
  the call's deadline (``toolTimeoutSeconds``): the loop registers the cancel scope that bounds
  the call, and ``through_rounds`` moves its deadline on by the time the answers took. The
  channel bounds that wait itself (the gateway's ``inputTimeoutSeconds``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp_types import INVALID_REQUEST

logger = logging.getLogger(__name__)

ServerAsk = types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest
"""A request a server may send its client during a call."""
ServerAnswer = (
    types.CreateMessageResult
    | types.CreateMessageResultWithTools
    | types.ElicitResult
    | types.ListRootsResult
)
MAX_INPUT_ROUNDS = 8
"""The most ``input_required`` rounds the gateway answers for a 2025 client before the call fails."""


@dataclass(frozen=True)
class Resume:
    """A 2026 client's retry of an ``input_required`` round, passed to the server untouched."""

    input_responses: types.InputResponses | None
    request_state: str | None


class CallerChannel(Protocol):
    """The downstream side of one relayed call: the client that made it.

    ``caller`` names who made the call (calls of one caller may share a log); ``client`` names the
    client connection (a log goes to each connection once). ``progress``, ``log`` and ``ask`` never
    raise for what the client does: a failed send is dropped, a failed ask is an ``ErrorData``.
    """

    caller: str
    client: object
    resume: Resume | None
    """The client's answers to the server's last ``input_required`` round (None: a first call)."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    async def log(self, params: types.LoggingMessageNotificationParams) -> None: ...

    async def ask(self, request: ServerAsk) -> ServerAnswer | types.ErrorData: ...

    def log_level(self) -> types.LoggingLevel | None:
        """The level a 2026 server is asked to log at for this call (None: the session's)."""
        ...

    def capabilities(self) -> types.ClientCapabilities | None:
        """What the client declared that the gateway can carry back to it: the capabilities a
        2026 server is told for this call (``server/caller_capabilities.py``; None: the
        gateway's own)."""
        ...

    async def input_required(
        self, result: types.InputRequiredResult
    ) -> types.InputResponses | types.ErrorData | None:
        """The answers to retry the call with (a client asked over its back channel), an error
        the call fails with, or None: the channel hands ``result`` to its client."""
        ...

    def refused(self, error: types.ErrorData) -> None:
        """The server answered the client's own retry (``resume``) with ``error`` (a tampered or
        expired ``requestState``), or refused the capabilities the client declared (``-32021``):
        the channel hands the error to its client as it is."""
        ...


R = TypeVar("R")


async def through_rounds(
    channel: CallerChannel | None,
    send: Callable[[Resume | None], Awaitable[R | types.InputRequiredResult]],
) -> R | types.InputRequiredResult | types.ErrorData:
    """Send a request (``send``, with the round's answers) and answer its server's
    ``input_required`` rounds through ``channel`` (see the module docstring).

    Returns the server's last answer: its result; its ``InputRequiredResult`` when the channel
    handed it to its client, or when there is no channel (the caller says what that means); an
    ``ErrorData`` when the client could not answer, or after ``MAX_INPUT_ROUNDS`` rounds.
    """
    resume = channel.resume if channel is not None else None
    answered = 0
    while True:
        result = await send(resume)
        if not isinstance(result, types.InputRequiredResult) or channel is None:
            return result
        if answered == MAX_INPUT_ROUNDS:
            return types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the server still asked for input after {MAX_INPUT_ROUNDS} rounds",
            )
        with not_counted():  # the client's answers may be a person's: not the tool's time
            answer = await channel.input_required(result)
        if answer is None or isinstance(answer, types.ErrorData):
            return result if answer is None else answer
        answered += 1
        resume = Resume(answer, result.request_state)


_channel: ContextVar[CallerChannel | None] = ContextVar("mcp_agent_caller_channel", default=None)
_deadline: ContextVar[anyio.CancelScope | None] = ContextVar("mcp_agent_call_deadline", default=None)


@contextmanager
def call_deadline(scope: anyio.CancelScope) -> Iterator[None]:
    """``scope`` bounds the tool call made inside: ``not_counted`` time moves its deadline on."""
    token = _deadline.set(scope)
    try:
        yield
    finally:
        _deadline.reset(token)


@contextmanager
def not_counted() -> Iterator[None]:
    """The time spent inside does not count against the deadline of the call being made (none
    while inside; after, what was left of it). Nothing without a ``call_deadline``."""
    scope = _deadline.get()
    if scope is None or math.isinf(scope.deadline) or scope.cancel_called:
        yield
        return
    left = scope.deadline - anyio.current_time()
    scope.deadline = math.inf
    try:
        yield
    finally:
        scope.deadline = anyio.current_time() + max(0.0, left)


@contextmanager
def relaying_to(channel: CallerChannel) -> Iterator[None]:
    """Relay what the servers send during the calls made inside to ``channel``."""
    token = _channel.set(channel)
    try:
        yield
    finally:
        _channel.reset(token)


def current_channel() -> CallerChannel | None:
    """The channel of the call being made, if it relays."""
    return _channel.get()


class ServerRelay:
    """What one server sends back: the relayed calls in flight on it (``len``), the session
    callbacks that reach them, and its ``notifications/resources/updated``.

    One per ``ServerConnection``, shared by its incarnations; ``ClientSession`` gets ``on_log``,
    and with ``asks`` ``on_sampling``, ``on_elicitation`` and ``on_roots``. ``updated`` (set by the hub) receives
    ``(server, uri)`` of each resource update.
    """

    def __init__(self, server: str, *, asks: bool = False) -> None:
        self.server = server
        self.asks = asks
        """Whether the server may ask (the gateway exposes the tools): only then does the session
        declare sampling, elicitation and roots, so a server never asks what nobody could answer."""
        self.updated: Callable[[str, str], Awaitable[None]] | None = None
        self._calls: list[CallerChannel] = []

    async def on_updated(self, uri: str) -> None:
        if self.updated is not None:
            await self.updated(self.server, uri)

    def __len__(self) -> int:
        return len(self._calls)

    @contextmanager
    def calling(self, channel: CallerChannel | None) -> Iterator[None]:
        """Count ``channel``'s call as in flight while inside (nothing when None)."""
        if channel is None:
            yield
            return
        self._calls.append(channel)
        try:
            yield
        finally:
            self._calls.remove(channel)

    def log_readers(self) -> list[CallerChannel]:
        """Who may read a log the server sends now: one channel per client connection, when every
        call in flight is one caller's; else nobody."""
        calls = list(self._calls)
        if not calls or len({channel.caller for channel in calls}) != 1:
            return []
        readers: dict[int, CallerChannel] = {}
        for channel in calls:
            readers.setdefault(id(channel.client), channel)
        return list(readers.values())

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        readers = self.log_readers()
        if not readers:
            logger.debug(
                "%s log [%s] not relayed (%d calls in flight): %s",
                self.server,
                params.level,
                len(self._calls),
                params.data,
            )
            return
        for channel in readers:
            await channel.log(params)

    async def _ask(self, request: ServerAsk) -> ServerAnswer | types.ErrorData:
        calls = list(self._calls)
        if len(calls) != 1:
            why = (
                "no call of a client that can answer is in flight"
                if not calls
                else f"{len(calls)} calls are in flight on this server and the request does not say which asked"
            )
            return types.ErrorData(
                code=INVALID_REQUEST, message=f"the gateway cannot relay {request.method}: {why}"
            )
        return await calls[0].ask(request)

    async def on_sampling(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        answer = await self._ask(types.CreateMessageRequest(params=params))
        if isinstance(
            answer, types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData
        ):
            return answer
        return _wrong_answer(answer)

    async def on_elicitation(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer = await self._ask(types.ElicitRequest(params=params))
        if isinstance(answer, types.ElicitResult | types.ErrorData):
            return answer
        return _wrong_answer(answer)

    async def on_roots(self, context: Any) -> types.ListRootsResult | types.ErrorData:
        answer = await self._ask(types.ListRootsRequest())
        if isinstance(answer, types.ListRootsResult | types.ErrorData):
            return answer
        return _wrong_answer(answer)


def _wrong_answer(answer: object) -> types.ErrorData:
    return types.ErrorData(
        code=types.INTERNAL_ERROR, message=f"the client answered with {type(answer).__name__}"
    )
