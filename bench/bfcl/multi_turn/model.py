"""The replay model: a scripted OpenAI-compatible model that makes a turn's ground-truth calls.

It answers ``/chat/completions`` (non-streamed) from the script of the current turn (``start``):
the turn's ground-truth calls, ONE per reply, in order — BFCL's calls of a turn are sequential
(``cd`` then ``mv``), and the gateway runs the calls of one reply in parallel — then a text
answer. A turn whose ground truth is empty (the model should not act) is answered with text at
once. It does not read the tool results: the ground truth is the whole script.

It records the tool names it was offered on each request (``offered``), so a test can see what
the gateway gave the model at each turn.

It is the ``handler`` of ``tests/fakes/model_server.py``'s ``FakeModelServer`` (real HTTP on
127.0.0.1), so the gateway talks to it exactly as to a real endpoint.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Any

from tests.fakes.model_server import RecordedRequest, Reply
from tests.fakes.openai_shapes import Call, completion

NAME = "bfcl-replay"
"""The model name it serves (``llm.model``)."""
DONE = "Done."


class ReplayModel:
    """One turn's script at a time; the gateway runs one conversation at a time against it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()
        self._ids = itertools.count()
        self.offered: list[list[str]] = []
        """The tool names of each chat request of the current turn."""

    def start(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        """The script of the next turn: (name, arguments) pairs."""
        with self._lock:
            self._queue = deque(calls)
            self.offered = []

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.path.endswith("/models"):  # the gateway's health check: is the model served?
            return Reply.json(
                {"object": "list", "data": [{"id": NAME, "object": "model", "owned_by": "bench"}]}
            )
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return Reply.json({"error": {"message": f"not found: {request.path}"}}, status=404)
        tools = request.json.get("tools") or []
        with self._lock:
            self.offered.append([tool.get("function", {}).get("name", "") for tool in tools])
            if not self._queue:
                return Reply.json(completion(content=DONE))
            name, arguments = self._queue.popleft()
            call = Call(name, arguments, id=f"call_{next(self._ids)}")
            return Reply.json(completion(content=None, calls=[call]))
