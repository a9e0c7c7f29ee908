"""Secrets out of what the gateway shows: URLs, bearer tokens, key shapes, secret=value pairs."""

from __future__ import annotations

import pytest

from mcp_agent._redact import is_secret_name, redact_text, redact_url


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
    [("key", True), ("API_KEY", True), ("x-api-key", True), ("token", True), ("page", False), ("monkey", False)],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
