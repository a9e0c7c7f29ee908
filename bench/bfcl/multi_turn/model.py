"""The replay model: a scripted OpenAI-compatible model that makes a turn's ground-truth calls.

It is AgentDojo's obedient model (``bench/agentdojo/obedient.py``) without an attack: it answers
``/chat/completions`` from the script of the current turn (``start``): the turn's ground-truth
calls, ONE per reply, in order — BFCL's calls of a turn are sequential (``cd`` then ``mv``), and
the gateway runs the calls of one reply in parallel — then a text answer (``DONE``). A turn whose
ground truth is empty (the model should not act) is answered with text at once. It does not read
the tool results: the ground truth is the whole script.

It also records the tool names it was offered on each request of the turn (``offered``), so a
test can see what the gateway gave the model at each turn.

It is the ``handler`` of ``tests/fakes/model_server.py``'s ``FakeModelServer`` (real HTTP on
127.0.0.1), so the gateway talks to it exactly as to a real endpoint.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bench.agentdojo.obedient import DONE, NAME, ObedientModel
from tests.fakes.model_server import RecordedRequest, Reply

__all__ = ["DONE", "NAME", "ReplayModel"]


class ReplayModel:
    """One turn's script at a time; the gateway runs one conversation at a time against it."""

    def __init__(self) -> None:
        self._model = ObedientModel()
        self.offered: list[list[str]] = []
        """The tool names of each chat request of the current turn."""

    def start(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        """The script of the next turn: (name, arguments) pairs."""
        self._model.start([SimpleNamespace(function=name, args=arguments) for name, arguments in calls], DONE)
        self.offered = []

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            tools = request.json.get("tools") or []
            self.offered.append([tool.get("function", {}).get("name", "") for tool in tools])
        return self._model(request)
