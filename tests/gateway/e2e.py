"""End-to-end pieces: the rule model over the OpenAI wire (for the fake model server) and a config
with real stdio tool servers (``tests/servers/slow.py`` and ``echo.py``).

The rules are those of ``conftest.RuleModel``, with the hub's exposed names: ``echo X`` calls
``echo__echo``, ``sleep N`` calls ``slow__sleep``; a tool result is answered
``<tool> said: <result>``; anything else ``answer: <query>``.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

from tests.fakes.model_server import RecordedRequest, Reply
from tests.fakes.openai_shapes import Call, completion

SERVERS = Path(__file__).resolve().parents[1] / "servers"
_ids = itertools.count(1)


def rule_reply(request: RecordedRequest) -> Reply:
    """Answer one Chat Completions request by the rules of the module docstring."""
    if not request.path.endswith("/chat/completions"):
        return Reply.json({"data": [{"id": "rule-model"}], "object": "list"})
    body = request.json
    messages = body["messages"]
    last = messages[-1]
    users = [m.get("content") or "" for m in messages if m["role"] == "user"]
    query = users[-1] if users else ""
    if last["role"] == "tool":
        name = next(
            (
                call["function"]["name"]
                for m in reversed(messages)
                if m["role"] == "assistant"
                for call in m.get("tool_calls") or []
                if call["id"] == last["tool_call_id"]
            ),
            "tool",
        )
        return Reply.json(completion(content=f"{name} said: {last['content']}"))
    verb, _, rest = query.partition(" ")
    if verb == "echo":
        return Reply.json(
            completion(content=None, calls=[Call("echo__echo", {"text": rest}, id=f"c{next(_ids)}")])
        )
    if verb == "sleep":
        call = Call("slow__sleep", {"seconds": float(rest or 30)}, id=f"c{next(_ids)}")
        return Reply.json(completion(content=None, calls=[call]))
    return Reply.json(completion(content=f"answer: {query}"))


def write_config(folder: Path, model_url: str, record: Path, **gateway: Any) -> Path:
    """An agent.json with the fake model server and the slow and echo fixture servers."""
    config = {
        "llm": {
            "endpoint": model_url,
            "model": "rule-model",
            "provider": "openai",
            "stream": False,
            "maxRetries": 0,
        },
        "limits": {"maxRounds": 4, "toolTimeoutSeconds": 60, "timeoutSeconds": 120},
        "mcpServers": {
            "slow": {
                "command": sys.executable,
                "args": [str(SERVERS / "slow.py")],
                "env": {"SLOW_RECORD": str(record)},
            },
            "echo": {"command": sys.executable, "args": [str(SERVERS / "echo.py")]},
        },
        "gateway": {"description": "End-to-end agent.", **gateway},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path
