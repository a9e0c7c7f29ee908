"""A second process on the same SQLite state, for ``test_sqlite.py``.

``python _sqlite_child.py URL MODE [ARGS]``; it prints one line per step it reaches, flushed:

- ``hold ID``: hold session ID, print ``held``, wait for a line on stdin, save a transcript
  ``["from the child"]``, print ``saved``, leave;
- ``writes ID``: save ever longer transcripts into ID forever, each message of save N saying
  ``N`` (so a torn save would show two numbers); prints ``saved N`` after each;
- ``inflight``: begin a run ``child-run`` and add a pending approval ``child-approval``,
  print ``ready``, then sleep until killed.
"""

from __future__ import annotations

import sys
import time

import anyio

from mcp_agent.messages import Message
from mcp_agent.state import Approval, RunRecord, StateLimits, open_state


def say(text: str) -> None:
    print(text, flush=True)


async def main(url: str, mode: str, *args: str) -> None:
    state = await open_state(url, limits=StateLimits(lease_seconds=600, max_session_bytes=0))
    if mode == "hold":
        async with state.sessions.hold(args[0]) as session:
            say("held")
            await anyio.to_thread.run_sync(sys.stdin.readline)
            await state.sessions.save(session, [Message.user("from the child")])
        say("saved")
    elif mode == "writes":
        count = 0
        while True:
            count += 1
            async with state.sessions.hold(args[0]) as session:
                await state.sessions.save(
                    session, [Message.user(f"{count} " * 50) for _ in range(count % 200 + 1)]
                )
            say(f"saved {count}")
    elif mode == "inflight":
        await state.runs.begin(
            RunRecord("child-run", session_id="s1", caller="alice", query="long one", replica=state.replica)
        )
        await state.approvals.add(
            Approval(
                "child-approval",
                "child-run",
                "s1",
                "c1",
                "fs__write",
                {"path": "x"},
                time.time(),
                "alice",
                state.replica,
            )
        )
        say("ready")
        await anyio.sleep_forever()
    await state.aclose()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
