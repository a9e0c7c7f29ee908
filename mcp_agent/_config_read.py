"""Reading agent.json, the pure parts: ``${VAR}`` expansion and error messages that name paths.

``expand_env`` expands ``${VAR}``, ``${VAR:-default}`` and ``$$`` in one string (a lone ``$`` is
left alone); ``expand_all`` does it in every string value of parsed JSON, never in keys.
``describe_errors`` turns pydantic's errors into one line per problem, naming the JSON path and,
for an unknown key, the nearest known one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .exceptions import ConfigError

Tagged = Mapping[str, Mapping[str, type[BaseModel]]]
"""Top-level fields holding a dict of tagged unions, with each tag's model."""

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: str, environ: Mapping[str, str], path: str) -> str:
    """Expand ``${VAR}``, ``${VAR:-default}`` and ``$$`` in one string value.

    Raises:
        ConfigError: a variable without a default is not set (the message names ``path``).
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{path or '<root>'}: environment variable {name} is not set "
            f"(write ${{{name}:-default}} to give a default)",
            path,
        )

    return _VAR.sub(replace, value)


def expand_all(value: Any, environ: Mapping[str, str], path: str) -> Any:
    """``expand_env`` over every string value of parsed JSON (keys are left as they are)."""
    if isinstance(value, str):
        return expand_env(value, environ, path)
    if isinstance(value, dict):
        return {k: expand_all(v, environ, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_all(v, environ, f"{path}[{i}]") for i, v in enumerate(value)]
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
    """One line per pydantic error: the JSON path and what is wrong (or the nearest known key)."""
    lines = []
    for error in errors:
        loc = tuple(error["loc"])
        path = format_loc(loc, tagged) or "<root>"
        if error["type"] == "extra_forbidden":
            owner = _model_at(root, loc, tagged)
            hint = ""
            if owner is not None:
                close = difflib.get_close_matches(str(loc[-1]), keys_of(owner), n=1, cutoff=0.5)
                if close:
                    hint = f'; did you mean "{close[0]}"?'
            lines.append(f"{path}: unknown key{hint}")
        else:
            lines.append(f"{path}: {error['msg']}")
    return "\n".join(lines)
