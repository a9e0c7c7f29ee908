"""exposeTools as a faithful pass-through: first the pure conversions (gateway/mcp/passthrough.py),
then the real Agent and ToolHub with two copies of the fixture server tests/servers/media.py, and
the SDK's own clients over SSE and Streamable HTTP, both eras; last, input schemas listed as the
servers sent them (tests/servers/gated.py sending a JSON Schema 2020-12 document)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError

from mcp_agent.assembly import open_agent
from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.gateway.mcp.passthrough import advertised_output_schema, exposed_tool, tool_result_to_mcp
from mcp_agent.messages import ToolResult, ToolSpec
from mcp_agent.state.folder import state_dir
from mcp_agent.tools.hub import open_tool_hub

from ..conftest import Running, eventually, running_gateway
from .test_server import connect

SERVERS = Path(__file__).resolve().parents[2] / "servers"
MEDIA = str(SERVERS / "media.py")
GATED = str(SERVERS / "gated.py")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
ROUTES = [("sse", "legacy"), ("sse", "modern"), ("http", "legacy"), ("http", "modern")]


NUMBER = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}

# ------------------------------------------------------------------------------ pure parts


@pytest.mark.parametrize(
    ("schema", "kept"),
    [
        (NUMBER, True),
        (
            {
                "type": "object",
                "$defs": {"T": {"type": "string"}},
                "properties": {"t": {"$ref": "#/$defs/T"}},
            },
            True,
        ),
        (None, False),
        ({"type": "string"}, False),  # the 2025 schema wants an object schema
        ({"properties": {}}, False),
        ({"type": "object", "properties": {"t": {"type": "nope"}}}, False),  # not a valid JSON Schema
        ({"type": "object", "required": "temp"}, False),
    ],
)
def test_only_usable_output_schemas_are_advertised(schema: dict[str, Any] | None, kept: bool) -> None:
    spec = ToolSpec(name="t", output_schema=schema)
    assert advertised_output_schema(spec) == (schema if kept else None)
    assert exposed_tool(spec).output_schema == (schema if kept else None)


def test_exposed_tools_keep_what_validates() -> None:
    spec = ToolSpec(
        name="s__t",
        description="Does t.",
        parameters={"properties": {"a": {"type": "string"}}},
        title="Tee",
        annotations={"readOnlyHint": True, "destructiveHint": False},
        output_schema=NUMBER,
    )
    tool = exposed_tool(spec)
    assert (tool.name, tool.title, tool.description) == ("s__t", "Tee", "Does t.")
    assert tool.input_schema == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert tool.annotations is not None and tool.annotations.read_only_hint is True
    assert tool.output_schema == NUMBER
    odd = exposed_tool(ToolSpec(name="u", title="You", annotations={"readOnlyHint": [1]}))
    assert odd.annotations is None and odd.title == "You"  # unusable annotations only are dropped


def test_results_without_parts_send_the_guarded_text() -> None:
    result = tool_result_to_mcp(ToolResult("error: invalid arguments", is_error=True), output_schema=NUMBER)
    assert result.is_error and [c.text for c in result.content] == ["error: invalid arguments"]  # type: ignore[union-attr]
    assert result.structured_content is None


def test_results_send_the_parts_and_hold_the_contract() -> None:
    parts = (
        {"type": "text", "text": "hi"},
        {"type": "image", "mimeType": "image/png"},
    )  # the image has no data
    result = tool_result_to_mcp(ToolResult("hi", content=parts, structured=[1, 2]), name="s__t")
    assert [c.type for c in result.content] == ["text", "text"]
    assert result.content[1].text == "[image content not passed on]"  # type: ignore[union-attr]
    assert result.structured_content is None and not result.is_error  # not an object: not sent
    good = tool_result_to_mcp(
        ToolResult("{}", content=parts[:1], structured={"temp": 1}), output_schema=NUMBER
    )
    assert not good.is_error and good.structured_content == {"temp": 1}
    bad = tool_result_to_mcp(
        ToolResult("x", content=parts[:1], structured={}), name="s__t", output_schema=NUMBER
    )
    assert bad.is_error and bad.content[0].text == "hi"  # type: ignore[union-attr]
    assert "'temp' is a required property" in bad.content[-1].text  # type: ignore[union-attr]
    failed = tool_result_to_mcp(ToolResult("boom", is_error=True, content=parts[:1]), output_schema=NUMBER)
    assert failed.is_error and len(failed.content) == 1  # an error result owes no structuredContent


# ------------------------------------------------------------------------------ end to end


def media_config(*, expose: bool = True, require: tuple[str, ...] = ()) -> AgentConfig:
    data: dict[str, Any] = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "limits": {"maxResultChars": 50, "toolTimeoutSeconds": 30},
        "mcpServers": {
            "media": {"command": sys.executable, "args": [MEDIA]},
            "other": {"command": sys.executable, "args": [MEDIA], "env": {"MEDIA_SCHEME": "other"}},
        },
        "approvals": {"require": list(require), "timeoutSeconds": 30},
        "gateway": {"description": "Pass-through.", "exposeTools": expose},
    }
    return parse_config(data, environ={})


@pytest.fixture
async def media_gateway() -> AsyncIterator[Running]:
    """A gateway per test (a module-scoped one would be shared by a failing test's successors:
    anyio's plugin then fails them all)."""
    async with running_gateway(media_config(), factory=open_agent) as gateway:
        yield gateway


async def pages(client: Any, method: str) -> list[Any]:
    """Every item of a paged listing, following the gateway's cursors, with either client."""
    items: list[Any] = []
    cursor: str | None = None
    while True:
        if isinstance(client, ClientSession):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await getattr(client, method)(params=params)
        else:
            page = await getattr(client, method)(cursor=cursor, cache_mode="bypass")
        field = {"list_resources": "resources", "list_resource_templates": "resource_templates"}[method]
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            return items


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_tools_keep_title_annotations_and_output_schema(
    media_gateway: Running, transport: str, era: str
) -> None:
    async with connect(media_gateway.url, transport, era) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert next(iter(tools)) == "agent_query"
    picture = tools["media__picture"]
    assert picture.title == "A picture"
    assert picture.annotations is not None
    assert (picture.annotations.read_only_hint, picture.annotations.open_world_hint) == (True, False)
    assert picture.annotations.title == "Picture"
    assert tools["other__weather"].output_schema == {
        "type": "object",
        "properties": {"temp": {"type": "number"}},
        "required": ["temp"],
    }
    assert tools["media__odd_schema"].output_schema is None  # not an object schema: dropped, tool kept
    assert tools["media__long"].output_schema is None


async def test_the_schema_lookup_answers_what_tools_list_lists(media_gateway: Running) -> None:
    """The SDK checks a 2026 call's ``Mcp-Param-*`` headers against ``input_schema_of`` instead of
    a whole listing: it must answer exactly the listed schema of every tool, and None for others."""
    tool = media_gateway.app.tool
    async with connect(media_gateway.url, "http", "modern") as client:
        listed = (await client.list_tools()).tools
    assert len(listed) > 1
    for each in listed:
        assert tool.input_schema_of(each.name) == each.input_schema, each.name
    assert tool.input_schema_of("media__nope") is None


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_results_keep_the_servers_parts_and_structured_content(
    media_gateway: Running, transport: str, era: str
) -> None:
    async with connect(media_gateway.url, transport, era) as client:
        picture = await client.call_tool("media__picture", {})
        weather = await client.call_tool("other__weather", {})  # the client checks it against its schema
    assert not picture.is_error
    assert [part.type for part in picture.content] == ["text", "image", "audio", "resource_link", "resource"]
    text, image, audio, link, embedded = picture.content
    assert isinstance(text, types.TextContent) and text.text == "a red dot"
    assert isinstance(image, types.ImageContent) and (image.data, image.mime_type) == (PNG, "image/png")
    assert isinstance(audio, types.AudioContent) and audio.mime_type == "audio/wav"
    assert isinstance(link, types.ResourceLink) and link.uri == "media://notes/1"  # readable as it is
    assert isinstance(embedded, types.EmbeddedResource) and embedded.resource.uri == "media://notes/2"
    assert not weather.is_error and weather.structured_content == {"temp": 21.5}
    assert weather.content[0].text == '{"temp": 21.5}'


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "modern")])
async def test_a_result_that_breaks_its_output_schema_is_an_error(
    media_gateway: Running, transport: str, era: str
) -> None:
    """The SDK's client raises on a successful result without (matching) structuredContent; the
    gateway sends such a result as an error, the server's parts kept, the reason added."""
    async with connect(media_gateway.url, transport, era) as client:
        missing = await client.call_tool("media__no_structure", {})
        wrong = await client.call_tool("media__wrong_structure", {})
    assert missing.is_error and missing.content[0].text == "warm"
    assert "media__no_structure" in missing.content[-1].text
    assert "returned no structuredContent" in missing.content[-1].text
    assert wrong.is_error and wrong.structured_content == {"temp": "warm"}
    assert "does not match its outputSchema at temp" in wrong.content[-1].text


