"""agent.json loading: env expansion, unknown keys, server kinds, serversDir, limits."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from mcp_agent.config import (
    DEFAULT_SYSTEM_PROMPT,
    AgentConfig,
    Limits,
    RemoteServerConfig,
    StdioServerConfig,
    load_config,
    parse_config,
)
from mcp_agent.config.load import expand_env
from mcp_agent.exceptions import ConfigError

# A config file as Claude Desktop writes it, copied as is (with keys we do not know).
CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Berlin"]},
        "github": {
            "command": "docker",
            "args": [
                "run",
                "-i",
                "--rm",
                "-e",
                "GITHUB_PERSONAL_ACCESS_TOKEN",
                "ghcr.io/github/github-mcp-server",
            ],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_xxx"},
        },
    },
    "globalShortcut": "Ctrl+Space",
    "preferences": {"menuBarEnabled": False},
}


def test_defaults_are_the_documented_ones():
    config = parse_config({})
    assert config.llm.endpoint == "http://localhost:11434/v1"
    assert config.llm.provider == "auto"
    assert config.limits == Limits(
        max_rounds=10,
        max_tokens=100_000,
        max_tool_calls=50,
        timeout_seconds=240,  # below the 300 s read timeout of many MCP clients (issue 9)
        tool_timeout_seconds=60,
        max_result_chars=16_000,
        max_history_chars=80_000,
        max_parallel_tools=4,
        loop_threshold=3,
        failure_hint_after=2,
        disable_tool_after=3,
        early_stop=False,
    )
    assert config.gateway.host == "127.0.0.1"
    assert config.gateway.port == 8765
    assert config.gateway.auth_token is None
    assert config.prompt() == DEFAULT_SYSTEM_PROMPT


def test_claude_desktop_file_loads_as_is(tmp_path, caplog):
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP))
    with caplog.at_level(logging.WARNING):
        config = load_config(path)
    assert set(config.mcp_servers) == {"filesystem", "time", "github"}
    fs = config.mcp_servers["filesystem"]
    assert isinstance(fs, StdioServerConfig)
    assert fs.args[-1] == "/Users/me/Desktop"
    assert config.mcp_servers["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_xxx"}
    assert any("globalShortcut" in w for w in config.warnings)
    assert any("preferences" in w for w in config.warnings)
    assert "globalShortcut" in caplog.text


def test_camel_case_keys_map_to_attributes():
    config = parse_config(
        {
            "llm": {"apiKey": "k", "toolCallStyle": "text", "maxOutputTokens": 100},
            "limits": {"maxRounds": 3, "earlyStop": True},
            "gateway": {"authToken": "t", "exposeTools": True, "maxConcurrentQueries": 2},
            "approvals": {"require": ["*__write_*"], "timeoutSeconds": 5},
        }
    )
    assert config.llm.api_key == "k"
    assert config.llm.tool_call_style == "text"
    assert config.limits.max_rounds == 3 and config.limits.early_stop
    assert config.gateway.expose_tools and config.gateway.max_concurrent_queries == 2
    assert config.approvals.require == ["*__write_*"]


# --- ${VAR} expansion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${A}", "alpha"),
        ("x-${A}-y", "x-alpha-y"),
        ("${MISSING:-fallback}", "fallback"),
        ("${MISSING:-}", ""),
        ("${A:-unused}", "alpha"),
        ("costs $5", "costs $5"),
        ("$A stays", "$A stays"),
        ("$$", "$"),
        ("$${A}", "${A}"),
        ("a $ b", "a $ b"),
        ("", ""),
    ],
)
def test_expand_env(text, expected):
    assert expand_env(text, {"A": "alpha"}, "x") == expected


def test_missing_variable_names_the_path():
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"gh": {"command": "x", "env": {"TOKEN": "${GH_TOKEN}"}}}}, environ={})
    assert "mcpServers.gh.env.TOKEN" in str(info.value)
    assert "GH_TOKEN" in str(info.value)


def test_variables_expand_in_values_only_never_keys():
    config = parse_config(
        {"mcpServers": {"${NAME}": {"command": "${CMD}", "args": ["--x=${CMD}"]}}},
        environ={"NAME": "n", "CMD": "run"},
    )
    assert "${NAME}" in config.mcp_servers
    server = config.mcp_servers["${NAME}"]
    assert server.command == "run" and server.args == ["--x=run"]


def test_dollar_in_system_prompt_survives():
    config = parse_config({"systemPrompt": "Prices are in $USD; $PATH is not expanded."}, environ={})
    assert config.prompt() == "Prices are in $USD; $PATH is not expanded."


def test_empty_token_from_unset_variable_means_no_token():
    config = parse_config({"gateway": {"authToken": "${TOKEN:-}"}}, environ={})
    assert config.gateway.auth_token is None


# --- unknown keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path", "suggestion"),
    [
        ({"limits": {"maxRound": 3}}, "limits.maxRound", "maxRounds"),
        ({"llm": {"endpiont": "x"}}, "llm.endpiont", "endpoint"),
        ({"mcpServers": {"a": {"command": "x", "allowTool": []}}}, "mcpServers.a.allowTool", "allowTools"),
        ({"mcpServers": {"r": {"url": "http://h/mcp", "header": {}}}}, "mcpServers.r.header", "headers"),
        ({"gateway": {"authtoken": "x"}}, "gateway.authtoken", "authToken"),
        ({"llm": {"capabilities": {"toolChoise": True}}}, "llm.capabilities.toolChoise", "toolChoice"),
    ],
)
def test_unknown_nested_key_names_path_and_suggests(data, path, suggestion):
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert path in message
    assert f'did you mean "{suggestion}"' in message


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # neither command nor url: a misspelling of either is named, and "command/url is
        # required" is left out because the hint says it all
        ({"comand": "npx"}, 'mcpServers.x.comand: unknown key; did you mean "command"?'),
        ({"Command": "npx", "args": []}, 'mcpServers.x.Command: unknown key; did you mean "command"?'),
        ({"cmd": "npx"}, 'mcpServers.x.cmd: unknown key; did you mean "command"?'),
        ({"URL": "http://h/mcp"}, 'mcpServers.x.URL: unknown key; did you mean "url"?'),
        ({"uri": "http://h/mcp", "headers": {}}, 'mcpServers.x.uri: unknown key; did you mean "url"?'),
        # the other keys tell the kind: the missing key is named
        ({"args": ["x"]}, "mcpServers.x.command: Field required"),
        ({"headers": {}}, "mcpServers.x.url: Field required"),
        # nothing to go by: the rule, and what the entry has
        (
            {"disabled": True},
            "mcpServers.x: a server needs 'command' (stdio) or 'url' (remote), and not both (it has 'disabled')",
        ),
    ],
)
def test_a_server_entry_without_command_or_url_names_the_misspelling(entry, message):
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"x": entry}})
    assert str(info.value) == f"invalid config:\n{message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"llm": {"model": "x",\n}}', "trailing comma before '}' at line 1 column 22"),
        ('{"a": [1, 2, ]}', "trailing comma before ']' at line 1 column 12"),
        ('{"llm": {}, // the model\n"limits": {}}', "a comment at line 1 column 13: JSON has no comments"),
        ('{\n  /* block */ "llm": {}}', "a comment at line 2 column 3"),
        ("{'llm': {}}", "single quotes at line 1 column 2: JSON strings and keys need double quotes"),
        ('{"llm": {"model": \'x\'}}', "single quotes at line 1 column 19"),
        ("{llm: {}}", "a key without quotes at line 1 column 2"),
        ('{"llm": {"stream": True}}', "True at line 1 column 20: JSON spells it true"),
        ('{"llm": {"temperature": None}}', "None at line 1 column 25: JSON spells it null"),
        ('{"llm": {} "limits": {}}', "a missing comma (or a stray character) at line 1 column 12"),
        ("", "the file is empty"),
        ("  \n", "the file is empty"),
        ('{"llm": ', "Expecting value at line 1 column 9"),
    ],
)
def test_json_mistakes_are_named(tmp_path, text, message):
    path = tmp_path / "agent.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"{path}: not valid JSON: {message}" in str(info.value)


def test_a_byte_order_mark_is_not_an_error(tmp_path):
    path = tmp_path / "agent.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"limits": {"maxRounds": 2}}).encode())
    assert load_config(path).limits.max_rounds == 2


def test_unknown_top_level_key_is_a_warning_with_suggestion():
    config = parse_config({"limit": {"maxRounds": 2}})
    assert config.limits.max_rounds == 10
    assert any('did you mean "limits"' in w for w in config.warnings)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"limits": {"maxRounds": -1}}, "limits.maxRounds"),
        ({"limits": {"maxRounds": "many"}}, "limits.maxRounds"),
        ({"llm": {"provider": "openrouter"}}, "llm.provider"),
        ({"mcpServers": {"a": {"args": []}}}, "mcpServers.a"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "mcpServers.a"),
        ({"mcpServers": {"a": {"url": "ftp://h"}}}, "mcpServers.a.url"),
        ({"mcpServers": {"a": {"url": "http://h", "transport": "websocket"}}}, "mcpServers.a.transport"),
        ({"systemPrompt": "a", "systemPromptFile": "b"}, "systemPromptFile"),
        ({"gateway": {"port": 70000}}, "gateway.port"),
    ],
)
def test_invalid_values_name_the_path(data, fragment):
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("host", "kept"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("0.0.0.0", "0.0.0.0"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("::", "::"),
        ("localhost", "localhost"),
        ("my-host.lan", "my-host.lan"),
        ("app.localhost.", "app.localhost."),
        ("", ""),
    ],
)
def test_gateway_host_accepts_addresses_and_names(host, kept):
    assert parse_config({"gateway": {"host": host}}).gateway.host == kept


@pytest.mark.parametrize(
    ("host", "fragment"),
    [
        ("bad host", "is not a host name or an IP address"),
        ("-lead.example", "is not a host name or an IP address"),
        ("a..b", "is not a host name or an IP address"),
        ("x" * 64, "is not a host name or an IP address"),
        ("localhost:8765", "has a port in it"),
        ("http://localhost", "is a URL or path"),
        ("1.2.3.256", "is not a valid IPv4 address"),
    ],
)
def test_gateway_host_refuses_what_is_not_a_host(host, fragment):
    with pytest.raises(ConfigError) as info:
        parse_config({"gateway": {"host": host}})
    assert f"gateway.host: {host!r} {fragment}" in str(info.value)


def test_not_an_object():
    with pytest.raises(ConfigError):
        parse_config([1, 2])


def test_bad_json_file_reports_line(tmp_path):
    path = tmp_path / "agent.json"
    path.write_text('{\n  "llm": {,\n}')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "line 2" in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.json")
    assert "nope.json" in str(info.value)


# --- servers -----------------------------------------------------------------------------------


def test_remote_server_type_sets_transport():
    config = parse_config(
        {
            "mcpServers": {
                "a": {"url": "http://127.0.0.1:9000/sse", "type": "sse"},
                "b": {"url": "http://127.0.0.1:9000/mcp", "type": "streamable-http"},
                "c": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer x"}},
                "d": {"command": "x", "type": "stdio"},
            }
        }
    )
    servers = config.mcp_servers
    assert isinstance(servers["a"], RemoteServerConfig) and servers["a"].transport == "sse"
    assert servers["b"].transport == "http"
    assert servers["c"].transport == "http" and servers["c"].headers["Authorization"] == "Bearer x"
    assert isinstance(servers["d"], StdioServerConfig)


def test_servers_dir_discovery(tmp_path):
    folder = tmp_path / "servers"
    folder.mkdir()
    (folder / "ports.py").write_text("")
    (folder / "web.py").write_text("")
    (folder / "_helper.py").write_text("")
    (folder / "notes.txt").write_text("")
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"serversDir": "servers", "mcpServers": {"web": {"command": "custom-web"}}}))
    config = load_config(path)
    servers = config.servers()
    assert set(servers) == {"ports", "web"}
    ports = servers["ports"]
    assert isinstance(ports, StdioServerConfig)
    assert ports.command == sys.executable
    assert Path(ports.args[0]) == (folder / "ports.py").resolve()
    assert servers["web"].command == "custom-web"  # an mcpServers entry of the same name wins


def test_servers_dir_missing_is_not_fatal(tmp_path, caplog):
    config = parse_config({"serversDir": "nowhere"}, base_dir=tmp_path)
    with caplog.at_level(logging.WARNING):
        assert config.servers() == {}
    assert "nowhere" in caplog.text


def test_system_prompt_file_is_relative_to_the_config(tmp_path):
    (tmp_path / "PROMPT.md").write_text("Be terse.")
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"systemPromptFile": "PROMPT.md"}))
    assert load_config(path).prompt() == "Be terse."


def test_system_prompt_file_missing_names_it(tmp_path):
    config = parse_config({"systemPromptFile": "NOPE.md"}, base_dir=tmp_path)
    with pytest.raises(ConfigError) as info:
        config.prompt()
    assert "NOPE.md" in str(info.value)


# --- limits ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "client", "expected"),
    [
        ({"maxRounds": 10}, {"maxRounds": 3}, 3),  # tighter wins
        ({"maxRounds": 3}, {"maxRounds": 10}, 3),  # never looser
        ({"maxRounds": 0}, {"maxRounds": 5}, 5),  # server off: the client may set a cap
        ({"maxRounds": 5}, {"maxRounds": 0}, 5),  # client "off" cannot lift the server's cap
        ({"maxRounds": 5}, {}, 5),
    ],
)
def test_limits_tighten(server, client, expected):
    assert Limits.model_validate(server).tighten(client).max_rounds == expected


def test_limits_tighten_early_stop_and_none():
    base = Limits()
    assert base.tighten(None) is base
    assert base.tighten({"earlyStop": True}).early_stop is True
    assert base.tighten({"timeoutSeconds": 1.5}).timeout_seconds == 1.5


def test_limits_tighten_rejects_unknown_keys():
    with pytest.raises(Exception, match="maxRoundz"):
        Limits().tighten({"maxRoundz": 1})


def test_bundled_agent_json_is_valid():
    root = Path(__file__).resolve().parents[2]
    config = load_config(root / "agent.json", environ={})
    assert isinstance(config, AgentConfig)
    assert config.servers(), "the default config offers the bundled servers"


def test_unknown_key_under_a_server_named_like_a_tag_still_gets_a_hint():
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"stdio": {"command": "x", "argz": []}}})
    assert 'mcpServers.stdio.argz: unknown key; did you mean "args"?' in str(info.value)


def test_the_state_section():
    config = parse_config(
        {
            "state": {
                "url": "sqlite:///data/state.db",
                "maxSessionBytes": 5000,
                "leaseSeconds": 12,
                "runs": {"maxCount": 3, "maxAgeDays": 1.5},
            }
        },
        base_dir="/srv/agent",
    )
    assert (config.state.max_session_bytes, config.state.lease_seconds) == (5000, 12)
    assert (config.state.runs.max_count, config.state.runs.max_age_days) == (3, 1.5)
    assert config.state_url() == "sqlite:////srv/agent/data/state.db"  # relative to agent.json's folder
    assert parse_config({}).state_url() == "memory://"
    assert parse_config({}).state_url("/var/lib/x.db") == "sqlite:////var/lib/x.db"
    for kept in ("sqlite:////abs/state.db", "sqlite:///~/state.db", "redis://127.0.0.1:6379/0", "memory://"):
        assert parse_config({"state": {"url": kept}}, base_dir="/srv").state_url("/x.db") == kept


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ({"url": "postgres://db/x"}, ["state.url", "sqlite:///PATH"]),
        ({"url": "state.db"}, ["state.url"]),
        ({"maxSessionByte": 5}, ["state.maxSessionByte", "maxSessionBytes"]),
        ({"runs": {"maxCount": -1}}, ["state.runs.maxCount"]),
        ({"leaseSeconds": 0}, ["state.leaseSeconds"]),
    ],
)
def test_a_bad_state_section_names_the_key(state, words):
    with pytest.raises(ConfigError) as info:
        parse_config({"state": state})
    for word in words:
        assert word in info.value.message


@pytest.mark.parametrize(
    ("oauth", "fragment"),
    [
        ({}, "gateway.oauth.issuer: Field required"),
        ({"issuer": "id.example.com"}, "is not an http(s) URL"),
        ({"issuer": "http://id.example.com"}, "uses plain http on a host other than this machine"),
        ({"issuer": "https://id.example.com?x=1"}, "has a query"),
        ({"issuer": "https://id.example.com", "jwksUrl": "https://id.example.com/k#x"}, "has a fragment"),
        ({"issuer": "https://id.example.com", "algorithms": ["RS256", "HS256"]}, "'HS256' not allowed"),
        ({"issuer": "https://id.example.com", "algorithms": ["none"]}, "'none' not allowed"),
        ({"issuer": "https://id.example.com", "scopeMap": {"x": ["root"]}}, "gateway.oauth.scopeMap.x"),
        ({"issuer": "https://id.example.com", "clockSkewSeconds": 3600}, "gateway.oauth.clockSkewSeconds"),
        ({"issuer": "https://id.example.com", "callerClaim": ""}, "gateway.oauth.callerClaim"),
    ],
)
def test_gateway_oauth_is_checked_with_clear_errors(oauth, fragment):
    with pytest.raises(ConfigError) as info:
        parse_config({"gateway": {"oauth": oauth}})
    assert fragment in str(info.value)


def test_gateway_oauth_resource_defaults_to_the_bind_address_or_must_be_given():
    config = parse_config({"gateway": {"port": 9000, "oauth": {"issuer": "http://127.0.0.1:8000"}}})
    assert config.gateway.oauth_resource == "http://127.0.0.1:9000/mcp"
    assert config.gateway.has_tokens  # OAuth callers need tokens: binding beyond loopback is allowed
    with pytest.raises(ConfigError) as info:
        parse_config({"gateway": {"host": "0.0.0.0", "oauth": {"issuer": "https://id.example.com"}}})
    assert "gateway.oauth.resource: set it to the gateway's public URL of /mcp" in str(info.value)
    given = {
        "host": "0.0.0.0",
        "oauth": {"issuer": "https://id.example.com", "resource": "https://a.example/mcp"},
    }
    assert parse_config({"gateway": given}).gateway.oauth_resource == "https://a.example/mcp"


def test_a_relative_command_and_cwd_are_relative_to_the_config_file(tmp_path: Path) -> None:
    """Like ``serversDir`` and ``state.url``: a client that launches the gateway from another
    folder starts the same program. A bare name still goes through PATH; a relative command
    with a ``cwd`` is found in that folder, as the operating system looks for it."""
    folder = tmp_path / "project"
    folder.mkdir()
    servers = {
        "venv": {"command": ".venv/bin/python", "args": ["server.py"]},
        "here": {"command": "./run.sh", "cwd": "srv"},
        "bare": {"command": "npx", "args": ["-y", "pkg"], "cwd": "data"},
        "absolute": {"command": "/usr/bin/env", "cwd": "/tmp"},
        "remote": {"url": "http://127.0.0.1:9/mcp"},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    loaded = load_config(path, environ={}).servers()
    assert loaded["venv"].command == str(folder / ".venv/bin/python")  # type: ignore[union-attr]
    assert loaded["venv"].args == ["server.py"]  # type: ignore[union-attr]
    assert loaded["here"].cwd == str(folder / "srv")  # type: ignore[union-attr]
    assert loaded["here"].command == str(folder / "srv" / "run.sh")  # type: ignore[union-attr]
    assert (loaded["bare"].command, loaded["bare"].cwd) == ("npx", str(folder / "data"))  # type: ignore[union-attr]
    assert (loaded["absolute"].command, loaded["absolute"].cwd) == ("/usr/bin/env", "/tmp")  # type: ignore[union-attr]
    assert loaded["remote"].url == "http://127.0.0.1:9/mcp"  # type: ignore[union-attr]
