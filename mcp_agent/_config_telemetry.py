"""The ``telemetry`` section of agent.json: OpenTelemetry traces (``mcp_agent.telemetry``)."""

from __future__ import annotations

from ._config_model import ConfigModel


class TelemetryConfig(ConfigModel):
    """OpenTelemetry traces (README "Traces"); the standard ``OTEL_*`` variables do the rest."""

    enabled: bool = True
    """Record spans of each run (to the application's TracerProvider, or to the one set up from the
    ``OTEL_*`` variables). False: no spans, and no provider is set up."""
    capture_content: bool = False
    """Put prompts, answers, tool arguments and tool results on the spans (secrets redacted)."""
    service_name: str | None = None
    """``service.name`` of a TracerProvider set up from the environment (``OTEL_SERVICE_NAME`` wins;
    default ``mcp-agent``)."""
