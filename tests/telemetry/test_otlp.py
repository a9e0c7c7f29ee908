"""Traces over OTLP/HTTP with nothing but ``OTEL_*`` variables, and ``setup_tracing``'s rules.

Each test runs the agent in a process of its own (a process has one TracerProvider), against an
OTLP receiver written here: a plain HTTP server on 127.0.0.1 that decodes each export with
``opentelemetry-proto`` (which the exporter depends on).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.model_server import FakeModelServer, Reply, running_model_server
from tests.fakes.openai_shapes import Call, openai_stream
from tests.servers import free_port

from .conftest import ROOT, traceparent

pytest.importorskip(
    "opentelemetry.exporter.otlp.proto.http", reason="needs the otel extra (the OTLP/HTTP exporter)"
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

ECHO = str(ROOT / "tests" / "servers" / "echo.py")
TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_ID = 0x00F067AA0BA902B7


@dataclass
class Exported:
    """One exported span, flattened: ids as ints, attributes as plain values."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    kind: int
    status: int
    attributes: dict[str, Any]
    resource: dict[str, Any]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 (``POST /v1/traces``, protobuf)."""

    spans: list[Exported] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(self.path, request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def add(self, path: str, request: Any) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Exported(
                            name=span.name,
                            trace_id=int.from_bytes(span.trace_id, "big"),
                            span_id=int.from_bytes(span.span_id, "big"),
                            parent_id=int.from_bytes(span.parent_span_id, "big")
                            if span.parent_span_id
                            else None,
                            kind=span.kind,
                            status=span.status.code,
                            attributes={item.key: _value(item.value) for item in span.attributes},
                            resource=resource,
                        )
                    )
        with self.lock:
            self.paths.append(path)
            self.spans.extend(found)

    def named(self, name: str) -> list[Exported]:
        with self.lock:
            return [span for span in self.spans if span.name == name]

    def wait_for(self, name: str, count: int = 1, timeout: float = 30) -> list[Exported]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.named(name)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no {name!r} span arrived; got {[span.name for span in self.spans]}")


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    found = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), found.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        yield server


def agent_json(folder: Path, model: FakeModelServer, **extra: Any) -> Path:
    config = {
        "llm": {"endpoint": model.base_url, "model": "m", "maxRetries": 0},
        "mcpServers": {"echo": {"command": sys.executable, "args": [ECHO]}},
        **extra,
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


def otel_env(endpoint: str, **more: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        **more,
    }


def test_query_exports_its_span_tree_over_otlp_http(
    tmp_path: Path, model: FakeModelServer, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    model.enqueue(
        Reply.sse(openai_stream(calls=[Call("echo__echo", {"text": "hi there"})], usage=(10, 5))),
        Reply.sse(openai_stream(content="The echo said: hi there.", usage=(20, 4))),
    )
    path = agent_json(tmp_path, model, telemetry={"serviceName": "otel-test"})
    done = subprocess.run(
        [sys.executable, "-m", "mcp_agent", "query", "say hi", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        env=otel_env(endpoint),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The echo said: hi there.\n"

    [run] = found.wait_for("invoke_agent mcp_agent")
    chats = found.wait_for("chat m", 2)
    [tool] = found.wait_for("execute_tool echo__echo")
    [mcp_send] = found.wait_for("MCP send tools/call echo")
    assert set(found.paths) == {"/v1/traces"}
    assert run.resource["service.name"] == "otel-test"
    assert run.parent_id is None
    assert all(chat.parent_id == run.span_id for chat in chats) and tool.parent_id == run.span_id
    assert mcp_send.parent_id == tool.span_id  # the SDK's client span nests under ours
    assert {span.trace_id for span in (run, *chats, tool, mcp_send)} == {run.trace_id}
    assert run.attributes["mcp_agent.termination_reason"] == "success"
    assert run.attributes["gen_ai.usage.input_tokens"] == 30
    first = next(chat for chat in chats if chat.attributes["mcp_agent.round"] == 1)
    assert first.attributes["gen_ai.request.stream"] is True
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["server.address"] == "127.0.0.1"
    assert first.attributes["server.port"] == int(model.base_url.split(":")[2].split("/")[0])
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert first.attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert tool.attributes["network.transport"] == "pipe"
    assert tool.attributes["mcp_agent.tool.server"] == "echo"


def test_serve_continues_a_callers_trace_and_exports_it(
    tmp_path: Path, model: FakeModelServer, receiver: tuple[Receiver, str]
) -> None:
    """``mcp-agent serve`` with OTEL_* only: a REST query's traceparent is the run's parent, and the
    spans reach the receiver by the time the gateway has shut down."""
    found, endpoint = receiver
    model.handler = lambda request: Reply.sse(openai_stream(content="served", usage=(3, 2)))
    port = free_port()
    path = agent_json(tmp_path, model, gateway={"port": port})
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env=otel_env(endpoint, OTEL_BSP_SCHEDULE_DELAY="60000"),  # only the shutdown flush sends them
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=2).json().get("status") in ("ok", "degraded"):
                    break
            except (httpx.HTTPError, ValueError):
                pass
            assert time.monotonic() < deadline, "the gateway did not come up"
            time.sleep(0.1)
        response = httpx.post(
            f"{url}/api/v1/query",
            json={"query": "hello"},
            headers={"traceparent": traceparent(TRACE_ID, PARENT_ID)},
            timeout=60,
        )
        assert response.json()["answer"] == "served"
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        if process.stderr is not None:
            process.stderr.close()
    [run] = found.wait_for("invoke_agent mcp_agent")
    assert run.trace_id == TRACE_ID and run.parent_id == PARENT_ID
    assert run.resource["service.name"] == "mcp-agent"
    [chat] = found.wait_for("chat m")
    assert chat.parent_id == run.span_id


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
    )


def test_setup_tracing_never_replaces_the_applications_provider() -> None:
    done = _python(
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "mine = TracerProvider()\n"
        "trace.set_tracer_provider(mine)\n"
        "from mcp_agent.telemetry.setup import setup_tracing\n"
        "assert setup_tracing(None, {'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://127.0.0.1:9'}) is False\n"
        "assert trace.get_tracer_provider() is mine\n"
        "print('kept')\n"
    )
    assert done.stdout.strip() == "kept", done.stderr


def test_setup_tracing_follows_the_environment() -> None:
    done = _python(
        "from opentelemetry import trace\n"
        "from mcp_agent.config import TelemetryConfig\n"
        "from mcp_agent.telemetry.setup import setup_tracing\n"
        "url = {'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://127.0.0.1:9'}\n"
        "assert not setup_tracing(None, {})\n"
        "assert not setup_tracing(TelemetryConfig(enabled=False), url)\n"
        "assert not setup_tracing(None, {**url, 'OTEL_SDK_DISABLED': 'true'})\n"
        "assert not setup_tracing(None, {**url, 'OTEL_TRACES_EXPORTER': 'none'})\n"
        "assert not setup_tracing(None, {**url, 'OTEL_EXPORTER_OTLP_PROTOCOL': 'grpc'})\n"
        "assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)\n"
        "assert setup_tracing(TelemetryConfig(serviceName='from-config'), "
        "{'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT': 'http://127.0.0.1:9/v1/traces'})\n"
        "provider = trace.get_tracer_provider()\n"
        "print(provider.resource.attributes['service.name'])\n"
        "assert not setup_tracing(None, url)  # once only\n"
    )
    assert done.stdout.strip() == "from-config", done.stderr


def test_setup_tracing_without_the_sdk_says_what_to_install() -> None:
    done = _python(
        "import sys, logging\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "sys.modules['opentelemetry.sdk'] = None\n"
        "from mcp_agent.telemetry.setup import setup_tracing\n"
        "print(setup_tracing(None, {'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://127.0.0.1:9'}))\n"
    )
    assert done.stdout.strip() == "False", done.stderr
    assert "mcp-gateway-agent[otel]" in done.stderr


def test_the_receiver_speaks_otlp(receiver: tuple[Receiver, str]) -> None:
    """The exporter itself, against the receiver (so a failure above is not the receiver's)."""
    found, endpoint = receiver
    done = _python(
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))\n"
        "with provider.get_tracer('t').start_as_current_span('probe'):\n"
        "    pass\n"
        "provider.shutdown()\n",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
    )
    assert done.returncode == 0, done.stderr
    assert found.wait_for("probe")
