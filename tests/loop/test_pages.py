"""Paged results (loop/pages.py): pages, the store's bounds, and read_result inside run() and Agent."""

from __future__ import annotations

import logging
import random
import re

import pytest

from mcp_agent.config import AgentConfig, Limits
from mcp_agent.events import RecordingSink, ToolCallEnded
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.guards import FAILURE_HINT
from mcp_agent.loop.pages import RunPages, free_name, kept_pages, mentioned_handles, page_starts
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.messages import Message, ToolCall, Turn
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.state.memory import MemoryPageStore
from mcp_agent.state.records import paged_size

from ._helpers import call, echo_tools, go, tool_texts

LINES = "".join(f"line {i:04d} é😀\n" for i in range(200))  # 200 lines of 13 characters: 2600
HANDLE = re.compile(r"paged result (r[0-9a-f]{8})")


def pages_of(text: str, size: int) -> list[str]:
    starts = page_starts(text, size)
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def body(read: str) -> str:
    """The page text inside a read_result answer (between its header line and its footer)."""
    _head, _, rest = read.partition("\n")
    return re.sub(r"\n\[\.\.\. [^\n]*\]\Z", "", rest)


def handle_in(request: ModelRequest) -> str:
    tool_messages = [m.content for m in request.messages if m.role == "tool"]
    match = HANDLE.search("\n".join(tool_messages))
    assert match, tool_messages
    return match.group(1)


def reads(*pages: int, tool: str = "read_result", handle: str | None = None) -> list[object]:
    """Script items: one turn per page, reading it from the handle the first tool result gave."""
    return [
        lambda req, p=p: tool_turn(call(tool, f"r{p}", handle=handle or handle_in(req), page=p))
        for p in pages
    ]


# --------------------------------------------------------------------------------------------
# pages: pure


def test_pages_end_at_line_breaks_when_one_is_near() -> None:
    pages = pages_of(LINES, 100)
    assert "".join(pages) == LINES
    assert all(len(page) <= 100 and page.endswith("\n") for page in pages)
    assert [len(page) for page in pages[:2]] == [91, 91]  # seven whole lines each


def test_a_page_without_line_breaks_is_cut_between_code_points() -> None:
    text = "😀" * 25 + "é" * 10
    pages = pages_of(text, 10)
    assert pages == ["😀" * 10, "😀" * 10, "😀" * 5 + "é" * 5, "é" * 5]
    assert all(page.encode("utf-8").decode("utf-8") == page for page in pages)


@pytest.mark.parametrize("cling", ["\u0301", "\ufe0f", "\u200d"])
def test_a_combining_mark_stays_with_its_base(cling: str) -> None:
    text = "a" * 9 + "e" + cling + "b" * 20  # the boundary at 10 falls before the mark
    pages = pages_of(text, 10)
    assert pages[0] == "a" * 9 and pages[1].startswith("e" + cling)
    assert "".join(pages) == text


def test_pages_join_back_to_the_text() -> None:
    rng = random.Random(13)
    alphabet = "ab\n é😀\u0301\u200d"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))
        size = rng.randrange(1, 60)
        pages = pages_of(text, size)
        assert "".join(pages) == text and all(0 < len(p) <= size for p in pages if text)


def test_free_name_avoids_server_tools() -> None:
    assert free_name({"echo"}) == "read_result"
    assert free_name({"read_result"}) == "read_result_page"
    assert free_name({"read_result", "read_result_page", "read_result_2"}) == "read_result_3"


# --------------------------------------------------------------------------------------------
# the store of runs without a session (the contract on every backend: tests/state/test_pages_contract.py)


def test_a_result_is_kept_up_to_the_cap_in_whole_pages_then_part_of_one() -> None:
    pages = pages_of("y" * 5_000, 100)
    kept = kept_pages(pages, 1_000)
    assert kept[:8] == pages[:8] and len(kept) == 9 and pages[8].startswith(kept[8])
    assert 900 < paged_size(kept) <= 1_000
    assert kept_pages(pages, 0) == pages and kept_pages(pages, 10) == pages[:1]  # the first page always
    emoji = pages_of("😀" * 300, 100)
    assert paged_size(kept_pages(emoji, 500)) <= 500 and "".join(kept_pages(emoji, 500)) == "😀" * 117


