"""Fixture: the server the official MCP conformance suite expects (``tests/conformance/``).

Run as ``conformance.py`` (stdio) or ``conformance.py http PORT`` (Streamable HTTP on
127.0.0.1, path ``/mcp``). Both protocol eras: the SDK's lowlevel ``Server`` answers
``initialize`` (2025-11-25) and ``server/discover`` with per-request ``_meta`` (2026-07-28).

What it offers is what the suite's server scenarios name (read from their code in
``tests/conformance/npm``): the ``test_*`` tools (text, image, audio, embedded resource, mixed
content, logging, progress, an error, sampling, elicitation with SEP-1034 defaults and SEP-1330
enums, the JSON Schema 2020-12 tool, the input-required multi round-trip tools, and the
diagnostic tools of ``server-stateless``), the ``test://`` resources and template, the
``test_*`` prompts, completions, ``logging/setLevel``, ``resources/subscribe`` and
``unsubscribe``, ``subscriptions/listen``, caching hints, and ``requestState`` sealed by the
SDK's boundary (so a tampered state is refused with -32602).

The sampling and elicitation tools ask as a server of the request's era does (``ask_caller``):
over the back channel, mid-call, on a handshake-era request; with an ``input_required`` result
on a 2026-07-28 one, which has no back channel (so a gateway speaking 2026-07-28 to this fixture
for a 2025 client is judged on bridging the two). So do the input-required tools and prompt, and
``test_missing_capability``: an ``input_required`` result does not exist in the handshake era
(the SDK refuses a handler's, -32603), so there they ask the same questions over the back
channel, one at a time (``asked``), as a server of that era would; a gateway speaking the
handshake era to this fixture for a 2026 client is judged on bridging those requests into
``input_required`` rounds (``gateway/mcp/held_calls.py``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging, sampling: on purpose

NAME = "conformance-fixture"
IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
STATE_KEY = b"conformance-fixture-request-state-key-0123456789"
MISSING_CAPABILITY = -32021
MODERN = "2026-07-28"  # the first era without a back channel: its requests are asked with input_required

Ctx = ServerRequestContext[Any, Any]
Result = types.CallToolResult | types.InputRequiredResult
ToolFn = Callable[[Ctx, dict[str, Any], types.CallToolRequestParams], Awaitable[Result]]

bus = InMemorySubscriptionBus()
subscriptions: set[str] = set()

SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def text(value: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=value)], is_error=is_error)


def ask(message: str, properties: dict[str, Any]) -> types.ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def answers(params: types.InputResponseRequestParams) -> dict[str, Any]:
    """The client's input responses as plain JSON, keyed as asked."""
    found: dict[str, Any] = {}
    for key, value in (params.input_responses or {}).items():
        found[key] = value.model_dump(by_alias=True, mode="json") if hasattr(value, "model_dump") else value
    return found


def handshake_era(ctx: Ctx) -> bool:
    """Whether the request is of the handshake era: it has a back channel, and no input_required."""
    return ctx.protocol_version < MODERN


ANSWER_TYPES: dict[type[Any], type[Any]] = {
    types.ElicitRequest: types.ElicitResult,
    types.CreateMessageRequest: types.CreateMessageResult,
    types.ListRootsRequest: types.ListRootsResult,
}


