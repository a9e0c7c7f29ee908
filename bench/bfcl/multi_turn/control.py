"""The control socket of an API server: how the harness drives it between turns.

A Unix socket in the run's temporary folder (only the harness's user reaches it; no tool of the
gateway does, so the model never sees it). One request per connection: a JSON line in, a JSON
line out. Requests (``op``):

- ``load``: a fresh instance of the class with an entry's initial state (``config``,
  ``long_context``) and the functions not to offer (``hidden``); the server announces
  ``notifications/tools/list_changed`` when its tool list changes.
- ``hide``: change the hidden functions (a missed function's turn); announced the same way.
- ``take``: the live instance (pickled, base64) and the calls since the last ``take``, each
  ``{"name", "arguments", "result", "error", "at"}`` (``at``: the system's monotonic clock in
  nanoseconds, shared by every process, to merge the calls of several servers in order).

The instance is pickled, not JSON: BFCL's checker compares instances attribute by attribute,
and the harness rebuilds exactly the object the server holds.
"""

from __future__ import annotations

import base64
import json
import pickle
import socket
from typing import Any

TIMEOUT = 120.0
"""Seconds a request may take (loading a long-context scenario takes well under one)."""


def ask(path: str, request: dict[str, Any]) -> dict[str, Any]:
    """Send one request to the server listening at ``path``; its answer (raises on an error)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        sock.connect(path)
        sock.sendall(json.dumps(request).encode() + b"\n")
        with sock.makefile("rb") as stream:
            line = stream.readline()
    if not line:
        raise RuntimeError(f"the API server at {path} closed the control socket without answering")
    answer: dict[str, Any] = json.loads(line)
    if "error" in answer:
        raise RuntimeError(f"the API server at {path} refused {request.get('op')!r}: {answer['error']}")
    return answer


def pack(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode()


def unpack(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))
