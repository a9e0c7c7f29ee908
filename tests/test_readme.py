"""README.md and the pages of docs/ stay true: every example in them is checked here, and a new
one needs a decision here. ``PAGES`` is README.md and every ``docs/*.md`` (not ``docs/_incoming``,
notes waiting to be folded in).

- Python blocks: every one compiles, and every one is run as written (the client example
  against a real gateway process, the library example in a real process), with the fake model
  server standing in for Ollama, once answering and once failing (the examples must say why).
  The agent-framework snippets (docs/clients.md) need their frameworks: the slow tier runs them
  (``tests/frameworks``, ``make test-frameworks``); here the versions the page names for them
  must be the pinned ones.
- Shell blocks, line by line: ``make X`` must be a Makefile target; a command of ours is written
  ``.venv/bin/mcp-agent`` (what ``make run`` leaves; a bare ``mcp-agent`` is not on PATH then) and
  parsed by the CLI's own parser, so every subcommand and option it uses exists, and
  ``--version``/``--help`` lines are run for real (the others would start servers or need a
  model). Install commands of other tools (pip, pipx, venv) and an MCP client's own set-up
  (``claude mcp add``) are not run: ``make test`` from a clean clone is their check. Any other
  kind of line fails until this file decides about it.
- JSON blocks: valid JSON (a fragment such as ``"mcpServers": {...}`` inside braces) and a
  valid agent.json, loaded by the real loader; a server whose command is ours is parsed by the
  CLI's parser too.
- Links between the pages lead to a page and a heading that exist; the README stays a short
  guide; docs/configuration.md names every key the loader accepts, and no other.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from mcp_agent.cli.main import _parser
from mcp_agent.config import AgentConfig, parse_config
from tests.fakes.model_server import RecordedRequest, Reply, running_model_server
from tests.frameworks.snippets import FRAMEWORKS, Framework
from tests.frameworks.snippets import SECTION as FRAMEWORKS_SECTION
from tests.gateway.conftest import free_port
from tests.gateway.e2e import rule_reply

ROOT = Path(__file__).resolve().parent.parent
PAGES = {
    path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
}
README = PAGES["README.md"]
BLOCKS = [
    (language, textwrap.dedent(body))
    for text in PAGES.values()
    for _, language, body in re.findall(r"^( *)```(\w*)\n(.*?)^\1```", text, flags=re.S | re.M)
]
PYTHON = [body for language, body in BLOCKS if language == "python"]
SHELL = [body for language, body in BLOCKS if language in ("sh", "bash", "shell", "console")]
JSON_BLOCKS = [body for language, body in BLOCKS if language == "json"]
CLIENT = next(body for body in PYTHON if "from mcp import Client" in body)
LIBRARY = next(body for body in PYTHON if "from mcp_agent import open_agent" in body)
ECHO = str(ROOT / "tests" / "servers" / "echo.py")


def test_the_two_commands_are_make_targets():
    section = README.split("## Two commands", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^(make [\w-]+)", section, flags=re.M)
    assert commands == ["make run", "make test"]  # exactly two: the slow tiers are under Development
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run:", makefile, flags=re.M) and re.search(r"^test:", makefile, flags=re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Python


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_every_python_block_compiles(index: int) -> None:
    compile(PYTHON[index], f"README.md, python block {index + 1}", "exec")


def test_every_python_block_is_run_below_or_in_the_slow_tier() -> None:
    frameworks = [framework.snippet for framework in FRAMEWORKS]
    assert sorted(PYTHON) == sorted([CLIENT, LIBRARY, *frameworks]), (
        "a new Python block in README.md or docs/: run it here"
    )


@pytest.mark.parametrize("framework", FRAMEWORKS, ids=[framework.name for framework in FRAMEWORKS])
def test_the_framework_table_names_the_pinned_versions(framework: Framework) -> None:
    assert f"({framework.version}" in FRAMEWORKS_SECTION, (
        f"README.md's frameworks table should name {framework.package} {framework.version}, as pinned"
    )


def _failing_model(request: RecordedRequest) -> Reply:
    if not request.path.endswith("/chat/completions"):
        return Reply.json({"object": "list", "data": [{"id": "rule-model", "object": "model"}]})
    return Reply.json({"error": {"message": "invalid api key", "type": "auth"}}, status=401)


def _config(folder: Path, model_url: str, **extra: object) -> Path:
    path = folder / "agent.json"
    config = {
        "llm": {"endpoint": model_url, "model": "rule-model", "stream": False, "maxRetries": 0},
        "mcpServers": {"echo": {"command": sys.executable, "args": [ECHO]}},
        **extra,
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "MCP_AGENT_STATE_DIR": str(tmp_path / "state")}


@contextlib.contextmanager
def _gateway(tmp_path: Path, model_url: str) -> Iterator[int]:
    """A real gateway process on a free port; yields the port once it answers health."""
    port = free_port()
    config = _config(tmp_path, model_url, gateway={"port": port})
    with subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config)],
        cwd=ROOT,
        env=_env(tmp_path),
        stderr=subprocess.DEVNULL,
    ) as gateway:
        try:
            deadline = time.monotonic() + 30  # a does-not-hang bound
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{port}/api/v1/health").status_code == 200:
                        break
                time.sleep(0.2)
            yield port
        finally:
            gateway.terminate()
            gateway.wait(timeout=20)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            rule_reply,
            ["answer: Is anything listening on port 8765?", "answer: How full is the root disk?"],
        ),
        (
            _failing_model,
            ["failed: Agent terminated (terminal_error): "] * 2,  # the reason, then the detail
        ),
    ],
    ids=["answers", "fails"],
)
def test_the_python_client_example_runs(
    tmp_path: Path, model: Callable[[RecordedRequest], Reply], expected: list[str]
) -> None:
    with running_model_server() as server:
        server.handler = model
        with _gateway(tmp_path, server.base_url) as port:
            code = CLIENT.replace("127.0.0.1:8765", f"127.0.0.1:{port}")
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(expected), done.stdout
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), line
        if model is _failing_model:
            assert "invalid api key" in line


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (rule_reply, "answer: Is port 8000 in use?"),
        (_failing_model, "Agent terminated (terminal_error): "),
    ],
    ids=["answers", "fails"],
)
def test_the_library_example_runs(
    tmp_path: Path, model: Callable[[RecordedRequest], Reply], expected: str
) -> None:
    with running_model_server() as server:
        server.handler = model
        _config(tmp_path, server.base_url)  # the example reads ./agent.json
        done = subprocess.run(
            [sys.executable, "-c", LIBRARY],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env=_env(tmp_path),
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(expected), done.stdout
    if model is _failing_model:
        assert "invalid api key" in done.stdout


# --------------------------------------------------------------------------------------------
# shell

OURS = {"mcp-agent", "mcp-gateway-agent"}  # in JSON: a client's "command", any path to ours
AFTER_MAKE_RUN = ".venv/bin/mcp-agent"  # how a shell line calls ours: make run puts nothing on PATH
INSTALLS = {"pip", "pipx", "python3"}  # set-up commands of other tools: not run here
REPLICAS = {  # "Running several replicas": the scale tier (tests/scale) runs README's haproxy.cfg itself
    ("sudo", "apt-get", "install", "-y", "redis-server", "haproxy"),
    ("haproxy", "-f", "haproxy.cfg"),
}


def _commands() -> list[list[str]]:
    commands = []
    for block in SHELL:
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                    words.pop(0)  # VAR=value before the command
                if words:
                    commands.append(words)
    return commands


COMMANDS = _commands()


def _our_arguments(words: list[str]) -> list[str] | None:
    if words[0] == AFTER_MAKE_RUN:
        return words[1:]
    python_m = words[:3] in (["python", "-m", "mcp_agent"], ["python3", "-m", "mcp_agent"])
    assert words[0] not in OURS and not python_m, (
        f"docs: {shlex.join(words)} fails after make run (exit 127: not on PATH); write {AFTER_MAKE_RUN} instead"
    )
    return None


def _parses(arguments: list[str]) -> None:
    try:
        _parser().parse_args(arguments)
    except SystemExit as exc:
        raise AssertionError(f"docs: mcp-agent {shlex.join(arguments)} is not a valid command line") from exc


def _bench_parses(path: str, arguments: list[str]) -> None:
    """A benchmark's command line, checked by the bench's own ``parse`` (every bench has one)."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    assert spec is not None and spec.loader is not None, f"docs: {path} does not exist"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.parse(arguments)
    except SystemExit as exc:
        raise AssertionError(f"docs: {path} {shlex.join(arguments)} is not a valid command line") from exc


