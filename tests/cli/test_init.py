"""``mcp-agent init`` as a user runs it (real subprocesses, fake model servers on 127.0.0.1),
and its pure parts: where each client keeps its servers, how their entries are read."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_agent.cli.client_configs import convert_entry, import_servers, locations, read_jsonc, servers_in
from mcp_agent.cli.model_discovery import (
    DEFAULT_PORTS,
    Candidate,
    FoundServer,
    choose,
    lmstudio_tools,
    ollama_tools,
    ports_from,
)
from mcp_agent.config import RemoteServerConfig, StdioServerConfig, load_config
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.server_shapes import lmstudio_routes, ollama_routes, vllm_routes

from .test_main import run_cli

HOME = Path("/home/u")
HERE = Path("/work/project")


def closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def init(
    folder: Path, *args: str, ports: list[int], home: Path | None = None
) -> tuple[int, str, str, dict[str, Any] | None]:
    """``mcp-agent init ARGS`` in ``folder``, looking only at ``ports``; (exit, stdout, stderr, the file)."""
    home = home or folder / "home"
    done = run_cli(
        "init",
        *args,
        cwd=folder,
        env={
            "MCP_AGENT_INIT_PORTS": ",".join(map(str, ports)),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
        },
    )
    path = folder / "agent.json"
    written = json.loads(path.read_text()) if path.exists() else None
    return done.returncode, done.stdout, done.stderr, written


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        yield server


def _models(*names: str) -> Reply:
    return Reply.json({"object": "list", "data": [{"id": name, "object": "model"} for name in names]})


def _ollama(server: FakeModelServer, capabilities: dict[str, list[str]]) -> None:
    def show(request: RecordedRequest) -> Reply:
        return Reply.json({"capabilities": capabilities.get(request.json.get("model"), ["completion"])})

    server.routes.update(ollama_routes())
    server.routes["/api/show"] = show
    server.routes["/v1/models"] = _models(*capabilities)


# ------------------------------------------------------------------------------ the model


def test_ollama_model_that_takes_tools_is_chosen_and_the_file_loads(tmp_path, model):
    _ollama(
        model,
        {
            "nomic-embed-text:latest": ["embedding"],
            "gemma3:1b": ["completion"],
            "qwen3:8b": ["completion", "tools", "thinking"],
        },
    )
    code, out, err, written = init(tmp_path, ports=[closed_port(), model.port])
    assert code == 0, err
    assert written == {
        "llm": {"endpoint": f"{model.url}/v1", "model": "qwen3:8b"},
        "approvals": {"requireDestructive": True},
        "mcpServers": {},
    }
    assert f"model: qwen3:8b on Ollama at {model.url}/v1: Ollama's /api/show lists tools" in out
    assert "wait for your yes (approvals.requireDestructive true)" in out
    assert "next: mcp-agent doctor" in out
    config = load_config(tmp_path / "agent.json", environ={})  # the loader every command uses
    assert config.llm.model == "qwen3:8b" and config.approvals.gates_destructive()
    assert (tmp_path / "agent.json").stat().st_mode & 0o777 == 0o600


def test_ollama_without_a_model_that_takes_tools_says_what_to_pull(tmp_path, model):
    _ollama(model, {"gemma3:1b": ["completion"], "nomic-embed-text": ["embedding"]})
    code, out, _, written = init(tmp_path, ports=[model.port])
    assert code == 0
    assert written is not None and written["llm"] == {"endpoint": f"{model.url}/v1", "model": "qwen3:8b"}
    assert "serves no model that takes tools" in out
    assert "`ollama pull qwen3:8b`" in out


def test_lmstudio_capabilities_say_which_model_takes_tools(tmp_path, model):
    routes = lmstudio_routes()
    v0 = {
        "object": "list",
        "data": [
            {"id": "text-embedding-nomic", "type": "embeddings", "max_context_length": 2048},
            {"id": "gemma-3-1b", "type": "llm", "max_context_length": 8192, "capabilities": []},
            {"id": "qwen3-8b", "type": "llm", "max_context_length": 32768, "capabilities": ["tool_use"]},
        ],
    }
    routes["/api/v0/models"] = Reply.json(v0)
    model.routes.update(routes)
    model.routes["/v1/models"] = _models("text-embedding-nomic", "gemma-3-1b", "qwen3-8b")
    code, out, err, written = init(tmp_path, ports=[model.port])
    assert code == 0, err
    assert written is not None and written["llm"] == {"endpoint": f"{model.url}/v1", "model": "qwen3-8b"}
    assert "qwen3-8b on LM Studio" in out and "tools among its capabilities" in out


def test_a_server_that_does_not_tell_gets_its_model_and_doctor_is_named(tmp_path, model):
    model.routes.update(vllm_routes())
    code, out, _, written = init(tmp_path, ports=[model.port])
    assert code == 0
    assert written is not None and written["llm"] == {"endpoint": f"{model.url}/v1", "model": "Qwen/Qwen3-8B"}
    assert "vLLM does not say which models take tools (`mcp-agent doctor` checks" in out


def test_lemonade_is_found_under_its_api_v1(tmp_path, model):
    model.routes["/api/v1/models"] = _models("Qwen3-8B-GGUF")
    code, out, _, written = init(tmp_path, ports=[model.port])
    assert code == 0
    assert written is not None and written["llm"] == {
        "endpoint": f"{model.url}/api/v1",
        "model": "Qwen3-8B-GGUF",
    }
    assert "Lemonade Server" in out


def test_no_model_server_writes_ollamas_default_and_says_how_to_get_one(tmp_path):
    port = closed_port()
    code, out, _, written = init(tmp_path, ports=[port])
    assert code == 0
    assert written is not None and written["llm"] == {
        "endpoint": "http://127.0.0.1:11434/v1",
        "model": "qwen3:8b",
    }
    assert f"no model server answered on 127.0.0.1 (ports {port})" in out
    assert "`ollama serve` and `ollama pull qwen3:8b`" in out


# ------------------------------------------------------------------------------ the file


def test_an_existing_file_is_kept_without_force(tmp_path):
    (tmp_path / "agent.json").write_text('{"llm": {"model": "mine"}}')
    code, _, err, written = init(tmp_path, ports=[closed_port()])
    assert code == 2
    assert "agent.json exists already; nothing was written (mcp-agent init --force replaces it)" in err
    assert written == {"llm": {"model": "mine"}}
    code, _, err, written = init(tmp_path, "--force", ports=[closed_port()])
    assert code == 0, err
    assert written is not None and written["llm"]["model"] == "qwen3:8b"


def test_config_option_names_the_file_written(tmp_path):
    code, out, _, _ = init(tmp_path, "--config", "other.json", ports=[closed_port()])
    assert code == 0
    assert json.loads((tmp_path / "other.json").read_text())["approvals"] == {"requireDestructive": True}
    assert "next: mcp-agent doctor --config other.json" in out


def test_a_bad_port_list_is_a_usage_error(tmp_path):
    done = run_cli("init", cwd=tmp_path, env={"MCP_AGENT_INIT_PORTS": "11434,eleven"})
    assert done.returncode == 2
    assert "$MCP_AGENT_INIT_PORTS: 'eleven' is not a port" in done.stderr
    assert not (tmp_path / "agent.json").exists()


def test_ports_default_and_override():
    assert ports_from({}) == DEFAULT_PORTS == (11434, 1234, 8080, 8000, 13305)
    assert ports_from({"MCP_AGENT_INIT_PORTS": " 1, 2 "}) == (1, 2)
    with pytest.raises(ValueError, match="'0' is not a port"):
        ports_from({"MCP_AGENT_INIT_PORTS": "0"})


# ------------------------------------------------------------------------------ --from


CLAUDE = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/u/My $Docs"],
        },
        "memory": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-memory"],
            "env": {"K": "v"},
        },
        "broken": {"args": ["no command"]},
        "odd": "npx server",
    },
    "globalShortcut": "Ctrl+Space",
}


def test_from_claude_imports_its_servers_and_reports_what_it_skipped(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "Claude").mkdir(parents=True)
    (home / ".config" / "Claude" / "claude_desktop_config.json").write_text(json.dumps(CLAUDE))
    code, out, err, written = init(tmp_path, "--from", "claude", ports=[closed_port()])
    assert code == 0, err
    assert written is not None
    assert sorted(written["mcpServers"]) == ["filesystem", "memory"]
    assert "servers: filesystem, memory (from " in out
    assert "broken: skipped: mcpServers.broken.command: Field required" in out
    assert "odd: skipped: not an object (str)" in out
    config = load_config(tmp_path / "agent.json", environ={})
    assert config.servers()["filesystem"].args[-1] == "/home/u/My $Docs"  # a $ stays a $


def test_from_a_client_whose_config_is_missing_writes_nothing(tmp_path):
    code, _, err, written = init(tmp_path, "--from", "cursor", ports=[closed_port()])
    assert code == 2
    assert "init --from cursor: no Cursor config found (looked for " in err
    assert ".cursor/mcp.json" in err and written is None


def test_from_cursor_reads_the_users_then_the_projects_file(tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"a": {"command": "user-a"}, "b": {"url": "http://127.0.0.1:9/mcp"}}})
    )
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"a": {"command": "project-a"}}})
    )
    code, _, err, written = init(tmp_path, "--from", "cursor", ports=[closed_port()])
    assert code == 0, err
    assert written is not None
    assert written["mcpServers"] == {"a": {"command": "project-a"}, "b": {"url": "http://127.0.0.1:9/mcp"}}


def test_from_vscode_reads_servers_with_comments_and_its_variables(tmp_path):
    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode" / "mcp.json").write_text(
        """{
  // VS Code's own format: "servers", comments, trailing commas
  "inputs": [{"type": "promptString", "id": "token", "password": true}],
  "servers": {
    "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"], "envFile": "${workspaceFolder}/.env",},
    "github": {"type": "http", "url": "https://api.example.com/mcp/", "headers": {"Authorization": "Bearer ${input:token}"}},
    "files": {"command": "npx", "args": ["${workspaceFolder}/data"], "env": {"HOME_DIR": "${env:HOME}"}},
  },
}"""
    )
    code, out, err, written = init(tmp_path, "--from", "vscode", ports=[closed_port()])
    assert code == 0, err
    assert written is not None
    servers = written["mcpServers"]
    assert servers["time"] == {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}
    assert servers["files"]["args"] == [f"{tmp_path}/data"]
    assert servers["files"]["env"] == {"HOME_DIR": "${HOME}"}
    assert servers["github"]["headers"] == {"Authorization": "Bearer $${input:token}"}
    assert "time: dropped envFile (not agent.json keys; put the variables of envFile in env)" in out
    assert "github.headers.Authorization uses ${input:token}, which the client asks for" in out


def test_from_vscode_with_settings_but_no_servers_is_an_error(tmp_path) -> None:
    user = tmp_path / "Code" / "User"
    user.mkdir(parents=True)
    (user / "settings.json").write_text('{"editor.fontSize": 14}')
    imported = import_servers(
        "vscode", platform="linux", environ={"XDG_CONFIG_HOME": str(tmp_path)}, home=tmp_path, cwd=tmp_path
    )
    assert imported.servers == {}
    assert imported.problems == [f"no MCP servers in {user / 'settings.json'}"]


def test_from_a_path_reads_any_of_the_three_keys(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text('{"editor.fontSize": 14, "mcp": {"servers": {"t": {"command": "uvx"}}}}')
    code, _, err, written = init(tmp_path, "--from", str(settings), ports=[closed_port()])
    assert code == 0, err
    assert written is not None and written["mcpServers"] == {"t": {"command": "uvx"}}
    (tmp_path / "agent.json").unlink()
    (tmp_path / "empty.json").write_text('{"other": 1}')
    code, _, err, written = init(tmp_path, "--from", str(tmp_path / "empty.json"), ports=[closed_port()])
    assert code == 2 and written is None
    assert "no mcpServers, servers or mcp.servers object in it" in err
    code, _, err, _ = init(tmp_path, "--from", str(tmp_path / "missing.json"), ports=[closed_port()])
    assert code == 2 and "cannot read" in err


@pytest.mark.parametrize(
    ("client", "platform", "expected"),
    [
        ("claude", "darwin", ["/home/u/Library/Application Support/Claude/claude_desktop_config.json"]),
        ("claude", "win32", ["C:/Users/u/AppData/Roaming/Claude/claude_desktop_config.json"]),
        ("claude", "linux", ["/home/u/.config/Claude/claude_desktop_config.json"]),
        ("cursor", "linux", ["/home/u/.cursor/mcp.json", "/work/project/.cursor/mcp.json"]),
        (
            "vscode",
            "darwin",
            [
                "/home/u/Library/Application Support/Code/User/settings.json",
                "/home/u/Library/Application Support/Code/User/mcp.json",
                "/work/project/.vscode/mcp.json",
            ],
        ),
        (
            "vscode",
            "win32",
            [
                "C:/Users/u/AppData/Roaming/Code/User/settings.json",
                "C:/Users/u/AppData/Roaming/Code/User/mcp.json",
                "/work/project/.vscode/mcp.json",
            ],
        ),
        (
            "vscode",
            "linux",
            [
                "/home/u/.config/Code/User/settings.json",
                "/home/u/.config/Code/User/mcp.json",
                "/work/project/.vscode/mcp.json",
            ],
        ),
    ],
)
def test_where_each_client_keeps_its_servers(client: str, platform: str, expected: list[str]) -> None:
    environ = {"APPDATA": "C:/Users/u/AppData/Roaming"}
    found = locations(client, platform=platform, environ=environ, home=HOME, cwd=HERE)
    assert [path.as_posix() for path in found] == expected


def test_xdg_config_home_moves_the_linux_files() -> None:
    [path] = locations("claude", platform="linux", environ={"XDG_CONFIG_HOME": "/cfg"}, home=HOME, cwd=HERE)
    assert path.as_posix() == "/cfg/Claude/claude_desktop_config.json"


def test_jsonc_keeps_strings_whole() -> None:
    text = '{"url": "http://x/y", /* a */ "s": "a // b, }", // c\n "l": [1, 2,],}'
    assert read_jsonc(text) == {"url": "http://x/y", "s": "a // b, }", "l": [1, 2]}
    assert read_jsonc('{"q": "say \\"hi\\" // not a comment"}') == {"q": 'say "hi" // not a comment'}
    with pytest.raises(ValueError):
        read_jsonc("{nope}")


def test_servers_in_each_format() -> None:
    assert servers_in({"mcpServers": {"a": {}}}) == ({"a": {}}, "mcpServers")
    assert servers_in({"servers": {"a": {}}}) == ({"a": {}}, "servers")
    assert servers_in({"mcp": {"servers": {"a": {}}}}) == ({"a": {}}, "mcp.servers")
    assert servers_in({"mcp.servers": {"a": {}}}) == ({"a": {}}, "mcp.servers")
    assert servers_in([1]) == (None, "")


def test_entries_are_checked_by_agent_jsons_own_models() -> None:
    entry, notes = convert_entry("r", {"type": "sse", "url": "http://h/sse"}, home=HOME, folder=HERE)
    assert entry == {"type": "sse", "url": "http://h/sse"} and notes == []
    assert RemoteServerConfig.model_validate(entry).transport == "sse"
    entry, notes = convert_entry("s", {"command": "x", "args": "not a list"}, home=HOME, folder=HERE)
    assert entry is None and notes == ["s: skipped: mcpServers.s.args: Input should be a valid list"]
    entry, _ = convert_entry(
        "h", {"command": "${userHome}/bin/srv", "cwd": "${workspaceFolder}"}, home=HOME, folder=HERE
    )
    assert entry is not None
    assert StdioServerConfig.model_validate(entry).command == "/home/u/bin/srv"
    assert entry["cwd"] == "/work/project"


def test_import_servers_never_raises_for_a_file_that_is_not_json(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{'single': 'quotes'}")
    imported = import_servers(str(bad), platform=sys.platform, environ={}, home=tmp_path, cwd=tmp_path)
    assert imported.servers == {} and imported.problems and "not JSON" in imported.problems[0]


# ------------------------------------------------------------------------------ what servers tell


def test_what_ollama_and_lmstudio_tell_of_tools() -> None:
    assert ollama_tools({"capabilities": ["completion", "tools"]}) is True
    assert ollama_tools({"capabilities": ["completion"]}) is False
    assert ollama_tools({"modelfile": "..."}) is None  # an Ollama too old to say
    assert lmstudio_tools(
        {
            "data": [
                {"id": "a", "type": "llm", "capabilities": ["tool_use"]},
                {"id": "b", "type": "llm"},
                {"id": "e", "type": "embeddings"},
                "junk",
            ]
        }
    ) == {"a": True, "b": None, "e": False}


def test_choose_prefers_a_model_said_to_take_tools() -> None:
    server = FoundServer(1, "ollama", "http://127.0.0.1:1/v1", "")
    server.models = [Candidate("e", False, ""), Candidate("u", None, ""), Candidate("t", True, "")]
    assert choose(server) == Candidate("t", True, "")
    server.models = [Candidate("e", False, ""), Candidate("u", None, "")]
    assert choose(server) == Candidate("u", None, "")
    server.models = [Candidate("e", False, "")]
    assert choose(server) is None


def test_the_next_commands_are_written_as_the_command_was_typed() -> None:
    """After `make run`, `mcp-agent` is not on PATH: the commands init prints must run as shown."""
    from mcp_agent.cli.init import typed_program

    assert typed_program(".venv/bin/mcp-agent", None) == ".venv/bin/mcp-agent"
    assert typed_program("/usr/local/bin/mcp-agent", "/usr/local/bin/mcp-agent") == "mcp-agent"
    assert typed_program(".venv/bin/mcp-agent", "/elsewhere/mcp-agent") == ".venv/bin/mcp-agent"
    assert typed_program("/x/mcp_agent/__main__.py", None) == "mcp-agent"


def test_init_run_from_the_venv_prints_next_commands_that_run(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_AGENT_INIT_PORTS": "9", "PATH": "/usr/bin:/bin"}  # port 9: nothing answers
    program = Path(sys.executable).parent / "mcp-agent"
    done = subprocess.run(
        [str(program), "init"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"next: {program} doctor" in done.stdout


def test_from_a_claude_desktop_config_to_a_first_answer(tmp_path, model):
    """The newcomer's path of issue 24: a Claude Desktop config and a model server on this
    machine; `init --from claude`, then a query that calls one of the imported tools."""
    from tests.gateway.e2e import SERVERS, rule_reply

    _ollama(model, {"qwen3:8b": ["completion", "tools"]})
    model.handler = rule_reply
    home = tmp_path / "home"
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    entry = {"command": sys.executable, "args": [str(SERVERS / "echo.py")]}
    claude.write_text(json.dumps({"mcpServers": {"echo": entry}}))
    code, out, err, written = init(tmp_path, "--from", "claude", ports=[model.port], home=home)
    assert code == 0, err
    assert written is not None and written["mcpServers"] == {"echo": entry}
    assert 'then: mcp-agent query "What can you do?"' in out
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "MCP_AGENT_STATE_DIR": str(tmp_path / "state"),
    }
    done = run_cli("query", "echo hello from a new user", cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "echo__echo said: hello from a new user" in done.stdout
