"""Loading agent.json: ``parse_config`` (parsed JSON to an ``AgentConfig``) and ``load_config`` (a file).

``parse_config`` warns about unknown top-level keys, expands ``${VAR}`` in string values,
remembers the secrets it meets (``_redact``) and validates, turning pydantic's errors into one
``ConfigError`` that names every bad JSON path (the pure helpers below).
``load_config`` reads the file first and says what is wrong with text that is not JSON.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .._redact import remember_secrets, secrets_in_config, secrets_in_environ
from ..exceptions import ConfigError
from .sections import AgentConfig, RemoteServerConfig, StdioServerConfig

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
        raise ConfigError(
            "invalid config:\n" + describe_errors(AgentConfig, errors, _TAGGED), first
        ) from None
    for warning in warnings:
        logger.warning("config: %s", warning)
    servers = {name: relative_to(server, base_dir) for name, server in config.mcp_servers.items()}
    return config.model_copy(
        update={"base_dir": Path(base_dir), "warnings": tuple(warnings), "mcp_servers": servers}
    )


def relative_to(
    server: StdioServerConfig | RemoteServerConfig, base_dir: str | os.PathLike[str]
) -> StdioServerConfig | RemoteServerConfig:
    """``server`` with a relative ``cwd`` made relative to ``base_dir``, the config file's folder
    (like ``serversDir`` and ``state.url``), and a relative ``command`` that names a path (it has
    a slash: ``.venv/bin/python``, ``./server.sh``) made relative to that ``cwd`` when there is
    one (where the operating system looks for it), else to ``base_dir``: a client that launches
    the gateway from another folder starts the same program. A bare command (``npx``, ``uvx``,
    ``python3``) is still looked up on PATH (pure)."""
    if not isinstance(server, StdioServerConfig):
        return server
    update: dict[str, str] = {}
    cwd = server.cwd
    if cwd and not os.path.isabs(os.path.expanduser(cwd)):
        cwd = update["cwd"] = _joined(base_dir, cwd)
    command = os.path.expanduser(server.command)
    if ("/" in command or os.sep in command) and not os.path.isabs(command):
        update["command"] = _joined(cwd or base_dir, command)
    return server.model_copy(update=update) if update else server


def _joined(base_dir: str | os.PathLike[str], path: str) -> str:
    """``path`` under ``base_dir``; normalised only under an absolute folder (``./x`` under ``.``
    stays a path, never the bare name ``x``)."""
    joined = os.path.join(os.fspath(base_dir), path)
    return os.path.normpath(joined) if os.path.isabs(joined) else joined


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
        config = parse_config(data, base_dir=file.resolve().parent, environ=environ)
    except ConfigError as exc:
        raise ConfigError(f"{file}: {exc.message}", exc.path) from None
    return config.model_copy(update={"llm": config.llm.model_copy(update={"config_file": str(file)})})


# Reading agent.json, the pure parts: ``${VAR}`` expansion and error messages that name paths.
#
# ``expand_env`` expands ``${VAR}``, ``${VAR:-default}`` and ``$$`` in one string (a lone ``$`` is
# left alone); ``expand_all`` does it in every string value of parsed JSON, never in keys. Both
# can list what they took from the environment (``found``), so that secrets among those values
# are masked in every output (``_redact.secrets_in_config``).
# ``describe_errors`` turns pydantic's errors into one line per problem, naming the JSON path and,
# for an unknown key, the nearest known one. ``describe_json_error`` says what is wrong with text
# that is not JSON, in the words of someone editing agent.json by hand: a trailing comma, a
# comment, single quotes, an unquoted key, Python's ``True``/``None``.
Tagged = Mapping[str, Mapping[str, type[BaseModel]]]
"""Top-level fields holding a dict of tagged unions, with each tag's model."""

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


Substitution = tuple[str, str, str]
"""One ``${VAR}`` taken from the environment: the JSON path, the variable's name, its value."""


