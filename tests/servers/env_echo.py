"""Fixture: a tool server that gives its environment away, the secrets in it included.

The variables named in ``$ENV_ECHO_VARS`` (comma-separated) are what it shows: ``show_env``
answers with them as JSON; ``fail_env`` answers with them as an error result (``isError``);
``rpc_env`` answers with a JSON-RPC error that quotes them. At start it writes them to stderr,
which the gateway keeps (the stderr tail) and logs at debug level.
"""

from __future__ import annotations

import json
import os
import sys

from _raw import RawServer, RpcError, main_guard, text

EMPTY = {"type": "object", "properties": {}}
NAMES = [name for name in os.environ.get("ENV_ECHO_VARS", "").split(",") if name]
server = RawServer(
    "env_echo",
    tools=[
        {"name": "show_env", "description": "Show the environment.", "inputSchema": EMPTY},
        {"name": "fail_env", "description": "Fail, quoting the environment.", "inputSchema": EMPTY},
        {"name": "rpc_env", "description": "A protocol error quoting the environment.", "inputSchema": EMPTY},
    ],
)


def shown() -> str:
    return json.dumps({name: os.environ.get(name) for name in NAMES})


server.handlers["show_env"] = lambda args, call: text(shown())
server.handlers["fail_env"] = lambda args, call: text(f"error: cannot log in with {shown()}", is_error=True)


@server.tool("rpc_env")
def rpc_env(args: dict[str, object], call: object) -> None:
    raise RpcError(-32000, f"upstream refused the credentials {shown()}")


if __name__ == "__main__":
    print(f"env_echo starting with {shown()}", file=sys.stderr, flush=True)
    main_guard(server)