@pytest.mark.parametrize("words", COMMANDS, ids=[shlex.join(words) for words in COMMANDS])
def test_every_shell_line(words: list[str]) -> None:
    arguments = _our_arguments(words)
    if words[0] == "make":
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        assert all(re.search(rf"^{re.escape(target)}:", makefile, flags=re.M) for target in words[1:])
    elif arguments is not None:
        if "--version" in arguments or "--help" in arguments:
            done = subprocess.run(
                [sys.executable, "-m", "mcp_agent", *arguments], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0 and done.stdout.startswith(("mcp-agent ", "usage: mcp-agent")), done
        else:
            _parses(arguments)
    elif words[:3] == ["claude", "mcp", "add"]:  # Claude Code's own set-up of the gateway
        assert words[-1] == "http://127.0.0.1:8765/mcp" and "--transport" in words, words
    elif words[0] == ".venv/bin/python" and words[1].startswith("bench/bench_"):
        _bench_parses(words[1], words[2:])
    elif tuple(words) in REPLICAS:
        assert any(language == "haproxy" for language, _ in BLOCKS), "README shows the haproxy.cfg it runs"
    else:
        assert words[0] in INSTALLS or words[0].endswith("/pip"), (
            f"docs: a shell line of a new kind ({shlex.join(words)}): decide in test_readme.py how to check it"
        )


INLINE = sorted(
    {
        span
        for text in PAGES.values()
        for span in re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
        if span.startswith(AFTER_MAKE_RUN + " ")
    }
)


@pytest.mark.parametrize("span", INLINE)
def test_every_command_in_the_text_parses(span: str) -> None:
    _parses(shlex.split(span)[1:])


def test_the_install_lines_install_this_project_not_a_namesake() -> None:
    installs = [words for words in COMMANDS if words[0] in ("pip", "pipx") or words[0].endswith("/pip")]
    ours = [words for words in installs if "install" in words and words[-1] == "."]
    assert ours, "the docs show how to install this project in its own environment"
    assert not any("mcp-agent" in words or "mcp_agent" in words for words in installs)


# --------------------------------------------------------------------------------------------
# JSON


@pytest.mark.parametrize("index", range(len(JSON_BLOCKS)))
def test_every_json_block_is_a_valid_config(index: int) -> None:
    body = JSON_BLOCKS[index].strip()
    data = json.loads(body if body.startswith("{") else "{" + body + "}")
    environ = {name: f"value-of-{name}" for name in re.findall(r"\$\{(\w+)", body)}
    parse_config(data, environ=environ)
    for server in data.get("mcpServers", {}).values():
        if Path(server.get("command", "")).name in OURS:
            _parses(server.get("args", []))


# --------------------------------------------------------------------------------------------
# the pages together


def test_the_readme_is_a_short_guide() -> None:
    lines = README.count("\n")
    assert lines <= 250, f"README.md has {lines} lines: it is the guide, the reference goes to docs/"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


LINKS = [
    (page, target)
    for page, text in PAGES.items()
    for target in re.findall(r"\]\(([^)\s]+)\)", text)
    if not re.match(r"[a-z]+:", target)  # https://..., mailto:: not ours to check offline
]


@pytest.mark.parametrize(("page", "target"), LINKS, ids=[f"{page}->{target}" for page, target in LINKS])
def test_every_link_between_the_pages_leads_somewhere(page: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (ROOT / page).parent / path if path else ROOT / page
    assert file.exists(), f"{page} links to {target}: no such file"
    if anchor:
        text = file.read_text(encoding="utf-8")
        outside_code = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        anchors = {_slug(heading) for heading in re.findall(r"^#+ (.+)$", outside_code, flags=re.M)}
        assert anchor in anchors, f"{page} links to {target}: {path or page} has no such heading"


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in typing.get_args(annotation) for model in _models_in(argument)]


def _keys(
    model: type[BaseModel], prefix: str = "", within: tuple[type[BaseModel], ...] = ()
) -> Iterator[tuple[str, bool]]:
    """Every key of agent.json the loader accepts under ``model``, as a dotted path (``<name>``
    for a name of the user's, ``[]`` for an entry of a list), with whether it holds more keys.
    A fallback entry takes the keys of ``llm`` itself, so a model within one of its own kind is
    not walked again; fields the loader fills in itself (``exclude``) are not keys of the file."""
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = f"{prefix}{field.alias or name}"
        inner = [sub for sub in _models_in(field.annotation) if not issubclass(sub, (*within, model))]
        yield key, bool(inner)
        shape = str(field.annotation)
        separator = ".<name>." if "dict[" in shape else "[]." if "list[" in shape else "."
        for sub in inner:
            yield from _keys(sub, key + separator, (*within, model))


ACCEPTED = dict(_keys(AgentConfig))
REFERENCE = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def _documented() -> set[str]:
    """The keys in the first column of the reference's tables: the first code span is a whole
    path, and each further one (``llm.requestTimeoutSeconds`` / ``connectTimeoutSeconds``) a
    sibling of it."""
    keys = set()
    for row in re.findall(r"^\| (.+?) \|", REFERENCE, flags=re.M):
        spans = re.findall(r"`([^`]+)`", row)
        if not spans or spans[0] == "key":
            continue
        parent = spans[0].rpartition(".")[0]
        keys.add(spans[0])
        keys.update(f"{parent}.{span}" if parent else span for span in spans[1:])
    return keys


def test_the_configuration_reference_names_every_key_the_loader_accepts() -> None:
    documented = _documented()
    missing = sorted(key for key, holds_more in ACCEPTED.items() if not holds_more and key not in documented)
    assert not missing, f"docs/configuration.md leaves out: {', '.join(missing)}"


def test_the_configuration_reference_names_no_key_the_loader_refuses() -> None:
    unknown = sorted(_documented() - set(ACCEPTED))
    assert not unknown, f"docs/configuration.md names keys the loader refuses: {', '.join(unknown)}"


# The tool lists these servers really publish (recorded in tests/tools/router/tool_lists/).
TOOL_LISTS = {
    "@modelcontextprotocol/server-filesystem": "filesystem.json",
    "@modelcontextprotocol/server-memory": "memory.json",
    "mcp-server-time": "time.json",
}
SERVER_ENTRIES = [
    server
    for body in JSON_BLOCKS
    for server in json.loads(body if body.strip().startswith("{") else "{" + body + "}")
    .get("mcpServers", {})
    .values()
    if server.get("allowTools") or server.get("denyTools")
]


@pytest.mark.parametrize(
    "server", SERVER_ENTRIES, ids=[" ".join(server.get("args", [])) for server in SERVER_ENTRIES]
)
def test_the_tools_an_example_names_exist_and_are_not_deprecated(server: dict[str, typing.Any]) -> None:
    [listed] = [name for package, name in TOOL_LISTS.items() if package in server.get("args", [])]
    recorded = json.loads(
        (ROOT / "tests" / "tools" / "router" / "tool_lists" / listed).read_text(encoding="utf-8")
    )
    tools = {tool["name"]: tool.get("description", "") for tool in recorded["tools"]}
    for glob in [*server.get("allowTools", []), *server.get("denyTools", [])]:
        matched = [name for name in tools if fnmatch.fnmatchcase(name, glob)]
        assert matched, f"{glob!r} names no tool of {listed} ({', '.join(tools)})"
        assert not any("DEPRECATED" in tools[name] for name in matched), f"{glob!r}: {matched} is deprecated"
