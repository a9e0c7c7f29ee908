"""agent.json: the whole configuration, as pydantic models, and its loader (the public names).

The file uses camelCase keys (the ``mcpServers`` format of Claude Desktop and Cursor, copied as
is); the models use snake_case attributes. Rules the loader enforces:

- ``${VAR}`` is expanded inside string values only, never in keys. ``${VAR:-default}`` gives a
  default, ``$$`` is a literal ``$``, and a lone ``$`` (``"costs $5"``) is left alone. A missing
  variable without a default is an error naming the JSON path.
- An unknown key inside a known object is an error that names the JSON path and suggests the
  nearest known key. An unknown top-level key is only a warning, so a Claude Desktop config file
  (``{"mcpServers": {...}, "globalShortcut": ...}``) loads as it is.
- Every ``*.py`` file in ``serversDir`` is a stdio server run with the current interpreter and
  named by its file stem; an ``mcpServers`` entry of the same name wins.
- **A numeric limit of 0 means "off"**, everywhere: no cap on rounds, tokens, tool calls, time,
  result size or history size, no loop detection, no failure hint, no tool withdrawal.
  ``maxParallelTools: 0`` means no bound on parallel calls.

Config objects are inert: factories elsewhere build runtime objects from them.

Where each part lives (this module only gathers the names the rest of the package imports):

- ``_config_model``: the base of every model (camelCase keys, unknown keys rejected, frozen).
- ``_config_llm``: ``llm`` (``LLMConfig``, ``CapabilityOverrides``, fallbacks).
- ``_config_run``: ``limits`` and ``approvals`` (``Limits``, ``ApprovalsConfig``).
- ``_config_servers``: ``mcpServers`` (``StdioServerConfig``, ``RemoteServerConfig``, their union).
- ``_config_gateway``: ``gateway`` (``GatewayConfig``, ``CallerConfig``, the bind-host check).
- ``_config_state``: ``sessions`` and ``state`` (``SessionsConfig``, ``StateConfig``).
- ``_config_telemetry``: ``telemetry`` (``TelemetryConfig``).
- ``_config_agent``: the whole file (``AgentConfig``) and ``DEFAULT_SYSTEM_PROMPT``.
- ``_config_load``: ``parse_config`` and ``load_config``; ``_config_read``: their pure helpers
  (``${VAR}`` expansion, error messages that name JSON paths).
"""

from __future__ import annotations

from ._config_agent import DEFAULT_SYSTEM_PROMPT, AgentConfig
from ._config_gateway import CallerConfig, GatewayConfig
from ._config_llm import CapabilityOverrides, LLMConfig
from ._config_load import load_config, parse_config
from ._config_run import ApprovalsConfig, Limits
from ._config_servers import RemoteServerConfig, StdioServerConfig
from ._config_state import SessionsConfig, StateConfig
from ._config_telemetry import TelemetryConfig

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AgentConfig",
    "ApprovalsConfig",
    "CallerConfig",
    "CapabilityOverrides",
    "GatewayConfig",
    "LLMConfig",
    "Limits",
    "RemoteServerConfig",
    "SessionsConfig",
    "StateConfig",
    "StdioServerConfig",
    "TelemetryConfig",
    "load_config",
    "parse_config",
]
