"""Tool lists cached on disk, so the next start can offer a server's tools before it is up.

After a server has listed its tools, ``ToolCache.save`` writes what it listed (the tools as the
server sent them, before filtering and compiling) to ``<state dir>/tool-cache/<server>-<key>.json``
(atomically: a temporary file renamed over the old one; the folder 0700, the file 0600, see
``_paths``). ``ToolCache.load`` reads it back on the next start, when the server's configuration
still has the same ``cache_key``.

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
hash only: a cache file holds the key and the lists, never the configuration.

A cache only speeds up listing: it decides nothing about calls (``hub.py`` checks each call
against the server's live list). Reading it is bounded, since anyone who can write the state
folder can write it: a file larger than ``MAX_FILE_BYTES`` is not read past that, one with more
than ``MAX_CONTAINERS`` objects and arrays is not parsed, one nested deeper than ``MAX_DEPTH``
or listing more than ``MAX_CACHED_ENTRIES`` tools (or catalog entries) is refused, and so is
one that cannot be read or parsed: each with a warning naming the file, never an exception, and
the server then starts as without a cache. A file of another ``CACHE_VERSION`` is ignored
silently. Each is overwritten by the next save; lists that ``load`` would refuse are not saved.
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

from ..config import RemoteServerConfig, StdioServerConfig
from ..messages import JSONObject
from ..state.folder import private_dirs
from ._resolved import resolution

logger = logging.getLogger(__name__)

CACHE_VERSION = 2
"""Bumped when the file format or the meaning of a cached list changes: older files are ignored
(2: resources, resource templates and prompts)."""
MAX_CACHED_ENTRIES = 1000
"""The most tools, resources, resource templates or prompts of one server the cache holds: a
longer list is not cached (its server is asked at each start, as without a cache)."""
MAX_FILE_BYTES = 4 << 20
"""The largest cache file read (4 MiB). Real tool lists take 540 to 1,300 bytes a tool (the six
in ``tests/router/tool_lists/``), so the longest cacheable lists (1000 tools and 1000 of each
catalog list) fit with room to spare. A file past it is ignored unread."""
MAX_CONTAINERS = 100_000
"""The most objects and arrays a cache file may hold, counted (as ``{`` and ``[`` bytes, an upper
bound) before it is parsed: what bounds a parse's time and memory, since a file of tiny
containers (``[[],[],…]``) makes the parser build an object every three bytes. A real tool takes
a few dozen (its schema's objects), so the longest cacheable lists need well under half."""
MAX_DEPTH = 128
"""The deepest nesting of a cache file: the file's own four levels around a tool's input schema
plus more than the 100 levels the schema compiler keeps (``schema/_normalize.py``). Checked
without recursion; a file too deep for the JSON parser itself is ignored the same way."""

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
        ValueError: it is something else, or longer than ``MAX_CACHED_ENTRIES``.
    """
    value = data.get(wire)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(e, dict) and isinstance(e.get(key), str) for e in value
    ):
        raise ValueError(f"{wire!r} is not a list of objects with a {key!r}")
    if len(value) > MAX_CACHED_ENTRIES:
        raise ValueError(
            f"{wire!r} has {len(value)} entries, more than the {MAX_CACHED_ENTRIES} a cache holds"
        )
    return tuple(value)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether the parsed JSON ``value`` nests more than ``limit`` levels (iteratively: however
    deep it is, this takes no stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _parse(raw: bytes) -> Any:
    """The JSON of a cache file, within ``MAX_FILE_BYTES`` and ``MAX_DEPTH``.

    Raises:
        ValueError: it is larger, not UTF-8 JSON, or nested deeper.
    """
    refusal = _oversized(raw)
    if refusal is not None:
        raise ValueError(f"it is {refusal}")
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ValueError(f"it is nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(data, dict | list) and _deeper_than(data, MAX_DEPTH):
        raise ValueError(f"it is nested deeper than {MAX_DEPTH} levels")
    return data


def _oversized(raw: bytes) -> str | None:
    """Why the bytes of a cache file are too much to parse (None: they are not)."""
    if len(raw) > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES >> 20} MiB"
    containers = raw.count(b"{") + raw.count(b"[")
    if containers > MAX_CONTAINERS:
        return f"holding up to {containers} objects and arrays, more than {MAX_CONTAINERS}"
    return None


def _encoded(data: dict[str, Any]) -> bytes | str:
    """The file ``save`` writes for ``data``, or why it writes none: what ``load`` would refuse."""
    if len(data["tools"]) > MAX_CACHED_ENTRIES:
        return f"{len(data['tools'])} tools, more than {MAX_CACHED_ENTRIES}"
    if _deeper_than(data, MAX_DEPTH):
        return f"nested deeper than {MAX_DEPTH} levels"
    raw = json.dumps(data, separators=(",", ":"), default=str).encode("utf-8")
    return _oversized(raw) or raw


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
            with path.open("rb") as file:
                raw = file.read(MAX_FILE_BYTES + 1)  # no more: a larger file is not read whole
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("tool cache: cannot read %s: %s (ignored)", path, exc)
            return None
        try:
            data = _parse(raw)
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
            if len(tools) > MAX_CACHED_ENTRIES:
                raise ValueError(
                    f"it lists {len(tools)} tools, more than the {MAX_CACHED_ENTRIES} a cache holds"
                )
            if not isinstance(capabilities, dict):
                raise ValueError("'capabilities' is not an object")
            catalog = {field: _entries(data, wire, key) for field, wire, key in _CATALOG_FIELDS}
        except (ValueError, KeyError, TypeError) as exc:  # (a UnicodeDecodeError is a ValueError)
            logger.warning("tool cache: ignoring corrupt file %s: %s", path, exc)
            return None
        if data.get("key") != cache_key(config):
            return None  # the configuration (or the script) changed since
        return CachedList(tuple(tools), capabilities, **catalog)

    def save(self, server: str, config: StdioServerConfig | RemoteServerConfig, listed: CachedList) -> bool:
        """Write the lists ``server`` just gave; returns whether they were written.

        Lists that ``load`` would refuse (too many tools, nested too deep, a file too large) are
        not written, and an older entry of the server is removed: it is out of date.
        """
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
            text = _encoded(data)
            if isinstance(text, str):
                logger.info("tool cache: not caching the lists of %s (%s)", server, text)
                with suppress(FileNotFoundError):
                    path.unlink()
                return False
            private_dirs(self.folder)  # 0700; mkstemp's file is 0600
            fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(text)
                os.replace(temporary, path)
            except BaseException:
                with suppress(OSError):
                    os.unlink(temporary)
                raise
        except (OSError, TypeError, ValueError, RecursionError) as exc:
            logger.warning("tool cache: cannot write %s: %s", path, exc)
            return False
        return True
