"""MCP servers imported from another client's config file, for ``mcp-agent init --from``.

Where each client keeps its servers, and under which key (``locations``; checked by each
client's documentation):

| ``--from`` | files, in the order read (a later file's server wins a name) | key |
|---|---|---|
| ``claude`` | Claude Desktop's ``claude_desktop_config.json``: macOS ``~/Library/Application Support/Claude/``, Windows ``%APPDATA%\\Claude\\``, Linux ``$XDG_CONFIG_HOME/Claude/`` (``~/.config``) | ``mcpServers`` |
| ``cursor`` | ``~/.cursor/mcp.json`` (every project), then ``.cursor/mcp.json`` in this folder | ``mcpServers`` |
| ``vscode`` | the user profile's ``settings.json`` (older VS Code: ``mcp.servers``) and ``mcp.json`` (``Code/User/`` under the folder above), then ``.vscode/mcp.json`` in this folder | ``servers`` |
| a path | that file | ``mcpServers``, ``servers`` or ``mcp.servers`` |

The files are read as JSON with comments and trailing commas (VS Code's files allow both).
Each entry becomes an ``mcpServers`` entry of agent.json (``convert_entry``, pure):

- the clients' variables become agent.json's: ``${env:NAME}`` → ``${NAME}``, ``${userHome}``
  and ``${workspaceFolder}`` → those folders; every other ``$`` is kept as written (``$$``),
  since agent.json expands ``${NAME}`` where the client did not. A ``${input:ID}`` (VS Code
  asks for it) is kept literally and reported: the user must put a value there.
- keys agent.json does not know (``envFile``, ``gallery``...) are dropped and reported;
- what is left is checked by agent.json's own models: an entry they refuse is skipped, and
  reported with the reason. Nothing is dropped without a line that says so.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..config import AgentConfig, RemoteServerConfig, StdioServerConfig
from ..config.load import Tagged, describe_errors, keys_of

__all__ = [
    "CLIENTS",
    "Imported",
    "convert_entry",
    "import_servers",
    "locations",
    "read_jsonc",
    "servers_in",
]

CLIENTS = ("claude", "cursor", "vscode")
_NAMES = {"claude": "Claude Desktop", "cursor": "Cursor", "vscode": "VS Code"}
_KNOWN_KEYS = frozenset(keys_of(StdioServerConfig)) | frozenset(keys_of(RemoteServerConfig))
_TAGGED: Tagged = {"mcpServers": {"stdio": StdioServerConfig, "remote": RemoteServerConfig}}
_VARIABLE = re.compile(r"\$\{(env:([A-Za-z_][A-Za-z0-9_]*)|userHome|workspaceFolder|input:[^}]*)\}|\$")


def _config_home(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    """Where applications keep their settings: macOS ``~/Library/Application Support``, Windows
    ``%APPDATA%``, else ``$XDG_CONFIG_HOME`` or ``~/.config``."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        return Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    return Path(environ.get("XDG_CONFIG_HOME") or home / ".config")


def locations(client: str, *, platform: str, environ: Mapping[str, str], home: Path, cwd: Path) -> list[Path]:
    """The files ``client`` keeps its servers in, in the order they are read (see the table)."""
    settings = _config_home(platform, environ, home)
    if client == "claude":
        return [settings / "Claude" / "claude_desktop_config.json"]
    if client == "cursor":
        return [home / ".cursor" / "mcp.json", cwd / ".cursor" / "mcp.json"]
    if client == "vscode":
        user = settings / "Code" / "User"
        return [user / "settings.json", user / "mcp.json", cwd / ".vscode" / "mcp.json"]
    raise ValueError(f"unknown client {client!r}")


