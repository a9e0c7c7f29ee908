r"""Talking to one live session of a tool server: requests, answers and failures.

A request goes over the session: its tool list (page by page), a tool call (to a 2026-07-28
Streamable HTTP server: as one POST of our own beside the session, ``raw_call.py``), and any other
request (resources, prompts), each failure translated once, here, into words (a failed start or
a crash, with the exit code and the tail of a stdio child's stderr, for the status, the log and
failed calls). An answer comes back through the repair filter (``ResponseRepairer``, below),
which mends and bounds it before the SDK's strict validation sees it.

``call_tool_on`` never raises for what the server does: a timeout (the server gets
``notifications/cancelled`` from the SDK and stays usable), a crash (the exit code and stderr
tail), a JSON-RPC error or an invalid result come back as error ``ToolResult``\ s.
``ask_on`` raises ``MCPError`` with a JSON-RPC code for every failure.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..._redact import redact_url
from ...config import RemoteServerConfig, StdioServerConfig
from ...exceptions import ToolServerError, ToolServerExited, ToolServerStartError
from ...messages import JSONObject, ToolResult
from ...telemetry.base import note_tool_transport
from ..presentation import call_result
from ..relay import CallerChannel, Resume, through_rounds
from ..stdio.transport import StdioChild
from .caller_capabilities import speaking_for
from .raw_call import RawCaller, UseSdk
from .tasks import CreatedTask, TaskTaker, follow, outcome

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P")
E = TypeVar("E")

CLIENT_INFO = types.Implementation(name="mcp-agent", version="0.1.0")
MAX_PAGES = 100
"""The most pages of one list a server is asked for (a cursor that loops cannot trap us)."""


class ProgressCallback(Protocol):
    """Receives a call's ``notifications/progress``: ``(progress, total, message)``."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


@dataclass
class LiveSession:
    """One running incarnation of a server: its session and what sits under it."""

    session: ClientSession
    repairer: ResponseRepairer
    child: StdioChild | None
    ended: anyio.Event
    """Set when the transport's read side ended: the server exited or the connection dropped."""
    raw: RawCaller | None = None
    """Sends tool calls without the session (a 2026-07-28 HTTP server: ``raw_call.py``)."""


async def list_pages(
    live: LiveSession,
    server: str,
    what: str,
    fetch: Callable[[ClientSession, types.PaginatedRequestParams | None], Awaitable[P]],
    items_of: Callable[[P], Sequence[E]],
    *,
    max_items: int | None = None,
) -> list[E] | None:
    """Every page of one list (at most ``MAX_PAGES``); None when it has more than ``max_items``."""
    listed: list[E] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await fetch(live.session, params)
        listed.extend(items_of(page))
        if max_items is not None and len(listed) > max_items:
            return None
        cursor = getattr(page, "next_cursor", None)
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
    else:
        logger.warning("%s: stopped listing %s after %d pages", server, what, MAX_PAGES)
    return listed


