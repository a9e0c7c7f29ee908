"""The ``PageStore`` contract (``mcp_agent/state/base.py``) on every backend in ``BACKENDS``: a
session's paged results, read page by page, bounded per session and in all, gone with the session;
on the shared backends, read from another replica (another ``State`` on the same store)."""

from __future__ import annotations

import anyio
import pytest

from mcp_agent.loop.pages import split_pages
from mcp_agent.messages import Message
from mcp_agent.state import PageInfo, State
from mcp_agent.state.records import EXPIRED_KEPT, paged_size

from .conftest import Backend

TEXT = "".join(f"line {i:03d} é😀 \ud800 日本\n" for i in range(30))  # a lone surrogate too, as JSON can give
PAGES = split_pages(TEXT, 100)
SIZE = paged_size(PAGES)


async def put(state: State, session: str, text: str = TEXT, **caps: int) -> PageInfo:
    info = await state.pages.put(session, "files__read", split_pages(text, 100), len(text), **caps)
    assert info is not None
    return info


async def session(state: State, session_id: str) -> str:
    async with state.sessions.hold(session_id):
        pass
    return session_id


async def test_put_then_read_each_page(state: State) -> None:
    await session(state, "conv")
    info = await put(state, "conv")
    assert (info.tool, info.pages, info.total_chars, info.kept_chars, info.size) == (
        "files__read",
        len(PAGES),
        len(TEXT),
        len(TEXT),
        SIZE,
    )
    assert info.handle.startswith("r") and len(info.handle) == 9
    start = 0
    for number, expected in enumerate(PAGES, 1):
        page = await state.pages.read("conv", info.handle, number)
        assert page is not None and page.result == info and not page.expired
        assert (page.start, page.text, page.end) == (start, expected, start + len(expected))
        start += len(expected)
    for beyond in (0, len(PAGES) + 1):
        page = await state.pages.read("conv", info.handle, beyond)
        assert page is not None and page.result == info and page.text is None
    assert await state.pages.read("conv", "r00000000", 1) is None
    assert await state.pages.entries("conv") == [info]


async def test_a_session_reads_only_its_own_results(state: State) -> None:
    await session(state, "mine")
    await session(state, "yours")
    info = await put(state, "mine")
    assert await state.pages.read("yours", info.handle, 1) is None
    assert await state.pages.entries("yours") == []


async def test_the_session_cap_evicts_its_least_recently_read_result(state: State) -> None:
    await session(state, "conv")
    await session(state, "other")
    other = await put(state, "other")
    first = await put(state, "conv", max_scope_bytes=2 * SIZE)
    second = await put(state, "conv", max_scope_bytes=2 * SIZE)
    await state.pages.read("conv", first.handle, 2)  # now the second is the least recently read
    third = await put(state, "conv", max_scope_bytes=2 * SIZE)
    gone = await state.pages.read("conv", second.handle, 1)
    assert gone is not None and gone.expired and gone.text is None
    assert [e.handle for e in await state.pages.entries("conv")] == [first.handle, third.handle]
    page = await state.pages.read("other", other.handle, 1)  # another session's results stay
    assert page is not None and page.text == PAGES[0]


async def test_the_total_cap_evicts_the_least_recently_used_of_any_session(backend: Backend) -> None:
    state = await backend.open(max_paged_bytes_total=3 * SIZE)
    kept = {}
    for name in ("s1", "s2", "s3"):
        kept[name] = await put(state, await session(state, name))
    await state.pages.read("s1", kept["s1"].handle, 1)  # s1's is now the most recently used
    kept["s4"] = await put(state, await session(state, "s4"))
    gone = await state.pages.read("s2", kept["s2"].handle, 1)
    assert gone is not None and gone.expired
    for name in ("s1", "s3", "s4"):
        page = await state.pages.read(name, kept[name].handle, 1)
        assert page is not None and page.text == PAGES[0], name


async def test_deleting_a_session_drops_its_results_and_their_room(backend: Backend) -> None:
    state = await backend.open(max_paged_bytes_total=2 * SIZE)
    await session(state, "conv")
    doomed = await put(state, "conv")
    assert await state.sessions.delete("conv")
    assert await state.pages.read("conv", doomed.handle, 1) is None
    assert await state.pages.entries("conv") == []
    assert await state.pages.put("conv", "t", PAGES, len(TEXT)) is None  # no session: nothing kept
    await session(state, "next")
    a, b = await put(state, "next"), await put(state, "next")
    for info in (a, b):  # the deleted session's result does not take room from them
        page = await state.pages.read("next", info.handle, 1)
        assert page is not None and not page.expired


async def test_a_session_that_expires_takes_its_results(backend: Backend) -> None:
    state = await backend.open(session_ttl_seconds=0.2)
    async with state.sessions.hold("conv") as held:
        await state.sessions.save(held, [Message.user("before")])
    info = await put(state, "conv")
    with anyio.fail_after(10):
        while await state.sessions.get("conv") is not None:
            await anyio.sleep(0.05)
    await state.beat()  # SQLite drops expired sessions here (a hold before would take it back)
    async with state.sessions.hold("conv") as fresh:  # the same id starts afresh
        assert fresh.transcript == ()
        assert await state.pages.read("conv", info.handle, 1) is None
        assert await state.pages.entries("conv") == []


async def test_release_forgets_a_sessions_results(state: State) -> None:
    await session(state, "conv")
    info = await put(state, "conv", max_scope_bytes=SIZE)
    evicted = info
    info = await put(state, "conv", max_scope_bytes=SIZE)
    await state.pages.release("conv")
    assert await state.pages.entries("conv") == []
    assert await state.pages.read("conv", info.handle, 1) is None
    assert await state.pages.read("conv", evicted.handle, 1) is None  # no tombstones either


async def test_evicted_handles_are_remembered_as_expired_within_a_bound(backend: Backend) -> None:
    state = await backend.open()
    await session(state, "conv")
    short = "x" * 150
    handles = [(await put(state, "conv", short, max_scope_bytes=paged_size(split_pages(short, 100)))).handle]
    for _ in range(EXPIRED_KEPT + 2):
        handles.append(
            (await put(state, "conv", short, max_scope_bytes=paged_size(split_pages(short, 100)))).handle
        )
    last = await state.pages.read("conv", handles[-1], 1)
    assert last is not None and last.text == "x" * 100
    recent = await state.pages.read("conv", handles[-2], 1)
    assert recent is not None and recent.expired
    if backend.shared:  # a shared store remembers the last EXPIRED_KEPT of each session
        assert await state.pages.read("conv", handles[0], 1) is None


async def test_another_replica_reads_the_pages_and_the_tombstones(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("memory:// is one process: no other replica shares it")
    a, b = await backend.open(), await backend.open()
    await session(a, "conv")
    first = await put(a, "conv", max_scope_bytes=SIZE)
    second = await put(a, "conv", max_scope_bytes=SIZE)  # evicts the first
    page = await b.pages.read("conv", second.handle, 3)
    assert page is not None and page.text == PAGES[2] and page.result == second
    gone = await b.pages.read("conv", first.handle, 3)
    assert gone is not None and gone.expired
    assert await b.pages.entries("conv") == [second]
