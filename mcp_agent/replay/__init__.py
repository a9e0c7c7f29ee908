"""Replaying a recorded run: the loop again, with no model server and no tool servers.

A run recorded with ``Agent(record=...)`` (``mcp-agent query --record FILE``,
``gateway.recordDir``; the file format is ``loop/recording.py``) is replayed by ``replay``:
it builds an ``Agent`` whose model server and tool servers are the recording (``run.py``),
compares what the loop does now with what it did then (``compare.py``) and reports the first
divergence. It stands above the loop: the recorder never calls it.

    report = await replay("run.jsonl")                       # the recording's own settings
    report = await replay("run.jsonl", config="agent.json")  # a new prompt, limits, tool filter
    assert report.identical, report.describe()
"""

from __future__ import annotations

from .compare import Divergence, ReplayReport
from .run import replay

__all__ = ["Divergence", "ReplayReport", "replay"]