async def _tools_page(
    session: ClientSession, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return await session.list_tools(params=params)


async def list_tool_pages(live: LiveSession, server: str) -> list[types.Tool]:
    """Every page of ``tools/list`` (at most ``MAX_PAGES``)."""
    return await list_pages(live, server, "tools", _tools_page, lambda page: page.tools) or []


async def ask_on(
    live: LiveSession,
    server: str,
    what: str,
    request: Callable[[ClientSession], Awaitable[T]],
    timeout: float | None,
) -> T:
    """Send one request (not a tool call) on the session; see ``ServerConnection.ask``."""
    try:
        with anyio.fail_after(timeout or None):
            return await request(live.session)
    except TimeoutError:
        raise MCPError(
            REQUEST_TIMEOUT, f"{what}: server {server} did not answer within {timeout:g} s"
        ) from None
    except MCPError:
        raise
    except ValidationError as exc:
        problem = describe_validation_error(exc)
        raise MCPError(
            INTERNAL_ERROR, f"{what}: server {server} returned an invalid result ({problem})"
        ) from None
    except Exception as exc:
        logger.warning("%s: %s failed: %r", server, what, exc)
        raise MCPError(INTERNAL_ERROR, f"{what}: server {server}: {type(exc).__name__}: {exc}") from None


async def call_tool_on(
    live: LiveSession,
    *,
    server: str,
    config: StdioServerConfig | RemoteServerConfig,
    mcp_name: str,
    arguments: JSONObject,
    shown: str,
    start: float,
    timeout: float | None,
    on_progress: ProgressCallback | None,
    channel: CallerChannel | None = None,
) -> ToolResult:
    """Call ``mcp_name`` on the session; every failure comes back as an error result.

    A 2026-07-28 server's ``input_required`` goes to ``channel`` (the client of an exposed call,
    ``tools/relay.py``): it keeps the result for its client (the call answers
    ``INPUT_REQUIRED_RELAYED``), or answers the requests and the call is retried with the answers
    (at most ``MAX_INPUT_ROUNDS`` rounds). Without a channel (the agent's own loop) it is an error.
    The server's error for the client's own retry (a tampered ``requestState``) goes to the channel
    too (``refused``), for the client to get as it is. A 2026 server is told the capabilities
    of the channel's client, not the gateway's (``caller_capabilities.py``), so its ``-32021``
    (a capability the client did not declare) goes to the channel as well; so does a
    handshake-era server's, which is the channel's own refusal of its request, passed on.
    """

    def failed(text: str) -> ToolResult:
        return ToolResult(text, is_error=True, elapsed_ms=(time.perf_counter() - start) * 1000)

    remote = config if isinstance(config, RemoteServerConfig) else None
    note_tool_transport(  # for the call's span (telemetry.py), when traced
        transport="pipe" if remote is None else "tcp",
        url=remote.url if remote is not None else None,
        protocol_version=live.session.protocol_version,
    )
    modern = live.session.protocol_version in MODERN_PROTOCOL_VERSIONS
    level = channel.log_level() if channel is not None and modern else None
    capabilities = channel.capabilities() if channel is not None and modern else None
    meta = cast(types.RequestParamsMeta, {types.LOG_LEVEL_META_KEY: level}) if level is not None else None

    async def send(
        resume: Resume | None,
    ) -> types.CallToolResult | ToolResult | types.InputRequiredResult | CreatedTask:
        try:
            if live.raw is not None and live.raw.takes(mcp_name):
                with suppress(UseSdk):
                    return await live.raw.call_tool(
                        mcp_name,
                        arguments,
                        timeout=timeout or None,
                        on_progress=on_progress,
                        input_responses=resume.input_responses if resume is not None else None,
                        request_state=resume.request_state if resume is not None else None,
                        meta=meta,
                        client_capabilities=capabilities,
                    )
            with speaking_for(capabilities):  # the SDK's session: caller_capabilities.py
                answer = await live.session.call_tool(
                    mcp_name,
                    arguments,
                    read_timeout_seconds=timeout or None,
                    progress_callback=on_progress,
                    input_responses=resume.input_responses if resume is not None else None,
                    request_state=resume.request_state if resume is not None else None,
                    meta=meta,
                    allow_input_required=True,
                    allow_claimed=True,
                )
            if isinstance(answer, types.CallToolResult | types.InputRequiredResult | CreatedTask):
                return answer
            return failed(f"tool {shown} failed: the server answered with a {type(answer).__name__}")
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return failed(f"tool {shown} timed out after {timeout:g} s")
            if (
                exc.code in (CONNECTION_CLOSED, PARSE_ERROR)
                and live.child is None
                and not live.ended.is_set()
            ):
                # a remote server's response stream failed, not its connection (an SSE event or a
                # JSON body over maxMessageBytes: "... exceeded the N byte limit.")
                hint = f" (mcpServers.{server}.maxMessageBytes)" if "byte limit" in exc.message else ""
                return failed(f"tool {shown} failed: server {server}: {exc.message}{hint}")
            if exc.code == CONNECTION_CLOSED:
                crash = await crash_error(server, live.child, None)
                return failed(f"tool {shown} failed: server {crash}")
            if channel is not None and (
                (resume is not None and resume is channel.resume)  # the client's own requestState
                or exc.code == MISSING_REQUIRED_CLIENT_CAPABILITY  # what the client did not declare
            ):  # the client's business: it gets the server's error as it is
                channel.refused(exc.error)
            return failed(f"tool {shown} failed: {exc.message} (MCP error {exc.code})")
        except ValidationError as exc:
            problem = describe_validation_error(exc)
            return failed(f"tool {shown} failed: the server returned an invalid result ({problem})")
        except Exception as exc:  # RuntimeError from the SDK, transport errors of remote servers
            logger.warning("%s: call to %s failed: %r", server, mcp_name, exc)
            return failed(f"tool {shown} failed: {type(exc).__name__}: {exc}")

    result: types.CallToolResult | ToolResult | types.InputRequiredResult | CreatedTask | types.ErrorData
    result = await through_rounds(channel, send)
    if isinstance(result, CreatedTask):  # a 2026 server runs the call as a task (tasks.py)
        if isinstance(channel, TaskTaker) and channel.take_task(server, result):
            return ToolResult(
                TASK_RELAYED.format(shown=shown), elapsed_ms=(time.perf_counter() - start) * 1000
            )
        result = await followed(live, result, shown=shown, timeout=timeout, failed=failed)
    if isinstance(result, ToolResult):
        return result
    if isinstance(result, types.ErrorData):
        return failed(f"tool {shown} failed: {result.message} (MCP error {result.code})")
    if isinstance(result, types.InputRequiredResult):
        if channel is None:
            return failed(input_required_text(shown, result))
        return ToolResult(  # the channel handed it to its client, who retries
            INPUT_REQUIRED_RELAYED.format(shown=shown), elapsed_ms=(time.perf_counter() - start) * 1000
        )
    return call_result(result, start)


async def followed(
    live: LiveSession,
    created: CreatedTask,
    *,
    shown: str,
    timeout: float | None,
    failed: Callable[[str], ToolResult],
) -> types.CallToolResult | ToolResult:
    """A task the server made of a call nobody asked a task of, followed to its end (``tasks.py``)."""
    try:
        with anyio.fail_after(timeout or None):
            return outcome(await follow(live.session, created))
    except TimeoutError:
        return failed(f"tool {shown} timed out after {timeout:g} s")
    except MCPError as exc:
        return failed(
            f"tool {shown} failed: its task could not be followed: {exc.message} (MCP error {exc.code})"
        )
    except ValidationError as exc:
        return failed(
            f"tool {shown} failed: the server returned an invalid task ({describe_validation_error(exc)})"
        )


TASK_RELAYED = "tool {shown} runs as a task of its server (relayed to the client)"
"""The text of a call whose task a channel took for its client."""
INPUT_REQUIRED_RELAYED = "tool {shown} asked its client for input (input_required, relayed)"
"""The text of a call whose ``input_required`` result a channel handed to its client."""


def input_required_text(shown: str, result: types.InputRequiredResult) -> str:
    """What the model reads when a 2026-07-28 server answers a call with ``input_required``:
    the server asked for what only a person or the client could give (elicitation, sampling,
    roots), and a tool the agent calls cannot ask for it."""
    asked = sorted({request.method for request in (result.input_requests or {}).values()})
    what = ", ".join(asked) or "input"
    return (
        f"tool {shown} needs {what} from the client, which a tool called by the agent cannot ask for; "
        "the call did not complete"
    )


# ---------------------------------------------------------------- failures in words

EXIT_WAIT_SECONDS = 1.0
"""How long a failure waits for a dying child's exit code."""
STDERR_SHOWN = 5
"""The lines of a child's stderr a failure quotes."""


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups (G5)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def error_text(error: ToolServerError) -> str:
    """The error without the leading server name (the status already names the server)."""
    text = str(error)
    prefix = f"{error.server}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


async def exit_info(child: StdioChild | None) -> tuple[int | None, tuple[str, ...]]:
    """The child's exit code (None: still running after a second, or no child) and stderr tail."""
    if child is None:
        return None, ()
    with anyio.move_on_after(EXIT_WAIT_SECONDS):
        await child.exited.wait()
    return child.returncode, child.stderr_tail(STDERR_SHOWN)


async def start_error(
    server: str, exc: BaseException, child: StdioChild | None, url: str | None = None
) -> ToolServerStartError:
    """Why the start of ``server`` failed with ``exc`` (possibly an exception group); for a
    remote server the message names its ``url`` (secrets in it masked)."""
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, ToolServerStartError):
            return leaf
    code, tail = await exit_info(child)
    if code is not None:
        message = "exited during start-up"
    else:
        leaf = next((e for e in leaves if isinstance(e, MCPError)), leaves[0])
        where = f" at {redact_url(url)}" if url else ""
        message = f"start-up failed{where}: {type(leaf).__name__}: {leaf}"
    return ToolServerStartError(message, server=server, exit_code=code, stderr_tail=tail)