def expand_env(
    value: str, environ: Mapping[str, str], path: str, found: list[Substitution] | None = None
) -> str:
    """Expand ``${VAR}``, ``${VAR:-default}`` and ``$$`` in one string value.

    Each value taken from ``environ`` is appended to ``found`` (when given).

    Raises:
        ConfigError: a variable without a default is not set (the message names ``path``).
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if name in environ:
            if found is not None:
                found.append((path, name, environ[name]))
            return environ[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{path or '<root>'}: environment variable {name} is not set "
            f"(write ${{{name}:-default}} to give a default)",
            path,
        )

    return _VAR.sub(replace, value)


def expand_all(
    value: Any, environ: Mapping[str, str], path: str, found: list[Substitution] | None = None
) -> Any:
    """``expand_env`` over every string value of parsed JSON (keys are left as they are)."""
    if isinstance(value, str):
        return expand_env(value, environ, path, found)
    if isinstance(value, dict):
        return {k: expand_all(v, environ, f"{path}.{k}" if path else k, found) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_all(v, environ, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def keys_of(model: type[BaseModel]) -> list[str]:
    """The keys a model accepts in the file (camelCase aliases)."""
    return [info.alias or name for name, info in model.model_fields.items() if not info.exclude]


def format_loc(loc: tuple[str | int, ...], tagged: Tagged) -> str:
    """A pydantic error location as a JSON path (``mcpServers.files.args[0]``), tags left out."""
    text = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            text += f"[{part}]"
        elif i == 2 and part in tagged.get(str(loc[0]), {}):
            continue
        else:
            text += f".{part}" if text else str(part)
    return text


def _model_at(root: type[BaseModel], loc: tuple[str | int, ...], tagged: Tagged) -> type[BaseModel] | None:
    """The model that owns the last key of an error location."""
    model: type[BaseModel] = root
    parts = list(loc[:-1])
    while parts:
        part = str(parts.pop(0))
        fields = {info.alias or name: info for name, info in model.model_fields.items()}
        info = fields.get(part)
        if info is None:
            return None
        if part in tagged and model is root:  # a dict of tagged models: a key, then the tag
            if len(parts) < 2 or str(parts[1]) not in tagged[part]:
                return None
            model = tagged[part][str(parts[1])]
            del parts[:2]
        elif isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            model = info.annotation
        else:
            return None
    return model


def describe_errors(root: type[BaseModel], errors: list[Any], tagged: Tagged) -> str:
    """One line per pydantic error: the JSON path and what is wrong (or the nearest known key).

    A required key reported missing is left out when an unknown key beside it is its misspelling
    (``comand``: the hint says it all).
    """
    lines = []
    missing: dict[tuple[str | int, ...], list[str]] = {}  # required keys absent, by parent
    for error in errors:
        if error["type"] == "missing":
            missing.setdefault(tuple(error["loc"][:-1]), []).append(str(error["loc"][-1]))
    explained: set[tuple[str | int, ...]] = set()  # missing keys an unknown key's hint names
    hints: dict[int, str] = {}
    for index, error in enumerate(errors):
        loc = tuple(error["loc"])
        if error["type"] == "extra_forbidden":
            owner = _model_at(root, loc, tagged)
            if owner is not None:
                # a required key that is absent is the likeliest meaning (``cmd``: command, not cwd)
                close = _nearest_key(str(loc[-1]), missing.get(loc[:-1], [])) or _nearest_key(
                    str(loc[-1]), keys_of(owner)
                )
                if close:
                    hints[index] = close
                    explained.add((*loc[:-1], close))
    for index, error in enumerate(errors):
        loc = tuple(error["loc"])
        path = format_loc(loc, tagged) or "<root>"
        if error["type"] == "extra_forbidden":
            hint = f'; did you mean "{hints[index]}"?' if index in hints else ""
            lines.append(f"{path}: unknown key{hint}")
        elif error["type"] == "missing" and loc in explained:
            continue
        elif error["type"] == "server_kind" and isinstance(error.get("input"), dict):
            keys = ", ".join(repr(str(key)) for key in error["input"]) or "no keys"
            lines.append(f"{path}: {error['msg']} (it has {keys})")
        else:
            lines.append(f"{path}: {str(error['msg']).removeprefix('Value error, ')}")
    return "\n".join(lines)


def _nearest_key(key: str, options: list[str]) -> str | None:
    """The option nearest to ``key``, case ignored (``URL``: url), or None when none is close."""
    by_lower = {option.lower(): option for option in options}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.5)
    return by_lower[close[0]] if close else None


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def describe_json_error(text: str, error: json.JSONDecodeError) -> str:
    """What is wrong with ``text`` (which ``json.loads`` refused with ``error``), with a hint for
    the common mistakes in a hand-edited file. Never raises."""
    pos = min(max(error.pos, 0), len(text))
    at = text[pos : pos + 2]
    before = text[:pos].rstrip()
    where = "at line {} column {}".format(*_line_col(text, pos))
    if not text.strip():
        return "the file is empty; it needs a JSON object such as {}"
    if before.endswith(",") and at[:1] in ("}", "]"):
        comma = "at line {} column {}".format(*_line_col(text, len(before) - 1))
        return f"trailing comma before '{at[0]}' {comma}: JSON allows no comma after the last item; remove it"
    if at in ("//", "/*") or at[:1] == "#":
        return f"a comment {where}: JSON has no comments; remove it"
    if at[:1] == "'":
        return f'single quotes {where}: JSON strings and keys need double quotes ("like this")'
    for python, name in (("True", "true"), ("False", "false"), ("None", "null")):
        if text.startswith(python, pos):
            return f"{python} {where}: JSON spells it {name}"
    if error.msg.startswith("Expecting property name") and (at[:1].isalpha() or at[:1] == "_"):
        return f'a key without quotes {where}: JSON keys need double quotes ("key": value)'
    if error.msg == "Expecting ',' delimiter":
        return f"a missing comma (or a stray character) {where}: items are separated by commas"
    return f"{error.msg} {where}"