async def test_a_scope_reads_only_its_own_results() -> None:
    store = MemoryPageStore()
    info = await store.put("session:a", "t", pages_of("x" * 50, 10), 50)
    assert info is not None
    page = await store.read("session:a", info.handle, 2)
    assert page is not None and page.result == info and (page.start, page.text) == (10, "x" * 10)
    assert await store.read("session:b", info.handle, 2) is None


async def test_the_scope_cap_evicts_that_scopes_least_recently_used() -> None:
    store = MemoryPageStore(max_bytes=0)
    text = pages_of("x" * 1000, 100)
    size = paged_size(text)
    other = await store.put("other", "t", text, 1000)
    first = await store.put("s", "t", text, 1000, max_scope_bytes=2 * size)
    second = await store.put("s", "t", text, 1000, max_scope_bytes=2 * size)
    assert other and first and second
    await store.read("s", first.handle, 1)  # read: now the second is the least recently used
    third = await store.put("s", "t", text, 1000, max_scope_bytes=2 * size)
    assert third is not None
    gone = await store.read("s", second.handle, 1)
    assert gone is not None and gone.expired
    assert [e.handle for e in await store.entries("s")] == [first.handle, third.handle]
    assert await store.read("other", other.handle, 1) is not None  # another scope's results stay


async def test_the_total_cap_evicts_the_least_recently_used() -> None:
    text = pages_of("x" * 1000, 100)
    size = paged_size(text)
    store = MemoryPageStore(max_bytes=3 * size)
    a, b, c = [await store.put(scope, "t", text, 1000) for scope in ("s1", "s2", "s3")]
    assert a and b and c
    await store.read("s1", a.handle, 1)  # a is now the most recently used
    d = await store.put("s4", "t", text, 1000)
    assert d is not None
    gone = await store.read("s2", b.handle, 1)
    assert gone is not None and gone.expired
    for scope, info in (("s1", a), ("s3", c), ("s4", d)):
        page = await store.read(scope, info.handle, 1)
        assert page is not None and page.result == info
    assert store.bytes == 3 * size <= store.max_bytes


async def test_a_result_bigger_than_the_cap_is_kept_up_to_the_cap() -> None:
    store = MemoryPageStore(max_bytes=0)
    pages = RunPages(store, "run:x", page_chars=100, max_scope_bytes=1_000)
    paged = await pages.page("big", "y" * 5_000)
    assert paged is not None
    [entry] = await store.entries("run:x")
    assert entry.size <= 1_000 and 600 < entry.kept_chars < 1_000
    assert paged.total_chars == 5_000 and "were not kept (limits.maxPagedBytes)" in paged.text
    last = (await pages.read({"handle": paged.handle, "page": paged.pages})).text
    assert last.endswith("characters were not kept]")


async def test_page_offsets_count_in_the_size() -> None:
    store = MemoryPageStore(max_bytes=0)
    info = await store.put("s", "t", pages_of("ab" * 5_000, 1), 10_000)  # 10 000 pages of one character
    assert info is not None and info.pages == 10_000 and info.size == 10_000 + 16 * info.pages
    assert store.bytes == info.size


async def test_release_frees_a_runs_results() -> None:
    store = MemoryPageStore()
    pages = RunPages(store, "run:x", page_chars=10, release=True)
    await pages.page("t", "z" * 100)
    assert len(store) == 1 and store.bytes > 0
    await pages.close()
    assert len(store) == 0 and store.bytes == 0
    kept = RunPages(store, "session:s", page_chars=10)
    await kept.page("t", "z" * 100)
    await kept.close()  # a session's results outlive the run
    assert len(store) == 1


