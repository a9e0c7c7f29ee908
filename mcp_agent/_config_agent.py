"""The whole of agent.json as one model, ``AgentConfig``, and the built-in system prompt.

``AgentConfig`` gathers the sections (each in a ``_config_*`` module of its own), checks what
spans them, and answers the questions that need the config file's folder: the system prompt
(inline, from ``systemPromptFile``, or ``DEFAULT_SYSTEM_PROMPT``), the state URL, and every
tool server (``mcpServers`` plus the scripts in ``serversDir``). Reading the file is
``_config_load``'s business.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from pydantic import Field, model_validator

from ._config_gateway import GatewayConfig
from ._config_llm import LLMConfig
from ._config_model import ConfigModel
from ._config_run import ApprovalsConfig, Limits
from ._config_servers import RemoteServerConfig, ServerConfig, StdioServerConfig
from ._config_state import SessionsConfig, StateConfig
from ._config_telemetry import TelemetryConfig
from .exceptions import ConfigError

logger = logging.getLogger("mcp_agent.config")

DEFAULT_SYSTEM_PROMPT = """\
You are a careful assistant with tools. Use a tool when the question needs facts you cannot know \
(this machine's state, files, the web, the current time); answer directly when you can.
Call tools with exactly the arguments their schemas ask for. When a tool reports an error, read it: \
fix the arguments once if the error says how, otherwise answer with what you know and say what failed.
Never call the same tool with the same arguments twice. When you have enough to answer, answer \
plainly and briefly, and stop calling tools."""


class AgentConfig(ConfigModel):
    """The whole of agent.json."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    limits: Limits = Field(default_factory=Limits)
    mcp_servers: dict[str, ServerConfig] = Field(default_factory=dict)
    servers_dir: str | None = None
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)

    base_dir: Path = Field(default=Path("."), exclude=True)
    """The folder relative paths are resolved against (the config file's folder)."""
    warnings: tuple[str, ...] = Field(default=(), exclude=True)
    """What the loader let pass with a warning (unknown top-level keys)."""

    @model_validator(mode="after")
    def _one_prompt(self) -> AgentConfig:
        if self.system_prompt is not None and self.system_prompt_file is not None:
            raise ValueError("set systemPrompt or systemPromptFile, not both")
        return self

    def prompt(self) -> str:
        """The system prompt: inline, from ``systemPromptFile``, or the built-in default."""
        if self.system_prompt is not None:
            return self.system_prompt
        if self.system_prompt_file is not None:
            path = self.base_dir / self.system_prompt_file
            try:
                return path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"systemPromptFile: cannot read {path}: {exc}", "systemPromptFile") from exc
        return DEFAULT_SYSTEM_PROMPT

    def state_url(self, default: str | os.PathLike[str] | None = None) -> str:
        """``state.url``, a relative SQLite path made relative to this file's folder; when unset,
        ``sqlite:///`` on ``default`` (a database file), or ``memory://`` without one."""
        url = self.state.url
        if url is None:
            return f"sqlite:///{os.fspath(default)}" if default is not None else "memory://"
        scheme, _, rest = url.partition("://")
        if scheme.lower() == "sqlite" and rest.startswith("/"):
            path = rest[1:]
            if path and not path.startswith("~") and not os.path.isabs(path):
                return f"sqlite:///{self.base_dir / path}"
        return url

    def servers(self) -> dict[str, StdioServerConfig | RemoteServerConfig]:
        """Every tool server: ``mcpServers`` plus the scripts found in ``serversDir``.

        A script is named by its file stem and run with this interpreter; an ``mcpServers``
        entry of the same name wins. Files starting with ``_`` are skipped.
        """
        servers: dict[str, StdioServerConfig | RemoteServerConfig] = {}
        if self.servers_dir:
            folder = self.base_dir / self.servers_dir
            if folder.is_dir():
                for script in sorted(folder.glob("*.py")):
                    if script.name.startswith("_"):
                        continue
                    servers[script.stem] = StdioServerConfig(
                        command=sys.executable, args=[str(script.resolve())]
                    )
            else:
                logger.warning("serversDir %s is not a folder; no servers discovered there", folder)
        servers.update(self.mcp_servers)
        return servers
