"""STOPGAP for ``exposeTools``: one inner tool call through the loop's own guards.

The Agent should offer this as ``Agent.call_tool(name, arguments, *, session_id=None,
events=None) -> ToolResult`` (requested from the loop's owner). Until it does, this builds the
same thing from the loop's ``Dispatcher``: the call is resolved, its arguments validated and
coerced, the approval gate asked (the call waits in the Agent's ApprovalQueue), the tool called
under ``toolTimeoutSeconds``, the result cut to ``maxResultChars``, and ToolCallStarted/Ended
(and approval) events emitted, exactly as for a call the model makes. Nothing goes around them.
Delete this module once ``Agent.call_tool`` exists (``service.call_tool`` prefers it).
"""

from __future__ import annotations

import secrets
from typing import Any

from .._types import JSONObject
from ..events import EventSink
from ..messages import ToolCall, ToolResult


async def guarded_call(
    agent: Any,
    name: str,
    arguments: JSONObject,
    *,
    session_id: str | None = None,
    events: EventSink | None = None,
) -> ToolResult:
    """Call ``name`` once with the loop's guards (see the module docstring)."""
    from ..loop._dispatch import Dispatcher, Emitter

    run_id = secrets.token_hex(8)
    emit = Emitter([events] if events is not None else [], run_id, session_id)
    dispatcher = Dispatcher(
        agent.tools,
        agent.config.limits,
        emit,
        gate=getattr(agent, "_gate", None),
        approvals=getattr(agent, "approvals", None),
    )
    call = ToolCall(id=f"direct_{run_id}", name=name, arguments=dict(arguments))
    # tainted: the arguments come from outside, like tool output would
    plan = await dispatcher.prepare([call], round=1, tainted=True, offered=dispatcher.offered())
    await dispatcher.execute(plan)
    [message] = dispatcher.finish(plan, "the call was interrupted")
    return ToolResult(message.content, is_error=message.is_error)