def test_handles_are_found_in_history() -> None:
    history = [
        Message.user("q"),
        Message.tool(
            ToolCall("c1", "t", {}), "abc\n[... paged result r0123abcd: 30 characters in 3 pages; ...]"
        ),
        Message.assistant("paged result r99999999 is not a tool message"),
    ]
    assert mentioned_handles(history) == ["r0123abcd"]


# --------------------------------------------------------------------------------------------
# in a run


async def test_the_model_reads_pages_two_and_three_exactly() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", "c1", text=LINES)), *reads(2, 3), text_turn("read")]  # type: ignore[list-item]
    )
    result, sink = await go(provider, limits=Limits(max_result_chars=100))
    first, two, three = tool_texts(result)
    expected = pages_of(LINES, 100)
    assert first.startswith(expected[0] + "\n[... paged result r")
    assert f"{len(LINES)} characters in {len(expected)} pages; this is page 1" in first
    assert body(two) == expected[1] and body(three) == expected[2]
    assert two.startswith(
        f"[paged result {handle_in(provider.requests[1])} (echo), page 2 of {len(expected)}"
    )
    assert "read_result(handle=" in three.rsplit("\n", 1)[-1]  # how to read on
    # offered only while a handle exists
    assert [spec.name for spec in provider.requests[0].tools] == ["echo", "add", "fail"]
    assert [spec.name for spec in provider.requests[1].tools][-1] == "read_result"
    # events and records say paged, not cut
    ended = sink.of(ToolCallEnded)[0]
    assert ended.pages == len(expected) and ended.total_chars == len(LINES) and not ended.truncated
    assert ended.handle == handle_in(provider.requests[1])
    assert result.tool_calls[0].to_dict()["paged"] == {"pages": len(expected), "total_chars": len(LINES)}
    assert "paged" not in result.tool_calls[1].to_dict()  # a page read is not paged again
    assert result.termination_reason is R.SUCCESS


async def test_a_short_result_offers_no_read_result() -> None:
    provider = ScriptedProvider([tool_turn(call("echo", "c1", text="short")), text_turn("ok")])
    result, _ = await go(provider, limits=Limits(max_result_chars=100))
    assert tool_texts(result) == ["short"]
    assert all("read_result" not in [s.name for s in req.tools] for req in provider.requests)


async def test_read_result_without_a_handle_is_an_unknown_tool() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("read_result", "c1", handle="r00000000", page=2)), text_turn("ok")]
    )
    result, _ = await go(provider)
    assert tool_texts(result)[0].startswith("error: unknown tool 'read_result'")


async def test_bad_handles_and_pages_list_what_can_be_read() -> None:
    provider = ScriptedProvider(
        [
            tool_turn(call("echo", "c1", text=LINES)),
            lambda req: tool_turn(
                call("read_result", "b1", handle="r00000000", page=2),
                call("read_result", "b2", handle=handle_in(req), page=99),
                call("read_result", "b3", handle=handle_in(req), page=0),
            ),
            text_turn("ok"),
        ]
    )
    result, _ = await go(provider, limits=Limits(max_result_chars=1000, failure_hint_after=0))
    _, unknown, past, zero = tool_texts(result)
    handle = handle_in(provider.requests[1])
    assert unknown == (
        "error: there is no paged result 'r00000000' in this conversation. "
        f"Results you can read: {handle} from echo (pages 1-3)."
    )
    assert past == f"error: paged result {handle} has 3 pages; there is no page 99. Read pages 1-3."
    assert zero.startswith(f"error: paged result {handle} has 3 pages; there is no page 0.")
    assert result.termination_reason is R.SUCCESS


async def test_rereading_a_page_is_a_duplicate_like_any_other() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", "c1", text=LINES)), *reads(2, 3, 2, 2), text_turn("never")]  # type: ignore[list-item]
    )
    result, _ = await go(provider, limits=Limits(max_result_chars=100, loop_threshold=3))
    texts = tool_texts(result)
    assert texts[3].endswith("[NOTE: identical to a call in round 2]")
    assert result.termination_reason is R.LOOP_DETECTED and "read_result called 3 times" in result.detail


