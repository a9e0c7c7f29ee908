"""The history as every wire sends it: which images go, which result answers which call (pure).

**Images.** Tools return images (``Message.images`` on tool messages; the text keeps a placeholder for
each). A provider sends them only when its model reads images: ``accepts_images`` resolves
``llm.vision`` (``auto``: by API and model name). Before each request ``fit_images`` decides
which images travel, so that the request stays within what every API takes:

- only PNG, JPEG, GIF and WebP (the types OpenAI, Anthropic and Gemini all accept);
- at most ``MAX_IMAGE_BYTES`` (5 MB, Anthropic's limit) per image;
- at most ``MAX_IMAGES_PER_MESSAGE`` (4) per tool result;
- at most ``MAX_REQUEST_IMAGES`` (8) and ``MAX_REQUEST_BYTES`` (10 MB decoded, about 13.3 MB of
  base64; Gemini takes 20 MB of request) per request, the newest kept.

An image left out gets a note at the end of its message's text (``[image 2 not sent: ...]``),
so the model knows it exists and why it cannot see it. With images off they are dropped
without notes: the placeholders say all there is. The transcript itself keeps every image, so a
later request (or a fallback model that reads images) can still send them.

**Tool results** for the native APIs (Anthropic, Gemini): paired with their calls and written
as text where a request may carry no tool blocks (``take_results``, ``stray_text``, below).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..config import LLMConfig
from ..messages import Image, Message, ToolCall, canonical_json
from .servers.endpoints import ProviderName

__all__ = [
    "MAX_IMAGES_PER_MESSAGE",
    "MAX_IMAGE_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_REQUEST_IMAGES",
    "NOT_RECORDED",
    "SUPPORTED_TYPES",
    "accepts_images",
    "call_text",
    "data_url",
    "fit_images",
    "image_label",
    "stray_text",
    "take_results",
    "vision_model",
]

SUPPORTED_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 5 * 1000 * 1000
MAX_IMAGES_PER_MESSAGE = 4
MAX_REQUEST_IMAGES = 8
MAX_REQUEST_BYTES = 10 * 1000 * 1000

_VISION_NAMES = re.compile(
    r"""
    ^(?:gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-4-turbo|gpt-4-vision|o1(?!-mini|-preview)|o3(?!-mini)|o4
      |claude-(?!2|instant)|gemini|grok-(?:2-vision|4)|llama-4)
    | llava | (?:^|[-_.\d])vl\d*(?![a-z]) | internvl | vlm | vision | minicpm-v | pixtral | moondream
    | llama-?4 | gemma-?3(?!n) | mistral-small-?3\.[12] | mistral-medium-3 | qwen\d(?:\.\d)?-omni | mllama
    | glm-4\.?\d*v | cogvlm | idefics | paligemma | phi-?4-multimodal
    """,
    re.IGNORECASE | re.VERBOSE,
)
_TEXT_ONLY_SIZES = re.compile(r"gemma-?3.*?(?:[-:_]|\b)(?:1b|270m)\b", re.IGNORECASE)


def vision_model(model: str) -> bool:
    """Whether a model name says the model reads images (``auto`` for OpenAI-compatible servers)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return bool(_VISION_NAMES.search(name)) and not _TEXT_ONLY_SIZES.search(name)


def accepts_images(llm: LLMConfig, provider: ProviderName) -> bool:
    """``llm.vision`` resolved: as set, or (``auto``) Gemini, Claude 3 and later, and models
    whose names say they read images (``vision_model``)."""
    if llm.vision != "auto":
        return llm.vision
    if provider == "gemini":
        return True
    if provider == "anthropic":
        return not re.match(r"claude-(?:2|instant)", llm.model.strip().lower())
    return vision_model(llm.model)


def data_url(image: Image) -> str:
    """The image as a ``data:`` URL (OpenAI-compatible ``image_url``)."""
    return f"data:{image.mime_type};base64,{image.data}"


def image_label(message: Message) -> str:
    """The text that introduces a tool result's images where they travel apart from it."""
    return f"[images returned by {message.name or 'a tool'}]"


