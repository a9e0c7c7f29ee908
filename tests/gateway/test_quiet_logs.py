"""A client's bad messages do not flood the log: one line, no traceback, rate-limited."""

from __future__ import annotations

import logging

import pytest

from mcp_agent.gateway.quiet_logs import ClientErrorFilter


def test_the_sdks_parse_failures_become_rate_limited_one_liners(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("mcp.server.sse")
    installed = list(logger.filters)  # serve() may have installed one already in this process
    for old in installed:
        logger.removeFilter(old)
    quiet = ClientErrorFilter(every=3600)
    logger.addFilter(quiet)
    try:
        with caplog.at_level(logging.DEBUG, logger="mcp.server.sse"):
            for _ in range(50):
                try:
                    raise ValueError("bad JSON-RPC")
                except ValueError:
                    logger.exception("Failed to parse message")
            logger.error("something else")  # other messages pass untouched
    finally:
        logger.removeFilter(quiet)
        for old in installed:
            logger.addFilter(old)
    [first, other] = caplog.records
    assert first.levelno == logging.WARNING and first.exc_info is None
    assert first.getMessage() == "Failed to parse message from a client (ValueError; answered 400)"
    assert other.getMessage() == "something else" and other.levelno == logging.ERROR
    assert quiet._held["mcp.server.sse: Failed to parse message"] == 49