async def test_page_reads_count_against_the_tool_budget() -> None:
    provider = ScriptedProvider(
        [tool_turn(call("echo", "c1", text=LINES)), *reads(2, 3), text_turn("never")]  # type: ignore[list-item]
    )
    result, _ = await go(provider, limits=Limits(max_result_chars=100, max_tool_calls=2))
    assert result.termination_reason is R.TOOL_BUDGET
    assert [c.name for c in result.tool_calls] == ["echo", "read_result", "read_result"]
    assert tool_texts(result)[2] == "not executed: tool-call budget exhausted"


async def test_failed_reads_never_count_against_the_tool_that_was_paged() -> None:
    bad = [
        lambda req, i=i: tool_turn(call("read_result", f"b{i}", handle="rffffffff", page=i)) for i in (1, 2)
    ]
    provider = ScriptedProvider(
        [
            tool_turn(call("echo", "c1", text=LINES)),
            *bad,  # type: ignore[list-item]
            *reads(2),  # type: ignore[list-item]
            tool_turn(call("echo", "c9", text="again")),
            text_turn("ok"),
        ]
    )
    result, _ = await go(provider, limits=Limits(max_result_chars=100, failure_hint_after=2))
    texts = tool_texts(result)
    assert texts[2].endswith(FAILURE_HINT)  # the hint is about read_result's own streak
    assert not texts[3].startswith("error") and texts[4] == "again" and FAILURE_HINT not in texts[4]


async def test_a_server_tool_named_read_result_is_not_shadowed(caplog: pytest.LogCaptureFixture) -> None:
    tools = echo_tools()
    tools.add("read_result", lambda **_: "the server's own read_result", parameters={"type": "object"})
    provider = ScriptedProvider(
        [
            tool_turn(call("echo", "c1", text=LINES)),
            *reads(2, tool="read_result_page"),  # type: ignore[list-item]
            tool_turn(call("read_result", "own")),
            text_turn("ok"),
        ]
    )
    with caplog.at_level(logging.WARNING, logger="mcp_agent.loop.pages"):
        result, _ = await go(provider, tools, limits=Limits(max_result_chars=100))
    first, page, own = tool_texts(result)
    assert 'read_result_page(handle="' in first
    assert body(page) == pages_of(LINES, 100)[1] and own == "the server's own read_result"
    names = [spec.name for spec in provider.requests[1].tools]
    assert names.count("read_result") == 1 and "read_result_page" in names
    assert "paged results are read with 'read_result_page'" in caplog.text


async def test_paging_off_cuts_as_before() -> None:
    provider = ScriptedProvider([tool_turn(call("echo", "c1", text=LINES)), text_turn("ok")])
    result, sink = await go(provider, limits=Limits(max_result_chars=100, page_results=False))
    assert (
        tool_texts(result)[0]
        == LINES[:100] + f"\n[... truncated: {len(LINES) - 100} of {len(LINES)} characters cut]"
    )
    assert sink.of(ToolCallEnded)[0].truncated and not sink.of(ToolCallEnded)[0].pages
    assert all("read_result" not in [s.name for s in req.tools] for req in provider.requests)


def test_a_client_may_turn_paging_off_but_not_on() -> None:
    on, off = Limits(), Limits(page_results=False)
    assert on.tighten({"pageResults": False}).page_results is False
    assert off.tighten({"pageResults": True}).page_results is False
    assert on.tighten({"maxPagedBytes": 1000}).max_paged_bytes == 1000
    assert on.tighten({"maxPagedBytes": 0}).max_paged_bytes == 8_000_000  # 0 (off) is looser


async def test_a_run_without_a_session_frees_its_pages() -> None:
    agent = Agent(
        ScriptedProvider([tool_turn(call("echo", "c1", text=LINES)), text_turn("ok")]),
        echo_tools(),
        AgentConfig(limits=Limits(max_result_chars=100)),
    )
    result = await agent.query("q")
    assert result.tool_calls[0].pages > 1 and len(agent._pages) == 0


