"""Real infrastructure on 127.0.0.1 for the scale-out tier: Debian's ``redis-server`` and
``haproxy``, and gateway replicas (``python -m mcp_agent serve``), each on a free loopback port.

Everything lives in a temporary folder of the test's (config files, logs, Redis's append-only
file): nothing is written to system folders, nothing listens beyond loopback, and ``stop()``
ends every process started here (a replica's tool servers included, even after the replica was
SIGKILLed). ``require(binary)`` skips a test when the program is missing, naming the command
that installs it; under ``CI=true`` it fails instead, so CI cannot pass by skipping.

    redis = RedisServer(folder).start()
    a, b = (Replica(folder, name, config).start() for name in "ab")
    balancer = HAProxy(folder, [a, b]).start()       # round-robin, health-checked, X-Served-By
    ...
    for thing in (balancer, a, b, redis): thing.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests._missing import missing

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "sudo apt-get install -y redis-server haproxy"
BOUND = 30.0
"""Seconds a process may take to come up or go down: a "does not hang" bound, not a timing."""


def require(binary: str) -> str:
    """The path of ``binary`` (``/usr/sbin`` too, where Debian puts haproxy).

    Skips the test when it is missing, with the command that installs it; fails instead when
    ``CI=true``: CI must run this tier, not skip it.
    """
    found = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}") if os.access(p, os.X_OK)), None
    )
    if found:
        return found
    missing(f"{binary} is not installed; install it with: {INSTALL}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], what: str | Callable[[], str], timeout: float = BOUND) -> None:
    """Poll ``check`` until it is true; fail naming ``what`` after ``timeout`` (does not hang).

    ``what`` may be a function, called only on failure: a process's log tail must be read then,
    not when the wait begins (it is empty then).
    """
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"{said}: not within {timeout:g} s")
        time.sleep(0.05)


def _end(process: subprocess.Popen[bytes] | None, others: Sequence[psutil.Process] = ()) -> None:
    """SIGTERM, wait, SIGKILL: ``process`` and then any of ``others`` still alive."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(BOUND)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(BOUND)
    alive = [p for p in others if p.is_running()]
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(alive, timeout=5)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=5)


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class RedisServer:
    """A ``redis-server`` on a free loopback port, its data and log in ``folder``.

    With ``persist`` (the default), append-only persistence (fsync on every write) in ``folder``,
    so a ``restart()`` shows what a Redis that went away still holds when it comes back, on the
    same port; without it, nothing is written to disk.
    """

    def __init__(self, folder: Path, *, persist: bool = True) -> None:
        self.binary = require("redis-server")
        self.folder = folder / "redis"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.persist = persist
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        config = self.folder / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {self.port}",
                    "protected-mode yes",
                    "daemonize no",
                    f"dir {self.folder}",
                    f"logfile {self.folder / 'redis.log'}",
                    'save ""',
                    f"appendonly {'yes' if self.persist else 'no'}",
                    "appendfsync always",
                    "",
                ]
            )
        )
        self.process = subprocess.Popen(
            [self.binary, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(
            self.answers,
            lambda: f"redis-server on port {self.port} (log: {_log_tail(self.folder / 'redis.log')})",
        )
        return self

    def answers(self) -> bool:
        """Whether it answers PING."""
        try:
            return self.command("PING") == b"+PONG\r\n"
        except OSError:
            return False

    def command(self, *words: str) -> bytes:
        """One command in the RESP protocol (no client library needed); the raw reply."""
        body = f"*{len(words)}\r\n" + "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in words)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(body.encode())
            return sock.recv(65536)

    def stop(self) -> None:
        _end(self.process)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


class Replica:
    """One gateway process: ``python -m mcp_agent serve --config CONFIG --port PORT [--stateless]``.

    ``config`` is the agent.json as a dict (written to the replica's own folder); its state folder
    (``$MCP_AGENT_STATE_DIR``) and its stderr log are its own too. Tool servers it spawns are
    remembered once it is healthy, so that ``stop()`` ends them even after a SIGKILL.
    """

    def __init__(self, folder: Path, name: str, config: dict[str, Any], *, stateless: bool = False) -> None:
        self.name = name
        self.folder = folder / f"replica-{name}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = config
        self.stateless = stateless
        self.process: subprocess.Popen[bytes] | None = None
        self.children: list[psutil.Process] = []
        self.log = self.folder / "stderr.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Replica:
        path = self.folder / "agent.json"
        path.write_text(json.dumps(self.config))
        command = [
            sys.executable,
            "-m",
            "mcp_agent",
            "serve",
            "--config",
            str(path),
            "--port",
            str(self.port),
        ]
        if self.stateless:
            command.append("--stateless")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_AGENT_STATE_DIR": str(self.folder / "state")}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
        wait_for(self.healthy, lambda: f"replica {self.name} on port {self.port}; its log:\n{self.tail()}")
        with contextlib.suppress(psutil.Error):
            self.children = psutil.Process(self.process.pid).children(recursive=True)
        return self

    def healthy(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"replica {self.name} exited; its log:\n{self.tail()}")
        try:
            return httpx.get(f"{self.url}/api/v1/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def tail(self, lines: int = 40) -> str:
        return _log_tail(self.log, lines)

    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown of its own (its tool servers are left behind
        until ``stop()``)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(BOUND)

    def stop(self) -> None:
        _end(self.process, self.children)


class HAProxy:
    """HAProxy on a free loopback port, round-robin over ``replicas`` (plain config, health
    checks on ``/api/v1/health``). Each response carries ``X-Served-By: <replica name>``; a
    request a dead replica refused is dispatched to another (``retries`` + ``redispatch``)."""

    def __init__(
        self,
        folder: Path,
        replicas: Sequence[Replica],
        *,
        config: str | None = None,
        backend: Sequence[str] = (),
    ) -> None:
        self.binary = require("haproxy")
        self.folder = folder / "haproxy"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.replicas = list(replicas)
        self.config = config
        """A config of one's own (its frontend must bind ``port``); ``config_text()`` when None."""
        self.backend = list(backend)
        """More lines for the backend of ``config_text()`` (stickiness, say)."""
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.folder / "stderr.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config_text(self) -> str:
        servers = [f"    server {r.name} 127.0.0.1:{r.port} check" for r in self.replicas]
        return "\n".join(
            [
                "global",
                "    maxconn 1024",
                "",
                "defaults",
                "    mode http",
                "    timeout connect 2s",
                "    timeout client 300s",
                "    timeout server 300s",
                "    timeout tunnel 300s",
                "    retries 3",
                "    option redispatch 1",
                "",
                "frontend gateway",
                f"    bind 127.0.0.1:{self.port}",
                "    default_backend replicas",
                "",
                "backend replicas",
                "    balance roundrobin",
                "    option httpchk",
                "    http-check send meth GET uri /api/v1/health ver HTTP/1.1 hdr Host 127.0.0.1",
                "    http-check expect status 200",
                "    default-server inter 500ms fall 2 rise 1",
                "    http-response set-header X-Served-By %s",
                *(f"    {line}" for line in self.backend),
                *servers,
                "",
            ]
        )

    def start(self) -> HAProxy:
        config = self.folder / "haproxy.cfg"
        config.write_text(self.config if self.config is not None else self.config_text())
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "-f", str(config), "-db"], stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        wait_for(
            self.all_up,
            lambda: (
                f"haproxy on port {self.port} with every replica up: {self._who_serves()}; "
                f"its log:\n{_log_tail(self.log)}"
            ),
        )
        return self

    def served_by(self) -> set[str]:
        """The replicas that answer a burst of health checks through the balancer."""
        names = set()
        with httpx.Client(base_url=self.url, timeout=5) as http:
            for _ in range(2 * len(self.replicas)):
                response = http.get("/api/v1/health")
                if response.status_code == 200:
                    names.add(response.headers.get("x-served-by", ""))
        return names

    def _who_serves(self) -> str:
        try:
            return f"served by {sorted(self.served_by())} of {sorted(r.name for r in self.replicas)}"
        except httpx.TransportError as exc:
            return f"not answering ({exc!r})"

    def all_up(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"haproxy exited; its log:\n{_log_tail(self.log)}")
        try:
            return self.served_by() == {r.name for r in self.replicas}
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        _end(self.process)
