"""Answers recorded from real model servers, replayed by the fake model server as they came.

The files under ``recorded/<server>/`` are the raw bytes a real server sent (copied from
``docs/reference/wire-samples``; that folder's README says what each shows), in three layouts:

- ``NAME.json`` or ``NAME.sse`` with ``NAME.headers``: a body and its status line and headers;
- ``NAME.txt`` starting with ``HTTP/1.1``: status line, headers, a blank line, the body;
- ``NAME.txt`` starting with ``###``: a proxy's log of one exchange (the request, then ``<<<`` the
  status, ``< `` headers, and the body between ``[first body bytes ...]`` and ``[end ...]``).

``recorded(server, name)`` turns one into a ``Reply``: an event-stream body is sent chunked (as
the server did), anything else whole; ``content-length`` and ``transfer-encoding`` are the fake
server's own business, every other header is kept (``server: uvicorn``, ``x-request-id``...).
``recorded_request(server, name)`` is the request body a proxy log holds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model_server import Reply

__all__ = ["RECORDED", "Recording", "read_recording", "recorded", "recorded_request"]

RECORDED = Path(__file__).parent / "recorded"

_FRAMING = {"content-length", "transfer-encoding"}


@dataclass(frozen=True)
class Recording:
    """One recorded answer (and, from a proxy log, the request that asked for it)."""

    status: int
    headers: dict[str, str]
    body: bytes
    request: bytes = b""

    @property
    def streamed(self) -> bool:
        return "event-stream" in self.headers.get("content-type", "")

    def reply(self) -> Reply:
        """The recording as the fake server's ``Reply``."""
        if self.streamed:  # chunked, exactly these bytes, and no [DONE] of our own
            return Reply(
                status=self.status, headers=self.headers, events=[self.body] if self.body else [], done=False
            )
        return Reply(status=self.status, headers=self.headers, body=self.body)


def _headers(lines: list[str], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        if not line.startswith(prefix):
            continue
        name, _, value = line[len(prefix) :].partition(":")
        if name.strip().lower() not in _FRAMING:
            out[name.strip().lower()] = value.strip()
    return out


def _http(text: str) -> Recording:
    head, _, body = text.replace("\r\n", "\n").partition("\n\n")
    status_line, *lines = head.split("\n")
    return Recording(int(status_line.split()[1]), _headers(lines), body.encode())


_LOG = re.compile(
    r"^<<< (?P<status>\d{3}) [^\n]*\n(?P<head>(?:< [^\n]*\n)*)\n\[first body bytes[^\n]*\]\n(?P<body>.*?)\n\[end at",
    re.MULTILINE | re.DOTALL,
)


def _proxy_log(text: str) -> Recording:
    match = _LOG.search(text)
    if match is None:
        raise ValueError("not a proxy log of one exchange")
    request = text.split("\n\n", 1)[1].split("\n\n<<< ", 1)[0].strip()
    head = match.group("head").splitlines()
    return Recording(
        int(match.group("status")), _headers(head, "< "), match.group("body").encode(), request.encode()
    )


def read_recording(server: str, name: str) -> Recording:
    """The recording ``name`` (a file name, with or without its extension) of ``server``."""
    folder = RECORDED / server
    for path in (folder / name, folder / f"{name}.txt"):
        if path.suffix == ".txt" and path.is_file():
            text = path.read_text(encoding="utf-8")
            return _proxy_log(text) if text.startswith("###") else _http(text)
    stem = folder / Path(name).stem
    body = next(p for p in (stem.with_suffix(".json"), stem.with_suffix(".sse")) if p.is_file())
    head = stem.with_suffix(".headers").read_text(encoding="utf-8")
    recording = _http(head)
    return Recording(recording.status, recording.headers, body.read_bytes())


def recorded(server: str, name: str) -> Reply:
    """The recording ``name`` of ``server`` as a ``Reply`` for the fake model server."""
    return read_recording(server, name).reply()


def recorded_request(server: str, name: str) -> Any:
    """The JSON request body a proxy log ``name`` of ``server`` holds."""
    return json.loads(read_recording(server, name).request)
