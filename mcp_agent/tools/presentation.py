"""What the model sees of the servers' tools: each tool as offered, each result as read back.

Offered: ``server_tool`` turns one listed MCP tool (wire JSON) into a ``ServerTool`` (or None:
skipped by ``allowTools``/``denyTools``, needing task-augmented execution, or with a schema that
cannot be compiled), ``cached_tools`` does it for a cached list; ``filter_warnings`` names the
``allowTools``/``denyTools`` globs that match none of the listed tools; ``assign_names`` gives
each tool its exposed name and ``exposed_specs`` its ``ToolSpec``. Read back: ``call_result``
turns a ``CallToolResult`` into the ``ToolResult`` the model reads, whose text
``content_to_text`` writes and whose images ``content_images`` picks.

No I/O but logging, and nothing of the MCP SDK but its types' names, so that the listing from
the cache alone (``cache.cached_listing``) does not load the SDK.
"""

from __future__ import annotations

import binascii
import fnmatch
import hashlib
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import RemoteServerConfig, StdioServerConfig
from ..config.globs import unmatched_globs
from ..messages import Image, JSONObject, ToolResult, ToolSpec
from .schema import CompiledSchema, compile_tool_schema

if TYPE_CHECKING:
    import mcp_types as types

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerTool:
    """A tool as its server offers it, after allow/deny and schema compilation, before naming.

    Attributes:
        server: the server's name.
        mcp_name: the tool's name on its server.
        description: the tool's description.
        schema: the compiled input schema.
        annotations: the MCP tool annotations, wire spelling (``readOnlyHint``...).
        title: the tool's title, or None.
        output_schema: the tool's ``outputSchema`` as the server sent it (the repair hides it
            from the SDK, see ``server/session.py``), or None when it sent none or not an object.
        input_schema: the tool's ``inputSchema`` as the server sent it (the same object, not a
            copy: big tool sets), or None when it sent none or not an object.
    """

    server: str
    mcp_name: str
    description: str
    schema: CompiledSchema
    annotations: Mapping[str, Any] = field(default_factory=dict)
    title: str | None = None
    output_schema: JSONObject | None = None
    input_schema: JSONObject | None = None


def tool_allowed(name: str, allow: Sequence[str] | None, deny: Sequence[str]) -> bool:
    """Whether ``allowTools``/``denyTools`` (fnmatch globs on MCP names) let a tool through."""
    if allow is not None and not any(fnmatch.fnmatchcase(name, pattern) for pattern in allow):
        return False
    return not any(fnmatch.fnmatchcase(name, pattern) for pattern in deny)


def filter_warnings(
    server: str, config: StdioServerConfig | RemoteServerConfig, names: Iterable[str]
) -> tuple[str, ...]:
    """One line per ``allowTools``/``denyTools`` glob of ``server`` that matches none of ``names``
    (the MCP names it listed), with the nearest names."""
    names = list(names)
    filters = (("allowTools", config.allow_tools or []), ("denyTools", config.deny_tools))
    return tuple(
        glob.describe(f"mcpServers.{server}.{key}")
        for key, patterns in filters
        for glob in unmatched_globs(patterns, names)
    )


def server_tool(
    server: str,
    config: StdioServerConfig | RemoteServerConfig,
    raw: JSONObject,
    *,
    name: str,
    description: str,
    task_required: bool = False,
) -> ServerTool | None:
    """A listed tool as offered by ``server``, or None when it is not offered.

    Args:
        raw: the tool as the server sent it (wire JSON, before the repair), whose
            ``inputSchema`` is compiled (and kept as sent) and whose ``annotations``, ``title``
            and ``outputSchema`` are kept.
        name, description: the tool's name and description (as the SDK read them, or as cached).
        task_required: it needs task-augmented execution (``execution.taskSupport: required``).
    """
    if task_required:
        logger.warning("%s: skipping tool %s: it requires task-augmented execution", server, name)
        return None
    if not tool_allowed(name, config.allow_tools, config.deny_tools):
        return None
    input_schema = raw.get("inputSchema")
    try:
        schema = compile_tool_schema(input_schema)
    except Exception:
        logger.exception("%s: skipping tool %s: its input schema could not be compiled", server, name)
        return None
    annotations = raw.get("annotations")
    title = raw.get("title")
    output_schema = raw.get("outputSchema")
    return ServerTool(
        server=server,
        mcp_name=name,
        description=description,
        schema=schema,
        annotations=dict(annotations) if isinstance(annotations, dict) else {},
        title=title if isinstance(title, str) and title else None,
        output_schema=dict(output_schema) if isinstance(output_schema, dict) else None,
        input_schema=input_schema if isinstance(input_schema, dict) else None,
    )


def cached_tools(
    server: str, config: StdioServerConfig | RemoteServerConfig, raws: Iterable[JSONObject]
) -> tuple[ServerTool, ...]:
    """The tools of a cached list (wire JSON, as the server sent them), filtered and compiled."""
    tools: list[ServerTool] = []
    for raw in raws:
        description = raw.get("description")
        execution = raw.get("execution")
        tool = server_tool(
            server,
            config,
            raw,
            name=str(raw["name"]),
            description=description if isinstance(description, str) else "",
            task_required=isinstance(execution, dict) and execution.get("taskSupport") == "required",
        )
        if tool is not None:
            tools.append(tool)
    return tuple(tools)