async def crash_error(server: str, child: StdioChild | None, exc: BaseException | None) -> ToolServerExited:
    """Why the running ``server`` went away (``exc``: what the transport raised, if anything)."""
    code, tail = await exit_info(child)
    if code is not None:
        message = "exited"
    elif child is not None:
        message = "closed its stdout"
    else:
        message = "connection closed" + (f": {_leaves(exc)[0]}" if exc is not None else "")
    return ToolServerExited(message, server=server, exit_code=code, stderr_tail=tail)


# ------------------------------------------------------------------------ repair
#
# Repair of server answers before the MCP SDK's strict validation sees them (mcp-sdk-2.md G1, G2).
#
# The SDK 2.x client validates every result against the negotiated protocol version, all or
# nothing: one tool with ``inputSchema: {}`` makes the whole ``tools/list`` fail, and a
# non-object ``structuredContent`` makes a call fail. ``ResponseRepairer`` sits between a
# transport's read stream and the ``ClientSession`` and mends each response on the way:
#
# - ``tools/list``: a tool without a usable object ``inputSchema`` gets ``{"type": "object"}``
#   for the SDK's eyes; a tool that still does not validate is dropped with a note, so one
#   sloppy tool never hides the others. ``outputSchema`` is always removed (G2): we pass
#   ``structuredContent`` through as data and the model reads text, so the SDK's output
#   validation could only turn a working call into a ``RuntimeError``. The untouched wire dict of
#   every tool is kept in ``raw_tools``: our own schema compiler sees the schema as the server
#   sent it and reports what it changed.
# - ``tools/call``: content beyond ``MAX_CONTENT_PARTS`` parts is dropped with a note, and a
#   result of more than ``MAX_RESULT_VALUES`` JSON values keeps only its text (before the SDK
#   validates a million parts); a ``structuredContent`` that is not an object is removed (its JSON is added
#   as text when the result has no text). Results are not validated here (the SDK does that on
#   every call); the connection turns the SDK's rejection of a broken result into an error result.
#
# The functions that decide are pure; ``ResponseRepairer.pump`` is the stream filter. Measured
# with ``bench/bench_big_results.py``.

