"""mcp_agent: an MCP gateway agent.

It starts MCP tool servers, offers their tools to a model server, runs a guarded tool-calling
loop, and serves the whole loop as one MCP tool, ``agent_query``. The public API is what this
module exports; everything else may change.

The names are loaded when first used (PEP 562): ``import mcp_agent`` costs next to nothing and
loads neither the MCP SDK nor pydantic nor httpx, so ``mcp-agent --help`` starts at once. Type
checkers read the imports under ``TYPE_CHECKING``; ``_EXPORTS`` says where each name lives at
run time, and a test keeps the two and ``__all__`` in step.
"""

from __future__ import annotations

from importlib import import_module as _import_module

from ._version import __version__ as __version__

TYPE_CHECKING = False  # not typing's: importing typing would cost more than this whole module
if TYPE_CHECKING:
    from typing import Any

    from .assembly import open_agent as open_agent
    from .config import AgentConfig as AgentConfig
    from .config import Limits as Limits
    from .config import load_config as load_config
    from .config import parse_config as parse_config
    from .events import Event as Event
    from .events import EventSink as EventSink
    from .exceptions import ArgumentValidationError as ArgumentValidationError
    from .exceptions import ConfigError as ConfigError
    from .exceptions import ContextLengthError as ContextLengthError
    from .exceptions import MCPAgentError as MCPAgentError
    from .exceptions import ProviderConnectionError as ProviderConnectionError
    from .exceptions import ProviderError as ProviderError
    from .exceptions import ProviderHTTPError as ProviderHTTPError
    from .exceptions import ProviderResponseError as ProviderResponseError
    from .exceptions import SessionTooLarge as SessionTooLarge
    from .exceptions import StateError as StateError
    from .exceptions import ToolCallError as ToolCallError
    from .exceptions import ToolServerError as ToolServerError
    from .exceptions import ToolServerExited as ToolServerExited
    from .exceptions import ToolServerStartError as ToolServerStartError
    from .loop.agent import Agent as Agent
    from .loop.approvals import ApprovalQueue as ApprovalQueue
    from .loop.approvals import Gate as Gate
    from .loop.approvals import GlobGate as GlobGate
    from .loop.approvals import Verdict as Verdict
    from .loop.result import RunResult as RunResult
    from .loop.result import TerminationReason as TerminationReason
    from .loop.run import run as run
    from .messages import Message as Message
    from .messages import ToolCall as ToolCall
    from .messages import ToolResult as ToolResult
    from .messages import ToolSpec as ToolSpec
    from .messages import Turn as Turn
    from .messages import Usage as Usage
    from .providers.base import ModelRequest as ModelRequest
    from .providers.base import Provider as Provider
    from .providers.factory import open_provider as open_provider
    from .state import RunRecord as RunRecord
    from .state import State as State
    from .state import StateLimits as StateLimits
    from .state import open_state as open_state
    from .state.base import SessionStore as SessionStore
    from .state.memory import MemorySessionStore as MemorySessionStore
    from .tools.base import ToolSource as ToolSource
    from .tools.hub import ToolHub as ToolHub
    from .tools.hub import open_tool_hub as open_tool_hub


_EXPORTS: dict[str, str] = {
    "Agent": ".loop.agent",
    "AgentConfig": ".config",
    "ApprovalQueue": ".loop.approvals",
    "ArgumentValidationError": ".exceptions",
    "ConfigError": ".exceptions",
    "ContextLengthError": ".exceptions",
    "Event": ".events",
    "EventSink": ".events",
    "Gate": ".loop.approvals",
    "GlobGate": ".loop.approvals",
    "Limits": ".config",
    "MCPAgentError": ".exceptions",
    "MemorySessionStore": ".state.memory",
    "Message": ".messages",
    "ModelRequest": ".providers.base",
    "Provider": ".providers.base",
    "ProviderConnectionError": ".exceptions",
    "ProviderError": ".exceptions",
    "ProviderHTTPError": ".exceptions",
    "ProviderResponseError": ".exceptions",
    "RunRecord": ".state",
    "RunResult": ".loop.result",
    "SessionStore": ".state.base",
    "SessionTooLarge": ".exceptions",
    "State": ".state",
    "StateError": ".exceptions",
    "StateLimits": ".state",
    "TerminationReason": ".loop.result",
    "ToolCall": ".messages",
    "ToolCallError": ".exceptions",
    "ToolHub": ".tools.hub",
    "ToolResult": ".messages",
    "ToolServerError": ".exceptions",
    "ToolServerExited": ".exceptions",
    "ToolServerStartError": ".exceptions",
    "ToolSource": ".tools.base",
    "ToolSpec": ".messages",
    "Turn": ".messages",
    "Usage": ".messages",
    "Verdict": ".loop.approvals",
    "load_config": ".config",
    "open_agent": ".assembly",
    "open_provider": ".providers.factory",
    "open_state": ".state",
    "open_tool_hub": ".tools.hub",
    "parse_config": ".config",
    "run": ".loop.run",
}
"""Each public name and the module that defines it."""

__all__ = [
    "Agent",
    "AgentConfig",
    "ApprovalQueue",
    "ArgumentValidationError",
    "ConfigError",
    "ContextLengthError",
    "Event",
    "EventSink",
    "Gate",
    "GlobGate",
    "Limits",
    "MCPAgentError",
    "MemorySessionStore",
    "Message",
    "ModelRequest",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderResponseError",
    "RunRecord",
    "RunResult",
    "SessionStore",
    "SessionTooLarge",
    "State",
    "StateError",
    "StateLimits",
    "TerminationReason",
    "ToolCall",
    "ToolCallError",
    "ToolHub",
    "ToolResult",
    "ToolServerError",
    "ToolServerExited",
    "ToolServerStartError",
    "ToolSource",
    "ToolSpec",
    "Turn",
    "Usage",
    "Verdict",
    "load_config",
    "open_agent",
    "open_provider",
    "open_state",
    "open_tool_hub",
    "parse_config",
    "run",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
