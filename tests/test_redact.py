"""Secrets out of what the gateway shows: the known values, URLs, bearer tokens, key shapes, secret=value pairs."""

from __future__ import annotations

import base64
import json
import secrets as secrets_module
from urllib.parse import quote

import pytest

from mcp_agent._redact import (
    KnownSecrets,
    is_secret_key,
    is_secret_name,
    mask_secrets,
    mask_secrets_in,
    redact_text,
    redact_url,
    remember_secrets,
    secrets_in_config,
    secrets_in_environ,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://localhost:11434/v1", "http://localhost:11434/v1"),
        ("http://user:pw@host:1/v1", "http://***@host:1/v1"),
        ("https://token@host/v1", "https://***@host/v1"),
        ("https://h/v1?key=abc", "https://h/v1?key=***"),
        ("https://h/v1?api-version=2024&api_key=abc", "https://h/v1?api-version=2024&api_key=***"),
        ("https://h/v1?X-Amz-Signature=abc&page=2", "https://h/v1?X-Amz-Signature=***&page=2"),
        ("https://h/v1?access_token=abc", "https://h/v1?access_token=***"),
        ("https://h/p#frag", "https://h/p#frag"),
        ("http://[::1", "***"),  # cannot be parsed: masked whole
        # nothing to hide: exactly as written (a state URL's slashes say which file it is)
        ("sqlite:////tmp/x/state.db", "sqlite:////tmp/x/state.db"),
        ("sqlite:///state.db", "sqlite:///state.db"),
        ("sqlite:///~/state.db", "sqlite:///~/state.db"),
        ("https://h/v1?q=a+b&page=2", "https://h/v1?q=a+b&page=2"),
        ("sqlite:////tmp/x.db?password=abc", "sqlite:////tmp/x.db?password=***"),
        ("redis://:pw@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("calling http://u:hunter2@h/v1 failed", "hunter2"),
        ("Authorization: Bearer abcdefghijk12345", "abcdefghijk12345"),
        ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrst", "sk-proj-abcdefghijklmnopqrst"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123"),
        ("--password=s3cr3t --verbose", "s3cr3t"),
        ("client_secret: abc123", "abc123"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890abcdefghijklmnopqrstu"),
    ],
)
def test_redact_text_hides_the_secret(text: str, secret: str) -> None:
    assert secret not in redact_text(text)


