r"""A ``tools/call`` to a 2026-07-28 Streamable HTTP server, sent as one POST of our own.

In the 2026-07-28 era a ``tools/call`` over HTTP is one self-contained POST: the request carries
its whole context (the ``_meta`` envelope and the ``Mcp-*`` headers), and its answer comes back on
that POST's body, as JSON or as an SSE stream, with no session. The SDK's ``ClientSession`` sends
it through its dispatcher (a pending table, a memory stream to the transport, one task per POST,
a pydantic parse of each message and a model dump back). ``RawCaller.call_tool`` sends the same
request itself, on the connection's own ``httpx2`` client (the one the SDK's transport uses: the
same options, the headers from config, the trace headers and the ``maxMessageBytes`` body cap of
``connection.py``, and its hook that reads an SSE answer to its end when it is closed, so that
its TCP connection is kept), and reads the answer itself. To a plain ``http://`` server the POST
skips the client's own layers and goes on kept connections of ``lean_http.LeanTransport``, with
the client's hooks and auth run around it (``LeanTransport.send``; ``lean_http.usable`` says when).

What it sends is what ``ClientSession.call_tool`` sends after ``adopt()`` of a discover result:
the JSON-RPC body with ``name``, ``arguments`` (and ``inputResponses``/``requestState`` on a
retry), the ``_meta`` envelope (protocol version, client info, client capabilities: restated by
``client_capabilities``, pinned by a test against the SDK's wire, or those of an exposed call's
client, ``caller_capabilities.py``, as the SDK's path sends them too; the log level: the call's
own, else the session's default), ``progressToken`` (the request id) when progress is wanted,
the trace context of the SDK's own client span ("MCP send tools/call NAME", made here as the
SDK's dispatcher makes it, with its attributes and error status); and the headers ``Accept``,
``Content-Type``, ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``.

What it does with the answer is what the session does: each ``notifications/progress`` of the
call to ``on_progress``; every other notification parsed at the negotiated version, a
``notifications/message`` to ``on_log`` (the relay's log routing), and each one to
``on_message`` (the session's message handler); the response through ``repair`` (the
``ResponseRepairer``), then the SDK's own result validation (``mcp_types.methods``, and the
``CallToolResult | InputRequiredResult`` model ``call_tool`` parses with; a ``resultType: "task"``
answer is a ``CreatedTask``, as the session's Tasks claim parses it, ``tasks.py``).

Failures come out as the session's do, so ``session.call_tool_on`` words them once for both
paths: ``MCPError`` with the server's error, ``REQUEST_TIMEOUT`` after ``timeout`` (the POST is
abandoned, its connection closed: at 2026-07-28 that is the cancellation, as the SDK's transport
does it), ``PARSE_ERROR`` for a body past ``maxMessageBytes`` or one that does not parse,
``CONNECTION_CLOSED`` for an SSE stream that failed or ended without a response; a
``ValidationError`` for an invalid result. A POST that fails below HTTP (the server is gone) ends
the incarnation, as the SDK's transport does when a POST raises: ``broken`` is set with the
error, ``connection.py`` raises it in the incarnation, and the call fails "connection closed".

Where it does not do the SDK's thing (each documented, none seen from a conforming server):

- a tool whose listed ``inputSchema`` has ``x-mcp-header`` annotations goes the SDK way
  (``takes``): the SDK mirrors those arguments into ``Mcp-Param-*`` headers;
- a redirect goes the SDK way (``UseSdk``: the SDK follows those that stay on the origin);
- an SSE stream that ends without a response fails the call: 2026-07-28 has no resumption
  (``Last-Event-ID`` was removed), where the SDK would still try a GET;
- a request the server sends on the call's stream is dropped (2026-07-28 servers send none:
  they answer ``input_required``); a JSON body that is no response fails the call (the SDK would
  wait for the timeout);
- the SDK re-lists the tools when a tool it never listed answers (for output schema
  validation, which the repair filter disables anyway by removing ``outputSchema``): not here.

Everything else goes the SDK way: handshake-era servers, stdio servers, the SSE transport,
``resources/*``, ``prompts/*``, listings and ``subscriptions/listen``.

The switch: ``MCP_AGENT_RAW_CALLS=0`` in the environment turns this path off (every call goes
through the SDK's session), read at each start of a server. An environment variable rather than
an ``agent.json`` key: it is an escape hatch for an operator and a lever for tests and benches
(a gateway in a subprocess), not a setting anyone should need.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Annotated, Any, NoReturn

import anyio
import httpx2
import mcp_types as types
from mcp import MCPError
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    encode_header_value,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    LOG_LEVEL_META_KEY,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSION_META_KEY,
    REQUEST_TIMEOUT,
)
from mcp_types import methods as _methods
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from .caller_capabilities import forwarded
from .lean_http import LeanTransport, usable
from .tasks import CreatedTask

logger = logging.getLogger(__name__)

RAW_CALLS_ENV = "MCP_AGENT_RAW_CALLS"
"""Set to ``0`` (or ``false``, ``no``, ``off``) to send every call through the SDK's session."""


