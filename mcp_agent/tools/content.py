"""MCP tool-result content turned into the text a model reads (pure, no I/O).

A ``tools/call`` result carries a list of content parts in MCP wire spelling: ``text``,
``image`` and ``audio`` (base64 ``data`` + ``mimeType``), ``resource_link`` (``uri``, ``name``,
``mimeType``, ``description``) and ``resource`` (an embedded ``resource`` with ``uri``,
``mimeType`` and ``text`` or ``blob``), plus an optional ``structuredContent``. Text goes to the
model as it is; binary data never does: it is summarised by type and decoded size. Embedded text
resources are inlined, capped. ``structuredContent`` is shown as compact JSON only when there is
no text, because MCP servers already mirror structured output as text. Annotations are ignored,
unknown parts are named by their type, and nothing here raises on odd input.

``content_images`` picks the images out of the same parts (``image`` parts, and embedded
``resource`` blobs whose type is an image) for models that read images: the text keeps its
placeholder for each, so a model that cannot see them still knows they were there. Data that is
not valid base64 is left out (one bad image must not make every later request of the
conversation fail), and the declared type is corrected from the image's own first bytes (PNG,
JPEG, GIF, WebP), since APIs refuse an image whose bytes contradict its type.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Sequence
from typing import Any

from ..messages import Image, JSONObject

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
