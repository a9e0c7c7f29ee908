"""The agent-framework snippets of docs/clients.md, and what the slow tier needs to run each of them.

Every framework has a block in docs/clients.md (found by its import line), a virtual environment of its own
(``.venv-frameworks/<name>``, made by ``make test-frameworks`` from the pins in
``tests/frameworks/<name>.txt``), and the few replacements that turn its Streamable HTTP snippet
into the SSE one (the page's table names them). ``code`` is the block as written, with only
those replacements: the port, the question, the transport and any setting a test varies.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = [
    textwrap.dedent(body)
    for _, language, body in re.findall(r"^( *)```(\w*)\n(.*?)^\1```", PAGE, flags=re.S | re.M)
    if language == "python"
]
SECTION = PAGE.split("## From agent frameworks", 1)[-1].split("\n## ", 1)[0].split("\n### ", 1)[0]
PAGE_PORT = "127.0.0.1:8765"
QUESTION = "Is anything listening on port 8765?"
FOLLOW_UP = "And on port 8000?"
SESSION_LINE = re.compile(r"^\[session_id: (\w+) \(pass it as session_id to continue this conversation\)\]$")


@dataclass(frozen=True)
class Framework:
    """One framework of the slow tier.

    Attributes:
        name: its virtual environment (``.venv-frameworks/<name>``) and pins (``<name>.txt``).
        package: the distribution whose pinned version the page's table must name.
        marker: the import line that only its block in docs/clients.md has.
        sse: (old, new) replacements that make the Streamable HTTP snippet an SSE one.
        text: whether the snippet prints the tool's text (the model sees the text, with the
            session line); else it prints ``answer`` from ``structuredContent``.
    """

    name: str
    package: str
    marker: str
    sse: tuple[tuple[str, str], ...]
    text: bool

    @property
    def python(self) -> Path:
        return ROOT / ".venv-frameworks" / self.name / "bin" / "python"

    @property
    def pins(self) -> Path:
        return Path(__file__).resolve().parent / f"{self.name}.txt"

    @property
    def version(self) -> str:
        """The pinned version of ``package``."""
        pins = self.pins.read_text(encoding="utf-8")
        return re.search(rf"^{re.escape(self.package)}==(\S+)$", pins, flags=re.M | re.I).group(1)  # type: ignore[union-attr]

    @property
    def snippet(self) -> str:
        """Its block in docs/clients.md: the one Python block with ``marker``."""
        [block] = [block for block in PYTHON_BLOCKS if self.marker in block]
        return block

    def code(self, port: int, transport: str, *changes: tuple[str, str]) -> str:
        """The snippet for ``transport`` ("http" or "sse") against ``127.0.0.1:port``, with
        ``changes`` too; every replacement must find its text."""
        code = self.snippet
        for old, new in (
            (PAGE_PORT, f"127.0.0.1:{port}"),
            *(self.sse if transport == "sse" else ()),
            *changes,
        ):
            assert old in code, f"the {self.name} snippet in docs/clients.md has no {old!r} any more"
            code = code.replace(old, new)
        return code


FRAMEWORKS = (
    Framework(
        "openai-agents",
        "openai-agents",
        "from agents.mcp import",
        (("MCPServerStreamableHttp", "MCPServerSse"), ('/mcp"', '/sse"')),
        text=True,
    ),
    Framework(
        "langchain-mcp-adapters",
        "langchain-mcp-adapters",
        "from langchain_mcp_adapters",
        (('"streamable_http"', '"sse"'), ('/mcp"', '/sse"')),
        text=True,
    ),
    Framework(
        "pydantic-ai-1",
        "pydantic-ai-slim",
        "from pydantic_ai.mcp import MCPServerStreamableHTTP",
        (("MCPServerStreamableHTTP", "MCPServerSSE"), ('/mcp"', '/sse"')),
        text=False,
    ),
    Framework(
        "pydantic-ai-2",
        "pydantic-ai-slim",
        "from pydantic_ai.mcp import MCPToolset",
        (('/mcp"', '/sse"'),),
        text=False,
    ),
    Framework(
        "smolagents",
        "smolagents",
        "from smolagents import MCPClient",
        (('"streamable-http"', '"sse"'), ('/mcp"', '/sse"')),
        text=True,
    ),
)
