"""A client's bad messages do not flood the log: one line, no traceback, rate-limited."""

from __future__ import annotations

import logging

import pytest

from mcp_agent.gateway.mcp.quiet_logs import ClientErrorFilter


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


def test_a_closed_session_under_a_request_is_one_line_but_real_errors_keep_their_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import anyio

    logger = logging.getLogger("mcp.server.streamable_http")
    quiet = ClientErrorFilter(every=3600)
    installed = list(logger.filters)
    for old in installed:
        logger.removeFilter(old)
    logger.addFilter(quiet)
    try:
        with caplog.at_level(logging.DEBUG, logger="mcp.server.streamable_http"):
            for error in (anyio.ClosedResourceError(), KeyError("a bug")):
                try:
                    raise error
                except Exception:
                    logger.exception("Error handling POST request")
    finally:
        logger.removeFilter(quiet)
        for old in installed:
            logger.addFilter(old)
    [gone, bug] = caplog.records
    assert gone.exc_info is None and "session closed meanwhile" in gone.getMessage()
    assert bug.exc_info is not None and bug.levelno == logging.ERROR


async def test_an_error_after_the_response_is_complete_is_not_raised() -> None:
    from mcp_agent.gateway.mcp.quiet_logs import LateErrorGuard

    sent: list[dict[str, object]] = []

    async def app(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]
        await send({"type": "http.response.start", "status": 500, "headers": []})  # type: ignore[operator]
        raise RuntimeError("the session closed under us")

    async def early(scope: object, receive: object, send: object) -> None:
        raise RuntimeError("before any response")

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "path": "/mcp"}
    await LateErrorGuard(app)(scope, receive, send)
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [202]
    with pytest.raises(RuntimeError, match="before any response"):
        await LateErrorGuard(early)(scope, receive, send)
