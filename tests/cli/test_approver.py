"""The approver's pure parts: how a call is shown in the question, and what counts as yes."""

from __future__ import annotations

import pytest

from mcp_agent.cli.approver import describe_call, is_yes


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ({}, "t {}"),
        ({"path": "a.txt"}, 't {"path": "a.txt"}'),
        ({"a": 1, "b": [True, None]}, 't {"a": 1, "b": [true, null]}'),
        ({"text": "x" * 10}, 't {"text": "xxxxx…"}'),  # long values cut
        ({"deep": {"text": "y" * 10}}, 't {"deep": {"text": "yyyyy…"}}'),
        ({"list": ["z" * 10]}, 't {"list": ["zzzzz…"]}'),
        ({"esc": "\x1b[2J\n"}, 't {"esc": "\\u001b[2J\\n"}'),  # no terminal control reaches the screen
        ({"k": "日本"}, 't {"k": "日本"}'),
        ({f"k{i}": i for i in range(20)}, 't {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k…'),
    ],
)
def test_describe_call(arguments: dict[str, object], shown: str) -> None:
    assert describe_call("t", arguments, value_chars=6, total=40) == shown


@pytest.mark.parametrize(
    ("answer", "yes"),
    [
        ("y", True),
        ("Y", True),
        ("yes", True),
        (" YES \r", True),
        ("", False),
        ("n", False),
        ("no", False),
        ("yep", False),
    ],
)
def test_is_yes(answer: str, yes: bool) -> None:
    assert is_yes(answer) is yes