MAX_CONTENT_PARTS = 1000
"""The most content parts of one tool result that are kept. At the default ``maxResultChars``
(16 000) a model reads fewer than this many parts of even one character each."""
MAX_RESULT_VALUES = 100_000
"""The most JSON values (objects, arrays, strings, numbers...) of one tool result that are
passed on whole; a bigger one keeps only its text parts. The SDK's validation costs ~0.4 us each."""

DEFAULT_VERSION = "2025-11-25"
"""The protocol version assumed until the server's initialize result names one."""
_EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Repaired:
    """One repaired result.

    Attributes:
        result: the result as the SDK should see it.
        notes: what was changed, one short sentence each (empty when nothing was).
        raw_tools: for a tools listing, every tool's wire dict as the server sent it, by name.
    """

    result: dict[str, Any]
    notes: tuple[str, ...] = ()
    raw_tools: Mapping[str, dict[str, Any]] = field(default_factory=dict)


def describe_validation_error(exc: ValidationError) -> str:
    """The first problem of a pydantic error, as ``where: what``."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "<root>"
    return f"{where}: {error['msg']}"


def _surface_check(method: str, version: str, data: Mapping[str, Any]) -> None:
    try:
        _methods.validate_server_result(method, version, data)
    except ValidationError:
        raise
    except (KeyError, ValueError):
        pass  # an unknown version or method: only the version-free model can judge


def repair_tools_result(result: Mapping[str, Any], version: str = DEFAULT_VERSION) -> Repaired:
    """Mend a ``tools/list`` result tool by tool (pure).

    Args:
        result: the result dict as received.
        version: the negotiated protocol version.
    """
    tools = result.get("tools")
    if not isinstance(tools, list):
        return Repaired(
            dict(result), ("tools/list: 'tools' is not a list; no tools",) if tools is not None else ()
        )
    notes: list[str] = []
    kept: list[dict[str, Any]] = []
    raw: dict[str, dict[str, Any]] = {}
    envelope = modern_defaults({k: v for k, v in result.items() if k != "tools"}, "tools/list", version)
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            notes.append(f"tools[{index}]: dropped, not a tool with a name")
            continue
        name = tool["name"]
        if name in raw:
            notes.append(f"{name}: dropped, duplicate name")
            continue
        fixed = {k: v for k, v in tool.items() if k != "outputSchema"}
        schema = tool.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            fixed["inputSchema"] = dict(_EMPTY_OBJECT_SCHEMA)
            notes.append(f"{name}: inputSchema {_describe_schema(schema)} replaced for the SDK")
        try:
            _surface_check("tools/list", version, {**envelope, "tools": [fixed]})
            types.Tool.model_validate(fixed, by_name=False)
        except ValidationError as exc:
            notes.append(f"{name}: dropped, invalid tool ({describe_validation_error(exc)})")
            continue
        raw[name] = tool
        kept.append(fixed)
    repaired = dict(result)
    repaired["tools"] = kept
    return Repaired(repaired, tuple(notes), raw)


def _describe_schema(schema: Any) -> str:
    if schema is None:
        return "missing"
    if not isinstance(schema, dict):
        return f"of type {type(schema).__name__}"
    if not schema:
        return "{}"
    return f"with type {schema.get('type')!r}"


def repair_call_result(result: Mapping[str, Any]) -> Repaired:
    """Mend a ``tools/call`` result (pure): a result too big to handle cheaply is cut down
    (``bound_result``), and a non-object ``structuredContent`` is moved to text.

    Anything else that is wrong is left for the SDK to reject; the caller turns that rejection
    into an error result. A result that needs nothing comes back as the same object.
    """
    result, notes = bound_result(result)
    structured = result.get("structuredContent")
    if structured is None or isinstance(structured, dict):
        return Repaired(result if isinstance(result, dict) else dict(result), notes)
    fixed = {k: v for k, v in result.items() if k != "structuredContent"}
    content = fixed.get("content")
    if isinstance(content, list) and not any(
        isinstance(c, dict) and c.get("type") == "text" for c in content
    ):
        fixed["content"] = [*content, {"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]
    return Repaired(fixed, (*notes, f"structuredContent of type {type(structured).__name__} moved to text"))


_MODERN_DEFAULTS: dict[str, dict[str, Any]] = {
    "tools/list": {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"},
    "tools/call": {"resultType": "complete"},
}
"""What a 2026-07-28 result lacking them is taken to say: a missing ``resultType`` is
``complete`` (``mcp-2026-07-28.md`` B4), a missing ``ttlMs`` is 0 (B9), and a missing
``cacheScope`` is the cautious ``private``."""


def modern_defaults(result: dict[str, Any], kind: str, version: str) -> dict[str, Any]:
    """``result`` with the fields 2026-07-28 requires and a sloppy server left out (pure; the
    same object when it lacks none, or on an older version)."""
    defaults = _MODERN_DEFAULTS.get(kind) if version in MODERN_PROTOCOL_VERSIONS else None
    if not defaults or all(key in result for key in defaults):
        return result
    return {**defaults, **result}


def _kind(result: Mapping[str, Any]) -> str | None:
    """Which request a result answers, judged by its shape."""
    if isinstance(result.get("protocolVersion"), str) and "capabilities" in result:
        return "initialize"
    if "tools" in result and "content" not in result:
        return "tools/list"
    if "content" in result or "structuredContent" in result:
        return "tools/call"
    return None


class ResponseRepairer:
    """The stream filter between a transport and a ``ClientSession``.

    Attributes:
        server: the server's name, for logs.
        version: the protocol version the server chose (from its initialize result).
        raw_tools: every listed tool's wire dict as the server sent it, by name (pages add).
        ended: set when the transport's read stream ended (the server closed or died).
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self.version = DEFAULT_VERSION
        self.raw_tools: dict[str, dict[str, Any]] = {}
        self.ended = anyio.Event()

    def repair(self, result: dict[str, Any]) -> dict[str, Any]:
        """Repair one result in place of the SDK; return what the session should see."""
        kind = _kind(result)
        if kind == "initialize":
            self.version = result["protocolVersion"]
            return result
        if kind in ("tools/list", "tools/call"):
            result = modern_defaults(result, kind, self.version)
        if kind == "tools/list":
            repaired = repair_tools_result(result, self.version)
            self.raw_tools.update(repaired.raw_tools)
        elif kind == "tools/call":
            repaired = repair_call_result(result)
        else:
            return result
        for note in repaired.notes:
            logger.warning("%s: %s", self.server, note)
        return repaired.result

    async def pump(
        self,
        source: AsyncIterable[SessionMessage | Exception],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Copy ``source`` to ``sink``, repairing results; set ``ended`` when ``source`` ends."""
        try:
            async with sink:
                async for item in source:
                    if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse):
                        item.message.result = self.repair(item.message.result)
                    await sink.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session went away first
        finally:
            self.ended.set()


def bound_result(result: Mapping[str, Any]) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """A ``tools/call`` result that costs little to validate, convert and render (pure).

    Content beyond ``MAX_CONTENT_PARTS`` parts is dropped with a note (``trim_content``). A
    result that still holds more than ``MAX_RESULT_VALUES`` JSON values (a ``structuredContent``
    or ``_meta`` of a million tiny objects: the SDK validates and re-serialises each one) keeps
    only its text parts and ``isError``, with a note. Returns the result (the same object when
    nothing changed) and what was changed, for the log.
    """
    result, trimmed = trim_content(result)
    notes = (trimmed,) if trimmed else ()
    if not _more_values_than(result, MAX_RESULT_VALUES):
        return result, notes
    content = result.get("content")
    texts = [
        {"type": "text", "text": part["text"]}
        for part in (content if isinstance(content, list) else ())
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    ]
    note = f"[... only the text of this result is shown: it held more than {MAX_RESULT_VALUES} JSON values]"
    reduced: dict[str, Any] = {"content": [*texts, {"type": "text", "text": note}]}
    if "isError" in result:
        reduced["isError"] = result["isError"]
    return reduced, (
        *notes,
        f"more than {MAX_RESULT_VALUES} JSON values: reduced to its {len(texts)} text parts",
    )


def _more_values_than(value: Any, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` JSON values; looks at no more than that many."""
    count = 1
    stack = [value]
    while stack:
        item = stack.pop()
        children: Any = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        count += len(children)
        if count > limit:
            return True
        stack.extend(children)
    return False


def trim_content(
    result: Mapping[str, Any], max_parts: int = MAX_CONTENT_PARTS
) -> tuple[Mapping[str, Any], str | None]:
    """A ``tools/call`` result with at most ``max_parts`` content parts (pure).

    The first ``max_parts`` parts are kept, then one text part says how many were dropped.
    Returns the result (the same object when nothing was dropped) and a note for the log, or None.
    """
    content = result.get("content")
    if not isinstance(content, list) or len(content) <= max_parts:
        return result, None
    dropped = len(content) - max_parts
    note = f"[... {dropped} more content parts not shown: the result had {len(content)} parts]"
    trimmed = {**result, "content": [*content[:max_parts], {"type": "text", "text": note}]}
    return trimmed, f"content: {dropped} of {len(content)} parts dropped (at most {max_parts} are kept)"
