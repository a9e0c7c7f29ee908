"""The MCP server the gateway serves: the ``agent_query`` tool (and, with exposeTools, the inner tools).

One lowlevel ``Server`` serves every transport (SSE, Streamable HTTP stateful or stateless,
stdio) and both protocol eras; the SDK negotiates the version.

- ``tools/list``: ``agent_query`` with its input schema (``maxLength`` from
  ``gateway.maxQueryChars``), its ``outputSchema`` (``RESULT_SCHEMA``) and a description made of
  ``gateway.description`` plus a generated summary of the tool servers and their tools. With
  ``exposeTools`` every inner tool follows under its exposed name. A caller with
  ``gateway.callers.NAME.tools`` sees only its tools, in the summary and in the list, and its
  call of any other is answered as a call of an unknown tool (``callers.py``).
- When the tools change, legacy clients get ``notifications/tools/list_changed`` on their
  connection (the init options advertise ``tools.listChanged``), 2026 clients on their
  ``subscriptions/listen`` stream.
- ``agent_query`` runs one query through ``GatewayService.run`` (``query.py``: progress and
  its heartbeat, a gone client, approvals asked of the caller by elicitation in both eras).
- A 2026 client that declares the Tasks extension gets ``agent_query`` as a task (``tasks.py``:
  ``tasks/get``, ``tasks/update``, ``tasks/cancel``, ``notifications/tasks``); ``serve_tasks``
  registers it. Its call of an exposed tool whose server declared the extension becomes the
  server's task, relayed (``task_relay.py``).
- Cancellation, as the SDK does it (mcp 2.3, verified by the tests): on a handshake-era
  connection ``notifications/cancelled`` cancels the handler's scope ("interrupt" mode) and no
  response is sent; on a 2026 Streamable HTTP request the client cancels by closing the response
  stream, which cancels the handler the same way. Either way the cancellation reaches
  ``Agent.query``, which ends the run ``cancelled`` (``RunEnded`` is emitted, so metrics count it),
  cancels the inner tool calls on their servers, and re-raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal, cast

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import NotificationOptions, Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import compose_tool_call_handler
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import HTTPConnection

from ..._plural import counted
from ..._version import __version__
from ...loop.result import RESULT_SCHEMA, RunResult
from ...messages import JSONObject, ToolSpec
from ...telemetry.base import continued_from
from ...tools.relay import Resume, current_channel, relaying_to
from ...tools.status import ServerStatus
from .._internals import request_connection
from ..callers import LOCAL, Caller, caller_now, caller_of
from ..service import Busy, GatewayService, NotReady, limits_schema
from .catalog import CatalogHandlers
from .held_calls import HeldCalls, may_be_asked
from .passthrough import advertised_output_schema, exposed_tool, tool_result_to_mcp
from .query import QueryCalls, text_result
from .relay import LogLevels, RequestChannel, resume_of
from .resumable import Streams
from .task_relay import TaskRelay
from .tasks import ListenFn, Tasks

logger = logging.getLogger(__name__)

ToolAnswer = types.CallToolResult | types.InputRequiredResult

TOOL_NAME = "agent_query"
NOTIFY_TIMEOUT_SECONDS = 2.0
MAX_SUMMARY_TOOLS = 8
MAX_EXPOSED_MEMO = 4096
"""Exposed tools remembered as listed; past this many (tool lists that keep changing) the memo starts over."""


class AgentMCPServer(Server[Any]):
    """A lowlevel Server that advertises ``tools.listChanged`` on every transport.

    The Streamable HTTP session manager builds its init options with the default
    ``NotificationOptions()`` (listChanged false); this override makes the capability true there
    too (mcp-sdk-2.md G7).
    """

    offers: Callable[[Literal["completions", "subscribe"]], bool] | None = None
    """Whether a tool server offers completions or resource subscriptions (exposeTools)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        """The SDK's capabilities, with ``completions`` and ``resources.subscribe`` declared only
        while a tool server that is up declares them (the handlers are always registered)."""
        capabilities = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        offers = self.offers
        if offers is None:
            return capabilities
        update: dict[str, Any] = {}
        if capabilities.completions is not None and not offers("completions"):
            update["completions"] = None
        resources = capabilities.resources
        if resources is not None and resources.subscribe and not offers("subscribe"):
            update["resources"] = resources.model_copy(update={"subscribe": False})
        return capabilities.model_copy(update=update) if update else capabilities

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            # resources and prompts are declared only with exposeTools (create_mcp_server)
            notification_options
            or NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True),
            experimental_capabilities,
            extensions,
        )


