"""Fixture: starts a long-lived grandchild that shares its stdout; ``pids`` names both processes.

The grandchild keeps the server's stdout pipe open, so the pipe never ends when the server exits:
only killing the whole process group cleans up. With ``GRANDCHILD_STAYS=1`` the server also
outlives the end of its stdin (as servers do that never read it to the end), so only a signal
stops it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from _raw import Call, RawServer, main_guard, text

grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
server = RawServer(
    "grandchild",
    tools=[
        {
            "name": "pids",
            "description": "The server's and grandchild's pids.",
            "inputSchema": {"type": "object"},
        },
        {
            "name": "exit",
            "description": "Exit the server, leaving the grandchild.",
            "inputSchema": {"type": "object"},
        },
    ],
)


@server.tool("pids")
def pids(args: dict, call: Call) -> dict:
    return text(json.dumps({"server": os.getpid(), "grandchild": grandchild.pid}))


@server.tool("exit")
def exit_now(args: dict, call: Call) -> dict:
    sys.stderr.write("grandchild: server exits, grandchild stays\n")
    sys.stderr.flush()
    os._exit(5)


if __name__ == "__main__":
    main_guard(server)
    while os.environ.get("GRANDCHILD_STAYS") == "1":
        time.sleep(60)
