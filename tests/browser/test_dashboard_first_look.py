"""What a newcomer sees first on the dashboard, measured in a real headless Chromium against a real
gateway process (issue 24): nothing above the header, whole axis labels on the charts, a run
list that counts only the tool calls that were made and says when a run waits for approval,
and the pending approvals counted in the header with a way to jump to them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_agent.messages import Usage
from mcp_agent.state.records import RunRecord
from tests.fakes.model_server import RecordedRequest, Reply
from tests.fakes.openai_shapes import Call, completion
from tests.gateway.e2e import rule_reply

from ._serve import TOKEN, serving

pytestmark = pytest.mark.browser

BOUND = 60_000  # ms: a "does not hang" bound for each wait in the page, not a timing


def _finished(run_id: str, ago: float, elapsed_ms: float) -> RunRecord:
    started = time.time() - ago
    return RunRecord(
        run_id,
        caller="owner",
        query=f"seeded {run_id}",
        started=started,
        ended=started + elapsed_ms / 1000,
        termination_reason="success",
        answer="done",
        usage=Usage(10, 5, 15),
        rounds=2,
        elapsed_ms=elapsed_ms,
        tool_calls=({"name": "echo__echo", "ok": True, "ms": 3.0},),
        model="rule-model",
    )


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway whose last hour has two finished runs: 0.42 s (ten minutes ago) and 1.42 s (a
    minute ago), so the latency chart's top label reads "1.42 s"."""
    records = [_finished("slow-one", 60, 1420.0), _finished("fast-one", 600, 420.0)]
    with serving(tmp_path_factory.mktemp("seeded"), seed=records) as url:
        yield url


def _page(browser: Any, url: str, height: int = 1000) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": 1280, "height": height})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.goto(f"{url}/#token={TOKEN}")
    page.wait_for_selector("body[data-events=listening]", timeout=BOUND)
    return context, page, problems


def test_nothing_is_laid_out_above_the_header(browser: Any, seeded: str) -> None:
    context, page, problems = _page(browser, seeded)
    try:
        page.wait_for_selector("#runs tr.run", timeout=BOUND)
        top = page.evaluate("document.querySelector('header').getBoundingClientRect().top")
        assert top == 0, f"the header starts {top} px down the page"
        assert problems == []
    finally:
        context.close()


# each chart label's box, and its chart's, in page pixels
LABELS = """() => [...document.querySelectorAll('[data-chart] svg')].flatMap((s) => {
  const box = s.getBoundingClientRect();
  return [...s.querySelectorAll('text')].map((t) => {
    const r = t.getBoundingClientRect();
    return { chart: s.parentNode.dataset.chart, text: t.textContent,
             left: r.left - box.left, right: r.right - box.left, width: box.width };
  });
})"""


WIDEST = """() => {
  for (const ms of [999, 9990, 125300, 599900]) {
    const chart = lineChart("widest", [ms, null], [null, null]);
    chart.dataset.chart = "widest-" + ms;
    document.body.appendChild(chart);
  }
}"""


def test_the_chart_labels_are_drawn_whole(browser: Any, seeded: str) -> None:
    context, page, problems = _page(browser, seeded)
    try:
        page.wait_for_selector("[data-chart=latency] circle", timeout=BOUND)
        labels = page.evaluate(LABELS)
        latency = [label["text"] for label in labels if label["chart"] == "latency"]
        assert "1.42 s" in latency, latency
        cut = [label for label in labels if label["left"] < 0 or label["right"] > label["width"]]
        assert cut == [], f"labels outside their chart (clipped): {cut}"
        # the longest top labels there can be (the page's own chart code, drawn in the page)
        page.evaluate(WIDEST)
        labels = page.evaluate(LABELS)
        assert {"999 ms", "9.99 s", "125.3 s", "599.9 s"} <= {label["text"] for label in labels}
        cut = [label for label in labels if label["left"] < 0 or label["right"] > label["width"]]
        assert cut == [], f"labels outside their chart (clipped): {cut}"
        assert problems == []
    finally:
        context.close()


def _twice(request: RecordedRequest) -> Reply:
    """``twice X``: two echo calls in one turn (more than ``maxToolCalls: 1`` allows, so the run
    ends ``tool_budget`` with both calls skipped); anything else by the e2e rules."""
    body = request.json if request.path.endswith("/chat/completions") else {}
    last = (body.get("messages") or [{}])[-1]
    if last.get("role") == "user" and str(last.get("content", "")).startswith("twice "):
        text = last["content"][len("twice ") :]
        calls = [
            Call("echo__echo", {"text": text + " 1"}, id="t1"),
            Call("echo__echo", {"text": text + " 2"}, id="t2"),
        ]
        return Reply.json(completion(content=None, calls=calls))
    return rule_reply(request)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    """A gateway with 30 earlier runs (a run list long enough to push the approvals below the
    fold) and a tool-call budget of one call per run."""
    earlier = [_finished(f"earlier-{i}", 7200 + 60 * i, 500.0) for i in range(30)]
    with serving(tmp_path, handler=_twice, limits={"maxToolCalls": 1}, seed=earlier) as url:
        yield url


