"""A gateway process submitting gated calls against the approval caps, for ``test_approval_caps.py``.

``python _approvals_child.py URL MAX_PENDING MAX_PER_CALLER COUNT`` opens the state, prints
``ready``, then for each line ``go AT`` on stdin waits until the wall-clock time AT and submits
COUNT calls of caller ``alice`` at once through an ``ApprovalQueue`` (the gateway's own path),
printing ``added N refused M``; ``quit`` (or the end of stdin) ends it.
"""

from __future__ import annotations

import sys
import time

import anyio

from mcp_agent.loop.approvals import ApprovalQueue, ApprovalsFull
from mcp_agent.messages import ToolCall
from mcp_agent.state import StateLimits, open_state


def say(text: str) -> None:
    print(text, flush=True)


async def submit_at_once(queue: ApprovalQueue, count: int) -> dict[str, int]:
    """``count`` calls submitted at once; how many were added and refused."""
    outcome = {"added": 0, "refused": 0}

    async def submit(index: int) -> None:
        try:
            await queue.submit(ToolCall(f"c{index}", "fs__write", {}), run_id="r", caller="alice")
        except ApprovalsFull:
            outcome["refused"] += 1
        else:
            outcome["added"] += 1

    async with anyio.create_task_group() as tg:
        for index in range(count):
            tg.start_soon(submit, index)
    return outcome


async def main(url: str, max_pending: str, max_per_caller: str, count: str) -> None:
    state = await open_state(url, limits=StateLimits(lease_seconds=600))
    queue = ApprovalQueue(
        0,
        max_pending=int(max_pending),
        max_per_caller=int(max_per_caller),
        store=state.approvals,
        replica=state.replica,
    )
    say("ready")
    while True:
        line = (await anyio.to_thread.run_sync(sys.stdin.readline)).split()
        if not line or line[0] != "go":
            break
        await anyio.sleep(max(float(line[1]) - time.time(), 0))
        outcome = await submit_at_once(queue, int(count))
        say(f"added {outcome['added']} refused {outcome['refused']}")
    await state.aclose()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
