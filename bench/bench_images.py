"""Benchmark: what images from tools cost on the way to the model.

Prints one JSON object, in milliseconds (median of a few rounds, and the best):

- ``extract``: ``content_images`` on one tool result holding one image of 100 kB, 1 MB and
  4 MB (the default ``maxMessageBytes``): base64 validation and type sniffing, run once per
  tool result on the event loop;
- ``request``: building and JSON-encoding one request body for a conversation of 10 rounds, each
  with a 1 MB screenshot (8 of them sent, the oldest 2 left out with a note), for each API, with
  ``vision`` on, against the same conversation with ``vision`` off (placeholders only); run on
  every model call.

    .venv/bin/python bench/bench_images.py
"""

from __future__ import annotations

import base64
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from mcp_agent.messages import Message, ToolCall
from mcp_agent.providers.anthropic import _wire as _anthropic_wire
from mcp_agent.providers.gemini import _wire as _gemini_wire
from mcp_agent.providers.history import fit_images
from mcp_agent.providers.openai._wire import to_openai_messages
from mcp_agent.providers.servers.endpoints import Capabilities
from mcp_agent.tools.presentation import content_images

PNG_HEAD = b"\x89PNG\r\n\x1a\n"


def png_b64(size: int) -> str:
    return base64.b64encode(PNG_HEAD + bytes(range(256)) * (size // 256)).decode()


def measure(fn: Callable[[], object], *, rounds: int = 15) -> dict[str, float]:
    fn()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(samples), 2), "best_ms": round(min(samples), 2)}


def conversation(rounds: int, image_bytes: int) -> list[Message]:
    [image] = content_images([{"type": "image", "data": png_b64(image_bytes), "mimeType": "image/png"}])
    messages = [
        Message.system("You are careful."),
        Message.user("Watch the screen and tell me when it changes."),
    ]
    for n in range(rounds):
        call = ToolCall(f"call_{n}", "screen__shot", {"display": 0})
        messages += [
            Message.assistant(f"Taking screenshot {n}.", [call]),
            Message.tool(
                call, f"screenshot {n}\n[image: image/png, {image_bytes / 1e6:.1f} MB]", images=[image]
            ),
        ]
    return messages


def body(api: str, messages: list[Message], vision: bool) -> str:
    fitted = fit_images(messages, enabled=vision)
    wire: Any
    if api == "openai":
        wire = to_openai_messages(fitted, Capabilities())
    elif api == "anthropic":
        wire = _anthropic_wire.to_anthropic_messages(fitted)
    else:
        wire = _gemini_wire.to_gemini_contents(fitted)
    return json.dumps(wire)


def main() -> None:
    results: dict[str, Any] = {"extract": {}, "request": {}}
    for size in (100_000, 1_000_000, 4_000_000):
        part = [{"type": "image", "data": png_b64(size), "mimeType": "image/png"}]
        results["extract"][f"{size // 1000}_kB"] = measure(lambda p=part: content_images(p))
    messages = conversation(10, 1_000_000)
    for api in ("openai", "anthropic", "gemini"):
        on, off = body(api, messages, True), body(api, messages, False)
        results["request"][api] = {
            "vision_on": {
                **measure(lambda a=api: body(a, messages, True)),
                "body_mb": round(len(on) / 1e6, 2),
            },
            "vision_off": {
                **measure(lambda a=api: body(a, messages, False)),
                "body_mb": round(len(off) / 1e6, 3),
            },
        }
    print(
        json.dumps(
            {
                "benchmark": "images",
                "unit": "milliseconds",
                "python": sys.version.split()[0],
                "machine": platform.machine(),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
