"""MCP tool-result content turned into the text a model reads (pure, no I/O).

A ``tools/call`` result carries a list of content parts in MCP wire spelling: ``text``,
``image`` and ``audio`` (base64 ``data`` + ``mimeType``), ``resource_link`` (``uri``, ``name``,
``mimeType``, ``description``) and ``resource`` (an embedded ``resource`` with ``uri``,
``mimeType`` and ``text`` or ``blob``), plus an optional ``structuredContent``. Text goes to the
model as it is; binary data never does: it is summarised by type and decoded size. Embedded text
resources are inlined, capped. ``structuredContent`` is shown as compact JSON only when there is
no text, because MCP servers already mirror structured output as text. Annotations are ignored,
unknown parts are named by their type, and nothing here raises on odd input.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._types import JSONObject

_MAX_FIELD_CHARS = 300  # names, uris and descriptions of summarised parts


def content_to_text(content: Sequence[JSONObject], structured: Any = None, *, max_resource_chars: int = 8000) -> str:
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