async def asked(ctx: Ctx, request: types.InputRequest) -> dict[str, Any]:
    """The caller's answer to ``request`` over the back channel, mid-call (handshake era), as
    plain JSON (the ``answers`` of a 2026-07-28 retry look the same)."""
    result = await ctx.session.send_request(
        request,  # type: ignore[arg-type]
        ANSWER_TYPES[type(request)],
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def elicited(answer: Any, field: str) -> Any:
    if isinstance(answer, dict) and isinstance(answer.get("content"), dict):
        return answer["content"].get(field)
    return None


def sampled(answer: Any) -> str:
    content = answer.get("content") if isinstance(answer, dict) else None
    if isinstance(content, dict):
        return str(content.get("text", ""))
    return ""


# ---- the tools ----------------------------------------------------------------------------

TOOLS: dict[str, tuple[str, dict[str, Any], ToolFn]] = {}


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> Callable[[ToolFn], ToolFn]:
    def register(fn: ToolFn) -> ToolFn:
        TOOLS[name] = (description, schema or {"type": "object", "properties": {}}, fn)
        return fn

    return register


@tool("test_simple_text", "Returns simple text content.")
async def simple_text(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    return text("This is a simple text response for testing.")


@tool("test_image_content", "Returns image content.")
async def image_content(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    return types.CallToolResult(content=[types.ImageContent(data=IMAGE, mime_type="image/png")])


@tool("test_audio_content", "Returns audio content.")
async def audio_content(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    return types.CallToolResult(content=[types.AudioContent(data=AUDIO, mime_type="audio/wav")])


@tool("test_embedded_resource", "Returns an embedded resource.")
async def embedded_resource(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    resource = types.TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])


@tool("test_multiple_content_types", "Returns text, image and resource content.")
async def multiple_content(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    resource = types.TextResourceContents(
        uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
    )
    return types.CallToolResult(
        content=[
            types.TextContent(text="Multiple content types test:"),
            types.ImageContent(data=IMAGE, mime_type="image/png"),
            types.EmbeddedResource(resource=resource),
        ]
    )


async def log(ctx: Ctx, message: str) -> None:
    await ctx.session.send_log_message("info", message, "conformance", related_request_id=ctx.request_id)


@tool("test_tool_with_logging", "Sends three log messages while it runs.")
async def with_logging(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    await log(ctx, "Tool execution started")
    await anyio.sleep(0.05)
    await log(ctx, "Tool processing data")
    await anyio.sleep(0.05)
    await log(ctx, "Tool execution completed")
    return text("Tool with logging executed successfully")


@tool("test_logging_tool", "Sends a log message (server-stateless: none without a logLevel).")
async def logging_tool(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    await log(ctx, "logging tool ran")
    return text("logged")


@tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.")
async def with_progress(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    for step in (0, 50, 100):
        await ctx.session.report_progress(step, 100, f"step {step} of 100")
        if step < 100:
            await anyio.sleep(0.05)
    return text("Tool with progress executed successfully")


@tool("test_error_handling", "Always fails.")
async def error_handling(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    return text("This tool intentionally returns an error for testing", is_error=True)


@tool(
    "test_sampling",
    "Asks the client's model (sampling/createMessage).",
    {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
)
async def sampling(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    try:
        answer = await ask_caller(ctx, params, "sample", sample(str(args.get("prompt", "")), 100))
    except MCPError as error:
        return text(f"Sampling failed: {error}", is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return text(f"LLM response: {sampled(answer)}")


async def ask_caller(
    ctx: Ctx,
    params: types.CallToolRequestParams,
    key: str,
    request: types.CreateMessageRequest | types.ElicitRequest,
) -> dict[str, Any] | types.InputRequiredResult:
    """The caller's answer to ``request`` as plain JSON, asked as a server of the request's era
    asks: a handshake-era request over its back channel, mid-call; a 2026-07-28 request, which
    has no back channel, with an ``input_required`` result whose retry carries the answer under
    ``key`` (that result is returned, the tool's answer for now)."""
    if ctx.protocol_version >= MODERN:
        got = answers(params)
        if key in got:
            return dict(got[key]) if isinstance(got[key], dict) else {}
        return types.InputRequiredResult(input_requests={key: request})
    if isinstance(request, types.CreateMessageRequest):
        result: types.CreateMessageResult | types.ElicitResult = await ctx.session.create_message(
            messages=request.params.messages,
            max_tokens=request.params.max_tokens,
            related_request_id=ctx.request_id,
        )
    else:
        assert isinstance(request.params, types.ElicitRequestFormParams)
        result = await ctx.session.elicit_form(
            request.params.message, request.params.requested_schema, related_request_id=ctx.request_id
        )
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def elicit(
    ctx: Ctx, params: types.CallToolRequestParams, message: str, schema: dict[str, Any]
) -> dict[str, Any] | types.InputRequiredResult:
    form = types.ElicitRequestFormParams(message=message, requested_schema=schema)
    return await ask_caller(ctx, params, "elicit", types.ElicitRequest(params=form))


def elicited_text(prefix: str, answer: dict[str, Any]) -> types.CallToolResult:
    return text(f"{prefix}: action={answer.get('action')}, content={json.dumps(answer.get('content') or {})}")


@tool(
    "test_elicitation",
    "Asks the user (elicitation/create).",
    {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)
async def elicitation(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    try:
        answer = await elicit(ctx, params, str(args.get("message", "")), schema)
    except MCPError as error:
        return text(f"Elicitation failed: {error}", is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return elicited_text("User response", answer)


@tool("test_elicitation_sep1034_defaults", "Asks with defaults for every primitive type (SEP-1034).")
async def sep1034(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    try:
        answer = await elicit(ctx, params, "Please provide user information", SEP1034_SCHEMA)
    except MCPError as error:
        return text(f"Elicitation failed: {error}", is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return elicited_text("Elicitation completed", answer)


@tool("test_elicitation_sep1330_enums", "Asks with the five enum forms (SEP-1330).")
async def sep1330(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    try:
        answer = await elicit(
            ctx, params, "Please select values using different enum schema types", SEP1330_SCHEMA
        )
    except MCPError as error:
        return text(f"Elicitation failed: {error}", is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return elicited_text("Elicitation completed", answer)


@tool(
    "json_schema_2020_12_tool", "Declares an input schema with JSON Schema 2020-12 keywords.", SCHEMA_2020_12
)
async def schema_2020_12(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    return text(json.dumps(args, sort_keys=True))


@tool(
    "test_x_mcp_header",
    "Mirrors its region argument into the Mcp-Param-Region header (SEP-2243).",
    {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}},
)
async def x_mcp_header(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    return text(f"region={args.get('region', '<none>')}")


@tool("test_missing_capability", "Needs the client's sampling capability (-32021 without it).")
async def missing_capability(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            MISSING_CAPABILITY,
            "This tool needs the client's sampling capability",
            {"requiredCapabilities": {"sampling": {}}},
        )
    if handshake_era(ctx):
        return text(f"Model said: {sampled(await asked(ctx, sample('Say hello', 20)))}")
    return types.InputRequiredResult(input_requests={"model": sample("Say hello", 20)})


@tool("test_streaming_elicitation", "Answers with an input-required result asking the user.")
async def streaming_elicitation(
    ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams
) -> Result:
    if "user_name" in answers(params):
        return text("thanks")
    return types.InputRequiredResult(
        input_requests={"user_name": ask("What is your name?", {"name": {"type": "string"}})}
    )


@tool("test_trigger_tool_change", "Announces a changed tool list to subscriptions/listen streams.")
async def trigger_tool_change(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    await bus.publish(ToolsListChanged())
    return text("tool list changed")


@tool("test_trigger_prompt_change", "Announces a changed prompt list to subscriptions/listen streams.")
async def trigger_prompt_change(
    ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams
) -> Result:
    await bus.publish(PromptsListChanged())
    return text("prompt list changed")


# ---- input-required (multi round-trip, 2026-07-28) ---------------------------------------


@tool("test_input_required_result_elicitation", "Asks the user's name, then greets.")
async def ir_elicitation(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    if handshake_era(ctx):
        answer = await asked(ctx, ask("What is your name?", {"name": {"type": "string"}}))
        return text(f"Hello, {elicited(answer, 'name')}!")
    got = answers(params)
    if "user_name" in got and isinstance(elicited(got["user_name"], "name"), str):
        return text(f"Hello, {elicited(got['user_name'], 'name')}!")
    if params.input_responses is not None and "user_name" in got:
        raise MCPError(
            types.INVALID_PARAMS, "inputResponses.user_name is not an elicitation result with a name"
        )
    return types.InputRequiredResult(
        input_requests={"user_name": ask("What is your name?", {"name": {"type": "string"}})}
    )


@tool("test_input_required_result_sampling", "Asks the client's model, then answers with its text.")
async def ir_sampling(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    if handshake_era(ctx):
        return text(f"Model said: {sampled(await asked(ctx, sample('What is the capital of France?', 100)))}")
    got = answers(params)
    if "capital_question" in got:
        return text(f"Model said: {sampled(got['capital_question'])}")
    return types.InputRequiredResult(
        input_requests={"capital_question": sample("What is the capital of France?", 100)}
    )


@tool("test_input_required_result_list_roots", "Asks the client's roots, then counts them.")
async def ir_roots(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    got = answers(params)
    if handshake_era(ctx):
        got = {"client_roots": await asked(ctx, types.ListRootsRequest())}
    if "client_roots" in got:
        roots = got["client_roots"].get("roots", []) if isinstance(got["client_roots"], dict) else []
        uris = ", ".join(str(root.get("uri")) for root in roots if isinstance(root, dict))
        return text(f"Client exposed {len(roots)} root(s): {uris}")
    return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})


@tool("test_input_required_result_request_state", "Round-trips requestState.")
async def ir_request_state(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    if handshake_era(ctx):  # no requestState in this era: the call itself holds its state
        await asked(ctx, ask("Please confirm", {"ok": {"type": "boolean"}}))
        return text("state-ok: confirmation received")
    if "confirm" in answers(params) and params.request_state == "confirm-round":
        return text("state-ok: confirmation received")
    return types.InputRequiredResult(
        input_requests={"confirm": ask("Please confirm", {"ok": {"type": "boolean"}})},
        request_state="confirm-round",
    )


@tool(
    "test_input_required_result_multiple_inputs", "Asks for an elicitation, a sampling and the roots at once."
)
async def ir_multiple(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    requests: dict[str, types.InputRequest] = {
        "user_name": ask("What is your name?", {"name": {"type": "string"}}),
        "greeting": sample("Generate a greeting", 50),
        "client_roots": types.ListRootsRequest(),
    }
    if handshake_era(ctx):
        for request in requests.values():
            await asked(ctx, request)
        return text("All inputs received.")
    if requests.keys() <= answers(params).keys():
        return text("All inputs received.")
    return types.InputRequiredResult(input_requests=requests, request_state="multiple-inputs")


@tool("test_input_required_result_multi_round", "Asks twice, the state growing each round.")
async def ir_multi_round(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    if handshake_era(ctx):
        name = elicited(
            await asked(ctx, ask("Step 1: What is your name?", {"name": {"type": "string"}})), "name"
        )
        step2 = ask("Step 2: What is your favorite color?", {"color": {"type": "string"}})
        return text(f"{name} likes {elicited(await asked(ctx, step2), 'color')}.")
    state = json.loads(params.request_state) if params.request_state else {"round": 0}
    got = answers(params)
    if state.get("round") == 1 and "step1" in got:
        return types.InputRequiredResult(
            input_requests={
                "step2": ask("Step 2: What is your favorite color?", {"color": {"type": "string"}})
            },
            request_state=json.dumps({"round": 2, "name": elicited(got["step1"], "name")}),
        )
    if state.get("round") == 2 and "step2" in got:
        return text(f"{state.get('name')} likes {elicited(got['step2'], 'color')}.")
    return types.InputRequiredResult(
        input_requests={"step1": ask("Step 1: What is your name?", {"name": {"type": "string"}})},
        request_state=json.dumps({"round": 1}),
    )


@tool("test_input_required_result_tampered_state", "Seals its requestState; a tampered one is refused.")
async def ir_tampered(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    if handshake_era(ctx):  # no requestState to tamper with: the call itself holds its state
        await asked(ctx, ask("Please confirm", {"ok": {"type": "boolean"}}))
        return text("state-ok: confirmed")
    if params.request_state is not None:
        return text(f"state-ok: {params.request_state}")
    return types.InputRequiredResult(
        input_requests={"confirm": ask("Please confirm", {"ok": {"type": "boolean"}})},
        request_state="round-1",
    )


@tool("test_input_required_result_capabilities", "Asks only for what the client declared it can answer.")
async def ir_capabilities(ctx: Ctx, args: dict[str, Any], params: types.CallToolRequestParams) -> Result:
    capabilities = ctx.session.client_capabilities
    requests: dict[str, types.InputRequest] = {}
    if capabilities is not None and capabilities.sampling is not None:
        requests["sample"] = sample("Say hello", 50)
    if capabilities is not None and capabilities.elicitation is not None:
        requests["ask"] = ask("What is your name?", {"name": {"type": "string"}})
    if capabilities is not None and capabilities.roots is not None:
        requests["roots"] = types.ListRootsRequest()
    if handshake_era(ctx):  # declared at initialize: asked in turn, a refused one left out
        for request in requests.values():
            with contextlib.suppress(MCPError):
                await asked(ctx, request)
        return text("capabilities checked")
    if not requests or answers(params):
        return text("capabilities checked")
    return types.InputRequiredResult(input_requests=requests, request_state="capability-gated")


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name=name, description=description, input_schema=schema)
            for name, (description, schema, _) in TOOLS.items()
        ]
    )


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Result:
    if params.name not in TOOLS:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
    return await TOOLS[params.name][2](ctx, dict(params.arguments or {}), params)


# ---- resources -----------------------------------------------------------------------------

RESOURCES = [
    types.Resource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource",
        mime_type="text/plain",
    ),
    types.Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A static PNG image",
        mime_type="image/png",
    ),
    types.Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource to subscribe to",
        mime_type="text/plain",
    ),
]


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_templates(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template-data",
        description="Data for an id",
        mime_type="application/json",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(
    ctx: Ctx, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult | types.InputRequiredResult:
    uri = str(params.uri)
    contents: types.TextResourceContents | types.BlobResourceContents
    if uri == "test://static-text":
        contents = types.TextResourceContents(
            uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
        )
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=IMAGE)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(
            uri=uri, mime_type="text/plain", text="Watched resource content"
        )
    elif uri.startswith("test://template/") and uri.endswith("/data"):
        item = uri.removeprefix("test://template/").removesuffix("/data")
        body = json.dumps(
            {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}, separators=(",", ":")
        )
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=body)
    else:
        raise MCPError(types.INVALID_PARAMS, "Resource not found", {"uri": uri})
    return types.ReadResourceResult(contents=[contents])


async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscriptions.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscriptions.discard(str(params.uri))
    return types.EmptyResult()


# ---- prompts -------------------------------------------------------------------------------

PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource",
        arguments=[
            types.PromptArgument(name="resourceUri", description="The resource to embed", required=True)
        ],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
    types.Prompt(name="test_input_required_result_prompt", description="A prompt that asks the user first"),
]


def user(content: types.ContentBlock) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(
    ctx: Ctx, params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    args = dict(params.arguments or {})
    if params.name == "test_simple_prompt":
        messages = [user(types.TextContent(text="This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        said = f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"
        messages = [user(types.TextContent(text=said))]
    elif params.name == "test_prompt_with_embedded_resource":
        resource = types.TextResourceContents(
            uri=args.get("resourceUri", "test://example-resource"),
            mime_type="text/plain",
            text="Embedded resource content for testing.",
        )
        messages = [
            user(types.EmbeddedResource(resource=resource)),
            user(types.TextContent(text="Please process the embedded resource above.")),
        ]
    elif params.name == "test_prompt_with_image":
        messages = [
            user(types.ImageContent(data=IMAGE, mime_type="image/png")),
            user(types.TextContent(text="Please analyze the image above.")),
        ]
    elif params.name == "test_input_required_result_prompt":
        got = answers(params)
        if handshake_era(ctx):
            question = ask("What context should the prompt use?", {"context": {"type": "string"}})
            got = {"user_context": await asked(ctx, question)}
        if "user_context" not in got:
            question = ask("What context should the prompt use?", {"context": {"type": "string"}})
            return types.InputRequiredResult(input_requests={"user_context": question})
        context = elicited(got["user_context"], "context")
        messages = [user(types.TextContent(text=f"Use the following context: {context}"))]
    else:
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    candidates = ["paris", "park", "party", "alpha", "beta"]
    values = [value for value in candidates if value.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def build() -> Server[Any]:
    hint = CacheHint(ttl_ms=0, scope="private")
    server: Server[Any] = Server(
        NAME,
        version="1.0.0",
        cache_hints={
            "tools/list": hint,
            "prompts/list": hint,
            "resources/list": hint,
            "resources/templates/list": hint,
            "resources/read": hint,
        },
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(bus),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level,
        get_tool_input_schema=lambda name: TOOLS[name][1] if name in TOOLS else None,
    )
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity(keys=[STATE_KEY]), default_audience=NAME)
    )
    return server


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str]) -> None:
    server = build()
    if len(argv) >= 2 and argv[0] == "http":
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(argv[1]), log_level="warning")
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main(sys.argv[1:])
