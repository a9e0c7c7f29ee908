"""The base of every agent.json model: camelCase keys in the file, snake_case in Python.

Each section of the file has a module of its own (``_config_llm``, ``_config_run``,
``_config_servers``, ``_config_gateway``, ``_config_state``, ``_config_telemetry``, and
``_config_agent`` for the whole file); ``config.py`` is where the rest of the package imports them from.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    """Base: camelCase keys in the file, snake_case in Python, unknown keys rejected, frozen."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )
