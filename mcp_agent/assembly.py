"""The one place that wires concrete parts into an ``Agent``: which model server, which tool
servers, which state.

The loop knows only protocols (``Provider``, ``ToolSource``, the stores of ``State``). What an
agent.json names becomes concrete here: the model client (``providers.factory.open_provider``),
the tool servers (``tools.hub.open_tool_hub``), tracing (``telemetry``), and the config sized for
the model server as identified (``providers.servers.info.sized_for_server``). The command line
and the gateway open their agent here, and so does a library user::

    async with open_agent("agent.json") as agent:  # starts the tool servers, opens one model client
        result = await agent.query("Is port 8000 in use?")
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .config import AgentConfig, load_config
from .events import EventSink
from .loop.agent import Agent
from .loop.approvals import ApprovalQueue, Gate, require_warnings
from .loop.recording import RecordTo
from .providers.factory import open_provider
from .providers.servers.info import server_info_of, sized_for_server
from .state.base import PinStore, SessionStore, State
from .state.folder import private_state_dir
from .telemetry.setup import flush_tracing, setup_tracing
from .tools.hub import open_tool_hub
from .tools.pins import ToolPins

logger = logging.getLogger(__name__)


@asynccontextmanager
async def open_agent(
    config: AgentConfig | str | os.PathLike[str],
    *,
    state: State | None = None,
    record: RecordTo | None = None,
    record_children: bool = True,
    hold_starts: bool = False,
    sessions: SessionStore | None = None,
    approvals: ApprovalQueue | None = None,
    events: EventSink | None = None,
    gate: Gate | None = None,
    pins: PinStore | None = None,
) -> AsyncIterator[Agent]:
    """An Agent over the configured model server and tool servers, for ``async with``.

    Starts every tool server and opens one model client; both are closed on exit. ``state``,
    ``record``, ``sessions``, ``approvals``, ``events`` and ``gate`` go to the ``Agent`` (see
    there); ``state`` is used, not closed. With ``record_children`` (the default, as for the CLI
    and the gateway) the tool servers' processes are recorded in the state folder
    (``$MCP_AGENT_STATE_DIR``, else ``$XDG_STATE_HOME/mcp-agent``, else
    ``~/.local/state/mcp-agent``), and what an earlier, killed process left there is reaped
    first. Once the servers are up, each ``approvals.require`` glob that matches no offered tool
    is logged as a warning. With ``hold_starts`` the servers offered from the tool cache do not
    start until ``agent.tools.release_starts()`` (the gateway calls it once it serves; 5 s at
    most). Each server's tool definitions are pinned in ``pins`` (default: ``state.pins``; None
    and no state: not pinned), and a changed one is withheld until accepted (``tools/pins.py``,
    ``policy.pinNewServers``).

    Raises:
        ConfigError: the config file is missing or invalid.
    """
    if not isinstance(config, AgentConfig):
        config = load_config(config)
    pin_store = pins if pins is not None else state.pins if state is not None else None
    tool_pins = (
        ToolPins(pin_store, pin_new_servers=config.policy.pin_new_servers, by=state.replica if state else "")
        if pin_store is not None
        else None
    )
    setup_tracing(config.telemetry)  # OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT says so (and none is set)
    async with (
        open_provider(config.llm) as provider,
        open_tool_hub(
            config.servers(),
            default_timeout=config.limits.tool_timeout_seconds,
            state_dir=private_state_dir() if record_children else None,
            hold_starts=hold_starts,
            relay_calls=config.gateway.expose_tools,  # servers may ask the exposed calls' clients
            pins=tool_pins,
        ) as hub,
    ):
        down = [status.name for status in hub.status() if status.status not in ("up", "disabled")]
        for warning in require_warnings(config.approvals.require, hub, down=down):
            logger.warning("%s", warning)
        config = sized_for_server(config, server_info_of(provider), hub.list_tools())
        try:
            yield Agent(
                provider,
                hub,
                config,
                state=state,
                sessions=sessions,
                approvals=approvals,
                events=events,
                gate=gate,
                record=record,
            )
        finally:
            await flush_tracing()