@pytest.mark.parametrize(
    "text",
    ["prompt_tokens: 10, max_tokens=100", "tool ports__check_port failed: exit code 1", "", "keys are fine"],
)
def test_redact_text_leaves_ordinary_text(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("key", True),
        ("API_KEY", True),
        ("x-api-key", True),
        ("token", True),
        ("page", False),
        ("monkey", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


# ------------------------------------------------------------------------------ known values


def test_known_values_are_masked_in_every_form_they_travel_in() -> None:
    secrets = KnownSecrets()
    secrets.add(['k3y-with"quote\\and/slash', "Bearer tok-1234567890", "short", ""])
    value = 'k3y-with"quote\\and/slash'
    for text in [
        f"plain {value} here",
        json.dumps({"echo": value}),  # inside a JSON string
        f"https://h/v1?key={quote(value, safe='')}",  # URL-encoded
    ]:
        assert value not in secrets.mask(text)
        assert json.dumps(value)[1:-1] not in secrets.mask(text)
        assert quote(value, safe="") not in secrets.mask(text)
        assert "***" in secrets.mask(text)
    # the credential of an Authorization value is a secret of its own
    assert secrets.mask("got tok-1234567890") == "got ***"
    assert secrets.mask("Authorization: Bearer tok-1234567890") == "Authorization: ***"
    # too short to be worth masking everywhere; empty is never a secret
    assert secrets.mask("a short answer") == "a short answer"
    assert secrets.mask_bytes(b'{"a": "tok-1234567890"}') == b'{"a": "***"}'


def test_stand_in_keys_of_local_servers_are_no_secrets() -> None:
    secrets = KnownSecrets()
    secrets.add(["ollama", "LM-Studio", "sk-no-key-required"])
    text = "start one with `ollama serve` (or LM-Studio); sk-no-key-required"
    assert secrets.mask(text) == text and len(secrets) == 0


def test_known_values_overlapping_mask_the_longest() -> None:
    secrets = KnownSecrets()
    secrets.add(["abcdef", "abcdefghij"])
    assert secrets.mask("xx abcdefghij yy") == "xx *** yy"


def test_nothing_known_leaves_text_as_it_is() -> None:
    secrets = KnownSecrets()
    assert secrets.mask("anything at all") == "anything at all"
    assert secrets.mask_bytes(b"bytes") == b"bytes"


def test_redact_text_masks_the_known_values_too() -> None:
    value = "plainvalue-" + secrets_module.token_hex(8)  # no shape the heuristics know
    assert value in redact_text(f"error: {value}")
    remember_secrets([value])
    assert redact_text(f"error: {value}") == "error: ***"
    assert mask_secrets_in({"a": [value, 1], value: None}) == {"a": ["***", 1], "***": None}


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("apiKey", True),
        ("authToken", True),
        ("Authorization", True),
        ("X-Api-Key", True),
        ("GITHUB_PERSONAL_ACCESS_TOKEN", True),
        ("Cookie", True),
        ("maxTokens", False),
        ("toolTimeoutSeconds", False),
        ("TZ", False),
        ("endpoint", False),
    ],
)
def test_is_secret_key(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


def test_secrets_in_config_finds_keys_tokens_env_headers_urls_and_flags() -> None:
    data = {
        "llm": {
            "endpoint": "https://user:url-password@h/v1?api_key=query-secret&x=1",
            "model": "qwen3:8b",
            "apiKey": "sk-literal-key",
            "fallbacks": [{"apiKey": "fallback-key"}],
        },
        "gateway": {"authToken": "gateway-token", "callers": {"alice": {"token": "alice-token"}}},
        "mcpServers": {
            "a": {
                "command": "x",
                "args": ["--api-key", "flag-secret", "--token=inline-secret", "-y", "not-a-secret-arg"],
                "env": {"GITHUB_TOKEN": "env-token", "TZ": "Europe/Paris", "PLAIN": "from-variable"},
            },
            "b": {
                "url": "https://h/mcp",
                "headers": {"Authorization": "Bearer header-token", "Accept": "text/x"},
            },
        },
        "systemPrompt": "You are helpful.",
    }
    substituted = [
        ("mcpServers.a.env.PLAIN", "SOME_VARIABLE", "from-variable"),  # into env: a secret
        ("llm.model", "MODEL", "qwen3:8b"),  # a plain variable into a plain key: not one
        ("systemPrompt", "MY_SERVICE_PASSWORD", "You are helpful."),  # a secret-named variable
    ]
    found = secrets_in_config(data, substituted)
    assert found == {
        "url-password",
        base64.b64encode(b"user:url-password").decode(),  # as HTTP Basic sends it
        "query-secret",
        "sk-literal-key",
        "fallback-key",
        "gateway-token",
        "alice-token",
        "flag-secret",
        "inline-secret",
        "env-token",
        "Bearer header-token",
        "from-variable",
        "You are helpful.",
    }


def test_secrets_in_environ_takes_secret_named_variables_only() -> None:
    environ = {
        "OPENAI_API_KEY": "a",
        "HF_TOKEN": "b",
        "DB_PASSWORD": "c",
        "AWS_SECRET_ACCESS_KEY": "d",
        "DESKTOP_SESSION": "ubuntu",
        "SSH_AUTH_SOCK": "/tmp/x",
        "PATH": "/bin",
        "MONKEY": "e",
    }
    assert secrets_in_environ(environ) == {"a", "b", "c", "d"}


def test_parse_config_remembers_the_secrets_it_loads() -> None:
    from mcp_agent.config import parse_config

    key, token = "cfg-key-" + secrets_module.token_hex(6), "env-tok-" + secrets_module.token_hex(6)
    parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "apiKey": "${PROVIDER_API_KEY}"},
            "mcpServers": {"s": {"command": "x", "env": {"SERVICE": "${SERVICE_VALUE}"}}},
        },
        environ={"PROVIDER_API_KEY": key, "SERVICE_VALUE": token},
    )
    assert mask_secrets(f"{key} {token}") == "*** ***"


def test_errors_never_show_a_known_secret() -> None:
    from mcp_agent.exceptions import ProviderHTTPError, ToolCallError, ToolServerStartError

    value = "leaky-" + secrets_module.token_hex(8)
    remember_secrets([value])
    assert value not in str(ProviderHTTPError(f"invalid key {value}", status=401))
    assert value not in ProviderHTTPError(f"invalid key {value}").message
    error = ToolServerStartError("failed", server="s", stderr_tail=[f"TOKEN is {value}"])
    assert value not in str(error) and value not in "".join(error.stderr_tail)
    assert value not in str(ToolCallError(f"server said {value}"))


def test_a_state_url_in_a_message_is_shown_as_configured() -> None:
    message = "state: state.url 'sqlite:////tmp/x/state.db': OperationalError: database or disk is full"
    assert redact_text(message) == message
