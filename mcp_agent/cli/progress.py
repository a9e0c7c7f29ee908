"""Live progress for the terminal: an EventSink that prints one line per step to stderr."""

from __future__ import annotations

import contextlib
from typing import TextIO

from ..events import Event, describe


class ProgressPrinter:
    """Prints ``events.describe`` lines to a stream (the CLI's stderr). Never raises."""

    def __init__(self, out: TextIO, *, max_rounds: int = 0) -> None:
        self.out = out
        self.max_rounds = max_rounds

    def emit(self, event: Event) -> None:
        line = describe(event, self.max_rounds)
        if line is None:
            return
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stderr must not break the run
            print(f"· {line}", file=self.out, flush=True)
