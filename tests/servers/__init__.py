"""Fixture MCP servers, each a real program; ``over_http`` runs one over Streamable HTTP (or SSE)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def over_http(
    script: str, *, env: dict[str, str] | None = None, timeout: float = 30, transport: str = "http"
) -> Iterator[str]:
    """``tests/servers/<script> TRANSPORT PORT`` in its own process, while the block runs; its MCP
    URL (``/mcp``, or ``/sse`` for ``transport="sse"``).

    Waits until the port answers (failing, not hanging, when the server exits or is not up within
    ``timeout``), and stops it on exit.
    """
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(HERE / script), transport, str(port)],
        cwd=HERE.parent.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert process.poll() is None, f"{script} exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{script} did not start listening") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}{'/sse' if transport == 'sse' else '/mcp'}"
    finally:
        process.terminate()
        process.wait(timeout=30)
