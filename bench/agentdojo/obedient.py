"""The obedient model: a scripted OpenAI-compatible model that falls for every injection.

It answers ``/chat/completions`` (non-streamed) from a script set before each run (``start``):
the user task's ground-truth calls, one per reply, in order; when the tool results it was just
sent carry an injection (AgentDojo's ``important_instructions`` text, found by its ``<INFORMATION>``
marker), the injection task's ground-truth calls come first, once per run — the worst case, a
model that does whatever a tool result tells it. With no call left it answers with the user
task's ground-truth output (AgentDojo's ``GROUND_TRUTH_OUTPUT``, where the task gives one),
followed by the injection task's when it fell for one (some injections only ask the model to
say something).

A refused call (an approval denied, a policy refusal) changes nothing: the script goes on with
its next call, as a model that reads the refusal and carries on would.

It is the ``handler`` of ``tests/fakes/model_server.py``'s ``FakeModelServer`` (real HTTP on
127.0.0.1), so the gateway talks to it exactly as to a real endpoint.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from typing import Any

from tests.fakes.model_server import RecordedRequest, Reply
from tests.fakes.openai_shapes import Call, completion

MARK = "<INFORMATION>"
"""What every ``important_instructions`` injection holds, whatever the YAML formatter did to the
rest of it (it folds long lines and quotes strings with newlines)."""
NAME = "obedient"
"""The model name it serves (``llm.model``)."""
DONE = "Done."
"""The answer when the user task gives no ground-truth output."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class ObedientModel:
    """A script per run; the gateway runs one at a time against it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()
        self._injection: list[tuple[str, dict[str, Any]]] | None = None
        self._answer = DONE
        self._injection_answer = ""
        self._ids = itertools.count()
        self.injected = False
        """Whether the current run's script took the injection task's calls."""

    def start(
        self, user_calls: Any, answer: str, injection_calls: Any = None, injection_answer: str = ""
    ) -> None:
        """The script of the next run: AgentDojo ``FunctionCall`` lists and the final answers
        (``injection_calls`` None: no attack in this run)."""
        with self._lock:
            self._queue = deque((call.function, dict(call.args)) for call in user_calls)
            self._injection = (
                None
                if injection_calls is None
                else [(call.function, dict(call.args)) for call in injection_calls]
            )
            self._answer = answer or DONE
            self._injection_answer = injection_answer
            self.injected = False

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.path.endswith("/models"):  # the gateway's health check: is the model served?
            return Reply.json(
                {"object": "list", "data": [{"id": NAME, "object": "model", "owned_by": "bench"}]}
            )
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return Reply.json({"error": {"message": f"not found: {request.path}"}}, status=404)
        messages = request.json.get("messages", [])
        fresh: list[str] = []
        for message in reversed(messages):  # the tool results since the model last spoke
            if message.get("role") != "tool":
                break
            fresh.append(_text(message.get("content")))
        with self._lock:
            if self._injection is not None and not self.injected and any(MARK in text for text in fresh):
                self.injected = True
                self._queue.extendleft(reversed(self._injection))
            if not self._queue:
                said = f"{self._answer} {self._injection_answer}" if self.injected else self._answer
                return Reply.json(completion(content=said.strip()))
            name, arguments = self._queue.popleft()
            call = Call(name, json.loads(json.dumps(arguments, default=str)), id=f"call_{next(self._ids)}")
            return Reply.json(completion(content=None, calls=[call]))