async def test_max_result_chars_cuts_text_parts_and_keeps_images(media_gateway: Running) -> None:
    async with connect(media_gateway.url, "http", "legacy") as client:
        result = await client.call_tool("media__long", {"size": 40})
    assert [part.type for part in result.content] == ["text", "image", "text", "text"]
    first, image, second, note = result.content
    assert first.text == "a" * 40 and second.text == "b" * 10  # 50 characters of text in all
    assert image.data == PNG
    assert note.text == "[... truncated: 30 of 80 characters cut]"


async def test_guards_still_apply(media_gateway: Running) -> None:
    async with connect(media_gateway.url, "http", "modern") as client:
        invalid = await client.call_tool("media__long", {"size": "many"})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("media__nope", {})
    assert invalid.is_error and [part.type for part in invalid.content] == ["text"]
    assert "size" in invalid.content[0].text
    assert (unknown.value.code, unknown.value.message) == (-32602, "Unknown tool: media__nope")


async def test_a_denied_call_sends_no_parts() -> None:
    config = media_config(require=("media__picture",))
    async with running_gateway(config, factory=open_agent) as gateway:
        results: list[Any] = []
        async with (
            connect(gateway.url, "sse", "legacy") as client,
            gateway.client() as http,
            anyio.create_task_group() as tg,
        ):

            async def call() -> None:
                results.append(await client.call_tool("media__picture", {}))

            tg.start_soon(call)
            pending: list[Any] = []

            async def waiting() -> bool:
                pending[:] = (await http.get("/api/v1/approvals")).json()["pending"]
                return bool(pending)

            await eventually(waiting)
            await http.post(f"/api/v1/approvals/{pending[0]['id']}", json={"approved": False})
    [result] = results
    assert result.is_error and [part.type for part in result.content] == ["text"]
    assert result.content[0].text.startswith("[DENIED:")


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_resources_are_listed_paged_and_read(media_gateway: Running, transport: str, era: str) -> None:
    async with connect(media_gateway.url, transport, era) as client:
        resources = await pages(client, "list_resources")
        templates = await pages(client, "list_resource_templates")
        note = await client.read_resource("other://notes/3")
        blob = await client.read_resource("media://blob")  # never listed: found by asking
        templated = await client.read_resource("other://notes/42")
        with pytest.raises(MCPError) as caught:
            await client.read_resource("nowhere://x")
    assert [r.uri for r in resources] == [f"{s}://notes/{n}" for s in ("media", "other") for n in (1, 2, 3)]
    assert resources[0].name == "note 1" and resources[0].mime_type == "text/plain"
    assert [t.uri_template for t in templates] == ["media://notes/{id}", "other://notes/{id}"]
    assert note.contents[0].text == "note 3"
    assert blob.contents[0].blob == "AAEC"
    assert templated.contents[0].text == "note 42"
    assert caught.value.code == -32002 and "nowhere://x" in caught.value.message


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_prompts_are_listed_and_got(media_gateway: Running, transport: str, era: str) -> None:
    async with connect(media_gateway.url, transport, era) as client:
        listed = await client.list_prompts()
        greeting = await client.get_prompt("other__greet", {"name": "Ada"})
        shown = await client.get_prompt("media__show")
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("media__nope")
    assert [p.name for p in listed.prompts] == ["media__greet", "media__show", "other__greet", "other__show"]
    assert listed.prompts[0].title == "Greeting" and listed.prompts[0].arguments[0].required
    assert greeting.messages[0].content.text == "Hello, Ada!"
    assert shown.messages[0].content.type == "image" and shown.messages[0].content.data == PNG
    assert caught.value.code == -32602


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_capabilities_are_declared_only_with_expose_tools(era: str) -> None:
    for expose in (True, False):
        config = media_config(expose=expose)
        async with (
            running_gateway(config, factory=open_agent) as gateway,
            connect(gateway.url, "http", era) as client,
        ):
            capabilities = client.server_capabilities
            assert capabilities is not None
            if expose:
                assert capabilities.resources is not None and capabilities.resources.list_changed
                if era == "legacy":  # (2026: the SDK derives it from subscriptions/listen)
                    assert not capabilities.resources.subscribe
                assert capabilities.prompts is not None and capabilities.prompts.list_changed
            else:
                assert capabilities.resources is None and capabilities.prompts is None
                with pytest.raises(MCPError) as caught:
                    await client.read_resource("media://notes/1")
                assert caught.value.code == -32601  # method not found


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_list_changed_reaches_legacy_clients(transport: str) -> None:
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    async with (
        running_gateway(media_config(), factory=open_agent) as gateway,
        connect(gateway.url, transport, "legacy", message_handler=on_message) as client,
    ):
        await client.list_resources()  # the gateway now knows this connection
        await client.call_tool("media__add_note", {})
        await eventually(lambda: any(isinstance(m, types.ResourceListChangedNotification) for m in seen))
        await client.call_tool("other__add_prompt", {})
        await eventually(lambda: any(isinstance(m, types.PromptListChangedNotification) for m in seen))
        resources = await pages(client, "list_resources")
        prompts = await client.list_prompts()
    assert "media://notes/4" in [r.uri for r in resources]
    assert "other__extra2" in [p.name for p in prompts.prompts]


