"""MemoryToolSource: the ToolSource seam's own fake, serving plain Python functions in-process.

    tools = MemoryToolSource()
    tools.add("add", lambda a, b: str(a + b), parameters={
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]})

A function may be sync or async, takes the arguments as keyword arguments and returns a str or
a ToolResult. An exception becomes an error result, as a real server's failure would.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from ..messages import JSONObject, JSONSchema, ToolResult, ToolSpec


class MemoryToolSource:
    """A ToolSource over in-process functions. Records every call in ``calls``."""

    def __init__(self) -> None:
        self._tools: dict[str, tuple[ToolSpec, Callable[..., Any]]] = {}
        self.calls: list[tuple[str, JSONObject]] = []

    def add(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        description: str = "",
        parameters: JSONSchema | None = None,
        server: str = "memory",
        annotations: Mapping[str, Any] | None = None,
    ) -> None:
        spec = ToolSpec(
            name=name,
            description=description or (fn.__doc__ or "").strip(),
            parameters=parameters or {"type": "object", "properties": {}},
            server=server,
            mcp_name=name,
            annotations=dict(annotations or {}),
        )
        self._tools[name] = (spec, fn)

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def list_tools(self) -> Sequence[ToolSpec]:
        return [spec for spec, _ in self._tools.values()]

    async def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None
    ) -> ToolResult:
        self.calls.append((name, dict(arguments)))
        entry = self._tools.get(name)
        if entry is None:
            return ToolResult(f"unknown tool {name!r}", is_error=True)
        _, fn = entry
        start = time.perf_counter()
        try:
            with anyio.fail_after(timeout or None):
                value = fn(**arguments)
                if inspect.isawaitable(value):
                    value = await value
        except TimeoutError:
            return ToolResult(
                f"tool {name} timed out after {timeout:g} s",
                is_error=True,
                elapsed_ms=(time.perf_counter() - start) * 1000,
            )
        except Exception as exc:
            return ToolResult(
                f"Error executing tool {name}: {exc}",
                is_error=True,
                elapsed_ms=(time.perf_counter() - start) * 1000,
            )
        elapsed = (time.perf_counter() - start) * 1000
        if isinstance(value, ToolResult):
            return ToolResult(value.text, value.is_error, value.content, value.structured, elapsed)
        return ToolResult(str(value), elapsed_ms=elapsed)
