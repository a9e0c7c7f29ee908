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

The folder: ``sections.py`` (the models, one per object of the file), ``load.py`` (reading,
``${VAR}`` expansion, errors that name JSON paths), ``globs.py`` (globs that match nothing).
This module gathers the names the rest of the package imports.
"""

from __future__ import annotations

from .load import load_config, parse_config
from .sections import (
    DEFAULT_SYSTEM_PROMPT,
    AgentConfig,
    ApprovalsConfig,
    CallerConfig,
    CallerToolsConfig,
    CapabilityOverrides,
    GatewayConfig,
    Limits,
    LLMConfig,
    OAuthConfig,
    PolicyConfig,
    RemoteServerConfig,
    SessionsConfig,
    StateConfig,
    StdioServerConfig,
    TelemetryConfig,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AgentConfig",
    "ApprovalsConfig",
    "CallerConfig",
    "CallerToolsConfig",
    "CapabilityOverrides",
    "GatewayConfig",
    "LLMConfig",
    "Limits",
    "OAuthConfig",
    "PolicyConfig",
    "RemoteServerConfig",
    "SessionsConfig",
    "StateConfig",
    "StdioServerConfig",
    "TelemetryConfig",
    "load_config",
    "parse_config",
]