def _route(value: Any) -> str:
    tag = value.get("resultType") if isinstance(value, dict) else getattr(value, "result_type", None)
    return "task" if tag == "task" else "core"


_RESULT: TypeAdapter[types.CallToolResult | types.InputRequiredResult | CreatedTask] = TypeAdapter(
    Annotated[
        Annotated[types.CallToolResult | types.InputRequiredResult, Tag("core")]
        | Annotated[CreatedTask, Tag("task")],
        Discriminator(_route),
    ]
)
"""What ``ClientSession.call_tool`` parses a result with once the Tasks claim is active (a core
arm and a ``task`` arm routed by ``resultType``, as the SDK builds it), so that an invalid result
is described in the same words."""

_SDK_TRACER = trace.get_tracer("mcp-python-sdk")
"""The tracer of the SDK's own client spans (``mcp/shared/_otel.py``): a raw call makes the span
the SDK's dispatcher makes for a request, and puts its context in ``_meta`` as it does."""

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
LogFn = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]
MessageFn = Callable[[Any], Awaitable[None]]


def raw_calls_enabled() -> bool:
    """Whether calls to 2026-07-28 HTTP servers go the raw way (``RAW_CALLS_ENV``)."""
    return os.environ.get(RAW_CALLS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class UseSdk(Exception):
    """This call goes the SDK's way; nothing of it reached a tool of the server."""


def client_capabilities(asks: bool, extensions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``clientCapabilities`` the session declares: sampling, elicitation (form and URL) and
    roots when it has the callbacks for them (``ServerRelay.asks``), else none, and
    ``extensions`` (the Tasks extension, whose result claim is active at every modern version).
    Restates the SDK's ``ClientSession._build_capabilities`` (private)."""
    capabilities = types.ClientCapabilities(
        extensions=dict(extensions) if extensions else None,
        sampling=types.SamplingCapability() if asks else None,
        elicitation=(
            types.ElicitationCapability(
                form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()
            )
            if asks
            else None
        ),
        roots=types.RootsCapability(list_changed=True) if asks else None,
    )
    return capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)


def _has_x_mcp_header(value: Any) -> bool:
    """Whether a JSON schema holds an ``x-mcp-header`` annotation anywhere (pure)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "x-mcp-header" in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _parse(data: str | bytes) -> dict[str, Any]:
    """One JSON-RPC message as a dict; a ``ValidationError`` (the SDK's words) when it is none."""
    try:
        message = json.loads(data)
    except ValueError:
        message = None
    if (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and (
            isinstance(message.get("result"), dict)
            or isinstance(message.get("error"), dict)
            or isinstance(message.get("method"), str)
        )
    ):
        return message
    parsed = types.jsonrpc_message_adapter.validate_json(data, by_name=False)  # raises the SDK's error
    dumped: dict[str, Any] = parsed.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return dumped


class RawCaller:
    """Sends ``tools/call`` to one 2026-07-28 Streamable HTTP server (one incarnation of it).

    Args:
        server: the server's name, for logs.
        url: its endpoint.
        http: the connection's HTTP client (the SDK transport's own).
        version: the negotiated protocol version.
        client_info: our ``clientInfo``, as the session declares it.
        capabilities: our ``clientCapabilities`` (``client_capabilities``).
        log_level: the session's default ``logLevel`` (None: none).
        max_event_size: the largest SSE event (``maxMessageBytes``; None: no limit).
        known_tools: the server's listed tools as it sent them, by name (the repair filter's).
        repair: the repair filter for a result (``ResponseRepairer.repair``).
        on_log: where a ``notifications/message`` goes (the relay).
        on_message: where every notification goes (the session's message handler).
        ended: set when the incarnation has ended.

    Attributes:
        broken: set when a POST failed below HTTP; ``failure`` says how.
    """

    def __init__(
        self,
        *,
        server: str,
        url: str,
        http: httpx2.AsyncClient,
        version: str,
        client_info: types.Implementation,
        capabilities: dict[str, Any],
        log_level: types.LoggingLevel | None,
        max_event_size: int | None,
        known_tools: Mapping[str, Mapping[str, Any]],
        repair: Callable[[dict[str, Any]], dict[str, Any]],
        on_log: LogFn,
        on_message: MessageFn,
        ended: anyio.Event,
    ) -> None:
        self.server = server
        self.url = url
        self.version = version
        self.broken = anyio.Event()
        self.failure: BaseException | None = None
        self._http = http
        self._envelope: dict[str, Any] = {
            PROTOCOL_VERSION_META_KEY: version,
            CLIENT_INFO_META_KEY: client_info.model_dump(by_alias=True, mode="json", exclude_none=True),
            CLIENT_CAPABILITIES_META_KEY: capabilities,
        }
        self._log_level = log_level
        self._headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            MCP_PROTOCOL_VERSION_HEADER: version,
            MCP_METHOD_HEADER: "tools/call",
        }
        self._max_event_size = max_event_size
        self._known_tools = known_tools
        self._header_tools: dict[str, tuple[object, bool]] = {}
        self._repair = repair
        self._on_log = on_log
        self._on_message = on_message
        self._ended = ended
        self._next_id = 0
        self._lean = LeanTransport(http.timeout) if usable(http, url) else None
        """None: every POST through ``http``. Set: the environment named no proxy at the start;
        each call still checks the client's cookies (``lean_http.usable``)."""

    def takes(self, name: str) -> bool:
        """Whether a call of ``name`` can go this way (its schema mirrors no argument into a
        header: see the module docstring)."""
        tool = self._known_tools.get(name)
        schema = tool.get("inputSchema") if tool is not None else None
        if schema is None:
            return True
        seen = self._header_tools.get(name)
        if seen is None or seen[0] is not schema:
            seen = (schema, _has_x_mcp_header(schema))
            self._header_tools[name] = seen
        return not seen[1]

    # ---------------------------------------------------------------- the request

    def _body(
        self,
        request_id: int,
        name: str,
        arguments: dict[str, Any],
        *,
        progress: bool,
        input_responses: types.InputResponses | None,
        request_state: str | None,
        meta: Mapping[str, Any] | None,
        client_capabilities: types.ClientCapabilities | None = None,
    ) -> dict[str, Any]:
        """The JSON-RPC request ``ClientSession.call_tool`` writes (see the module docstring),
        with the calling client's capabilities when given (``caller_capabilities.py``)."""
        if input_responses is None and request_state is None:
            params: dict[str, Any] = {"name": name, "arguments": arguments}
            if meta:
                params["_meta"] = dict(meta)
        else:
            params = types.CallToolRequestParams(
                name=name,
                arguments=arguments,
                input_responses=input_responses,
                request_state=request_state,
                _meta=meta,  # type: ignore[arg-type]
            ).model_dump(by_alias=True, mode="json", exclude_none=True)
        envelope = dict(params.get("_meta") or {})
        envelope.update(self._envelope)
        if client_capabilities is not None:
            envelope[CLIENT_CAPABILITIES_META_KEY] = forwarded(
                self._envelope[CLIENT_CAPABILITIES_META_KEY], client_capabilities
            )
        if self._log_level is not None:
            envelope.setdefault(LOG_LEVEL_META_KEY, self._log_level)
        if progress:
            envelope["progressToken"] = request_id
        propagate.inject(envelope)  # SEP-414, as the SDK's dispatcher does: the current span's context
        params["_meta"] = envelope
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        on_progress: ProgressFn | None = None,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: Mapping[str, Any] | None = None,
        client_capabilities: types.ClientCapabilities | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult | CreatedTask:
        """Call ``name``: its result, or what the session would raise (module docstring).
        ``client_capabilities``: the calling client's, declared in place of ours where we relay
        its questions (``caller_capabilities.forwarded``; None: ours).

        Raises:
            MCPError: the server's error, or one made as the SDK makes it.
            ValidationError: the result is invalid.
            UseSdk: the call must go the SDK's way (nothing reached the tool).
        """
        self._next_id += 1
        request_id = self._next_id
        with _SDK_TRACER.start_as_current_span(
            f"MCP send tools/call {name}",
            kind=SpanKind.CLIENT,
            attributes={"mcp.method.name": "tools/call", "jsonrpc.request.id": str(request_id)},
        ) as span:
            body = self._body(
                request_id,
                name,
                arguments,
                progress=on_progress is not None,
                input_responses=input_responses,
                request_state=request_state,
                meta=meta,
                client_capabilities=client_capabilities,
            )
            headers = {**self._headers, MCP_NAME_HEADER: encode_header_value(name)}
            with anyio.move_on_after(timeout) as clock:
                try:
                    raw = await self._post(request_id, body, headers, on_progress)
                except MCPError as exc:
                    code = str(exc.code)
                    span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                    span.set_status(StatusCode.ERROR, exc.message)
                    raise
            if clock.cancelled_caught:
                raise MCPError(code=REQUEST_TIMEOUT, message="Request 'tools/call' timed out")
        result = self._repair(raw)
        ttl = result.get("ttlMs")
        if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
            result["ttlMs"] = 0  # as the session floors it
        with suppress(KeyError):  # a version the SDK's tables lack: only the model judges
            _methods.validate_server_result("tools/call", self.version, result)
        return _RESULT.validate_python(result, by_name=False)

    async def _post(
        self,
        request_id: int,
        body: dict[str, Any],
        headers: dict[str, str],
        on_progress: ProgressFn | None,
    ) -> dict[str, Any]:
        """POST the request; the response's result (or raise as ``call_tool`` says)."""
        request = self._http.build_request("POST", self.url, json=body, headers=headers)
        try:
            if self._lean is not None and usable(self._http, self.url, proxied=False):
                response = await self._lean.send(self._http, request)
            else:
                response = await self._http.send(request, stream=True, follow_redirects=False)
        except Exception as exc:
            await self._break(exc)
        try:
            return await self._answer(request_id, response, on_progress)
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """Close the lean transport's connections (the incarnation has ended)."""
        if self._lean is not None:
            await self._lean.aclose()

    async def _break(self, exc: Exception) -> NoReturn:
        """A POST failed below HTTP: end the incarnation, as the SDK's transport does."""
        logger.warning("%s: tools/call failed: %r", self.server, exc)
        if self.failure is None:
            self.failure = exc
        self.broken.set()
        with anyio.move_on_after(1.0):
            await self._ended.wait()
        raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")

    async def _answer(
        self, request_id: int, response: httpx2.Response, on_progress: ProgressFn | None
    ) -> dict[str, Any]:
        """Read the response to the POST: its JSON-RPC result, or raise."""
        if response.next_request is not None:  # a redirect: the SDK follows those on the origin
            await response.aread()
            raise UseSdk(f"redirected to {response.next_request.url}")
        if response.status_code == 202:
            raise MCPError(code=INVALID_REQUEST, message="server answered a request with 202 Accepted")
        content_type = response.headers.get("content-type", "").lower()
        if response.status_code >= 400:
            await self._error_status(response, content_type)
        if content_type.startswith("application/json"):
            try:
                data = await response.aread()
            except httpx2.StreamError as exc:  # past maxMessageBytes (connection._cap_json_body)
                raise MCPError(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}") from None
            except Exception as exc:
                await self._break(exc)
            try:
                message = _parse(data)
            except ValidationError as exc:
                raise MCPError(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}") from None
            if "method" in message:
                raise MCPError(code=PARSE_ERROR, message="Failed to parse JSON response: not a response")
            return _result_of(message)
        if content_type.startswith("text/event-stream"):
            return await self._read_stream(request_id, response, on_progress)
        raise MCPError(code=INVALID_REQUEST, message=f"Unexpected content type: {content_type}")

    @staticmethod
    async def _error_status(response: httpx2.Response, content_type: str) -> None:
        """A 4xx/5xx answer: the JSON-RPC error in its body, or one made of the status."""
        if content_type.startswith("application/json"):
            try:
                message = _parse(await response.aread())
            except (httpx2.StreamError, ValidationError):
                message = {}
            error = message.get("error")
            if isinstance(error, dict):
                with suppress(ValidationError):  # no JSON-RPC error: the status speaks
                    data = types.ErrorData.model_validate(error)
                    raise MCPError(code=data.code, message=data.message, data=data.data)
        if response.status_code == 404:
            raise MCPError(code=METHOD_NOT_FOUND, message="Not Found")
        raise MCPError(code=INTERNAL_ERROR, message="Server returned an error response")

    async def _read_stream(
        self, request_id: int, response: httpx2.Response, on_progress: ProgressFn | None
    ) -> dict[str, Any]:
        """Read an SSE answer: notifications as they come, then the response."""
        answer: dict[str, Any] | None = None
        try:
            async for sse in httpx2.EventSource(response, max_event_size=self._max_event_size):
                if sse.event != "message" or not sse.data:
                    continue  # a priming event, or an unknown event
                try:
                    message = _parse(sse.data)
                except ValidationError as exc:
                    raise MCPError(code=PARSE_ERROR, message=f"Failed to parse SSE message: {exc}") from None
                if "method" in message:
                    await self._notified(request_id, message, on_progress)
                    continue
                answer = message
                break  # the stream's end is read when it is closed (connection._DrainedAnswer)
        except httpx2.SSEError as exc:
            raise MCPError(code=CONNECTION_CLOSED, message=f"SSE stream failed: {exc}") from None
        except MCPError:
            raise
        except Exception as exc:
            logger.debug("%s: SSE stream ended: %r", self.server, exc)
        if answer is None:
            raise MCPError(code=CONNECTION_CLOSED, message="SSE stream ended without a response")
        return _result_of(answer, "SSE message")

    async def _notified(
        self, request_id: int, message: dict[str, Any], on_progress: ProgressFn | None
    ) -> None:
        """A message on the call's stream: its progress, a log, another notification."""
        method: str = message["method"]
        params = message.get("params")
        if "id" in message:
            logger.debug("%s: dropped request %r on a 2026-07-28 call stream", self.server, method)
            return
        if method == "notifications/progress" and on_progress is not None and isinstance(params, dict):
            token, progress = params.get("progressToken"), params.get("progress")
            if (
                token == request_id
                and not isinstance(token, bool)
                and isinstance(progress, int | float)
                and not isinstance(progress, bool)
            ):
                total, text = params.get("total"), params.get("message")
                try:
                    await on_progress(
                        float(progress),
                        float(total) if isinstance(total, int | float) else None,
                        text if isinstance(text, str) else None,
                    )
                except Exception:
                    logger.exception("%s: progress callback raised", self.server)
        try:
            notification = _methods.parse_server_notification(method, self.version, params)
        except KeyError:
            logger.debug("%s: dropped %r: not defined at %s", self.server, method, self.version)
            return
        except ValidationError:
            logger.warning("%s: failed to validate notification: %s", self.server, method, exc_info=True)
            return
        if isinstance(notification, types.CancelledNotification):
            return
        try:
            if isinstance(notification, types.LoggingMessageNotification):
                await self._on_log(notification.params)
            await self._on_message(notification)
        except Exception:
            logger.exception("%s: notification callback for %r raised", self.server, method)


def _result_of(message: dict[str, Any], what: str = "JSON response") -> dict[str, Any]:
    """The result of a JSON-RPC response; its error raised as ``MCPError`` (``PARSE_ERROR``
    when it is neither, as the SDK's transport fails a message it cannot parse)."""
    error = message.get("error")
    if isinstance(error, dict):
        try:
            data = types.ErrorData.model_validate(error)
        except ValidationError as exc:
            raise MCPError(code=PARSE_ERROR, message=f"Failed to parse {what}: {exc}") from None
        raise MCPError(code=data.code, message=data.message, data=data.data)
    result = message.get("result")
    if not isinstance(result, dict):
        raise MCPError(code=PARSE_ERROR, message=f"Failed to parse {what}: no result")
    return result
