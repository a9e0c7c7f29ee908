"""Loading agent.json: ``parse_config`` (parsed JSON to an ``AgentConfig``) and ``load_config`` (a file).

``parse_config`` warns about unknown top-level keys, expands ``${VAR}`` in string values,
remembers the secrets it meets (``_redact``) and validates, turning pydantic's errors into one
``ConfigError`` that names every bad JSON path (the pure helpers are in ``_config_read``).
``load_config`` reads the file first and says what is wrong with text that is not JSON.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._config_agent import AgentConfig
from ._config_read import (
    Substitution,
    Tagged,
    describe_errors,
    describe_json_error,
    expand_all,
    format_loc,
    keys_of,
)
from ._config_servers import RemoteServerConfig, StdioServerConfig
from ._redact import remember_secrets, secrets_in_config, secrets_in_environ
from .exceptions import ConfigError

logger = logging.getLogger("mcp_agent.config")

_TAGGED: Tagged = {"mcpServers": {"stdio": StdioServerConfig, "remote": RemoteServerConfig}}
"""Fields holding a dict of tagged unions: pydantic puts the tag in error locations."""


def parse_config(
    data: Any,
    *,
    base_dir: str | os.PathLike[str] = ".",
    environ: Mapping[str, str] | None = None,
) -> AgentConfig:
    """Build an AgentConfig from parsed JSON.

    The secret values it holds (and those of secret-named variables in ``environ``) are
    remembered, so that no log, event, response or error message shows them (``_redact``).

    Raises:
        ConfigError: the data is not a valid config; the message names every bad path.
    """
    if not isinstance(data, dict):
        raise ConfigError("the config must be a JSON object")
    known = set(keys_of(AgentConfig)) | set(AgentConfig.model_fields)
    warnings = []
    for key in [k for k in data if k not in known]:
        close = difflib.get_close_matches(key, keys_of(AgentConfig), n=1, cutoff=0.75)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        warnings.append(f"unknown top-level key {key!r} ignored{hint}")
    data = {k: v for k, v in data.items() if k in known}
    environ = os.environ if environ is None else environ
    substituted: list[Substitution] = []
    data = expand_all(data, environ, "", substituted)
    remember_secrets(secrets_in_config(data, substituted) | secrets_in_environ(environ))
    try:
        config = AgentConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = format_loc(tuple(errors[0]["loc"]), _TAGGED) if errors else None
        raise ConfigError("invalid config:\n" + describe_errors(AgentConfig, errors, _TAGGED), first) from None
    for warning in warnings:
        logger.warning("config: %s", warning)
    return config.model_copy(update={"base_dir": Path(base_dir), "warnings": tuple(warnings)})


def load_config(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> AgentConfig:
    """Read and validate an agent.json file.

    Raises:
        ConfigError: the file is missing, is not JSON, or is not a valid config.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")  # a byte-order mark (Notepad's) is not an error
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{file}: not valid JSON: {describe_json_error(text, exc)}") from None
    try:
        return parse_config(data, base_dir=file.resolve().parent, environ=environ)
    except ConfigError as exc:
        raise ConfigError(f"{file}: {exc.message}", exc.path) from None
