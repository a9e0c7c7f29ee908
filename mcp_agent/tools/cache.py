"""Tool lists cached on disk, so the next start can offer a server's tools before it is up.

After a server has listed its tools, ``ToolCache.save`` writes what it listed (the tools as the
server sent them, before filtering and compiling) to ``<state dir>/tool-cache/<server>-<key>.json``
(atomically: a temporary file renamed over the old one; the folder 0700, the file 0600, see
``state/folder.py``). ``ToolCache.load`` reads it back on the next start, when the server's configuration
still has the same ``cache_key``.

The same entry holds the server's resources, resource templates and prompts when it declared
them (listed after its start, see ``server/lists.py``), so the gateway can list those too while the
server starts. Each is absent when it is not known: the server does not offer it, has not
listed it yet, or has more than ``MAX_CACHED_ENTRIES`` of it (such a list is asked of the server
once it is up, as without a cache). It also holds the protocol version the server spoke (its
era: a handshake-era server is not probed with ``server/discover`` at its next start).

The key is a hash of everything that can change what the server lists: its command, args, cwd,
env names and values, url, transport and headers, its ``allowTools``/``denyTools``, and what the
command line resolves to on this machine (``resolution``, below): the identity (real path, size,
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

``cached_listing`` lists every server's tools from the cache alone (``mcp-agent tools`` on a warm
cache), starting nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..auth.token_store import TokenStore, login_hint
from ..config import RemoteServerConfig, StdioServerConfig
from ..messages import JSONObject, ToolSpec
from ..state.folder import private_dirs
from .presentation import ServerTool, cached_tools, exposed_specs
from .status import ServerStatus
from .stdio.processes import start_problem

logger = logging.getLogger(__name__)

CACHE_VERSION = 2
"""Bumped when the file format or the meaning of a cached list changes: older files are ignored
(2: resources, resource templates and prompts)."""
MAX_CACHED_ENTRIES = 1000
"""The most tools, resources, resource templates or prompts of one server the cache holds: a
longer list is not cached (its server is asked at each start, as without a cache)."""
MAX_FILE_BYTES = 4 << 20
"""The largest cache file read (4 MiB). Real tool lists take 540 to 1,300 bytes a tool (the six
in ``tests/tools/router/tool_lists/``), so the longest cacheable lists (1000 tools and 1000 of each
catalog list) fit with room to spare. A file past it is ignored unread."""
MAX_CONTAINERS = 100_000
"""The most objects and arrays a cache file may hold, counted (as ``{`` and ``[`` bytes, an upper
bound) before it is parsed: what bounds a parse's time and memory, since a file of tiny
containers (``[[],[],…]``) makes the parser build an object every three bytes. A real tool takes
a few dozen (its schema's objects), so the longest cacheable lists need well under half."""
MAX_DEPTH = 128
"""The deepest nesting of a cache file: the file's own four levels around a tool's input schema
plus more than the 100 levels the schema compiler keeps (``schema/normalize.py``). Checked
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
        protocol_version: the protocol version it spoke when it listed them (its era, so that
            the next start skips the probe of a handshake-era server: ``server/era.py``), or
            None when not known.
    """

    tools: tuple[JSONObject, ...]
    capabilities: JSONObject
    resources: tuple[JSONObject, ...] | None = None
    resource_templates: tuple[JSONObject, ...] | None = None
    prompts: tuple[JSONObject, ...] | None = None
    protocol_version: str | None = None


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
            version = data.get("protocolVersion")
            if version is not None and not isinstance(version, str):
                raise ValueError("'protocolVersion' is not a string")
        except (ValueError, KeyError, TypeError) as exc:  # (a UnicodeDecodeError is a ValueError)
            logger.warning("tool cache: ignoring corrupt file %s: %s", path, exc)
            return None
        if data.get("key") != cache_key(config):
            return None  # the configuration (or the script) changed since
        return CachedList(tuple(tools), capabilities, **catalog, protocol_version=version)

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
        if listed.protocol_version is not None:
            data["protocolVersion"] = listed.protocol_version
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


# ------------------------------------------------------------ listing from the cache
#
# The tools of every server read from the tool cache alone: ``mcp-agent tools`` on a warm cache.
#
# ``cached_listing`` answers what the hub would list before any server has started (each server
# ``idle``, its tools ``from_cache``), but starts nothing and loads nothing of the MCP SDK (about
# half a second of imports): it reads the cache files (above), filters, compiles and names the
# tools (``presentation.py``). When a server has no cached list for its
# configuration it returns None, and the caller opens the hub, which starts that server.
def cached_listing(
    servers: Mapping[str, StdioServerConfig | RemoteServerConfig],
    cache: ToolCache,
    tokens: Path | None = None,
) -> tuple[tuple[ToolSpec, ...], list[ServerStatus]] | None:
    """``(tools, statuses)`` from the cache, in configuration order; None when a server that is
    not disabled has no usable cached list. With the token folder ``tokens``, a server with an
    ``oauth`` login to be done by a person and no stored tokens is shown as needing a login."""
    tools: list[ServerTool] = []
    disabled: set[str] = set()
    versions: dict[str, str | None] = {}
    down: dict[str, str] = {}
    for name, config in servers.items():
        if config.disabled:
            disabled.add(name)
            continue
        cached = cache.load(name, config)
        if cached is None:
            return None
        versions[name] = cached.protocol_version
        if isinstance(config, StdioServerConfig) and (
            problem := start_problem(config.command, config.cwd, config.env)
        ):
            down[name] = problem  # it cannot start: its cached tools are not offered
            continue
        tools += cached_tools(name, config, cached.tools)
    specs, _, _ = exposed_specs(tools, servers)
    counts: dict[str, int] = {}
    for spec in specs:
        counts[spec.server] = counts.get(spec.server, 0) + 1
    statuses = [
        ServerStatus(name=name, status="disabled", lazy=config.lazy)
        if name in disabled
        else ServerStatus(
            name=name,
            status="failed" if name in down or needs_login(name, config, tokens) else "idle",
            error=down.get(name) or (login_hint(name) if needs_login(name, config, tokens) else None),
            tool_count=counts.get(name, 0),
            from_cache=True,
            lazy=config.lazy,
            protocol_version=versions.get(name),
        )
        for name, config in servers.items()
    ]
    return specs, statuses


def needs_login(name: str, config: StdioServerConfig | RemoteServerConfig, tokens: Path | None) -> bool:
    """Whether a person must log the server in first: it has ``oauth`` (not client credentials)
    and no tokens are stored for it in ``tokens`` (None: not known)."""
    if tokens is None or not isinstance(config, RemoteServerConfig) or config.oauth is None:
        return False
    return (
        config.oauth.grant == "authorization_code" and not TokenStore(name, config.url, tokens).has_tokens()
    )


# ------------------------------------------------------ what a command resolves to
#
# What a stdio server's command line resolves to on this machine, found without running it.
#
# A cached tool list is only good for the program that listed it, and the
# configuration alone does not say which program that is: ``npx -y pkg`` runs whichever version of
# ``pkg`` npm has fetched, ``python server.py`` whatever ``server.py`` holds now, ``my-server``
# whatever binary ``PATH`` finds. ``resolution`` gathers what can be known cheaply (a few ``stat``
# calls and small reads, no process, no network), and the cache key hashes it:
#
# - the command as the child's ``PATH`` (or its ``cwd``, for a path) resolves it: real path, size,
#   ``mtime_ns`` and inode, so an upgraded interpreter, runner or binary is a new key;
# - the same identity for every argument that names an existing file (a server script);
# - for a package runner (``npx``, ``bunx``, ``pnpx``, ``npm exec``, ``pnpm dlx``, ``yarn dlx``,
#   ``bun x``; ``uvx``, ``uv tool run``; ``pipx run``): the package it runs and, unless the
#   arguments pin an exact version (``pkg@1.2.3``, ``pkg==1.2.3``: the arguments are in the key
#   already), every copy of it found where the runner takes it from without a registry:
#   ``node_modules/<pkg>/package.json`` under the server's ``cwd`` and npm's npx cache
#   (``$npm_config_cache/_npx/*/node_modules/<pkg>/package.json``, version and identity); uv's
#   installed tool (``$UV_TOOL_DIR/<pkg>``: its receipt and ``dist-info``); pipx's venv of it and
#   its ``pipx run`` cache (``dist-info`` names).
#
# What cannot be known without running the runner: whether an unpinned ``npx``, ``uvx`` or
# ``pipx run`` asks the registry at this start and gets a newer version (npx does when npm's
# metadata cache is stale, uvx with ``@latest`` or ``--refresh``), and which of uv's cached
# ephemeral environments an unpinned ``uvx`` picks (their layout is uv's own business). Such an
# upgrade shows when the server lists its tools: the list that differs replaces the cached one and
# clients are told; and whatever the cache holds, calls are checked against the live list
# (``hub.py``).
#
# Everything here is bounded: at most ``MAX_SCANNED`` folders of a runner's cache are looked at, and
# a ``package.json`` over ``MAX_MANIFEST_BYTES`` is identified by its file alone.
Family = Literal["npm", "uv", "pipx"]

MAX_SCANNED = 256
"""The most folders of one runner's cache looked at (npx keeps one per package set it ran)."""
MAX_MANIFEST_BYTES = 1 << 20
"""The largest ``package.json`` whose version is read."""
_PASSED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What the child inherits from us (``mcp.client.stdio.get_default_environment``), under its ``env``."""

_NPM_RUNNERS = {"npx", "pnpx", "bunx"}
_NPM_SUBCOMMANDS = {"npm": "exec", "pnpm": "dlx", "yarn": "dlx", "bun": "x"}
_NPM_VALUED = {
    "-p",
    "--package",
    "-c",
    "--call",
    "--registry",
    "--cache",
    "--userconfig",
    "-w",
    "--workspace",
}
_UV_VALUED = {
    "--from",
    "--with",
    "-w",
    "--with-editable",
    "--with-requirements",
    "--python",
    "-p",
    "--index",
    "--index-url",
    "--default-index",
    "--extra-index-url",
    "-c",
    "--constraints",
    "--overrides",
    "--env-file",
    "--directory",
    "--project",
    "--cache-dir",
    "--config-file",
}
_PIPX_VALUED = {"--spec", "--python", "--pip-args", "--index-url", "-i", "--backend"}
_NPM_EXACT = re.compile(r"^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$")
_PY_EXACT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?\s*(?:==|@)\s*v?\d[0-9A-Za-z.+!-]*$")


def child_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the server's process gets: ours, reduced as the stdio client does, plus
    its configured ``env``."""
    return {name: os.environ[name] for name in _PASSED_ENV if name in os.environ} | dict(env)


def file_identity(path: Path) -> list[Any] | None:
    """``[real path, size, mtime_ns, inode]`` of a regular file, or None when there is none."""
    try:
        real = path.resolve()
        stat = real.stat()
    except (OSError, RuntimeError):
        return None
    if not real.is_file():
        return None
    return [str(real), stat.st_size, stat.st_mtime_ns, stat.st_ino]


def resolve_command(command: str, env: Mapping[str, str], cwd: str | None) -> Path | None:
    """The file ``command`` runs, as ``execvp`` in the child would find it (None: not found)."""
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command)
        return path if path.is_absolute() or cwd is None else Path(cwd) / path
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    return Path(found) if found else None


def _runner(command: str, args: Sequence[str]) -> tuple[Family, Sequence[str]] | None:
    """The package runner ``command`` is, and its arguments from the package on; None otherwise."""
    name = Path(command).name.lower().removesuffix(".exe").removesuffix(".cmd")
    if name in _NPM_RUNNERS:
        return "npm", args
    if name in _NPM_SUBCOMMANDS and list(args[:1]) == [_NPM_SUBCOMMANDS[name]]:
        return "npm", args[1:]
    if name == "uvx":
        return "uv", args
    if name == "uv" and list(args[:2]) in (["tool", "run"], ["tool", "uvx"]):
        return "uv", args[2:]
    if name == "pipx" and list(args[:1]) == ["run"]:
        return "pipx", args[1:]
    return None


def package_spec(command: str, args: Sequence[str]) -> tuple[Family, str] | None:
    """``(family, spec)``: the package a runner command line runs (``@scope/pkg@1``, ``pkg==2``),
    or None when ``command`` is not a package runner or names no package."""
    runner = _runner(command, args)
    if runner is None:
        return None
    family, rest = runner
    valued, chosen = {"npm": _NPM_VALUED, "uv": _UV_VALUED, "pipx": _PIPX_VALUED}[family], None
    explicit = {"npm": ("-p", "--package"), "uv": ("--from",), "pipx": ("--spec",)}[family]
    index = 0
    while index < len(rest):
        arg = rest[index]
        if arg == "--":  # what follows is the command line to run: its first word, unless chosen
            return (family, chosen or rest[index + 1]) if chosen or index + 1 < len(rest) else None
        option, equals, value = arg.partition("=")
        if equals and option in explicit:
            chosen = chosen or value
        elif arg in explicit and index + 1 < len(rest):
            chosen = chosen or rest[index + 1]
            index += 1
        elif arg in valued:
            index += 1
        elif not arg.startswith("-"):
            return family, chosen or arg
        index += 1
    return (family, chosen) if chosen else None


def is_pinned(family: Family, spec: str) -> bool:
    """Whether ``spec`` names one exact version (then the arguments, in the key, say it all)."""
    if family == "npm":
        name, _, version = spec.rpartition("@")
        return bool(name) and name != "@" and bool(_NPM_EXACT.match(version))
    return bool(_PY_EXACT.match(spec.strip()))


def package_name(family: Family, spec: str) -> str:
    """The package's name in ``spec``: without its version (npm) or extras and specifiers (Python)."""
    if family == "npm":
        name, at, _ = spec.rpartition("@")
        return name if at and name and name != "@" else spec
    if family == "uv" and ("://" in spec or spec.startswith(("git+", "/", "."))):
        return spec  # a URL or a path: found by no name
    return re.split(r"[\[<>=!~@;\s]", spec.strip(), maxsplit=1)[0]


def _python_key(name: str) -> str:
    """A Python distribution name as its ``dist-info`` folder spells it, lower-cased."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _npm_manifest(path: Path) -> list[Any] | None:
    """The identity of ``package.json`` at ``path`` and the version it declares (when small)."""
    identity = file_identity(path)
    if identity is None:
        return None
    version: Any = None
    if identity[1] <= MAX_MANIFEST_BYTES:
        try:
            data = json.loads(path.read_bytes())
            version = data.get("version") if isinstance(data, dict) else None
        except (OSError, ValueError, RecursionError):
            version = None
    return [*identity, version if isinstance(version, str) else None]


def _folders(parent: Path) -> list[Path]:
    """At most ``MAX_SCANNED`` entries of ``parent``, by name (none when it is missing)."""
    try:
        with os.scandir(parent) as entries:
            names = [entry.name for _, entry in zip(range(4 * MAX_SCANNED), entries, strict=False)]
    except OSError:
        return []
    return [parent / name for name in sorted(names)[:MAX_SCANNED]]


def _dist_infos(prefix: Path, name: str) -> list[str]:
    """The ``dist-info`` folders of ``name`` in the Python environment at ``prefix`` (one
    ``scandir`` of each ``site-packages``)."""
    key = _python_key(name)
    found: list[str] = []
    for site in [*sorted(prefix.glob("lib/python*/site-packages")), prefix / "Lib" / "site-packages"]:
        try:
            with os.scandir(site) as entries:
                for entry in entries:
                    stem = entry.name.removesuffix(".dist-info")
                    if stem != entry.name and _python_key(stem.rpartition("-")[0]) == key:
                        found.append(entry.name)
        except OSError:
            continue
    return sorted(found)


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def _npm_copies(name: str, env: Mapping[str, str], cwd: str | None) -> dict[str, Any]:
    cache = env.get("npm_config_cache") or env.get("NPM_CONFIG_CACHE") or str(_home(env) / ".npm")
    copies: dict[str, Any] = {}
    local = _npm_manifest(Path(cwd or ".") / "node_modules" / name / "package.json")
    if local is not None:
        copies["local"] = local
    for folder in _folders(Path(cache) / "_npx"):
        manifest = _npm_manifest(folder / "node_modules" / name / "package.json")
        if manifest is not None:
            copies[f"npx/{folder.name}"] = manifest
    return copies


def _uv_copies(name: str, env: Mapping[str, str]) -> dict[str, Any]:
    data = env.get("XDG_DATA_HOME") or str(_home(env) / ".local" / "share")
    tool = Path(env.get("UV_TOOL_DIR") or Path(data) / "uv" / "tools") / _python_key(name).replace("_", "-")
    receipt = file_identity(tool / "uv-receipt.toml")
    if receipt is None:
        return {}
    return {"tool": [*receipt, _dist_infos(tool, name)]}


def _pipx_copies(name: str, env: Mapping[str, str]) -> dict[str, Any]:
    home = Path(env.get("PIPX_HOME") or _home(env) / ".local" / "share" / "pipx")
    copies: dict[str, Any] = {}
    venv = _dist_infos(home / "venvs" / _python_key(name).replace("_", "-"), name)
    if venv:
        copies["venv"] = venv
    for folder in _folders(home / ".cache"):
        found = _dist_infos(folder, name)
        if found:
            copies[f"run/{folder.name}"] = found
    return copies


def resolution(command: str, args: Sequence[str], env: Mapping[str, str], cwd: str | None) -> dict[str, Any]:
    """What the command line resolves to (see the module docstring), JSON-ready for a hash.

    Args:
        command, args, env, cwd: the server's configuration (``env`` as configured: ours is
            added as the child would get it).
    """
    child = child_environment(env)
    executable = resolve_command(command, child, cwd)
    files: dict[str, Any] = {}
    for arg in args:
        if arg.startswith("-") or len(arg) > 4096 or "\x00" in arg:
            continue
        path = Path(arg)
        identity = file_identity(path if path.is_absolute() or cwd is None else Path(cwd) / path)
        if identity is not None:
            files[arg] = identity
    result: dict[str, Any] = {
        "command": file_identity(executable) if executable is not None else None,
        "files": files,
    }
    spec = package_spec(command, args)
    if spec is not None:
        family, text = spec
        package: dict[str, Any] = {"family": family, "spec": text}
        if not is_pinned(family, text):
            name = package_name(family, text)
            if family == "npm":
                package["copies"] = _npm_copies(name, child, cwd)
            elif family == "uv":
                package["copies"] = _uv_copies(name, child)
            else:
                package["copies"] = _pipx_copies(name, child)
        result["package"] = package
    return result