# --------------------------------------------------------------------------------------------
# sessions


def _session_agent(*script: object, **limits: int) -> Agent:
    config = AgentConfig(limits=Limits(max_result_chars=100, **limits))
    return Agent(ScriptedProvider(list(script)), echo_tools(), config)  # type: ignore[arg-type]


async def test_the_next_query_on_a_session_reads_a_page() -> None:
    agent = _session_agent(
        tool_turn(call("echo", "c1", text=LINES)),
        text_turn("first answer"),
        *reads(3),
        text_turn("second answer"),
    )
    first = await agent.query("q1", session_id="s1")
    second = await agent.query("q2", session_id="s1")
    assert first.ok and second.ok and second.answer == "second answer"
    page = [m.content for m in second.transcript if m.role == "tool"][-1]
    assert body(page) == pages_of(LINES, 100)[2]
    assert isinstance(agent.provider, ScriptedProvider)
    assert "read_result" in [spec.name for spec in agent.provider.requests[2].tools]  # offered at once


async def test_another_session_cannot_read_the_handle() -> None:
    handle: list[str] = []

    def remember(req: ModelRequest) -> Turn:
        handle.append(handle_in(req))
        return text_turn("first")

    agent = _session_agent(
        tool_turn(call("echo", "c1", text=LINES)),
        remember,
        lambda req: tool_turn(call("read_result", "x", handle=handle[0], page=2)),
        text_turn("second"),
    )
    await agent.query("q1", session_id="s1")
    other = await agent.query("q2", session_id="s2")  # knows the handle, not the session
    text = [m.content for m in other.transcript if m.role == "tool"][-1]
    assert text.startswith("error: unknown tool 'read_result'")


async def test_an_expired_handle_says_so() -> None:
    size = paged_size(pages_of(LINES, 100))
    agent = _session_agent(
        tool_turn(call("echo", "c1", text=LINES)),
        text_turn("first"),
        tool_turn(call("echo", "c2", text=LINES + "more")),  # evicts the first (the session holds one)
        text_turn("second"),
        *reads(2),  # the handle it finds is the first one's
        text_turn("third"),
        max_paged_bytes=size + 100,
    )
    await agent.query("q1", session_id="s1")
    await agent.query("q2", session_id="s1")
    third = await agent.query("q3", session_id="s1")
    text = [m.content for m in third.transcript if m.role == "tool"][-1]
    assert text.startswith("error: paged result r") and "has expired" in text
    assert "Results you can read: r" in text and "(pages 1-" in text
    assert third.ok


async def test_a_handle_from_an_earlier_process_says_expired() -> None:
    history = [
        Message.user("q0"),
        Message.assistant("", tool_calls=(ToolCall("c0", "echo", {"text": "x"}),)),
        Message.tool(
            ToolCall("c0", "echo", {}), "x\n[... paged result r0badc0de: 3000 characters in 3 pages; ...]"
        ),
        Message.assistant("earlier answer"),
    ]
    agent = _session_agent(*reads(2, handle="r0badc0de"), text_turn("ok"))
    async with agent.sessions.hold("s1") as session:
        await agent.sessions.save(session, history)
    result = await agent.query("again", session_id="s1")
    text = [m.content for m in result.transcript if m.role == "tool"][-1]
    assert text.startswith("error: paged result r0badc0de has expired")
    assert text.endswith("No paged results can be read now.")


async def test_events_of_a_paged_call() -> None:
    sink = RecordingSink()
    agent = _session_agent(tool_turn(call("echo", "c1", text=LINES)), text_turn("ok"))
    await agent.query("q", events=sink)
    [ended] = sink.of(ToolCallEnded)
    assert ended.to_dict()["pages"] == len(pages_of(LINES, 100)) and ended.to_dict()["total_chars"] == len(
        LINES
    )
