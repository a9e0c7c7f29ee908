"""The queue of background starts (``StartQueue``, in ``tools/server/connection.py``): held until
released, a few at a time, a call jumping the queue; then with real gated fixture servers behind a
ToolHub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_agent.config import StdioServerConfig
from mcp_agent.tools.hub import open_tool_hub
from mcp_agent.tools.server.connection import Slot, StartQueue, default_limit

from .conftest import server
from .test_cache import until

# ------------------------------------------------------------------------------ the queue alone


async def test_held_starts_wait_for_release_then_go_a_few_at_a_time() -> None:
    queue = StartQueue(limit=2, held=True)
    got: list[int] = []
    wanted = [anyio.Event() for _ in range(3)]
    async with anyio.create_task_group() as tg:
        slots: list[Slot] = []

        async def take(index: int) -> None:
            slots.append(await queue.turn(wanted[index]))
            got.append(index)

        for index in range(3):
            tg.start_soon(take, index)
        await anyio.sleep(0.1)
        assert got == []  # held
        queue.release()
        await until(lambda: len(got) == 2)
        await anyio.sleep(0.1)
        assert len(got) == 2  # two at a time
        slots[0].release()
        slots[0].release()  # idempotent: gives back one place, not two
        await until(lambda: len(got) == 3)
        for slot in slots:
            slot.release()


async def test_a_wanted_start_jumps_the_queue_held_or_full() -> None:
    queue = StartQueue(limit=1, held=True)
    waiting = anyio.Event()
    got: list[str] = []
    async with anyio.create_task_group() as tg:

        async def take() -> None:
            await queue.turn(waiting)
            got.append("jumped")

        tg.start_soon(take)
        await anyio.sleep(0.1)
        assert got == []
        waiting.set()  # a call waits for this server
        await until(lambda: got == ["jumped"])
    queue.release()
    first = await queue.turn(anyio.Event())  # the one place
    wanted = anyio.Event()
    wanted.set()
    with anyio.fail_after(1):
        await queue.turn(wanted)  # a full queue does not hold a wanted start either
    first.release()


async def test_held_starts_go_after_hold_seconds_without_a_release() -> None:
    queue = StartQueue(limit=1, held=True, hold_seconds=0.2)
    assert queue.held
    with anyio.fail_after(10):
        (await queue.turn(anyio.Event())).release()
    assert not queue.held


def test_the_default_leaves_half_the_cpus_to_the_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    for cpus, limit in [(None, 1), (1, 1), (2, 1), (3, 1), (8, 4)]:
        monkeypatch.setattr("os.cpu_count", lambda cpus=cpus: cpus)
        assert default_limit() == limit


# ------------------------------------------------------------------------------ behind a hub


def gated_servers(tmp_path: Path, count: int) -> dict[str, StdioServerConfig]:
    """``count`` gated servers sharing one gate, each logging to ``log<i>``."""
    (tmp_path / "tools.txt").write_text("echo\n")
    return {
        f"g{i}": server(
            "gated.py",
            env={
                "GATED_GATE": str(tmp_path / "gate"),
                "GATED_TOOLS": str(tmp_path / "tools.txt"),
                "GATED_LOG": str(tmp_path / f"log{i}"),
            },
        )
        for i in range(count)
    }


def started(tmp_path: Path, count: int) -> list[int]:
    return [i for i in range(count) if (tmp_path / f"log{i}").exists()]


async def warm(tmp_path: Path, servers: dict[str, StdioServerConfig], state: Path) -> None:
    (tmp_path / "gate").touch()
    async with open_tool_hub(servers, state_dir=state) as hub:
        assert all(s.status == "up" for s in hub.status())
    (tmp_path / "gate").unlink()
    for i in range(len(servers)):
        (tmp_path / f"log{i}").unlink()


async def test_background_starts_are_held_then_queued_and_a_call_jumps_the_queue(tmp_path: Path) -> None:
    servers = gated_servers(tmp_path, 3)
    state = tmp_path / "state"
    await warm(tmp_path, servers, state)
    async with open_tool_hub(servers, state_dir=state, hold_starts=True, start_limit=1) as hub:
        assert len(hub.list_tools()) == 3  # every list from the cache
        await anyio.sleep(0.3)
        assert started(tmp_path, 3) == []  # held
        hub.release_starts()
        await until(lambda: started(tmp_path, 3) == [0])
        await anyio.sleep(0.3)
        assert started(tmp_path, 3) == [0]  # one at a time (g0 is held at the gate)
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await hub.call_tool("g2__echo", {"text": "hi"}))

            tg.start_soon(call)
            await until(lambda: 2 in started(tmp_path, 3))  # the call's server jumped the queue
            assert 1 not in started(tmp_path, 3)
            (tmp_path / "gate").touch()
        assert results[0].text == "echo: hi"
        await until(lambda: all(s.status == "up" for s in hub.status()))
        assert started(tmp_path, 3) == [0, 1, 2]


async def test_a_start_that_hangs_gives_its_place_back(tmp_path: Path) -> None:
    servers = gated_servers(tmp_path, 2)
    state = tmp_path / "state"
    await warm(tmp_path, servers, state)
    async with open_tool_hub(servers, state_dir=state, start_limit=1) as hub:
        await until(lambda: started(tmp_path, 2) == [0])
        # g0 hangs at the gate; after SLOT_SECONDS g1 starts anyway (a does-not-hang bound)
        await until(lambda: started(tmp_path, 2) == [0, 1], seconds=15)
        assert [s.status for s in hub.status()] == ["starting", "starting"]
        (tmp_path / "gate").touch()
        await until(lambda: all(s.status == "up" for s in hub.status()))
