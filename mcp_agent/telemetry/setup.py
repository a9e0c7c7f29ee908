"""Whether runs are traced: a TracerProvider from the ``OTEL_*`` variables when the application has
none (``setup_tracing``), and the trace of each run, recording or not (``start_trace``).

Imports nothing of OpenTelemetry until ``setup_tracing`` finds that the environment asks for
traces, and the recording spans (``spans.py``) only once a run is traced.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._redact import redact_text
from .base import DEFAULT_SETTINGS, NO_TRACE, RunTrace, TraceSettings, tracer

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from ..config import TelemetryConfig

logger = logging.getLogger("mcp_agent.telemetry.base")

DEFAULT_SERVICE_NAME = "mcp-agent"


_installed: TracerProvider | None = None


def setup_tracing(settings: TelemetryConfig | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Install a TracerProvider exporting over OTLP/HTTP when the environment asks for one.

    Only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) is set, the ``[otel]``
    extra is installed, ``telemetry.enabled`` is true, ``OTEL_SDK_DISABLED`` is not ``true``,
    ``OTEL_TRACES_EXPORTER`` is unset or ``otlp``, and no TracerProvider is installed yet: the
    embedding application's own provider is never replaced. The exporter, sampler and resource
    read the other ``OTEL_*`` variables themselves (headers, timeout, compression,
    ``OTEL_TRACES_SAMPLER``, ``OTEL_RESOURCE_ATTRIBUTES``). ``service.name`` is
    ``OTEL_SERVICE_NAME``, else ``telemetry.serviceName``, else ``mcp-agent``.

    Returns:
        Whether a provider was installed now.
    """
    global _installed
    env = os.environ if environ is None else environ
    if settings is not None and not settings.enabled:
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter_name != "otlp":
        logger.debug("OTEL_TRACES_EXPORTER=%s: no tracer provider set up here", exporter_name)
        return False
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol.strip().lower() != "http/protobuf":
        logger.warning(
            "traces: OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported (only http/protobuf); no traces",
            protocol,
        )
        return False
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # the application installed its own: never replace it
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "traces: OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is missing; "
            "install mcp-gateway-agent[otel] to send traces"
        )
        return False
    name = (
        env.get("OTEL_SERVICE_NAME") or (settings.service_name if settings else None) or DEFAULT_SERVICE_NAME
    )
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:  # lost a race with another installer
        provider.shutdown()
        return False
    _installed = provider
    logger.info("traces go to %s over OTLP/HTTP (service.name %s)", redact_text(endpoint), name)
    return True


async def flush_tracing(timeout_seconds: float = 5.0) -> None:
    """Export what is buffered, when ``setup_tracing`` installed the provider (before shutdown)."""
    provider = _installed
    if provider is None:
        return
    import anyio

    with anyio.move_on_after(timeout_seconds + 1, shield=True):  # also while the agent is cancelled
        await anyio.to_thread.run_sync(provider.force_flush, int(timeout_seconds * 1000))


def start_trace(
    *,
    run_id: str,
    session_id: str | None = None,
    caller: str | None = None,
    query: str = "",
    settings: TraceSettings | None = None,
    run_span: bool = True,
) -> RunTrace:
    """The trace of a run starting now: ``NO_TRACE`` unless traced. Without ``run_span`` only
    tool spans are made, under the current span (the gateway's ``exposeTools`` calls)."""
    settings = settings or DEFAULT_SETTINGS
    if not settings.enabled:
        return NO_TRACE
    found = tracer()
    if found is None:
        return NO_TRACE
    from .spans import recording  # the recording classes load only when traced

    return recording(found, settings, run_id, session_id, caller, query, run_span)
