"""Exposed tool names: what the model sees for each MCP tool (pure, no I/O).

A tool ``read_file`` on server ``files`` is exposed as ``files__read_file``: ``<prefix>__<tool>``,
where the prefix is the server's name unless its ``toolPrefix`` says otherwise (``""`` exposes
the bare MCP name). Every exposed name matches ``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``, which OpenAI,
Anthropic and Gemini all accept: other characters become ``_``, a leading digit or ``-`` gets a
``_`` in front, and a name longer than 64 characters is cut and given the first 8 hex digits of
the SHA-1 of the whole name, so two long names never meet by being cut. Two tools that end up
with the same name are told apart deterministically: the first by ``(server, mcp_name)`` keeps
the name, every other gets an 8-hex suffix from its own ``server`` and ``mcp_name``, and a
warning says so. The outcome depends only on the set of tools, never on the order in which the
servers started.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_NAME_LENGTH = 64
"""The longest name any provider accepts."""

SEPARATOR = "__"
"""Between the prefix and the MCP tool name."""

NAME_PATTERN = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
"""What every exposed name matches."""

_HASH_LENGTH = 8
_DISALLOWED = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class NamedTool:
    """One MCP tool to be named.

    Attributes:
        server: the server's name, as in ``mcpServers``.
        mcp_name: the tool's name on that server.
        prefix: the server's ``toolPrefix``; None means the server's name, ``""`` means none.
    """

    server: str
    mcp_name: str
    prefix: str | None = None


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LENGTH]


def _with_suffix(name: str, suffix: str) -> str:
    """``name`` + ``_`` + ``suffix``, cutting ``name`` so that the whole fits in 64 characters."""
    return f"{name[: MAX_NAME_LENGTH - len(suffix) - 1]}_{suffix}"


def sanitize(name: str) -> str:
    """Turn any string into a valid exposed name.

    Characters outside ``[A-Za-z0-9_-]`` become ``_`` (one per character, so ``a.b`` and ``a_b``
    meet: that is for :func:`assign_names` to resolve); a name that starts with a digit or ``-``,
    or is empty, gets a leading ``_``; a name over 64 characters is cut to 55 and given ``_`` plus
    8 hex digits of the SHA-1 of the original ``name``.

    Args:
        name: any string, such as ``"server__tool"``.

    Returns:
        A string matching :data:`NAME_PATTERN`. Equal inputs give equal outputs.
    """
    cleaned = _DISALLOWED.sub("_", name)
    if not cleaned or not (cleaned[0].isalpha() or cleaned[0] == "_"):  # cleaned is ASCII
        cleaned = "_" + cleaned
    if len(cleaned) > MAX_NAME_LENGTH:
        cleaned = _with_suffix(cleaned, _short_hash(name))
    return cleaned


def exposed_name(tool: NamedTool) -> str:
    """The name ``tool`` gets when nothing collides with it."""
    prefix = tool.server if tool.prefix is None else tool.prefix
    raw = f"{prefix}{SEPARATOR}{tool.mcp_name}" if prefix else tool.mcp_name
    return sanitize(raw)


def assign_names(tools: Sequence[NamedTool]) -> tuple[dict[tuple[str, str], str], list[str]]:
    """Give every tool a unique, valid exposed name.

    Args:
        tools: the tools of every server, in any order. A repeated ``(server, mcp_name)`` is named
            once (its first ``prefix`` wins) and reported.

    Returns:
        ``(names, warnings)``: ``names`` maps ``(server, mcp_name)`` to the exposed name, and the
        names are pairwise distinct; ``warnings`` are sentences for the log and for ``doctor``
        (collisions, cut names, repeated tools), in a stable order. The result depends only on
        the set of tools, not on their order.
    """
    warnings: list[str] = []
    unique: dict[tuple[str, str], NamedTool] = {}
    for tool in sorted(tools, key=lambda t: (t.server, t.mcp_name, t.prefix is None, t.prefix or "")):
        key = (tool.server, tool.mcp_name)
        if key in unique:
            if unique[key].prefix != tool.prefix:
                warnings.append(
                    f"tool {tool.mcp_name!r} of server {tool.server!r} is listed twice; named once"
                )
            continue
        unique[key] = tool

    wanted: dict[str, list[tuple[str, str]]] = {}
    for key, tool in unique.items():  # sorted by (server, mcp_name)
        name = exposed_name(tool)
        wanted.setdefault(name, []).append(key)
        prefix = tool.server if tool.prefix is None else tool.prefix
        if len(f"{prefix}{SEPARATOR}{tool.mcp_name}" if prefix else tool.mcp_name) > MAX_NAME_LENGTH:
            warnings.append(
                f"tool {tool.mcp_name!r} of server {tool.server!r}: name too long, exposed as {name!r}"
            )

    names: dict[tuple[str, str], str] = {}
    taken = set(wanted)
    for name, keys in wanted.items():
        winner, *losers = keys
        names[winner] = name
        for server, mcp_name in losers:
            seed = f"{server}\x00{mcp_name}"
            renamed = _with_suffix(name, _short_hash(seed))
            while renamed in taken:  # a clash with another tool's name: rehash until free
                seed += "\x00"
                renamed = _with_suffix(name, _short_hash(seed))
            taken.add(renamed)
            names[(server, mcp_name)] = renamed
            warnings.append(
                f"tool name collision: {name!r} is taken by tool {winner[1]!r} of server {winner[0]!r}; "
                f"tool {mcp_name!r} of server {server!r} is exposed as {renamed!r}"
            )
    return names, warnings