async def test_list_changed_reaches_2026_listeners() -> None:
    async with (
        running_gateway(media_config(), factory=open_agent) as gateway,
        connect(gateway.url, "http", "modern") as client,
    ):
        async with client.listen(resources_list_changed=True, prompts_list_changed=True) as subscription:
            await client.call_tool("media__add_note", {})
            await client.call_tool("media__add_prompt", {})
            kinds: set[str] = set()
            with anyio.fail_after(10):
                async for event in subscription:
                    kinds.add(type(event).__name__)
                    if kinds == {"ResourcesListChanged", "PromptsListChanged"}:
                        break
        resources = await pages(client, "list_resources")
    assert "media://notes/4" in [r.uri for r in resources]


# ------------------------------------------------------------ input schemas as the servers sent them

SHIPMENT: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "A shipment – to anywhere",
    "type": "object",
    "$defs": {
        "count": {"$anchor": "count", "type": "integer", "minimum": 1},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    "properties": {
        "count": {"$ref": "#count"},
        "mode": {"oneOf": [{"const": "air"}, {"const": "sea"}]},
        "to": {"$ref": "#/$defs/address"},
        "note": {"type": ["string", "null"], "default": None},
        "weight": {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": 1000.0},
    },
    "required": ["mode"],
    "allOf": [{"required": ["count"]}],
    "if": {"properties": {"mode": {"const": "sea"}}},
    "then": {"required": ["to"]},
    "else": {"properties": {"count": {"maximum": 10}}},
}
"""Every family of JSON Schema 2020-12 keywords the gateway's normalisation rewrites for models."""
LOOSE: dict[str, Any] = {"properties": {"text": {"type": "string"}}, "required": ["text"]}
"""No ``type``: the SDK refuses to list it (an object schema is required)."""


def wire(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def same_schema(listed: dict[str, Any], sent: dict[str, Any]) -> bool:
    """Whether ``listed`` is ``sent`` byte-for-byte, member by member, in any order of the root's
    members: the SDK's server writes the keywords its model of an input schema declares
    (``$schema``, ``type``...) first, and JSON's object members have no order (RFC 8259)."""
    return listed.keys() == sent.keys() and all(wire(listed[key]) == wire(sent[key]) for key in sent)


def schema_config(tmp_path: Path, schemas: dict[str, dict[str, Any]]) -> AgentConfig:
    """One gated server per schema, each listing the tool ``ship`` with that ``inputSchema``."""
    (tmp_path / "tools.txt").write_text("ship\n")
    servers: dict[str, Any] = {}
    for name, schema in schemas.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(schema))
        env = {
            "GATED_SCHEMA": str(tmp_path / f"{name}.json"),
            "GATED_TOOLS": str(tmp_path / "tools.txt"),
            "GATED_GATE": str(tmp_path / "gate"),
            "GATED_LOG": str(tmp_path / f"{name}.log"),
        }
        servers[name] = {"command": sys.executable, "args": [GATED], "env": env}
    data = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "mcpServers": servers,
        "gateway": {"description": "Schemas.", "exposeTools": True},
    }
    return parse_config(data, environ={})


