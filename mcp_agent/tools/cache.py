"""Tool lists cached on disk, so the next start can offer a server's tools before it is up.

After a server has listed its tools, ``ToolCache.save`` writes what it listed (the tools as the
server sent them, before filtering and compiling) to ``<state dir>/tool-cache/<server>-<key>.json``
(atomically: a temporary file renamed over the old one). ``ToolCache.load`` reads it back on the
next start, when the server's configuration still has the same ``cache_key``.

The same entry holds the server's resources, resource templates and prompts when it declared
them (listed after its start, see ``_lists.py``), so the gateway can list those too while the
server starts. Each is absent when it is not known: the server does not offer it, has not
listed it yet, or has more than ``MAX_CACHED_ENTRIES`` of it (such a list is asked of the server
once it is up, as without a cache).

The key is a hash of everything that can change what the server lists: its command, args, cwd,
env names and values, url, transport and headers, its ``allowTools``/``denyTools``, and what the
command line resolves to on this machine (``_resolved.py``): the identity (real path, size,
mtime, inode) of the executable and of every argument that names a file (a script in
``servers/``), and for a package runner (``npx``, ``uvx``, ``pipx run``...) the versions of the
package it would run that are found locally, unless the arguments pin one. Secrets go into the
hash only: a cache file holds the key and the lists, never the configuration. A cache file that cannot be read or parsed is ignored with a warning, one of
another ``CACHE_VERSION`` silently (each is overwritten by the next save).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._types import JSONObject
from ..config import RemoteServerConfig, StdioServerConfig
from ._resolved import resolution

logger = logging.getLogger(__name__)

CACHE_VERSION = 2
"""Bumped when the file format or the meaning of a cached list changes: older files are ignored
(2: resources, resource templates and prompts)."""
MAX_CACHED_ENTRIES = 1000
"""The most resources, resource templates or prompts of one server the cache holds: a longer
list is not cached."""

_CATALOG_FIELDS = (
    ("resources", "resources", "uri"),
    ("resource_templates", "resourceTemplates", "uriTemplate"),
    ("prompts", "prompts", "name"),
)
"""Each list of the catalog: its ``CachedList`` field, its name in the file, the key each entry has."""


@dataclass(frozen=True)
class CachedList:
    """A server's lists as it last gave them (wire JSON, before filtering and compiling).

    Attributes:
        tools: its tools.
        capabilities: the capabilities the server declared.
        resources: its resources, or None when not known (see the module docstring).
        resource_templates: its resource templates, or None when not known.
        prompts: its prompts, or None when not known.
    """

    tools: tuple[JSONObject, ...]
    capabilities: JSONObject
    resources: tuple[JSONObject, ...] | None = None
    resource_templates: tuple[JSONObject, ...] | None = None
    prompts: tuple[JSONObject, ...] | None = None


def _entries(data: dict[str, Any], wire: str, key: str) -> tuple[JSONObject, ...] | None:
    """The list ``data[wire]`` of objects that each have a string ``key``, or None when absent.

    Raises:
        ValueError: it is something else.
    """
    value = data.get(wire)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(e, dict) and isinstance(e.get(key), str) for e in value
    ):
        raise ValueError(f"{wire!r} is not a list of objects with a {key!r}")
    return tuple(value)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def cache_key(config: StdioServerConfig | RemoteServerConfig) -> str:
    """A hash of everything in ``config`` (and on disk) that can change the server's tool list:
    a few ``stat`` calls and small reads, never a process or the network."""
    parts: dict[str, Any] = {
        "version": CACHE_VERSION,
        "allow": config.allow_tools,
        "deny": sorted(config.deny_tools),
    }
    if isinstance(config, StdioServerConfig):
        parts.update(
            command=config.command,
            args=config.args,
            cwd=config.cwd,
            env={name: _digest(value) for name, value in sorted(config.env.items())},
            resolved=resolution(config.command, config.args, config.env, config.cwd),
        )
    else:
        parts.update(
            url=config.url,
            transport=config.transport,
            headers={name.lower(): _digest(value) for name, value in sorted(config.headers.items())},
        )
    return _digest(json.dumps(parts, sort_keys=True, separators=(",", ":")))


def _file_name(server: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", server)[:64]
    return f"{safe}-{_digest(server)[:8]}.json"


class ToolCache:
    """The cached tool lists in one folder (``<state dir>/tool-cache``).

    ``load`` and ``save`` never raise for what is on disk: a failure is logged and the cache is
    simply not used.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    @classmethod
    def of_state_dir(cls, state_dir: str | os.PathLike[str]) -> ToolCache:
        """The cache of a state folder (``$MCP_AGENT_STATE_DIR``): its ``tool-cache`` folder."""
        return cls(Path(state_dir) / "tool-cache")

    def path(self, server: str) -> Path:
        """The cache file of ``server``."""
        return self.folder / _file_name(server)

    def load(self, server: str, config: StdioServerConfig | RemoteServerConfig) -> CachedList | None:
        """The cached list of ``server``, or None when there is none for this configuration."""
        path = self.path(server)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("tool cache: cannot read %s: %s (ignored)", path, exc)
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("version"), int):
                raise ValueError("not a tool cache file")
            if data["version"] != CACHE_VERSION:  # written by another version: not ours to read
                logger.debug(
                    "tool cache: %s has version %s, not %d (ignored)", path, data["version"], CACHE_VERSION
                )
                return None
            tools = data["tools"]
            capabilities = data.get("capabilities") or {}
            if not isinstance(tools, list) or not all(isinstance(t, dict) and "name" in t for t in tools):
                raise ValueError("'tools' is not a list of tools")
            if not isinstance(capabilities, dict):
                raise ValueError("'capabilities' is not an object")
            catalog = {field: _entries(data, wire, key) for field, wire, key in _CATALOG_FIELDS}
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("tool cache: ignoring corrupt file %s: %s", path, exc)
            return None
        if data.get("key") != cache_key(config):
            return None  # the configuration (or the script) changed since
        return CachedList(tuple(tools), capabilities, **catalog)

    def save(self, server: str, config: StdioServerConfig | RemoteServerConfig, listed: CachedList) -> bool:
        """Write the lists ``server`` just gave; returns whether they were written."""
        data: dict[str, Any] = {
            "version": CACHE_VERSION,
            "server": server,
            "key": cache_key(config),
            "capabilities": listed.capabilities,
            "tools": list(listed.tools),
        }
        for field, wire, _ in _CATALOG_FIELDS:
            entries = getattr(listed, field)
            if entries is not None:
                data[wire] = list(entries)
        path = self.path(server)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    json.dump(data, file, separators=(",", ":"), default=str)
                os.replace(temporary, path)
            except BaseException:
                with suppress(OSError):
                    os.unlink(temporary)
                raise
        except (OSError, TypeError, ValueError) as exc:
            logger.warning("tool cache: cannot write %s: %s", path, exc)
            return False
        return True
