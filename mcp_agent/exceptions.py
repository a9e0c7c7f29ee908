"""Every exception mcp_agent raises, in one place.

The hierarchy::

    MCPAgentError
    ├── ConfigError                   agent.json is invalid (the message names the JSON path)
    ├── ProviderError                 the model server failed (.status, .request_id, .terminal)
    │   ├── ProviderConnectionError   could not reach the server (the message says how to start one)
    │   ├── ProviderHTTPError         the server answered with an error status
    │   ├── ContextLengthError        the request does not fit the model's context window
    │   └── ProviderResponseError     the answer was malformed or the stream broke off
    ├── ToolServerError               an MCP tool server failed (.server)
    │   ├── ToolServerStartError      it could not be started (.exit_code, .stderr_tail)
    │   └── ToolServerExited          it exited while in use (.exit_code, .stderr_tail)
    ├── ToolCallError                 a tool call could not be made (unknown tool, server down)
    ├── LoginFailed                   ``mcp-agent login`` could not log in to a remote server
    ├── ArgumentValidationError       a tool call's arguments do not match its schema (.errors)
    ├── ApprovalsFull                 too many approvals wait, in all or a caller's (.waiting, .limit, .caller)
    ├── StateError                    the state store (``state.url``) failed: disk, database, network
    │   └── SessionTooLarge           a conversation is over ``state.maxSessionBytes`` (.size, .limit)
    └── GatewayFailed                 the gateway could not serve any more (its service stopped, its store broken too long)

Inside the agent loop failures are data, not exceptions: a tool error becomes a tool result the
model reads, and a provider error ends the run with a termination reason. These exceptions are
raised at the edges (config loading, start-up) and between layers.

A message never shows a secret the process knows (an API key echoed in a server's error body, a
token in a tool server's stderr): the messages are masked as they are made (``_redact``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._redact import mask_secrets

if TYPE_CHECKING:
    from .messages import Usage


class MCPAgentError(Exception):
    """The base class of every error mcp_agent raises on purpose."""

    def __str__(self) -> str:
        return mask_secrets(super().__str__())


class ConfigError(MCPAgentError):
    """The configuration is invalid.

    Args:
        message: what is wrong, naming the JSON path (``mcpServers.files.command``).
        path: the JSON path as a dotted string, when one applies.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


class ProviderError(MCPAgentError):
    """The model server failed.

    Args:
        message: the server's own message where it sent one.
        status: the HTTP status, when there was a response.
        request_id: the server's request id, for reports to the provider.
        terminal: True when retrying cannot help (auth, bad request, quota): the run ends at once.
        retryable: True when a retry may succeed (connection error, 429, 5xx).

    Attributes:
        usage: what the failed call cost, estimated, when the server had started to answer (a
            stream that broke off); the loop counts it against ``limits.maxTokens``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        terminal: bool = False,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        message = mask_secrets(message)
        super().__init__(message)
        self.message = message
        self.status = status
        self.request_id = request_id
        self.terminal = terminal
        self.retryable = retryable
        self.retry_after = retry_after
        self.usage: Usage | None = None

    def __str__(self) -> str:
        parts = [self.message]
        if self.status is not None:
            parts.insert(0, f"HTTP {self.status}:")
        if self.request_id:
            parts.append(f"(request id {self.request_id})")
        return " ".join(parts)


class ProviderConnectionError(ProviderError):
    """The model server could not be reached (refused, DNS, TLS, connect timeout)."""


class ProviderHTTPError(ProviderError):
    """The model server answered with an error status."""


class ContextLengthError(ProviderError):
    """The request does not fit the model's context window; trim history and retry once."""


class ProviderResponseError(ProviderError):
    """The model server's answer was malformed, or its stream broke off before the end."""