def test_the_servers_input_schema_is_listed_and_the_normalised_one_when_the_sdk_refuses_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = ToolSpec(name="s__ship", parameters={"type": "object", "properties": {}}, input_schema=SHIPMENT)
    assert wire(exposed_tool(spec).input_schema) == wire(SHIPMENT)  # (the SDK's server orders its root)
    normalised = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    loose = ToolSpec(name="s__loose", title="Loose", parameters=normalised, input_schema=LOOSE)
    warned: set[tuple[str, str]] = set()
    with caplog.at_level(logging.WARNING, logger="mcp_agent.gateway.mcp.passthrough"):
        listed = [exposed_tool(loose, warned=warned) for _ in range(3)]
    assert all(tool.input_schema == normalised and tool.title == "Loose" for tool in listed)
    [warning] = caplog.records  # one per tool and schema, however often it is listed
    assert "s__loose is listed with the gateway's normalised input schema" in warning.getMessage()
    assert "at type: Field required" in warning.getMessage()
    assert exposed_tool(ToolSpec(name="plain", parameters={"properties": {}})).input_schema == {
        "type": "object",
        "properties": {},
    }  # no schema as sent (an in-memory tool): the normalised one, as ever


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_input_schemas_are_listed_as_the_servers_sent_them_and_calls_checked_by_the_normalised(
    tmp_path: Path, transport: str, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "gate").touch()
    config = schema_config(tmp_path, {"rich": SHIPMENT, "loose": LOOSE})
    with caplog.at_level(logging.WARNING, logger="mcp_agent.gateway.mcp.passthrough"):
        async with (
            running_gateway(config, factory=open_agent) as gateway,
            connect(gateway.url, transport, era) as client,
        ):
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            again = {tool.name: tool for tool in (await client.list_tools()).tools}
            good = await client.call_tool("rich__ship", {"count": 2, "mode": "sea", "to": {"city": "Oslo"}})
            bad = [
                await client.call_tool("rich__ship", arguments)
                for arguments in (
                    {"count": 0, "mode": "air"},  # $ref to an $anchor: minimum 1
                    {"count": 2, "mode": "sea"},  # if/then: "to" required
                    {"count": 2, "mode": "bus"},  # oneOf
                    {"count": 20, "mode": "air"},  # else: maximum 10
                )
            ]
    rich = tools["rich__ship"].input_schema
    assert same_schema(rich, SHIPMENT) and same_schema(again["rich__ship"].input_schema, SHIPMENT)
    assert {"$schema", "$defs", "allOf", "if", "then", "else"} <= rich.keys()
    assert rich["$defs"]["count"]["$anchor"] == "count" and rich["properties"]["to"] == {
        "$ref": "#/$defs/address"
    }
    assert tools["loose__ship"].input_schema == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }  # the SDK would refuse the server's: the normalised one, said once
    warnings = [r.getMessage() for r in caplog.records if "normalised input schema" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("exposeTools: loose__ship is listed")
    # the calls are checked against the normalised schema, as the model's are
    assert not good.is_error and good.content[0].text == "ship: "
    for result, where in zip(bad, ("count", "to", "mode", "count"), strict=True):
        assert result.is_error and where in result.content[0].text, result.content[0].text
    calls = [
        line for line in (tmp_path / "rich.log").read_text().splitlines() if line.startswith("tools/call")
    ]
    assert calls == [
        'tools/call ship {"count": 2, "mode": "sea", "to": {"city": "Oslo"}}'
    ]  # only the valid one


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_warm_start_lists_the_schemas_the_servers_sent(tmp_path: Path, era: str) -> None:
    config = schema_config(tmp_path, {"rich": SHIPMENT})
    (tmp_path / "gate").touch()
    async with open_tool_hub(config.servers(), state_dir=state_dir()) as hub:
        assert [tool.name for tool in hub.list_tools()] == ["rich__ship"]
    (tmp_path / "gate").unlink()
    async with (
        running_gateway(config, factory=open_agent) as gateway,
        connect(gateway.url, "http", era) as client,
    ):
        # the gate is shut: the server has not answered initialize; the list is the cached one
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert not (tmp_path / "gate").exists()
        (tmp_path / "gate").touch()
    assert same_schema(tools["rich__ship"].input_schema, SHIPMENT)
