"""Fixtures for the traces: the SDK's in-memory exporter behind the process's TracerProvider, and a
remote MCP server that tells which trace context reached it (``tests/servers/traced.py``).

A process has one global TracerProvider and it cannot be replaced, so ``spans`` installs one the
first time (an SDK ``TracerProvider`` whose processor hands finished spans to the exporter of the
test running now, and drops them between tests) and every later test reuses it. Tests that need
a process of their own (``setup_tracing``, the OTLP exporter) run subprocesses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.servers import over_http

ROOT = Path(__file__).resolve().parents[2]
TRACED = ROOT / "tests" / "servers" / "traced.py"


_switch: Any = None


def _installed_switch() -> Any:
    """A span processor that hands finished spans to its ``target`` (None: drops them), added to
    the process's SDK TracerProvider (installed here the first time)."""
    global _switch
    if _switch is None:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

        class Switch(SpanProcessor):
            target: Any = None

            def on_end(self, span: Any) -> None:
                target = self.target
                if target is not None:
                    target.export([span])

        current = trace.get_tracer_provider()
        provider = current if isinstance(current, TracerProvider) else TracerProvider()
        _switch = Switch()
        provider.add_span_processor(_switch)
        if provider is not current:
            trace.set_tracer_provider(provider)
    return _switch


class Spans:
    """The spans finished during one test."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter

    def all(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[Any]:
        return [span for span in self.all() if span.name == name]

    def one(self, name: str) -> Any:
        found = self.named(name)
        assert len(found) == 1, (name, [span.name for span in self.all()])
        return found[0]

    def by_id(self, span_id: int) -> Any:
        return next((span for span in self.all() if span.context.span_id == span_id), None)

    def ancestors(self, span: Any) -> list[Any]:
        """The finished spans above ``span``, nearest first."""
        chain = []
        while span.parent is not None:
            span = self.by_id(span.parent.span_id)
            if span is None:
                break
            chain.append(span)
        return chain

    def children(self, parent: Any) -> list[Any]:
        return [
            span
            for span in self.all()
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        ]


@pytest.fixture
def spans() -> Iterator[Spans]:
    """The spans of this test (skips without the OpenTelemetry SDK: ``pip install .[otel]``)."""
    pytest.importorskip("opentelemetry.sdk.trace", reason="needs the OpenTelemetry SDK (the otel extra)")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    switch = _installed_switch()
    exporter = InMemorySpanExporter()
    switch.target = exporter
    try:
        yield Spans(exporter)
    finally:
        switch.target = None
    # every test also checks that no span of ours carries an unset (None) attribute
    ours = [span for span in exporter.get_finished_spans() if span.instrumentation_scope.name == "mcp_agent"]
    unset = [(span.name, key) for span in ours for key, value in span.attributes.items() if value is None]
    assert not unset, f"attributes without a value: {unset}"


def traceparent(trace_id: int, span_id: int) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-01"


@dataclass(frozen=True)
class TracedServer:
    """``tests/servers/traced.py`` over HTTP or SSE in a subprocess of its own."""

    transport: str
    url: str

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)


@pytest.fixture(params=["http", "sse"])
def traced_server(request: pytest.FixtureRequest) -> Iterator[TracedServer]:
    with over_http("traced.py", transport=request.param) as url:
        yield TracedServer(request.param, url)


def seen_by(result_text: str) -> dict[str, Any]:
    """What ``whoami`` saw: ``{"header": traceparent or None, "meta": traceparent or None}``."""
    found: dict[str, Any] = json.loads(result_text)
    return found


def ids_of(traceparent_value: str) -> tuple[int, int]:
    """(trace id, parent span id) of a W3C traceparent."""
    _, trace_id, span_id, _ = traceparent_value.split("-")
    return int(trace_id, 16), int(span_id, 16)


def names(spans: Sequence[Any]) -> list[str]:
    return [span.name for span in spans]
