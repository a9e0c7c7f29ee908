"""mcp_agent: an MCP gateway agent.

It starts MCP tool servers, offers their tools to a model server, runs a guarded tool-calling
loop, and serves the whole loop as one MCP tool, ``agent_query``. The public API is what this
module exports; everything else may change.
"""

from __future__ import annotations

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
from .loop.agent import run as run
from .loop.approvals import ApprovalQueue as ApprovalQueue
from .loop.approvals import Gate as Gate
from .loop.approvals import GlobGate as GlobGate
from .loop.approvals import Verdict as Verdict
from .loop.result import RunResult as RunResult
from .loop.result import TerminationReason as TerminationReason
from .loop.sessions import MemorySessionStore as MemorySessionStore
from .loop.sessions import SessionStore as SessionStore
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
from .tools.base import ToolSource as ToolSource
from .tools.hub import ToolHub as ToolHub
from .tools.hub import open_tool_hub as open_tool_hub

__version__ = "0.1.0"

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
    "open_provider",
    "open_state",
    "open_tool_hub",
    "parse_config",
    "run",
]
