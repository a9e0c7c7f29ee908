"""Chromium for the browser tier (``make test-browser``): Playwright for Python driving the
Debian ``chromium`` (or Playwright's own build). Without it the tests say how to install it and
skip; with ``CI=true`` they fail instead."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from tests._missing import missing

INSTALL = (
    "the browser tests need Playwright for Python and Chromium: "
    "`.venv/bin/pip install playwright` and `apt-get install -y chromium` "
    "(or `.venv/bin/playwright install chromium`)"
)


def _missing(why: str) -> NoReturn:
    missing(f"{why}: {INSTALL}")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        except Exception as exc:  # no Playwright build either
            _missing(f"Chromium could not be started ({str(exc).splitlines()[0]})")
        yield launched
        launched.close()
