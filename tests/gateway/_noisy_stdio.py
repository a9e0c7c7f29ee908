"""A stdio gateway whose Agent factory prints to stdout: the protocol stream must stay clean.

Usage: ``python _noisy_stdio.py CONFIG``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio

from mcp_agent.assembly import open_agent
from mcp_agent.config import load_config
from mcp_agent.gateway.serve import serve
from mcp_agent.loop.agent import Agent


@asynccontextmanager
async def noisy(config: Any, *, state: Any) -> AsyncIterator[Agent]:
    print("a stray print while the tools start")
    sys.stdout.write("and a stray write\n")
    sys.stdout.flush()
    async with open_agent(config) as agent:
        print("another stray print once started")
        yield agent


if __name__ == "__main__":
    anyio.run(partial(serve, load_config(sys.argv[1]), stdio=True, factory=noisy))
