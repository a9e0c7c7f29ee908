"""How a run emits its events: ``Emitter`` stamps each with the run's ids and hands it to every sink.

The run (``loop/run.py``, ``loop/_state.py``) and the tool dispatch (``loop/_dispatch.py``)
emit through one ``Emitter`` per run. A sink that raises is logged and ignored: events must
never break a run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..events import Event, EventSink

logger = logging.getLogger("mcp_agent.loop._dispatch")


class Emitter:
    """Builds events with the run's ids and hands them to every sink.

    A sink that raises is logged and ignored: events must never break a run.
    """

    def __init__(
        self, sinks: Sequence[EventSink], run_id: str, session_id: str | None, caller: str | None = None
    ) -> None:
        self.sinks = tuple(sinks)
        self.run_id = run_id
        self.session_id = session_id
        self.caller = caller

    def __call__(self, event_type: Callable[..., Event], /, **fields: Any) -> None:
        if not self.sinks:
            return
        event = event_type(run_id=self.run_id, session_id=self.session_id, caller=self.caller, **fields)
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception:
                logger.exception("event sink %r failed on %s", sink, event.type)