# the texts of the run list's row for a query; whether the first approval card is in the window
ROW = "((q) => [...document.querySelector(`#runs tr.run:has(td.q[title='${q}'])`).cells].map((td) => td.textContent))"
IN_VIEW = """() => {
  const card = document.querySelector('#approvals .approval');
  if (!card) throw new Error('no approval card');
  const r = card.getBoundingClientRect();
  return r.top >= 0 && r.bottom <= innerHeight;
}"""


def _row(page: Any, query: str) -> list[str]:
    cells: list[str] = page.evaluate(f"{ROW}({query!r})")
    return cells


def test_skipped_calls_are_not_counted_as_tool_calls(browser: Any, gateway: str) -> None:
    context, page, problems = _page(browser, gateway)
    try:
        page.fill("#query", "twice hello")
        page.click("#ask")
        page.wait_for_selector("#progress >> text=tool_budget", timeout=BOUND)
        page.wait_for_selector("#runs tr.run td.q[title='twice hello']", timeout=BOUND)
        page.wait_for_function(
            "() => !document.querySelector('#runs tr.run td.warn')", timeout=BOUND
        )  # the list has the finished record
        _, ending, _, rounds, tools, *_ = _row(page, "twice hello")
        assert (ending, rounds) == ("tool_budget", "1")
        assert tools == "0 (2 skipped)", tools
        assert problems == []
    finally:
        context.close()


def test_a_run_waiting_for_approval_says_so_and_the_header_counts_it(browser: Any, gateway: str) -> None:
    # a short window: the approvals section starts below the fold
    context, page, problems = _page(browser, gateway, height=600)
    try:
        assert page.is_hidden("#pending")
        # asked over REST (not in the page: a reload would cancel a run the page asked for)
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(
                httpx.post,
                f"{gateway}/api/v1/query",
                json={"query": "echo wait for me"},
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=10 * BOUND / 1000,  # longer than the waits in the page below
            )
            # the run list: waiting for approval, with the round and the call made so far
            page.wait_for_selector("#runs tr.run td >> text=waiting for approval", timeout=BOUND)
            page.wait_for_function(f"() => {ROW}('echo wait for me')[4] === '1'", timeout=BOUND)
            _, ending, _, rounds, tools, *_ = _row(page, "echo wait for me")
            assert (ending, rounds, tools) == ("waiting for approval", "1", "1")

            # the header counts it, in view; its button brings the approval into view
            pending = page.wait_for_selector("#pending >> text=1 approval pending", timeout=BOUND)
            box = pending.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 600
            assert not page.evaluate(IN_VIEW), "the window is meant to start with the approval below the fold"
            pending.click()
            page.wait_for_function(IN_VIEW, timeout=BOUND)
            focused = "() => document.activeElement.textContent"
            assert page.evaluate(focused) == "Approve"
            with page.expect_response(lambda r: r.url.endswith("/api/v1/approvals"), timeout=BOUND):
                pass  # the page's next look at the approvals (every 3 s) keeps the card, and the focus
            assert page.evaluate(focused) == "Approve"

            # after a reload (no live events for this run) the list still says it waits
            page.reload()
            page.wait_for_selector("body[data-events=listening]", timeout=BOUND)
            page.wait_for_selector("#runs tr.run td >> text=waiting for approval", timeout=BOUND)
            _, ending, _, rounds, tools, *_ = _row(page, "echo wait for me")
            assert (ending, rounds, tools) == ("waiting for approval", "…", "…")
            assert page.inner_text("#pending") == "1 approval pending"

            page.click("#approvals .approval button:has-text('Approve')")
            assert asked.result().json()["termination_reason"] == "success"
        page.wait_for_selector("#runs tr.run td.ok >> text=success", timeout=BOUND)
        page.wait_for_selector("#pending", state="hidden", timeout=BOUND)
        page.wait_for_function(f"() => {ROW}('echo wait for me')[1] === 'success'", timeout=BOUND)
        _, ending, _, rounds, tools, *_ = _row(page, "echo wait for me")
        assert (ending, rounds, tools) == ("success", "2", "1")
        assert problems == []
    finally:
        context.close()
