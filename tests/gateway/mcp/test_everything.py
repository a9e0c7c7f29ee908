"""exposeTools against the reference ``everything`` server from npm, run as a real stdio server.

``make test`` installs it into ``tests/npm`` (``package-lock.json`` pins the version). Without
Node.js these tests fail and say so: their subject is missing, which is not a reason to skip.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from mcp_agent.assembly import open_agent
from mcp_agent.config import parse_config

from ..conftest import Running, running_gateway
from .test_passthrough import ROUTES, pages
from .test_server import connect

NPM = Path(__file__).resolve().parents[2] / "npm"
PACKAGE = NPM / "node_modules" / "@modelcontextprotocol" / "server-everything"


def everything_command() -> list[str]:
    """``node <the installed server> stdio``; fails the test, saying what to do, when it cannot run."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "Node.js is not installed (no `node` on PATH): the tests of the npm `everything` MCP server "
            "need Node.js >= 20 and npm; install them, then run `make test`, which installs the server"
        )
    pinned = json.loads((NPM / "package.json").read_text())["dependencies"][
        "@modelcontextprotocol/server-everything"
    ]
    installed = PACKAGE / "package.json"
    if not installed.exists():
        pytest.fail(f"{PACKAGE} is missing: run `make test` (or `npm ci --prefix tests/npm`)")
    version = json.loads(installed.read_text())["version"]
    if version != pinned:
        pytest.fail(f"server-everything {version} is installed, tests/npm pins {pinned}: run `make test`")
    return [node, str(PACKAGE / "dist" / "index.js"), "stdio"]


@pytest.fixture
async def everything() -> AsyncIterator[Running]:
    node, *args = everything_command()
    data: dict[str, Any] = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "limits": {"toolTimeoutSeconds": 30},
        "mcpServers": {"everything": {"command": node, "args": args, "startupTimeoutSeconds": 30}},
        "gateway": {"description": "Everything.", "exposeTools": True},
    }
    async with running_gateway(parse_config(data, environ={}), factory=open_agent) as gateway:
        [status] = gateway.app.service.server_status()
        assert status.status == "up", status.error
        yield gateway


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_tools_and_results_pass_through(everything: Running, transport: str, era: str) -> None:
    async with connect(everything.url, transport, era) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        image = await client.call_tool("everything__get-tiny-image", {})
        weather = await client.call_tool("everything__get-structured-content", {"location": "Chicago"})
        links = await client.call_tool("everything__get-resource-links", {"count": 2})
        [link] = [part for part in links.content if isinstance(part, types.ResourceLink)][1:]
        linked = await client.read_resource(str(link.uri))  # a link from a result is readable as it is
    tiny = tools["everything__get-tiny-image"]
    assert tiny.title == "Get Tiny Image Tool"
    assert tiny.annotations is not None and tiny.annotations.read_only_hint is True
    schema = tools["everything__get-structured-content"].output_schema
    assert schema is not None and "temperature" in schema["properties"]
    assert "everything__simulate-research-query" not in tools  # needs task-augmented execution

    assert not image.is_error and [part.type for part in image.content] == ["text", "image", "text"]
    picture = image.content[1]
    assert isinstance(picture, types.ImageContent) and picture.mime_type == "image/png"
    assert base64.b64decode(picture.data).startswith(b"\x89PNG")
    assert not weather.is_error  # the client checked it against the advertised outputSchema
    assert weather.structured_content is not None and "temperature" in weather.structured_content
    assert str(link.uri) == "demo://resource/dynamic/text/2"
    assert linked.contents[0].text.startswith("Resource 2: This is a plaintext resource")


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_resources_pass_through(everything: Running, transport: str, era: str) -> None:
    async with connect(everything.url, transport, era) as client:
        resources = await pages(client, "list_resources")
        templates = await pages(client, "list_resource_templates")
        document = await client.read_resource("demo://resource/static/document/features.md")
        blob = await client.read_resource("demo://resource/dynamic/blob/3")
    uris = [str(r.uri) for r in resources]
    assert "demo://resource/static/document/architecture.md" in uris and len(uris) >= 7
    assert {t.uri_template for t in templates} == {
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    }
    assert document.contents[0].mime_type == "text/markdown" and document.contents[0].text
    assert isinstance(blob.contents[0], types.BlobResourceContents) and blob.contents[0].blob


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_prompts_pass_through(everything: Running, transport: str, era: str) -> None:
    async with connect(everything.url, transport, era) as client:
        listed = await client.list_prompts()
        args = await client.get_prompt("everything__args-prompt", {"city": "Paris"})
        embedded = await client.get_prompt(
            "everything__resource-prompt", {"resourceType": "Text", "resourceId": "1"}
        )
    names = [p.name for p in listed.prompts]
    assert names[:2] == ["everything__simple-prompt", "everything__args-prompt"]
    assert {"everything__completable-prompt", "everything__resource-prompt"} <= set(names)
    assert "Paris" in args.messages[0].content.text
    resource = embedded.messages[1].content
    assert isinstance(resource, types.EmbeddedResource)
    assert str(resource.resource.uri) == "demo://resource/dynamic/text/1"