def call_result(result: types.CallToolResult, start: float) -> ToolResult:
    """The ToolResult of a call that started at ``start`` (``time.perf_counter()``)."""
    content = tuple(part.model_dump(by_alias=True, exclude_none=True, mode="json") for part in result.content)
    structured = result.structured_content
    return ToolResult(
        text=content_to_text(list(content), structured),
        is_error=bool(result.is_error),
        content=content,
        structured=structured,
        elapsed_ms=(time.perf_counter() - start) * 1000,
    )


# ----------------------------------------------------------------------- names
#
# Exposed tool names: what the model sees for each MCP tool (pure, no I/O).
#
# A tool ``read_file`` on server ``files`` is exposed as ``files__read_file``: ``<prefix>__<tool>``,
# where the prefix is the server's name unless its ``toolPrefix`` says otherwise (``""`` exposes
# the bare MCP name). Every exposed name matches ``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``, which OpenAI,
# Anthropic and Gemini all accept: other characters become ``_``, a leading digit or ``-`` gets a
# ``_`` in front, and a name longer than 64 characters is cut and given the first 8 hex digits of
# the SHA-1 of the whole name, so two long names never meet by being cut. Two tools that end up
# with the same name are told apart deterministically: the first by ``(server, mcp_name)`` keeps
# the name, every other gets an 8-hex suffix from its own ``server`` and ``mcp_name``, and a
# warning says so. The outcome depends only on the set of tools, never on the order in which the
# servers started.
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


# ----------------------------------------------------------------------- specs
#
# The tools the model is offered: servers' tools named and turned into ``ToolSpec``s (pure).
#
# ``exposed_specs`` gives each tool its exposed name (``assign_names``: the server's
# ``toolPrefix`` and the MCP name, collisions resolved) and its ``ToolSpec``; the hub offers them
# and routes calls by the names, and ``mcp-agent tools`` lists them from the cache alone.
def exposed_specs(
    tools: Sequence[ServerTool], configs: Mapping[str, StdioServerConfig | RemoteServerConfig]
) -> tuple[tuple[ToolSpec, ...], dict[str, tuple[str, str]], list[str]]:
    """``(specs, names, warnings)``: the specs in the order of ``tools``, each exposed name's
    ``(server, MCP name)``, and the naming warnings (collisions, cut names)."""
    names, warnings = assign_names(
        [NamedTool(t.server, t.mcp_name, configs[t.server].tool_prefix) for t in tools]
    )
    specs: list[ToolSpec] = []
    routes: dict[str, tuple[str, str]] = {}
    for tool in tools:
        exposed = names[(tool.server, tool.mcp_name)]
        specs.append(
            ToolSpec(
                name=exposed,
                description=tool.description,
                parameters=tool.schema.parameters,
                variants=dict(tool.schema.variants),
                server=tool.server,
                mcp_name=tool.mcp_name,
                changes=tuple(tool.schema.changes),
                annotations=dict(tool.annotations),
                timeout_seconds=configs[tool.server].call_timeout_seconds,
                title=tool.title,
                output_schema=tool.output_schema,
                input_schema=tool.input_schema,
            )
        )
        routes[exposed] = (tool.server, tool.mcp_name)
    return tuple(specs), routes, list(warnings)


# --------------------------------------------------------------------- content
#
# MCP tool-result content turned into the text a model reads (pure, no I/O).
#
# A ``tools/call`` result carries a list of content parts in MCP wire spelling: ``text``,
# ``image`` and ``audio`` (base64 ``data`` + ``mimeType``), ``resource_link`` (``uri``, ``name``,
# ``mimeType``, ``description``) and ``resource`` (an embedded ``resource`` with ``uri``,
# ``mimeType`` and ``text`` or ``blob``), plus an optional ``structuredContent``. Text goes to the
# model as it is; binary data never does: it is summarised by type and decoded size. Embedded text
# resources are inlined, capped. ``structuredContent`` is shown as compact JSON only when there is
# no text, because MCP servers already mirror structured output as text. Annotations are ignored,
# unknown parts are named by their type, and nothing here raises on odd input.
#
# ``content_images`` picks the images out of the same parts (``image`` parts, and embedded
# ``resource`` blobs whose type is an image) for models that read images: the text keeps its
# placeholder for each, so a model that cannot see them still knows they were there. Data that is
# not valid base64 is left out (one bad image must not make every later request of the
# conversation fail), and the declared type is corrected from the image's own first bytes (PNG,
# JPEG, GIF, WebP), since APIs refuse an image whose bytes contradict its type.
_MAX_FIELD_CHARS = 300  # names, uris and descriptions of summarised parts


