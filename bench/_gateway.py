"""A gateway in a process of its own for a benchmark: start it, wait until it serves, stop it.

The gateway benchmarks (``bench_gateway.py``, ``bench_scale.py``, ``bench_state.py``,
``bench_telemetry.py``) run the gateway as their own script in a hidden ``--serve`` mode, so that
the clients they measure do not share its event loop; ``bench_dashboard.py`` runs ``mcp-agent
serve``. ``GatewayProcess`` starts such a process on a loopback port (``PYTHONPATH`` set to the
repository, so it imports this checkout), waits until ``GET /api/v1/health`` says it serves, and
stops it with SIGTERM (SIGKILL when it does not exit in time), keeping its exit code and, when
asked for, what it printed.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GatewayProcess:
    """``python ARGS...`` serving a gateway on ``port``; started at once, not waited for.

    Args:
        args: the interpreter's arguments (the script and its ``--serve`` options, port included).
        port: the port the process serves on.
        env: the environment (default: this one); ``PYTHONPATH`` is set to the repository.
        capture_stdout: keep what the process prints (``stdout`` after ``stop``); else discarded.
        quiet: discard its stderr too (else it goes to this process's).
        cwd: the process's working directory (default: the repository: ``python -m`` puts the
            working directory first on the path, ahead of ``PYTHONPATH``, so a bench started from
            another checkout would otherwise run that checkout's code).
        name: the gateway's name, if it has one (HAProxy's name for a replica).
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        port: int,
        env: Mapping[str, str] | None = None,
        capture_stdout: bool = False,
        quiet: bool = False,
        cwd: Path | None = None,
        name: str = "",
    ) -> None:
        self.args = list(args)
        self.name = name
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.stdout = ""
        self.exit_code: int | None = None
        self._stopped = False
        self.process = subprocess.Popen(
            [sys.executable, *args],
            env={**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if quiet else None,
            cwd=ROOT if cwd is None else cwd,
            text=True,
        )

    def wait_ready(self, timeout: float = 60, *, all_up: bool = False) -> GatewayProcess:
        """Wait until health answers 200 (serving), or with ``all_up`` until it says ``ok``
        (every tool server up too).

        Raises:
            SystemExit: the process exited, or did not serve within ``timeout`` (it is stopped).
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                response = httpx.get(f"{self.url}/api/v1/health", timeout=2)
                if response.status_code == 200 and (not all_up or response.json().get("status") == "ok"):
                    return self
            except (httpx.TransportError, ValueError):
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                what = f"gateway {self.name}" if self.name else "the gateway"
                raise SystemExit(f"{what} did not start: {' '.join(self.args)}")
            time.sleep(0.05)

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code (None when it had to be killed).
        Stopping a stopped gateway does nothing."""
        if self._stopped:
            return self.exit_code
        self._stopped = True
        if self.process.poll() is None:
            self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=timeout)
            self.exit_code = self.process.returncode
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        self.stdout = out or ""
        return self.exit_code


@contextmanager
def serving(folder: Path, config: Mapping[str, Any], *, timeout: float = 180) -> Iterator[str]:
    """``mcp-agent serve`` of ``config`` (written to ``folder/agent.json``; its state in
    ``folder/state``), quiet, until every tool server is up; yields its base URL, stops it after."""
    import json

    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    port = free_port()
    gateway = GatewayProcess(
        ["-m", "mcp_agent", "serve", "--config", str(path), "--port", str(port)],
        port=port,
        env={**os.environ, "MCP_AGENT_STATE_DIR": str(folder / "state")},
        quiet=True,
    )
    try:
        gateway.wait_ready(timeout, all_up=True)
        yield gateway.url
    finally:
        gateway.stop()


class EchoOnceModel:
    """A zero-latency Provider for the gateway benchmarks: call ``tool`` with the query, then
    answer with its result."""

    def __init__(self, tool: str = "echo__echo") -> None:
        self.tool = tool
        self.ids = itertools.count()

    async def complete(self, request: Any, on_delta: Any = None) -> Any:
        from mcp_agent.messages import ToolCall, Usage
        from mcp_agent.providers.fake import text_turn, tool_turn

        last = request.messages[-1]
        usage = Usage(10, 5, 15)
        if last.role == "tool":
            return text_turn(f"echo: {last.content}", usage=usage)
        return tool_turn(ToolCall(f"c{next(self.ids)}", self.tool, {"text": last.content}), usage=usage)