# ------------------------------------------------------------------------------------ pure parts


def summarize_tools(specs: Sequence[ToolSpec], statuses: Sequence[ServerStatus] = ()) -> str:
    """A short generated summary of the tool servers and their tools, for the description."""
    by_server: dict[str, list[str]] = {}
    for spec in specs:
        by_server.setdefault(spec.server or "tools", []).append(spec.mcp_name or spec.name)
    down = []
    for status in statuses:
        if status.status not in ("up", "disabled"):
            down.append(status.name)
    if not by_server:
        text = "It has no tools at the moment, so it answers from the model's own knowledge."
    else:
        parts = []
        for server, names in sorted(by_server.items()):
            shown = ", ".join(names[:MAX_SUMMARY_TOOLS])
            more = f" and {len(names) - MAX_SUMMARY_TOOLS} more" if len(names) > MAX_SUMMARY_TOOLS else ""
            parts.append(f"{server} ({shown}{more})")
        count = len(specs)
        text = (
            f"Inside, a model plans and calls {counted(count, 'tool')} from "
            f"{counted(len(by_server), 'server')}: {'; '.join(parts)}."
        )
    if down:
        text += f" Unavailable now: {', '.join(sorted(down))}."
    return text


def agent_query_description(
    description: str, specs: Sequence[ToolSpec], statuses: Sequence[ServerStatus] = ()
) -> str:
    """The full description of ``agent_query``: the configured sentence, the summary, the usage."""
    return (
        f"{description.strip()}\n\n{summarize_tools(specs, statuses)}\n\n"
        "Send one natural-language question or task in `query`; the agent may take several "
        "rounds of tool calls and returns the answer (structured details in structuredContent). "
        "Pass the same `session_id` to continue a conversation."
    )


def agent_query_input_schema(max_query_chars: int, *, query_only: bool = False) -> JSONObject:
    """``agent_query``'s input schema.

    The optional members are nullable and ``null`` (or ``""`` for ``session_id``) means absent:
    frameworks with a "strict" tool mode (the OpenAI Agents SDK, smolagents) make every property
    required and fill what they do not need with ``null``. ``query_only`` publishes ``query``
    alone (``gateway.queryOnlySchema``), for clients that cannot cope even with that.
    """
    query: JSONObject = {
        "type": "string",
        "minLength": 1,
        "description": "The question or task for the agent.",
    }
    if max_query_chars:
        query["maxLength"] = max_query_chars
    properties: JSONObject = {"query": query}
    if not query_only:
        properties["session_id"] = {
            "type": ["string", "null"],
            "description": (
                "Continue the conversation with this id, as returned by an earlier call (the last line "
                "of its text, or structuredContent.session_id); omit it or send null to start a new one."
            ),
            "maxLength": 128,
        }
        properties["limits"] = limits_schema()
    return {
        "type": "object",
        "properties": properties,
        "required": ["query"],
        "additionalProperties": False,
    }


def run_result_to_mcp(result: RunResult) -> types.CallToolResult:
    """``content`` = the answer (for a failure: ``Agent terminated (<reason>): <detail>``, whether
    retrying may help, and any partial answer), then a last line with the conversation id; plus
    structuredContent.

    The conversation id is in the text because most agent frameworks show their model only the
    text: without it there, the model could never continue the conversation.
    """
    text = result.shown_answer()
    if result.session_id:
        text += f"\n\n[session_id: {result.session_id} (pass it as session_id to continue this conversation)]"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=result.to_structured(),
        is_error=not result.ok,
    )


# ------------------------------------------------------------------------------------ the server