def content_to_text(
    content: Sequence[JSONObject], structured: Any = None, *, max_resource_chars: int = 8000
) -> str:
    """Render a tool result's content for the model.

    Args:
        content: the result's ``content`` parts, as wire dicts.
        structured: the result's ``structuredContent``, if any.
        max_resource_chars: the most characters of one embedded text resource to inline; the
            rest is cut with a note. 0 means no cap.

    Returns:
        One text: the parts in order, one per line. ``""`` when there is nothing to show (the
        loop treats an empty result as a failure signal itself).
    """
    parts = content if isinstance(content, Sequence) and not isinstance(content, (str, bytes)) else []
    lines: list[str] = []
    has_text = False
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
            if isinstance(text, str) and text:
                lines.append(text)
                has_text = True
            continue
        rendered = _render_part(part, max_resource_chars)
        if rendered:
            lines.append(rendered)
    if structured is not None and not has_text:
        lines.append(_compact_json(structured))
    return "\n".join(lines)


def content_images(content: Sequence[JSONObject]) -> list[Image]:
    """The images among a tool result's content parts, in order.

    An ``image`` part, or an embedded ``resource`` with a ``blob`` and an ``image/*`` type,
    with base64 data that decodes. Whitespace in the data is removed; the type is the one the
    bytes show when they show one (``sniff_image_type``), else the declared one. Audio, links
    and text resources are not images; nothing here raises.
    """
    parts = content if isinstance(content, Sequence) and not isinstance(content, (str, bytes)) else []
    images: list[Image] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        source = part if part.get("type") == "image" else None
        if part.get("type") == "resource" and isinstance(part.get("resource"), dict):
            resource = part["resource"]
            source = {"data": resource.get("blob"), "mimeType": resource.get("mimeType")}
        if source is None:
            continue
        mime, data = source.get("mimeType"), source.get("data")
        if not isinstance(mime, str) or not mime.lower().startswith("image/") or not isinstance(data, str):
            continue
        if any(space in data for space in " \t\r\n"):
            data = "".join(data.split())
        try:
            head = binascii.a2b_base64(data, strict_mode=True)[:16] if data else b""
        except (binascii.Error, ValueError):
            continue
        if head:
            images.append(Image(sniff_image_type(head) or mime.lower(), data))
    return images


def sniff_image_type(head: bytes) -> str | None:
    """The image type that the first bytes of an image show (PNG, JPEG, GIF, WebP), or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _render_part(part: Any, max_resource_chars: int) -> str:
    if not isinstance(part, dict):
        return f"[unrecognised content part: {type(part).__name__}]"
    kind = part.get("type")
    if kind in ("image", "audio"):
        return _summary(str(kind), part.get("mimeType"), part.get("data"))
    if kind == "resource_link":
        return _resource_link(part)
    if kind == "resource":
        resource = part.get("resource")
        return _embedded(resource if isinstance(resource, dict) else {}, max_resource_chars)
    if isinstance(kind, str) and kind:
        return f"[{_clip(kind)} content]"
    return "[content part without a type]"


def _summary(kind: str, mime: Any, data: Any, uri: Any = None) -> str:
    """``[image: image/png, 4.0 kB]``: kind, then whichever of uri, mime type and size are known."""
    details = [_clip(str(v)) for v in (uri, mime) if isinstance(v, str) and v]
    if isinstance(data, str):
        details.append(format_size(base64_size(data)))
    return f"[{kind}: {', '.join(details)}]" if details else f"[{kind}]"


def _resource_link(part: JSONObject) -> str:
    uri = part.get("uri")
    head = f"[resource link: {_clip(uri) if isinstance(uri, str) and uri else '(no uri)'}"
    details = [_clip(v) for v in (part.get("name"), part.get("mimeType")) if isinstance(v, str) and v]
    if details:
        head += f" ({', '.join(details)})"
    description = part.get("description")
    if isinstance(description, str) and description:
        head += f" - {_clip(description)}"
    return head + "]"


def _embedded(resource: JSONObject, max_chars: int) -> str:
    uri, mime, text = resource.get("uri"), resource.get("mimeType"), resource.get("text")
    if isinstance(text, str):
        details = [_clip(v) for v in (uri, mime) if isinstance(v, str) and v]
        head = f"[resource: {', '.join(details)}]" if details else "[resource]"
        if max_chars > 0 and len(text) > max_chars:
            cut = len(text) - max_chars
            text = f"{text[:max_chars]}\n[... {cut} more characters of this resource not shown]"
        return f"{head}\n{text}"
    return _summary("resource", mime, resource.get("blob"), uri)


def base64_size(data: str) -> int:
    """The number of bytes that base64 text ``data`` decodes to (whitespace ignored)."""
    length = len(data) - sum(data.count(c) for c in " \t\r\n")
    padding = min(len(data.rstrip()) - len(data.rstrip().rstrip("=")), 2)
    return max(length * 3 // 4 - padding, 0)


def format_size(size: int) -> str:
    """``512 B``, ``3.9 kB``, ``1.2 MB`` (decimal units)."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_FIELD_CHARS else text[:_MAX_FIELD_CHARS] + "..."


def _compact_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):  # keys that are not strings, a value that contains itself
        return str(value)
