"""The ``PinStore`` contract, on every backend: a server's pinned and seen tool definitions are
read back whole, each kind apart, listed by server, replaced whole, and seen by every replica of
a shared backend (the gateway pins, ``mcp-agent tools --accept`` in another process accepts)."""

from __future__ import annotations

from mcp_agent.state import State
from mcp_agent.state.records import ToolPin

from .conftest import Backend

ECHO = {
    "description": "Echo the text \u200b\U000e0041 é \ud800",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "outputSchema": None,
    "annotations": {"readOnlyHint": True},
    "title": None,
}


async def test_pins_and_sightings_are_read_back_whole_each_kind_apart(state: State) -> None:
    assert await state.pins.get("g") is None
    assert await state.pins.list() == []
    pinned = ToolPin("g", "pinned", {"echo": ECHO}, at=1.5, by="first sight")
    await state.pins.put(pinned)
    assert await state.pins.get("g") == pinned
    assert await state.pins.get("g", "seen") is None
    seen = ToolPin("g", "seen", {"echo": {**ECHO, "description": "changed"}}, at=2.0, by="r1")
    await state.pins.put(seen)
    assert await state.pins.get("g", "seen") == seen
    assert await state.pins.get("g") == pinned
    assert await state.pins.list("seen") == [seen]


async def test_put_replaces_and_list_answers_by_server(state: State) -> None:
    await state.pins.put(ToolPin("zeta", "pinned", {"a": ECHO}))
    await state.pins.put(ToolPin("alpha", "pinned", {"a": ECHO}))
    replaced = ToolPin("zeta", "pinned", {"b": ECHO}, by="cli")
    await state.pins.put(replaced)
    assert [(p.server, sorted(p.tools)) for p in await state.pins.list()] == [
        ("alpha", ["a"]),
        ("zeta", ["b"]),
    ]
    assert await state.pins.get("zeta") == replaced


async def test_every_replica_of_a_shared_backend_sees_a_pin(backend: Backend) -> None:
    if not backend.shared:
        return
    gateway, cli = await backend.open(), await backend.open()
    await gateway.pins.put(ToolPin("g", "seen", {"echo": ECHO}))
    await cli.pins.put(ToolPin("g", "pinned", {"echo": ECHO}, by="cli"))
    pin = await gateway.pins.get("g")
    assert pin is not None and pin.by == "cli"
    assert await cli.pins.get("g", "seen") == await gateway.pins.get("g", "seen")
