"""The client's side of an exposed call's relay: progress, logs and the server's questions.

``RequestChannel`` is the ``CallerChannel`` (``tools/relay.py``) of one exposed ``tools/call``:
``AgentQueryTool`` makes one per call and makes the call inside ``relaying_to(channel)``; what the
tool's server sends during the call comes back here and goes to the client on the call's own
stream (``related_request_id``), in both eras:

- progress, under the client's own ``progressToken`` (``report_progress``; nothing when the
  client sent none);
- logs (``notifications/message``): a 2025-era client gets those at or above the level it set
  with ``logging/setLevel`` on its connection (all, before it set one); a 2026-era client those
  at or above the level its request's ``_meta`` ``io.modelcontextprotocol/logLevel`` asks for
  (none without it: the SDK filters). ``tools/relay.py`` says which calls' clients read a log;
- sampling, elicitation (form and URL mode) and roots requests, when the client declared the
  capability (else the server gets ``-32021``, missing required client capability) and has a
  back channel (a 2025-era session; a 2026-era request has none, and the server gets an error
  that says so). The request is withdrawn when the call ends first.
- a 2026-07-28 server's ``input_required`` result (``input_required``): a 2026-era client gets it
  untouched (``kept``; ``-32021`` instead when it did not declare a capability a request needs),
  and its retry's ``inputResponses`` and ``requestState`` go back to the server untouched
  (``resume``), and the server's error for them (a tampered ``requestState``) goes back as it is
  (``refused``); a 2025-era client with a back channel is asked each request in turn, and the
  answers go to the server's retry (``tools/relay.py`` bounds the rounds). Each round waits at
  most ``answer_seconds`` (``gateway.inputTimeoutSeconds``) for the client's answers, time that
  does not count against the tool's timeout (``tools/relay.py`` ``not_counted``).
- the log level a 2026 server is asked for per request (``log_level``): the one the client reads;
- the client capabilities a 2026 server is told per request (``capabilities``): the client's
  sampling, elicitation and roots, when the gateway can carry those questions to it.

``LogLevels`` remembers the level each 2025-era client connection set, and asks the tool servers
for the most verbose one any client wants (``ToolHub.set_log_level``).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.validation import wants_sampling_tools
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...tools.relay import Resume, ServerAnswer, ServerAsk
from .._internals import request_connection
from ..callers import Caller
from ..service import GatewayService

logger = logging.getLogger(__name__)

SEND_TIMEOUT_SECONDS = 2.0
"""How long a notification to the client may take before it is dropped."""
LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
NONE_DECLARED = types.ClientCapabilities()


# ------------------------------------------------------------------------------------------ pure


def admits(level: types.LoggingLevel, threshold: str | None) -> bool:
    """Whether a log at ``level`` passes a client's ``threshold`` (None: it set none, all pass;
    anything but a level: none pass)."""
    if threshold is None:
        return True
    return threshold in LEVELS and LEVELS.index(level) >= LEVELS.index(threshold)


def most_verbose(levels: list[types.LoggingLevel]) -> types.LoggingLevel | None:
    """The lowest of the levels clients set (None when none did)."""
    return min(levels, key=LEVELS.index) if levels else None


def missing_capability(request: ServerAsk, capabilities: types.ClientCapabilities | None) -> str | None:
    """The capability a client needs to answer ``request`` and did not declare (None: it has it)."""
    caps = capabilities or types.ClientCapabilities()
    if isinstance(request, types.CreateMessageRequest):
        if caps.sampling is None:
            return "sampling"
        if (
            wants_sampling_tools(request.params.tools, request.params.tool_choice)
            and caps.sampling.tools is None
        ):
            return "sampling.tools"
        return None
    if isinstance(request, types.ElicitRequest):
        elicitation = caps.elicitation
        if isinstance(request.params, types.ElicitRequestURLParams):
            return None if elicitation is not None and elicitation.url is not None else "elicitation.url"
        if elicitation is None or (elicitation.form is None and elicitation.url is not None):
            return "elicitation.form"  # ``{}`` (2025-06-18) means forms
        return None
    return None if caps.roots is not None else "roots"


def required(capability: str) -> dict[str, Any]:
    """``"elicitation.url"`` as the ``requiredCapabilities`` object of a ``-32021`` error."""
    tree: dict[str, Any] = {}
    for part in reversed(capability.split(".")):
        tree = {part: tree}
    return tree


def resume_of(
    params: types.CallToolRequestParams | types.GetPromptRequestParams | types.ReadResourceRequestParams,
) -> Resume | None:
    """A 2026 client's retry of its server's ``input_required`` round, for the server (None: a
    first request)."""
    if params.request_state is None and params.input_responses is None:
        return None
    return Resume(params.input_responses, params.request_state)


def answer_type(request: ServerAsk) -> type[ServerAnswer]:
    if isinstance(request, types.CreateMessageRequest):
        if wants_sampling_tools(request.params.tools, request.params.tool_choice):
            return types.CreateMessageResultWithTools
        return types.CreateMessageResult
    if isinstance(request, types.ElicitRequest):
        return types.ElicitResult
    return types.ListRootsResult


# ------------------------------------------------------------------------------------ log levels


class LogLevels:
    """The ``logging/setLevel`` of each 2025-era client connection, and the servers told."""

    def __init__(self, service: GatewayService) -> None:
        self.service = service
        self._levels: dict[int, types.LoggingLevel] = {}

    def of(self, ctx: ServerRequestContext[Any]) -> types.LoggingLevel | None:
        return self._levels.get(id(request_connection(ctx)))

    async def set_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """The ``logging/setLevel`` handler: remember it for the connection, tell the servers."""
        connection = request_connection(ctx)
        key = id(connection)
        if key not in self._levels:
            connection.exit_stack.callback(self._levels.pop, key, None)
        self._levels[key] = params.level
        await self.tell_servers()
        return types.EmptyResult()

    async def tell_servers(self) -> None:
        level = most_verbose(list(self._levels.values()))
        hub = self.service.hub
        if level is not None and hub is not None:
            await hub.set_log_level(level)


# ------------------------------------------------------------------------------------ the channel


class RequestChannel:
    """The ``CallerChannel`` of one exposed ``tools/call``, over its request context.

    ``end()`` when the call is over: a question still open is withdrawn.
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any],
        caller: Caller,
        levels: LogLevels,
        resume: Resume | None = None,
        *,
        answer_seconds: float = 0,
    ) -> None:
        self.ctx = ctx
        self.answer_seconds = answer_seconds
        """How long one ``input_required`` round waits for a 2025 client's answers (0: no limit)."""
        self.caller = caller.name
        self.client: object = request_connection(ctx)
        self.resume = resume
        self.kept: types.InputRequiredResult | types.ErrorData | None = None
        """The server's ``input_required`` result for the client, or the error it gets instead."""
        self._levels = levels
        self._modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        self._ended = anyio.Event()

    def end(self) -> None:
        self._ended.set()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        with anyio.move_on_after(SEND_TIMEOUT_SECONDS):
            try:
                await self.ctx.session.report_progress(progress, total, message)
            except Exception:
                logger.debug("could not relay progress", exc_info=True)

    def threshold(self) -> str | None:
        """The least severe level this call's client reads (None: every level).

        2025 era: what its connection set with ``logging/setLevel``; 2026-07-28: what its request's
        ``_meta`` asks for, and no log at all when it asks for none.
        """
        if not self._modern:
            return self._levels.of(self.ctx)
        asked = (self.ctx.meta or {}).get(types.LOG_LEVEL_META_KEY)
        return asked if asked in LEVELS else "no logs"

    def log_level(self) -> types.LoggingLevel | None:
        threshold = self.threshold()
        return next((level for level in LEVELS if level == threshold), None)

    def capabilities(self) -> types.ClientCapabilities:
        """What the client declared that the gateway can carry back to it: a 2026-era client's
        (a server's questions reach it as ``input_required`` rounds), a 2025-era client's with a
        back channel; nothing for a 2025-era request without one (stateless HTTP)."""
        session = self.ctx.session
        declared = session.client_capabilities
        if declared is None or not (self._modern or session.can_send_request):
            return NONE_DECLARED
        return declared

    async def input_required(
        self, result: types.InputRequiredResult
    ) -> types.InputResponses | types.ErrorData | None:
        requests = result.input_requests or {}
        if self._modern:  # the client answers the round itself and retries
            refused = next(filter(None, map(self.refusal, requests.values())), None)
            self.kept = refused if refused is not None else result
            return None
        responses: types.InputResponses = {}
        with anyio.move_on_after(self.answer_seconds or None):
            for key, request in requests.items():
                answer = await self.ask(request)
                if isinstance(answer, types.ErrorData):
                    return answer
                responses[key] = answer
            return responses
        return types.ErrorData(
            code=INTERNAL_ERROR,
            message=f"the client did not answer {request.method} within {self.answer_seconds:g} s "
            "(gateway.inputTimeoutSeconds)",
        )

    def refused(self, error: types.ErrorData) -> None:
        self.kept = error

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        if not admits(params.level, self.threshold()):
            return
        # sent as a plain notification on the call's own stream (the SDK's send_log_message
        # warns that logging is deprecated in 2026-07-28; it is the way of the 2025 era)
        notification = types.LoggingMessageNotification(params=params)
        with anyio.move_on_after(SEND_TIMEOUT_SECONDS):
            try:
                await self.ctx.session.send_notification(notification, related_request_id=self.ctx.request_id)
            except Exception:
                logger.debug("could not relay a log", exc_info=True)

    def refusal(self, request: ServerAsk) -> types.ErrorData | None:
        """The ``-32021`` error for a request whose capability the client did not declare."""
        missing = missing_capability(request, self.ctx.session.client_capabilities)
        if missing is None:
            return None
        return types.ErrorData(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"the client did not declare the {missing} capability {request.method} needs",
            data={"requiredCapabilities": required(missing)},
        )

    async def ask(self, request: ServerAsk) -> ServerAnswer | types.ErrorData:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        if not self.ctx.session.can_send_request:
            return types.ErrorData(
                code=INTERNAL_ERROR,
                message=f"the gateway cannot relay {request.method}: the client's request has no back channel",
            )
        answer: list[ServerAnswer | types.ErrorData] = []
        async with anyio.create_task_group() as tg:

            async def withdraw() -> None:
                await self._ended.wait()
                tg.cancel_scope.cancel()

            async def send() -> None:
                answer.append(await self._send(request))
                tg.cancel_scope.cancel()

            tg.start_soon(withdraw)
            tg.start_soon(send)
        if not answer:
            return types.ErrorData(
                code=INTERNAL_ERROR, message=f"{request.method} withdrawn: the call that asked has ended"
            )
        return answer[0]

    async def _send(self, request: ServerAsk) -> ServerAnswer | types.ErrorData:
        try:
            return await self.ctx.session.send_request(
                request,
                answer_type(request),
                metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id),
            )
        except MCPError as exc:
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.error.data)
        except Exception as exc:  # no back channel after all, the client left, an invalid answer
            logger.info("could not relay %s to the caller: %r", request.method, exc)
            return types.ErrorData(
                code=INTERNAL_ERROR, message=f"{request.method} failed: {type(exc).__name__}: {exc}"
            )
