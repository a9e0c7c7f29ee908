"""Fixture: a server that talks back during its calls, for the relay tests (``gateway/mcp/relay.py``).

Run as ``relay.py`` (stdio) or ``relay.py http PORT`` (Streamable HTTP on 127.0.0.1). Built on
the SDK's lowlevel ``Server``. ``$RELAY_PLAIN=1`` leaves out completions and subscriptions.

Tools:

- ``count`` ``{steps}``: one ``notifications/progress`` per step, then "counted to N";
- ``chatter``: logs one line at each of debug, info, warning and error (on its request), then
  "chattered";
- ``level``: the level the client last set with ``logging/setLevel`` ("none" before);
- ``sample``, ``ask``, ``ask_url``, ``roots``: ask the client for a sampling, a form elicitation,
  a URL elicitation or its roots, and answer with what came back (an error result with the
  code and message of an error);
- ``hold`` / ``release``: ``hold`` answers once ``release`` was called (two calls in flight);
- ``crash``: exits at once (code 3);
- ``touch`` ``{uri}``: sends ``notifications/resources/updated`` for ``uri`` when subscribed:
  with ``resources/subscribe`` (the handshake era) or on a ``subscriptions/listen`` stream that
  names it (2026-07-28); "not subscribed: URI" otherwise;
- ``listening``: the URIs of each open ``subscriptions/listen`` stream that names some, as JSON.

Resources: ``relay://doc``, ``relay://asked`` (its read asks the client's name with a form
elicitation first, and reads "text for NAME") and the template ``relay://items/{id}``. Prompts:
``greet`` (argument ``name``), ``introduce`` (asks the client's name first, like
``relay://asked``, and says "Hello NAME"). Completions: ``greet``'s ``name`` → names from
``NAMES`` that start with the value; the template's ``id`` → "1", "2", "3". ``$RELAY_DEAF=1``: a
``subscriptions/listen`` that names resources is refused (-32602).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import ResourceUpdated

NAMES = ("alice", "alina", "bob")
PLAIN = os.environ.get("RELAY_PLAIN") == "1"
DEAF = os.environ.get("RELAY_DEAF") == "1"  # subscriptions/listen refuses resource subscriptions
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}

state: dict[str, Any] = {"level": "none", "subscribed": set(), "released": anyio.Event()}
bus = InMemorySubscriptionBus()
handler = ListenHandler(bus)
listening: dict[int, list[str]] = {}  # one entry per open subscriptions/listen stream


def text(value: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=is_error)


TOOLS = [
    types.Tool(
        name="count",
        description="Count, reporting progress.",
        input_schema={"type": "object", "properties": {"steps": {"type": "integer"}}},
    ),
    *(
        types.Tool(name=name, description=f"The {name} tool.", input_schema=OBJECT)
        for name in (
            "chatter",
            "level",
            "sample",
            "ask",
            "ask_url",
            "roots",
            "hold",
            "release",
            "crash",
            "listening",
        )
    ),
    types.Tool(
        name="touch",
        description="Announce a resource update.",
        input_schema={"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
    ),
]


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def asked(ctx: ServerRequestContext[Any], name: str) -> str:
    session, related = ctx.session, ctx.request_id
    if name == "sample":
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
        sampled = await session.create_message([message], max_tokens=10, related_request_id=related)
        content = sampled.content
        return f"sampled: {content.text if isinstance(content, types.TextContent) else content}"
    if name == "ask":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        answer = await session.elicit_form("Your name?", schema, related_request_id=related)
        return f"elicited: {answer.action} {answer.content}"
    if name == "ask_url":
        answer = await session.elicit_url(
            "Sign in", "https://example.test/login", "e-1", related_request_id=related
        )
        return f"elicited: {answer.action}"
    roots = await session.send_request(
        types.ListRootsRequest(),
        types.ListRootsResult,
        metadata=ServerMessageMetadata(related_request_id=related),
    )
    return "roots: " + " ".join(str(root.uri) for root in roots.roots)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    name, args = params.name, params.arguments or {}
    if name == "count":
        steps = int(args.get("steps", 3))
        for step in range(1, steps + 1):
            await ctx.session.report_progress(step, steps, f"step {step}/{steps}")
        return text(f"counted to {steps}")
    if name == "chatter":
        for level in ("debug", "info", "warning", "error"):
            await ctx.session.send_log_message(
                level, f"{level} line", "relay", related_request_id=ctx.request_id
            )
        return text("chattered")
    if name == "level":
        return text(str(state["level"]))
    if name in ("sample", "ask", "ask_url", "roots"):
        try:
            return text(await asked(ctx, name))
        except MCPError as exc:
            return text(f"error {exc.code}: {exc.message}", is_error=True)
    if name == "hold":
        await state["released"].wait()
        state["released"] = anyio.Event()
        return text("released")
    if name == "crash":
        os._exit(3)
    if name == "release":
        state["released"].set()
        return text("releasing")
    if name == "touch":
        uri = str(args["uri"])
        if uri in state["subscribed"]:
            await ctx.session.send_resource_updated(uri)
            return text(f"touched {uri}")
        if any(uri in uris for uris in listening.values()):
            await bus.publish(ResourceUpdated(uri))
            return text(f"touched {uri}")
        return text(f"not subscribed: {uri}")
    if name == "listening":
        return text(json.dumps([uris for uris in listening.values() if uris]))
    raise MCPError(types.INVALID_PARAMS, f"unknown tool {name}")


async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    state["level"] = params.level
    return types.EmptyResult()


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    resources = [
        types.Resource(uri="relay://doc", name="doc"),
        types.Resource(uri="relay://asked", name="asked"),
    ]
    return types.ListResourcesResult(resources=resources)


async def name_asked(ctx: ServerRequestContext[Any]) -> str:
    """The client's name, asked over the back channel on this request's behalf."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = await ctx.session.elicit_form("Your name?", schema, related_request_id=ctx.request_id)
    return str((answer.content or {}).get("name", answer.action))


