"""The TypeScript SDK (1.x, from npm) as a caller: its request timeout, reset by the gateway's
progress heartbeat, and approvals put to it by elicitation on its back channel.

``make test`` installs the SDK into ``tests/npm`` (pinned); ``tests/npm/ts_client.mjs`` is the client.
Without Node.js these tests fail and say so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import RuleModel, make_config, running_gateway

NPM = Path(__file__).resolve().parents[1] / "npm"
CLIENT = NPM / "ts_client.mjs"


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail(
            "Node.js is not installed: the TypeScript-SDK tests need Node.js >= 20 and npm (`make test`)"
        )
    if not (NPM / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        pytest.fail(
            "the TypeScript SDK is missing from tests/npm: run `make test` (or `npm ci --prefix tests/npm`)"
        )
    return found


async def ts_call(url: str, transport: str, **options: Any) -> dict[str, Any]:
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [node(), str(CLIENT), url, transport, json.dumps(options)], check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_slow_run_outlives_the_clients_timeout_when_progress_resets_it(transport: str) -> None:
    """The TypeScript SDK's request timeout fired (-32001) while a long model call was silent."""
    config = make_config(progress_interval_seconds=0.5)
    async with running_gateway(config, model=RuleModel(delay=1.2)) as gateway:
        # two model calls of 1.2 s against a 1 s timeout: only the heartbeat keeps the call alive
        kept = await ts_call(
            gateway.url, transport, query="echo slow", timeout=1000, resetTimeoutOnProgress=True
        )
        assert kept["ok"] and kept["text"].startswith("echo said: slow"), kept
        assert any("waiting for the model" in (message or "") for message in kept["progress"])
        # without resetting on progress the same call times out in the client, as the SDK does
        lost = await ts_call(
            gateway.url, transport, query="echo slow", timeout=1000, resetTimeoutOnProgress=False
        )
        assert not lost["ok"] and "timed out" in (lost["error"] or "").lower(), lost


@pytest.mark.parametrize("transport", ["http", "sse"])
@pytest.mark.parametrize("elicit", ["approve", "decline"])
async def test_approvals_reach_a_typescript_client_on_its_back_channel(transport: str, elicit: str) -> None:
    async with running_gateway() as gateway:
        result = await ts_call(gateway.url, transport, query="write ts.txt", timeout=30000, elicit=elicit)
    assert result["asked"] == ['The agent wants to call write_file with {"text": "ts.txt"}. Allow it?']
    if elicit == "approve":
        assert result["text"].startswith("write_file said: written") and gateway.tools.written == ["ts.txt"]
    else:
        assert "[DENIED: the caller declined this call]" in result["text"] and gateway.tools.written == []
