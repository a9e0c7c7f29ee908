"""Not a server: a process that owns a ToolHub the way the CLI and the gateway do.

It starts the hub on the servers named in argv[1] (a JSON object of mcpServers), prints the pids
of every server and grandchild as one JSON line on stdout, and runs until SIGTERM or SIGINT,
which cancel its task group. The test then checks that no process outlived it. With a state
folder as argv[2] the hub records its children there and first reaps orphans (its log goes to
stderr).
"""

from __future__ import annotations

import json
import logging
import signal
import sys

import anyio

from mcp_agent.config import StdioServerConfig
from mcp_agent.tools.hub import open_tool_hub


async def main() -> None:
    servers = {name: StdioServerConfig.model_validate(raw) for name, raw in json.loads(sys.argv[1]).items()}
    state_dir = sys.argv[2] if len(sys.argv) > 2 else None
    if state_dir is not None:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
        )
    async with anyio.create_task_group() as tg:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

            async def cancel_on_signal() -> None:
                async for _ in signals:
                    tg.cancel_scope.cancel()

            tg.start_soon(cancel_on_signal)
            async with open_tool_hub(servers, state_dir=state_dir) as hub:
                pids = []
                for spec in hub.list_tools():
                    if spec.mcp_name == "pids":
                        pids += json.loads((await hub.call_tool(spec.name, {})).text).values()
                print(json.dumps(pids), flush=True)
                await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main)