def read_jsonc(text: str) -> Any:
    """JSON with ``//`` and ``/* */`` comments and trailing commas (VS Code's JSONC).

    Raises:
        ValueError: it is not JSON even so.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':  # a string, copied whole
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            if char in "}]":  # a trailing comma before it goes
                spaces = []
                while out and out[-1].isspace():
                    spaces.append(out.pop())
                if out and out[-1] == ",":
                    out.pop()
                out.extend(spaces)
            out.append(char)
            i += 1
    return json.loads("".join(out))


def servers_in(data: Any) -> tuple[Mapping[str, Any] | None, str]:
    """The servers object of a client's parsed file and the key it was under; (None, "") when
    the file has none."""
    if not isinstance(data, Mapping):
        return None, ""
    for key in ("mcpServers", "servers"):
        if isinstance(data.get(key), Mapping):
            return data[key], key
    mcp = data.get("mcp")
    if isinstance(mcp, Mapping) and isinstance(mcp.get("servers"), Mapping):
        return mcp["servers"], "mcp.servers"
    if isinstance(data.get("mcp.servers"), Mapping):  # a settings.json written with the dotted key
        return data["mcp.servers"], "mcp.servers"
    return None, ""


def _variables(value: str, *, home: Path, folder: Path, notes: list[str], where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        whole, env = match.group(0), match.group(2)
        if env:
            return f"${{{env}}}"
        if whole == "${userHome}":
            return str(home)
        if whole == "${workspaceFolder}":
            return str(folder)
        if whole.startswith("${input:"):
            notes.append(f"{where} uses {whole}, which the client asks for: write the value there")
        return "$" + whole  # kept as written: agent.json reads "$$" as "$"

    return _VARIABLE.sub(replace, value)


def _translate(value: Any, *, home: Path, folder: Path, notes: list[str], where: str) -> Any:
    if isinstance(value, str):
        return _variables(value, home=home, folder=folder, notes=notes, where=where)
    if isinstance(value, list):
        return [
            _translate(item, home=home, folder=folder, notes=notes, where=f"{where}[{i}]")
            for i, item in enumerate(value)
        ]
    if isinstance(value, Mapping):
        return {
            key: _translate(item, home=home, folder=folder, notes=notes, where=f"{where}.{key}")
            for key, item in value.items()
        }
    return value


def convert_entry(
    name: str, entry: Any, *, home: Path, folder: Path
) -> tuple[dict[str, Any] | None, list[str]]:
    """One client server entry as an agent.json ``mcpServers`` entry, and what to tell about it.

    Returns (the entry, notes), or (None, [why it was skipped]).
    """
    if not isinstance(entry, Mapping):
        return None, [f"{name}: skipped: not an object ({type(entry).__name__})"]
    notes: list[str] = []
    unknown = sorted(key for key in entry if key not in _KNOWN_KEYS)
    if unknown:
        notes.append(
            f"{name}: dropped {', '.join(unknown)} (not agent.json keys"
            + ("; put the variables of envFile in env" if "envFile" in unknown else "")
            + ")"
        )
    kept = {key: value for key, value in entry.items() if key in _KNOWN_KEYS}
    converted = _translate(kept, home=home, folder=folder, notes=notes, where=f"{name}")
    try:
        AgentConfig.model_validate({"mcpServers": {name: converted}})
    except ValidationError as exc:
        return None, [f"{name}: skipped: {describe_errors(AgentConfig, exc.errors(), _TAGGED)}"]
    return converted, notes


@dataclass
class Imported:
    """What ``import_servers`` found: the servers, the files read, and every note."""

    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Why nothing (or not everything) could be imported: no file, a file that is not JSON."""


def import_servers(
    source: str,
    *,
    platform: str,
    environ: Mapping[str, str] = os.environ,
    home: Path,
    cwd: Path,
) -> Imported:
    """The servers of ``source`` (``claude``, ``cursor``, ``vscode`` or a file's path). Never
    raises for what a file holds: ``problems`` and ``notes`` say it."""
    result = Imported()
    if source in CLIENTS:
        candidates = locations(source, platform=platform, environ=environ, home=home, cwd=cwd)
        files = [path for path in candidates if path.is_file()]
        if not files:
            tried = ", ".join(str(path) for path in candidates)
            result.problems.append(f"no {_NAMES[source]} config found (looked for {tried})")
    else:
        files = [Path(source).expanduser()]
    for path in files:
        try:
            data = read_jsonc(path.read_text(encoding="utf-8-sig"))
        except OSError as exc:
            result.problems.append(f"cannot read {path}: {exc.strerror or exc}")
            continue
        except (ValueError, UnicodeDecodeError) as exc:
            result.problems.append(f"{path}: not JSON: {exc}")
            continue
        servers, _ = servers_in(data)
        if servers is None:
            if source not in CLIENTS or path.name != "settings.json":  # most settings have no servers
                result.problems.append(f"{path}: no mcpServers, servers or mcp.servers object in it")
            continue
        result.files.append(path)
        folder = path.parent.parent if path.parent.name in (".vscode", ".cursor") else cwd
        for name, entry in servers.items():
            converted, notes = convert_entry(str(name), entry, home=home, folder=folder)
            result.notes.extend(notes)
            if converted is not None:
                result.servers[str(name)] = converted
    if files and not result.files and not result.problems:  # only settings without servers
        result.problems.append(f"no MCP servers in {', '.join(str(path) for path in files)}")
    return result