class AgentQueryTool:
    """The handlers of the gateway's MCP server, over one GatewayService."""

    def __init__(self, service: GatewayService, streams: Streams | None = None) -> None:
        self.service = service
        self.tasks: Tasks | None = None
        """``agent_query`` as a task (``serve_tasks`` sets it)."""
        self.queries = QueryCalls(service, run_result_to_mcp, streams)
        self.subscriptions = InMemorySubscriptionBus()
        self.log_levels = LogLevels(service)
        self.held = HeldCalls(service, self.log_levels)
        self._legacy_connections: dict[int, Any] = {}
        self._schema_warnings: set[tuple[str, str]] = set()
        self._exposed: dict[int, tuple[ToolSpec, types.Tool]] = {}
        service.on_tools_changed(self.tools_changed)

    # ---------------------------------------------------------------- tools/list

    def tool_list(self, caller: Caller = LOCAL) -> list[types.Tool]:
        """``agent_query`` and, with ``exposeTools``, the inner tools: those ``caller`` may use."""
        service = self.service
        specs = service.tool_specs(caller)
        tools = [
            types.Tool(
                name=TOOL_NAME,
                title="Ask the agent",
                description=agent_query_description(
                    service.gateway.description, specs, service.server_status()
                ),
                input_schema=agent_query_input_schema(
                    service.gateway.max_query_chars, query_only=service.gateway.query_only_schema
                ),
                output_schema=RESULT_SCHEMA,
                annotations=types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
            )
        ]
        if service.gateway.expose_tools:  # by name: the same list in the same order (prompt caches)
            tools.extend(
                self._exposed_tool(spec)
                for spec in sorted(specs, key=lambda spec: spec.name)
                if spec.name != TOOL_NAME
            )
        return tools

    def _exposed_tool(self, spec: ToolSpec) -> types.Tool:
        """``exposed_tool(spec)``, made once per spec: the hub keeps the same ``ToolSpec`` objects
        until its tools change, and checking a tool against both eras' schemas is not free."""
        known = self._exposed.get(id(spec))
        if known is not None and known[0] is spec:
            return known[1]
        if len(self._exposed) >= MAX_EXPOSED_MEMO:
            self._exposed.clear()
        tool = exposed_tool(spec, warned=self._schema_warnings)
        self._exposed[id(spec)] = (spec, tool)
        return tool

    def input_schema_of(self, name: str) -> JSONObject | None:
        """The ``inputSchema`` listed for the tool ``name`` (None: no such tool).

        The SDK's 2026-07-28 HTTP path checks a call's ``Mcp-Param-*`` headers against it before
        the call is dispatched; without this lookup it would build the whole ``tools/list`` for
        every call to find one schema.
        """
        gateway = self.service.gateway
        if name == TOOL_NAME:
            return agent_query_input_schema(gateway.max_query_chars, query_only=gateway.query_only_schema)
        caller = caller_now()  # another caller's tool has no schema, as an unknown one (callers.py)
        if not gateway.expose_tools or (caller is not None and not caller.may_use(name)):
            return None
        spec = next((spec for spec in self.service.tool_specs() if spec.name == name), None)
        return None if spec is None else self._exposed_tool(spec).input_schema

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        caller = request_caller(ctx)
        if caller is None:
            raise MCPError(types.INVALID_REQUEST, "Unauthorized: this connection has no caller")
        # Caching hints (2026-07-28): not cacheable (ttlMs 0), since the list changes whenever a
        # tool server starts, fails or lists anew (clients are told by list_changed or listen),
        # and private: each caller is its own auth context, and a private answer never crosses it.
        return types.ListToolsResult(tools=self.tool_list(caller), ttl_ms=0, cache_scope="private")

    # ---------------------------------------------------------------- tools/call

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._remember(ctx)
        caller = request_caller(ctx)
        if caller is None:
            return text_result("Unauthorized: this connection has no caller", is_error=True)
        if params.name == TOOL_NAME:
            return await self.queries.call(ctx, params, caller)
        arguments = dict(params.arguments or {})
        if self.service.gateway.expose_tools:
            spec = next((spec for spec in self.service.tool_specs() if spec.name == params.name), None)
            if spec is not None and caller.may_use(spec.name):
                # a held call's answer is a tool's: HeldCalls checks the method of a retry
                if self.held.holds(params.request_state):  # answers to what its server asked mid-call
                    return cast(ToolAnswer, await self.held.retry(ctx, caller, params))
                resume = resume_of(params)  # a retry of the server's own input_required round
                if may_be_asked(ctx):
                    answer = await self.held.start(
                        ctx, caller, partial(self._inner_result, spec, arguments, caller), resume=resume
                    )
                    return cast(ToolAnswer, answer)
                return await self._inner_call(ctx, spec, arguments, caller, resume)
        # a protocol error, as the specification has it (-32602), not a result a model would read
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")

    async def _inner_call(
        self,
        ctx: ServerRequestContext[Any],
        spec: ToolSpec,
        arguments: JSONObject,
        caller: Caller,
        resume: Resume | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One exposed call: the server's parts and structuredContent, held to its outputSchema;
        what the server sends during the call is relayed to this client (``relay.py``)."""
        channel = RequestChannel(
            ctx, caller, self.log_levels, resume, answer_seconds=self.service.gateway.input_timeout_seconds
        )
        try:
            with relaying_to(channel):
                return await self._inner_result(spec, arguments, caller)
        finally:
            channel.end()

    async def _inner_result(
        self, spec: ToolSpec, arguments: JSONObject, caller: Caller
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The call made in the current relay channel; a 2026 server's ``input_required`` the
        channel kept for its client is the answer (raises ``MCPError`` -32021 when the client did
        not declare a capability the server's requests need)."""
        try:
            result = await self.service.call_tool(spec.name, arguments, caller)
        except Busy as exc:
            return text_result(str(exc), is_error=True)
        except NotReady as exc:
            return text_result(f"Agent unavailable ({exc.state}): {exc.message}", is_error=True)
        channel = current_channel()
        kept = channel.kept if isinstance(channel, RequestChannel) else None
        if isinstance(kept, types.ErrorData):
            raise MCPError(kept.code, kept.message, kept.data)
        if kept is not None:
            return kept
        return tool_result_to_mcp(result, name=spec.name, output_schema=advertised_output_schema(spec))

    # ---------------------------------------------------------------- list_changed

    def _remember(self, ctx: ServerRequestContext[Any]) -> None:
        """Keep a legacy connection with a standalone channel, to tell it when the tools change."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connection = request_connection(ctx)
        if not connection.has_standalone_channel:
            return
        key = id(connection)
        if key in self._legacy_connections:
            return
        self._legacy_connections[key] = connection
        connection.exit_stack.callback(self._legacy_connections.pop, key, None)

    @property
    def connections(self) -> int:
        return len(self._legacy_connections)

    async def tools_changed(self) -> None:
        """Tell every client that the tool list (and the description) changed."""
        for connection in list(self._legacy_connections.values()):
            with anyio.move_on_after(NOTIFY_TIMEOUT_SECONDS):
                try:
                    await connection.send_tool_list_changed()
                except Exception:
                    logger.debug("could not send tools/list_changed", exc_info=True)
        await self.subscriptions.publish(ToolsListChanged())


def request_caller(ctx: ServerRequestContext[Any]) -> Caller | None:
    """Who sent this MCP request: the HTTP request's caller, or the local user over stdio.

    None for an HTTP request that carries no caller, which the auth middleware never lets
    through; the handler refuses it rather than guess.
    """
    request = ctx.request
    if request is None:  # stdio: the parent process that started us
        return LOCAL
    return caller_of(request.scope) if isinstance(request, HTTPConnection) else None


def create_mcp_server(
    service: GatewayService, *, streams: Streams | None = None
) -> tuple[AgentMCPServer, AgentQueryTool]:
    """The MCP server of the gateway and its handler object (tests and the app need both).

    ``streams`` tells which Streamable HTTP streams a client resumed (HTTP only).
    """
    tool = AgentQueryTool(service, streams)
    catalog = (
        CatalogHandlers(
            service,
            caller_of=request_caller,
            remember=tool._remember,
            connections=tool._legacy_connections.values,
            bus=tool.subscriptions,
            levels=tool.log_levels,
            held=tool.held,
        )
        if service.gateway.expose_tools
        else None
    )  # with exposeTools only: the handlers are what makes the SDK declare the capabilities
    listen: ListenFn = ListenHandler(tool.subscriptions)
    if catalog is not None:
        listen = catalog.listening(ListenHandler(tool.subscriptions))
    server = AgentMCPServer(
        "mcp-agent",
        version=__version__,
        title="mcp_agent gateway",
        instructions=service.gateway.description,
        get_tool_input_schema=tool.input_schema_of,
        on_list_tools=tool.list_tools,
        on_call_tool=tool.call_tool,
        on_subscriptions_listen=listen,
        on_list_resources=catalog.list_resources if catalog else None,
        on_list_resource_templates=catalog.list_resource_templates if catalog else None,
        on_read_resource=catalog.read_resource if catalog else None,
        on_list_prompts=catalog.list_prompts if catalog else None,
        on_get_prompt=catalog.get_prompt if catalog else None,
        on_completion=catalog.complete if catalog else None,
        on_subscribe_resource=catalog.subscribe if catalog else None,
        on_unsubscribe_resource=catalog.unsubscribe if catalog else None,
    )
    server.offers = catalog.offers if catalog else None
    if catalog is not None:
        # registered by method: the constructor's on_set_logging_level warns that logging is
        # deprecated in 2026-07-28, and the 2025 era's clients are the ones that set a level
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, tool.log_levels.set_level)
    continue_http_traces(server)
    serve_tasks(server, tool, listen)
    return server, tool


def serve_tasks(server: AgentMCPServer, tool: AgentQueryTool, listen: ListenFn) -> None:
    """``agent_query`` as a task for clients that declare the Tasks extension (``tasks.py``): the
    extension declared in the capabilities, its methods, its ``tools/call`` interceptor and its
    ``subscriptions/listen`` (``listen`` serves the listens without ``taskIds``, as before)."""
    tasks = Tasks(tool.service, run_result_to_mcp, request_caller, tool_name=TOOL_NAME)
    tasks.relay = TaskRelay(tasks, tool._inner_result, tool.log_levels)  # exposed tools' tasks
    tool.tasks = tasks
    server.extensions[tasks.identifier] = tasks.settings()
    for binding in tasks.methods():
        server.add_request_handler(binding.method, binding.params_type, binding.handler)
    server.add_request_handler(
        "tools/call", types.CallToolRequestParams, compose_tool_call_handler([tasks], tool.call_tool)
    )
    server.add_request_handler(
        "subscriptions/listen",
        types.SubscriptionsListenRequestParams,
        tasks.listen_handler(listen, tool.subscriptions),
    )


# The caller's W3C trace context, continued by the runs its requests start (``telemetry/``).
#
# - Over MCP the SDK continues ``params._meta.traceparent`` itself: its OpenTelemetry middleware
#   makes the ``tools/call agent_query`` server span the child of it, and the run's span the child
#   of that. ``TraceHeaders``, put before the SDK's middleware, continues an HTTP ``traceparent``
#   header instead when ``_meta`` carries none (a client that traces its HTTP requests but not its
#   MCP messages).
# - Over REST, ``QueryAnswer`` runs the query inside ``continued_from(request.headers)``.
#
# Either way a span already current (an ASGI instrumentation's server span) wins, and nothing
# happens when nothing is traced.
class TraceHeaders:
    """MCP server middleware: an HTTP ``traceparent`` header is the parent when ``_meta`` has none."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        request = ctx.request
        meta = ctx.meta
        if not isinstance(request, HTTPConnection) or (meta is not None and meta.get("traceparent")):
            return await call_next(ctx)
        with continued_from(request.headers):
            return await call_next(ctx)


def continue_http_traces(server: Server[Any]) -> None:
    """Put ``TraceHeaders`` first in ``server``'s middleware (outside the SDK's span middleware)."""
    server.middleware.insert(0, TraceHeaders())
