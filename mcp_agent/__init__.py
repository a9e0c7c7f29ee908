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
from .exceptions import ToolCallError as ToolCallError
from .exceptions import ToolServerError as ToolServerError
from .exceptions import ToolServerExited as ToolServerExited
from .exceptions import ToolServerStartError as ToolServerStartError
from .loop.result import RunResult as RunResult
from .loop.result import TerminationReason as TerminationReason
from .messages import Message as Message
from .messages import ToolCall as ToolCall
from .messages import ToolResult as ToolResult
from .messages import ToolSpec as ToolSpec
from .messages import Turn as Turn
from .messages import Usage as Usage

__version__ = "0.1.0"

__all__ = [
    "AgentConfig",
    "ArgumentValidationError",
    "ConfigError",
    "ContextLengthError",
    "Event",
    "EventSink",
    "Limits",
    "MCPAgentError",
    "Message",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderResponseError",
    "RunResult",
    "TerminationReason",
    "ToolCall",
    "ToolCallError",
    "ToolResult",
    "ToolServerError",
    "ToolServerExited",
    "ToolServerStartError",
    "ToolSpec",
    "Turn",
    "Usage",
    "load_config",
    "parse_config",
]
