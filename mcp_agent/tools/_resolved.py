"""What a stdio server's command line resolves to on this machine, found without running it.

A cached tool list (``cache.py``) is only good for the program that listed it, and the
configuration alone does not say which program that is: ``npx -y pkg`` runs whichever version of
``pkg`` npm has fetched, ``python server.py`` whatever ``server.py`` holds now, ``my-server``
whatever binary ``PATH`` finds. ``resolution`` gathers what can be known cheaply (a few ``stat``
calls and small reads, no process, no network), and the cache key hashes it:

- the command as the child's ``PATH`` (or its ``cwd``, for a path) resolves it: real path, size,
  ``mtime_ns`` and inode, so an upgraded interpreter, runner or binary is a new key;
- the same identity for every argument that names an existing file (a server script);
- for a package runner (``npx``, ``bunx``, ``pnpx``, ``npm exec``, ``pnpm dlx``, ``yarn dlx``,
  ``bun x``; ``uvx``, ``uv tool run``; ``pipx run``): the package it runs and, unless the
  arguments pin an exact version (``pkg@1.2.3``, ``pkg==1.2.3``: the arguments are in the key
  already), every copy of it found where the runner takes it from without a registry:
  ``node_modules/<pkg>/package.json`` under the server's ``cwd`` and npm's npx cache
  (``$npm_config_cache/_npx/*/node_modules/<pkg>/package.json``, version and identity); uv's
  installed tool (``$UV_TOOL_DIR/<pkg>``: its receipt and ``dist-info``); pipx's venv of it and
  its ``pipx run`` cache (``dist-info`` names).

What cannot be known without running the runner: whether an unpinned ``npx``, ``uvx`` or
``pipx run`` asks the registry at this start and gets a newer version (npx does when npm's
metadata cache is stale, uvx with ``@latest`` or ``--refresh``), and which of uv's cached
ephemeral environments an unpinned ``uvx`` picks (their layout is uv's own business). Such an
upgrade shows when the server lists its tools: the list that differs replaces the cached one and
clients are told; and whatever the cache holds, calls are checked against the live list
(``hub.py``).

Everything here is bounded: at most ``MAX_SCANNED`` folders of a runner's cache are looked at, and
a ``package.json`` over ``MAX_MANIFEST_BYTES`` is identified by its file alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

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