def _size_text(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 100_000 else f"{size / 1000:.1f} kB"


def _own_problem(image: Image, index: int) -> str | None:
    if image.mime_type not in SUPPORTED_TYPES:
        return f"{image.mime_type} is not a type models read (PNG, JPEG, GIF, WebP)"
    if image.size > MAX_IMAGE_BYTES:
        return f"{_size_text(image.size)} is over the {_size_text(MAX_IMAGE_BYTES)} an image may have"
    if index >= MAX_IMAGES_PER_MESSAGE:
        return f"at most {MAX_IMAGES_PER_MESSAGE} images of one tool result are sent"
    return None


def fit_images(messages: Sequence[Message], *, enabled: bool) -> list[Message]:
    """The messages with only the images to send on them (see the module docstring).

    Args:
        messages: the conversation.
        enabled: the model reads images; when False every image is dropped, without notes.
    """
    if not any(message.images for message in messages):
        return list(messages)
    if not enabled:
        return [replace(m, images=()) if m.images else m for m in messages]
    out = list(messages)
    count = size = 0
    for position in range(len(out) - 1, -1, -1):  # newest first: they matter most
        message = out[position]
        if not message.images:
            continue
        kept: list[Image] = []
        notes: list[str] = []
        for index, image in enumerate(message.images):
            problem = _own_problem(image, index)
            if problem is None and count >= MAX_REQUEST_IMAGES:
                problem = f"a request carries at most {MAX_REQUEST_IMAGES} images, and newer ones came first"
            elif problem is None and size + image.size > MAX_REQUEST_BYTES:
                problem = (
                    f"a request carries at most {_size_text(MAX_REQUEST_BYTES)} of images, "
                    "and newer ones came first"
                )
            if problem is not None:
                notes.append(f"[image {index + 1} not sent: {problem}]")
                continue
            kept.append(image)
            count += 1
            size += image.size
        content = "\n".join([message.content, *notes]) if notes and message.content else "\n".join(notes)
        out[position] = replace(message, images=tuple(kept), content=content if notes else message.content)
    return out


# --------------------------------------------------------------------------------------------
# tool results for the native APIs (Anthropic, Gemini): pairing and text forms
#
# Both APIs want the results of one assistant turn together, right after it, one per call and in
# call order. ``take_results`` reads the ``tool`` messages that follow an assistant message and
# pairs each call with its result: a call without one gets an error result (``NOT_RECORDED``), and
# a result that answers no call of that turn (or repeats one) is returned apart, to be sent as text
# (``stray_text``). A request that offers no tools may carry no tool blocks at all, so earlier calls
# are then written as text too (``call_text``).

NOT_RECORDED = "not executed: no result was recorded"
"""The error result sent for a call that has no result in the history."""


def take_results(
    messages: Sequence[Message], start: int, calls: Sequence[ToolCall]
) -> tuple[list[tuple[ToolCall, Message]], list[Message], int]:
    """Pair ``calls`` with the ``tool`` messages from ``messages[start]`` on.

    Returns:
        Each call with its result (a synthesised ``NOT_RECORDED`` error when it has none), in
        call order; the results that answer no call (or repeat one), in the order they came; and
        the index of the first message after the results.
    """
    results: dict[str, Message] = {}
    stray: list[Message] = []
    i = start
    while i < len(messages) and messages[i].role == "tool":
        result = messages[i]
        i += 1
        known = any(c.id == result.tool_call_id for c in calls)
        if known and result.tool_call_id not in results:
            results[result.tool_call_id or ""] = result
        else:
            stray.append(result)
    missing = Message(role="tool", content=NOT_RECORDED, is_error=True)
    return [(call, results.get(call.id, missing)) for call in calls], stray, i


def call_text(call: ToolCall) -> str:
    """A tool call written as text, for a history sent without tools."""
    return f"[called {call.name} with {canonical_json(call.arguments)}]"


def stray_text(message: Message) -> str:
    """A tool result that answers no call, written as text."""
    label = message.name or message.tool_call_id or "tool"
    prefix = "error from" if message.is_error else "result of"
    return f"[{prefix} {label}]\n{message.content}"
