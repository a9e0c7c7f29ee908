"""The dashboard in a real headless Chromium against a real gateway process: ask in the page →
the timeline fills in (a model call, then a tool call waiting for approval) → approve it in the
page → the run finishes with its answer; then a reload shows the run again from the record.

Screenshots go to ``.artifacts/browser/`` (git-ignored); the test prints where.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._serve import ROOT, TOKEN, serving

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / ".artifacts" / "browser"
BOUND = 60_000  # ms: a "does not hang" bound for each wait in the page, not a timing


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path) as url:
        yield url


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_ask_watch_the_timeline_approve_and_see_the_run_finish(browser: Any, gateway: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda msg: problems.append(f"console: {msg.text} {msg.location}") if msg.type == "error" else None,
    )
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status} {r.request.method} {r.url}") if r.status >= 400 else None,
    )
    try:
        page.goto(f"{gateway}/#token={TOKEN}")
        assert "token=" not in page.url  # taken from the fragment, then removed from the address
        page.wait_for_selector("body[data-events=listening]", timeout=BOUND)
        page.wait_for_selector("#runs >> text=no runs", timeout=BOUND)

        page.fill("#query", "echo hello from the browser")
        page.click("#ask")
        # the timeline fills in from the event stream: the model call, then the gated tool call
        page.wait_for_selector("#timeline[data-state=running] .wf-row[data-kind=model]", timeout=BOUND)
        page.wait_for_selector("#timeline .wf-row[data-kind=tool] >> text=awaiting approval", timeout=BOUND)
        card = page.wait_for_selector("#approvals .approval", timeout=BOUND)
        assert "echo__echo" in card.inner_text()
        assert "hello from the browser" in card.inner_text()  # its arguments
        assert "asked by owner" in card.inner_text()  # who asked: authToken's caller
        _shot(page, "1-waiting-for-approval.png")

        card.query_selector("button:has-text('Approve')").click()
        page.wait_for_selector("#timeline[data-state=success]", timeout=BOUND)
        page.wait_for_selector("#run-answer >> text=echo__echo said: hello from the browser", timeout=BOUND)
        page.wait_for_selector("#approvals >> text=none pending", timeout=BOUND)
        kinds = page.eval_on_selector_all("#timeline .wf-row", "rows => rows.map(r => r.dataset.kind)")
        assert kinds == ["model", "tool", "model"]
        page.click("#timeline .wf-row[data-kind=tool]")  # expand: arguments and the result
        details = page.inner_text("#timeline")
        assert '{"text": "hello from the browser"}' in details
        assert "approved after" in details
        _shot(page, "2-finished.png")

        # a reload shows the run from its record (the selected run is kept in the address)
        page.reload()
        page.wait_for_selector("#runs tr.run.sel >> text=echo hello from the browser", timeout=BOUND)
        page.wait_for_selector("#timeline[data-state=success]", timeout=BOUND)
        assert page.eval_on_selector_all("#timeline .wf-row", "rows => rows.length") == 3
        page.wait_for_selector("[data-chart=qpm] rect", timeout=BOUND)  # the run is in the last hour
        page.wait_for_selector("[data-chart=latency] circle", timeout=BOUND)

        # filter and search
        page.select_option("#reason", "max_rounds")
        page.wait_for_selector("#runs >> text=no runs", timeout=BOUND)
        page.select_option("#reason", "")
        page.fill("#search", "nothing like this")
        page.wait_for_selector("#runs >> text=no runs", timeout=BOUND)
        page.fill("#search", "FROM THE BROWSER")
        page.wait_for_selector("#runs tr.run", timeout=BOUND)
        _shot(page, "3-after-reload.png")
        assert problems == []
    finally:
        print(f"screenshots in {ARTIFACTS}")
        context.close()