async def list_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(uri_template="relay://items/{id}", name="item")
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    said = f"text for {await name_asked(ctx)}" if uri == "relay://asked" else f"text of {uri}"
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=said)])


async def subscribe(
    ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
) -> types.EmptyResult:
    state["subscribed"].add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(
    ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    state["subscribed"].discard(str(params.uri))
    return types.EmptyResult()


async def listen(
    ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
) -> types.SubscriptionsListenResult:
    if DEAF and params.notifications.resource_subscriptions:
        raise MCPError(types.INVALID_PARAMS, "no resource subscriptions here")
    key = id(params)
    listening[key] = sorted(params.notifications.resource_subscriptions or ())
    try:
        return await handler(ctx, params)
    finally:
        del listening[key]


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    argument = types.PromptArgument(name="name", required=True)
    prompts = [types.Prompt(name="greet", arguments=[argument]), types.Prompt(name="introduce")]
    return types.ListPromptsResult(prompts=prompts)


async def get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name == "introduce":
        name = await name_asked(ctx)
    else:
        name = (params.arguments or {}).get("name", "you")
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"Hello {name}"))
    return types.GetPromptResult(messages=[message])


async def complete(
    ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
) -> types.CompleteResult:
    ref, value = params.ref, params.argument.value
    if isinstance(ref, types.PromptReference) and ref.name == "greet":
        values = [name for name in NAMES if name.startswith(value)]
    elif isinstance(ref, types.ResourceTemplateReference) and ref.uri == "relay://items/{id}":
        values = [item for item in ("1", "2", "3") if item.startswith(value)]
    else:
        raise MCPError(types.INVALID_PARAMS, f"nothing to complete for {ref}")
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values)))


def build() -> Server[Any]:
    extras: dict[str, Any] = (
        {}
        if PLAIN
        else {
            "on_completion": complete,
            "on_subscribe_resource": subscribe,
            "on_unsubscribe_resource": unsubscribe,
            "on_subscriptions_listen": listen,
        }
    )
    return Server(
        "relay",
        version="0.0.1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_set_logging_level=set_level,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        **extras,
    )


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn

        uvicorn.run(
            build().streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning"
        )
    else:
        anyio.run(serve_stdio)