class ToolServerError(MCPAgentError):
    """An MCP tool server failed.

    Args:
        message: what happened.
        server: the server's name in agent.json.
        exit_code: the process exit code, when it exited.
        stderr_tail: the last lines the process wrote to stderr.
    """

    def __init__(
        self,
        message: str,
        *,
        server: str,
        exit_code: int | None = None,
        stderr_tail: Sequence[str] = (),
    ) -> None:
        message = mask_secrets(message)
        super().__init__(message)
        self.message = message
        self.server = server
        self.exit_code = exit_code
        self.stderr_tail = tuple(mask_secrets(line) for line in stderr_tail)

    def __str__(self) -> str:
        text = f"{self.server}: {self.message}"
        if self.exit_code is not None:
            text += f" (exit code {self.exit_code})"
        if self.stderr_tail:
            text += "; stderr: " + " | ".join(self.stderr_tail[-5:])
        return text


class ToolServerStartError(ToolServerError):
    """A tool server could not be started, or did not finish its handshake in time."""


class ToolServerExited(ToolServerError):
    """A tool server exited while it was in use."""


class ToolCallError(MCPAgentError):
    """A tool call could not be made: the tool is unknown or its server is unavailable."""


class ArgumentValidationError(MCPAgentError):
    """A tool call's arguments do not match the tool's input schema.

    Args:
        errors: one dict per violation: ``{"path", "message", "received"}``.
    """

    def __init__(self, message: str, errors: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.errors = list(errors)


class ApprovalsFull(MCPAgentError):
    """Too many approvals are waiting, in all (``approvals.maxPending``) or for one caller (its
    share of it): the call is denied at once, and nothing is stored.

    The store raises it from ``ApprovalStore.add``, whose count and add are one atomic step (in
    every process sharing the store); the loop turns it into the denial the model reads.

    Args:
        waiting: how many approvals wait now (in all, or the caller's).
        limit: the cap they reached.
        caller: the caller whose share is full; None when the total cap is.
    """

    def __init__(self, waiting: int, limit: int, caller: str | None = None) -> None:
        if caller is None:
            message = (
                f"too many approvals are waiting ({waiting}, approvals.maxPending); "
                "try again once some are answered"
            )
        else:
            message = (
                f"too many approvals of caller {caller!r} are waiting ({waiting}, its share of "
                "approvals.maxPending); try again once some are answered"
            )
        super().__init__(message)
        self.waiting = waiting
        self.limit = limit
        self.caller = caller


class StateError(MCPAgentError):
    """The state store (``state.url``: conversations, approvals, run records) failed.

    Raised by the store's operations (a disk full, a database locked past its busy timeout, a
    server gone away). The agent loop catches it where a run's outcome is concerned: an answer is
    never lost because its conversation could not be saved (the result's ``detail`` says so).
    A store that cannot even be opened raises ``ConfigError`` naming ``state.url`` instead.
    """


class LeaseLost(StateError):
    """A run's lock on its conversation lapsed before it saved (its process stalled longer than
    ``state.leaseSeconds``, or the lock was broken as a dead replica's): another run may have
    written the conversation since, so this run's transcript is not saved over it.

    Args:
        session_id: the conversation.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r}: this run's lock on it lapsed before the save (a stall longer than "
            "state.leaseSeconds), and another run may have written it since; the transcript was not saved over it"
        )
        self.session_id = session_id


class SessionTooLarge(StateError):
    """A conversation's stored form is over the store's cap (``state.maxSessionBytes``).

    Args:
        session_id: the conversation.
        size: its stored size in bytes.
        limit: the cap.
    """

    def __init__(self, session_id: str, size: int, limit: int) -> None:
        super().__init__(
            f"session {session_id!r} is too big to store ({size} bytes, state.maxSessionBytes is {limit}); "
            "start a new conversation or raise the cap"
        )
        self.session_id = session_id
        self.size = size
        self.limit = limit


class LoginFailed(MCPAgentError):
    """``mcp-agent login`` could not log in to a remote server (the message says why and what to do)."""


class GatewayFailed(MCPAgentError):
    """The gateway stopped because it could not serve any more: its service ended on an error,
    or its state store failed for longer than ``state.maxOutageSeconds``. ``serve`` raises it
    after a graceful shutdown, and ``mcp-agent serve`` exits 1, so that a supervisor restarts the
    process instead of leaving it alive and answering errors.

    Args:
        reason: what ended it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the gateway stopped: {reason}")
        self.reason = reason
