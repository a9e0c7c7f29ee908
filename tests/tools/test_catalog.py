"""The ToolHub's catalog: resources, templates and prompts of real stdio servers (tests/servers/media.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from mcp import MCPError

from mcp_agent.tools.catalog import decode_cursor, encode_cursor, template_pattern
from mcp_agent.tools.hub import ToolHub, open_tool_hub

from .conftest import FAST_RESTARTS, server

# ------------------------------------------------------------------------------ pure parts


def test_cursors_round_trip_and_refuse_garbage() -> None:
    assert decode_cursor(encode_cursor("files", "page 2/ü", 3)) == ("files", "page 2/ü", 3)
    assert decode_cursor(encode_cursor("files", None, 0)) == ("files", None, 0)
    for bad in ["", "not base64!", encode_cursor("x", None, 0)[:-2] + "zz", "W1sxXV0"]:
        with pytest.raises(MCPError) as caught:
            decode_cursor(bad)
        assert caught.value.code == -32602


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("demo://notes/{id}", "demo://notes/7", True),
        ("demo://notes/{id}", "demo://notes/7/more", False),
        ("demo://notes/{id}", "demo://other/7", False),
        ("file:///{+path}", "file:///etc/hosts", True),
        ("search://q{?term,page}", "search://q?term=x&page=2", True),
        ("a.b://{x}.txt", "a.b://name.txt", True),
        ("a.b://{x}.txt", "aXb://name.txt", False),
    ],
)
def test_template_patterns(template: str, uri: str, matches: bool) -> None:
    assert bool(template_pattern(template).fullmatch(uri)) is matches


# ------------------------------------------------------------------------------ real servers


@pytest.fixture
async def hub() -> AsyncIterator[ToolHub]:
    servers = {
        "media": server("media.py", env={"MEDIA_SHARED": "1"}),
        "other": server("media.py", env={"MEDIA_SCHEME": "other", "MEDIA_SHARED": "1"}),
        "paged": server("paged.py"),  # no resources, no prompts
    }
    async with open_tool_hub(servers, default_timeout=30) as hub:
        assert [s.status for s in hub.status()] == ["up", "up", "up"]
        yield hub


async def all_resources(hub: ToolHub, templates: bool = False) -> tuple[list[str], int]:
    """Every URI (or URI template) and how many pages it took."""
    uris: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        if templates:
            listing = await hub.catalog.list_resource_templates(cursor)
            uris.extend(t.uri_template for t in listing.resource_templates)
        else:
            page = await hub.catalog.list_resources(cursor)
            uris.extend(r.uri for r in page.resources)
            listing = page
        pages += 1
        cursor = listing.next_cursor
        if cursor is None:
            return uris, pages


async def test_tools_carry_title_annotations_and_output_schema(hub: ToolHub) -> None:
    specs = {spec.name: spec for spec in hub.list_tools()}
    picture = specs["media__picture"]
    assert picture.title == "A picture"
    assert picture.annotations == {"readOnlyHint": True, "openWorldHint": False, "title": "Picture"}
    assert picture.output_schema is None
    assert specs["media__weather"].output_schema == {
        "type": "object",
        "properties": {"temp": {"type": "number"}},
        "required": ["temp"],
    }
    assert specs["media__odd_schema"].output_schema == {"type": "string"}  # as sent; the gateway judges


async def test_results_keep_every_part(hub: ToolHub) -> None:
    result = await hub.call_tool("media__picture", {})
    assert [part["type"] for part in result.content] == [
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
    ]
    assert "[image: image/png" in result.text  # the model's text is unchanged
    weather = await hub.call_tool("media__weather", {})
    assert weather.structured == {"temp": 21.5}


async def test_resources_are_paged_server_by_server_with_their_own_uris(hub: ToolHub) -> None:
    uris, pages = await all_resources(hub)
    assert uris == [
        "media://notes/1",
        "media://notes/2",
        "media://notes/3",
        "shared://one",
        "other://notes/1",
        "other://notes/2",
        "other://notes/3",
        "shared://one",
    ]
    assert pages == 4  # two pages of each server, two a page; paged has none
    templates, pages = await all_resources(hub, templates=True)
    assert (templates, pages) == (["media://notes/{id}", "other://notes/{id}"], 2)


async def test_reads_are_routed_by_listing_template_or_trial(hub: ToolHub) -> None:
    catalog = hub.catalog
    # never listed: every server offering resources is tried in order, the first answer wins
    blob = await catalog.read_resource("other://blob")
    assert blob.contents[0].uri == "other://blob" and blob.contents[0].blob == "AAEC"  # type: ignore[union-attr]
    assert catalog.owner("other://blob") == "other"
    # listed by both copies: the first in configuration order
    await all_resources(hub)
    assert catalog.owner("other://notes/2") == "other"
    shared = await catalog.read_resource("shared://one")
    assert shared.contents[0].text == "shared from media"  # type: ignore[union-attr]
    # a template match routes URIs nobody listed
    assert catalog.owner("other://notes/99") is None
    await all_resources(hub, templates=True)
    assert catalog.owner("other://notes/99") == "other"
    read = await catalog.read_resource("other://notes/99")
    assert read.contents[0].text == "note 99"  # type: ignore[union-attr]
    # unknown everywhere: the first server's own error
    with pytest.raises(MCPError) as caught:
        await catalog.read_resource("nowhere://x")
    assert caught.value.code == -32002 and "nowhere://x" in caught.value.message


async def test_a_bad_cursor_is_an_invalid_params_error(hub: ToolHub) -> None:
    with pytest.raises(MCPError) as caught:
        await hub.catalog.list_resources(encode_cursor("paged", None, 0))
    assert caught.value.code == -32602
    with pytest.raises(MCPError):
        await hub.catalog.list_resources("garbage")


async def test_prompts_are_named_like_tools_and_got_from_their_server(hub: ToolHub) -> None:
    listed = await hub.catalog.list_prompts()
    assert [p.name for p in listed.prompts] == ["media__greet", "media__show", "other__greet", "other__show"]
    assert listed.prompts[0].title == "Greeting" and listed.prompts[0].arguments[0].name == "name"  # type: ignore[index]
    greeting = await hub.catalog.get_prompt("other__greet", {"name": "Ada"})
    assert greeting.messages[0].content.text == "Hello, Ada!"  # type: ignore[union-attr]
    shown = await hub.catalog.get_prompt("media__show")
    assert shown.messages[0].content.type == "image"
    with pytest.raises(MCPError) as caught:
        await hub.catalog.get_prompt("nope")
    assert caught.value.code == -32602 and "media__greet" in caught.value.message


async def test_prompts_can_be_got_before_they_are_listed(hub: ToolHub) -> None:
    greeting = await hub.catalog.get_prompt("media__greet", {"name": "Bo"})
    assert greeting.messages[0].content.text == "Hello, Bo!"  # type: ignore[union-attr]


async def test_list_changed_notifications_reach_subscribers(hub: ToolHub) -> None:
    seen: list[str] = []
    hub.subscribe_catalog(seen.append)
    await hub.call_tool("media__add_note", {})
    await hub.call_tool("other__add_prompt", {})
    with anyio.fail_after(10):
        while seen != ["resources", "prompts"]:
            await anyio.sleep(0.02)
    uris, _ = await all_resources(hub)
    assert "media://notes/4" in uris
    names = [p.name for p in (await hub.catalog.list_prompts()).prompts]
    assert "other__extra2" in names


async def test_a_server_without_the_capability_has_none() -> None:
    async with open_tool_hub({"paged": server("paged.py")}) as hub:
        assert (await hub.catalog.list_resources()).resources == []
        assert (await hub.catalog.list_resource_templates()).resource_templates == []
        assert (await hub.catalog.list_prompts()).prompts == []
        with pytest.raises(MCPError) as caught:
            await hub.catalog.read_resource("media://notes/1")
        assert caught.value.code == -32002


async def test_servers_coming_and_going_change_the_catalog() -> None:
    seen: list[str] = []
    async with open_tool_hub({"media": server("media.py")}, restart_policy=FAST_RESTARTS) as hub:
        hub.subscribe_catalog(seen.append)
        crashed = await hub.call_tool("media__crash", {})
        assert crashed.is_error
        with anyio.fail_after(20):  # down, then up again after the restart
            while seen.count("resources") < 2 or seen.count("prompts") < 2:
                await anyio.sleep(0.02)
        assert hub.status()[0].restarts == 1
        assert len((await hub.catalog.list_prompts()).prompts) == 2
