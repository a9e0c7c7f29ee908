"""Provider-neutral values that flow between the loop, the providers and the tool servers.

Everything here is a frozen dataclass with ``to_dict``/``from_dict`` so that a transcript can be
stored, printed as JSON and read back. No I/O, no provider specifics: a provider turns these into
its own wire format and back (``providers/openai/_wire.py`` and the other wires).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Role = Literal["system", "user", "assistant", "tool"]

_EMPTY: Mapping[str, Any] = {}


def _meta(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value) if value else {}


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for.

    Attributes:
        id: the call id as the server sent it (generated when the server sent none). It is kept
            exactly, because the result must quote it back.
        name: the exposed tool name (``server__tool``), never the MCP name.
        arguments: the parsed arguments. ``{}`` when the model sent none, or when they could not
            be parsed (then ``error`` says why).
        error: why the argument text could not be parsed, or None.
        raw_arguments: the argument text as sent, kept only when it was not clean JSON (only its
            first 200 characters when it was over ``llm.maxToolArgumentChars``).
        meta: provider data to replay as it came (Gemini's ``thoughtSignature``).
    """

    id: str
    name: str
    arguments: JSONObject = field(default_factory=dict)
    error: str | None = None
    raw_arguments: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        data: JSONObject = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.error is not None:
            data["error"] = self.error
        if self.raw_arguments is not None:
            data["raw_arguments"] = self.raw_arguments
        if self.meta:
            data["meta"] = dict(self.meta)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            arguments=dict(data.get("arguments") or {}),
            error=data.get("error"),
            raw_arguments=data.get("raw_arguments"),
            meta=_meta(data.get("meta")),
        )


@dataclass(frozen=True)
class Image:
    """An image a tool returned, carried to the model when it reads images.

    Attributes:
        mime_type: the image's type (``image/png``).
        data: the image, base64 encoded (no ``data:`` prefix, no whitespace).
    """

    mime_type: str
    data: str

    @property
    def size(self) -> int:
        """The decoded size in bytes."""
        padding = len(self.data) - len(self.data.rstrip("="))
        return max(len(self.data) * 3 // 4 - min(padding, 2), 0)

    def to_dict(self) -> JSONObject:
        return {"mime_type": self.mime_type, "data": self.data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Image:
        return cls(mime_type=str(data["mime_type"]), data=str(data["data"]))


@dataclass(frozen=True)
class Provenance:
    """Where a tool result came from, and whether its text is trusted (``loop/provenance.py``).

    Attributes:
        server: the tool server that answered ("" for the loop's own tools).
        tool: the exposed tool name.
        call_id: the id of the call it answers.
        trusted: False when the text comes from outside the user and the operator (a web page,
            an e-mail, an issue comment...) and may carry instructions an attacker wrote.
        why: how that was decided (``mcpServers.web.trust``, ``openWorldHint: true``...).
    """

    server: str
    tool: str
    call_id: str
    trusted: bool
    why: str

    def to_dict(self) -> JSONObject:
        return {
            "server": self.server,
            "tool": self.tool,
            "call_id": self.call_id,
            "trusted": self.trusted,
            "why": self.why,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        return cls(
            server=str(data.get("server") or ""),
            tool=str(data.get("tool") or ""),
            call_id=str(data.get("call_id") or ""),
            trusted=data.get("trusted") is True,
            why=str(data.get("why") or ""),
        )


@dataclass(frozen=True)
class Message:
    """One message of a conversation.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the text ("" when an assistant message only calls tools).
        tool_calls: the calls of an assistant message, in the order the model gave them.
        tool_call_id: for a ``tool`` message, the id of the call it answers.
        name: for a ``tool`` message, the exposed name of the tool (Gemini matches results by name).
        reasoning: an assistant's reasoning, kept apart from the answer; not sent back by default.
        is_error: for a ``tool`` message, whether the result reports a failure.
        meta: provider data to replay as it came.
        images: for a ``tool`` message, the images the tool returned. ``content`` still names
            each one (``[image: image/png, 4.0 kB]``), so a provider that sends no images (or
            drops some) leaves the model a placeholder; one that reads images sends them too.
        provenance: for a ``tool`` message, where its text came from and whether it is trusted
            (the loop's own answers, such as a denial, are trusted). None: kept before
            provenance was recorded.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str = ""
    is_error: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)
    images: tuple[Image, ...] = ()
    provenance: Provenance | None = field(default=None, compare=False)
    """(Not compared: two messages with the same content are equal wherever it came from.)"""

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Sequence[ToolCall] = (), reasoning: str = "") -> Message:
        return cls(role="assistant", content=text, tool_calls=tuple(tool_calls), reasoning=reasoning)

    @classmethod
    def tool(
        cls,
        call: ToolCall,
        text: str,
        *,
        is_error: bool = False,
        images: Sequence[Image] = (),
        provenance: Provenance | None = None,
    ) -> Message:
        """The result of ``call``, to be placed right after the assistant message that made it."""
        return cls(
            role="tool",
            content=text,
            tool_call_id=call.id,
            name=call.name,
            is_error=is_error,
            images=tuple(images),
            provenance=provenance,
        )

    def to_dict(self) -> JSONObject:
        data: JSONObject = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.reasoning:
            data["reasoning"] = self.reasoning
        if self.is_error:
            data["is_error"] = True
        if self.meta:
            data["meta"] = dict(self.meta)
        if self.images:
            data["images"] = [image.to_dict() for image in self.images]
        if self.provenance is not None:
            data["provenance"] = self.provenance.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            reasoning=data.get("reasoning") or "",
            is_error=bool(data.get("is_error", False)),
            meta=_meta(data.get("meta")),
            images=tuple(Image.from_dict(i) for i in data.get("images") or ()),
            provenance=Provenance.from_dict(data["provenance"]) if data.get("provenance") else None,
        )


@dataclass(frozen=True)
class Usage:
    """Token counts of one model call, or a sum of several.

    ``estimated`` is True when the server reported nothing and the counts were estimated from
    the text (about four characters a token). ``clamped`` is True when the server reported counts
    that could not be trusted (negative, not integers, absurdly large, a total below the sum) and
    they were repaired (``providers/turns.py``).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False
    clamped: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            estimated=self.estimated or other.estimated,
            clamped=self.clamped or other.clamped,
        )

    def to_dict(self) -> JSONObject:
        data: JSONObject = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.estimated:
            data["estimated"] = True
        if self.clamped:
            data["clamped"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            total_tokens=int(data.get("total_tokens", 0)),
            estimated=bool(data.get("estimated", False)),
            clamped=bool(data.get("clamped", False)),
        )


@dataclass(frozen=True)
class Turn:
    """What one model call produced, whatever the server and wire format.

    Whether the turn calls tools is decided by ``tool_calls`` alone, never by ``finish_reason``.
    ``model`` is the configured name of the model that answered (set by the provider that made
    the call; with ``llm.fallbacks`` it says which entry answered), or None when unknown.
    ``max_output_tokens`` is the cap on the answer's length the request carried (set by the
    provider; None when unknown): with ``finish_reason`` ``"length"`` it tells whether the answer
    was cut off by that cap or by something else (a full context window).
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    request_id: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    max_output_tokens: int | None = None

    def to_message(self) -> Message:
        return Message(
            role="assistant",
            content=self.content,
            tool_calls=self.tool_calls,
            reasoning=self.reasoning,
            meta=_meta(self.meta),
        )

    def to_dict(self) -> JSONObject:
        return {
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage.to_dict(),
            "request_id": self.request_id,
            "meta": dict(self.meta),
            "model": self.model,
            "max_output_tokens": self.max_output_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        return cls(
            content=data.get("content") or "",
            reasoning=data.get("reasoning") or "",
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            finish_reason=data.get("finish_reason"),
            usage=Usage.from_dict(data.get("usage") or {}),
            request_id=data.get("request_id"),
            meta=_meta(data.get("meta")),
            model=data.get("model"),
            max_output_tokens=data.get("max_output_tokens"),
        )


@dataclass(frozen=True)
class Delta:
    """A piece of a turn while it streams, for live progress.

    Attributes:
        kind: ``text``, ``reasoning`` or ``tool_call`` (a call's name became known or its
            arguments grew).
        text: the new text (for ``tool_call``: the new argument fragment).
        index: the tool call's slot, for ``tool_call``.
        name: the tool call's exposed name once known, for ``tool_call``.
    """

    kind: Literal["text", "reasoning", "tool_call"]
    text: str = ""
    index: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it.

    Attributes:
        name: the exposed name (``server__tool``), unique among all offered tools.
        description: the tool's description.
        parameters: the normalised JSON Schema of the arguments (an object schema). Arguments are
            validated against this, and providers with full JSON Schema support send it as is.
        variants: the schema compiled for each provider dialect, by dialect name: ``openai``,
            ``openai_strict`` (only when strict mode keeps the meaning), ``anthropic``, ``gemini``.
            A provider falls back to ``parameters`` when its dialect is missing.
        server: the name of the tool server that owns it.
        mcp_name: the tool's name on its server.
        changes: what the schema compiler changed, as short strings, for ``tools`` and ``doctor``.
        annotations: the MCP tool annotations (``readOnlyHint``...), wire spelling.
        timeout_seconds: this tool's own per-call deadline (its server's ``callTimeoutSeconds``),
            or None to use the run's ``toolTimeoutSeconds``. 0 means none.
        title: the tool's human-readable title, as its server gave it (None: none).
        output_schema: the JSON Schema of the tool's ``structuredContent``, as its server sent
            it (None: none). Only the gateway's ``exposeTools`` uses it; models never see it.
        input_schema: the tool's ``inputSchema`` as its server sent it, the very object (None:
            none, or not an object). Only the gateway's ``exposeTools`` lists it; models see
            ``parameters``, and arguments are checked against ``parameters``.
    """

    name: str
    description: str = ""
    parameters: JSONSchema = field(default_factory=lambda: {"type": "object", "properties": {}})
    variants: Mapping[str, JSONSchema] = field(default_factory=dict)
    server: str = ""
    mcp_name: str = ""
    changes: tuple[str, ...] = ()
    annotations: Mapping[str, Any] = field(default_factory=dict)
    timeout_seconds: float | None = None
    title: str | None = None
    output_schema: JSONSchema | None = None
    input_schema: JSONSchema | None = None

    def schema_for(self, dialect: str) -> JSONSchema:
        """The schema to send to a provider of the given dialect."""
        return dict(self.variants.get(dialect) or self.parameters)

    def changes_for(self, dialect: str) -> tuple[str, ...]:
        """The compiler's changes that concern ``dialect``: the normalisation notes (no prefix)
        and that dialect's own (``"gemini: dropped default at properties.n"``)."""
        dialects = {"openai", "openai_strict", "anthropic", "gemini"}
        return tuple(
            change
            for change in self.changes
            if change.split(":", 1)[0] not in dialects or change.split(":", 1)[0] == dialect
        )


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        text: what the model reads: text parts joined, media summarised, never base64.
        is_error: True when the tool (or the way to it) reported a failure.
        content: the raw MCP content parts, wire spelling, for callers that want them.
        structured: the tool's ``structuredContent``, if any.
        elapsed_ms: wall time of the call.
    """

    text: str
    is_error: bool = False
    content: tuple[JSONObject, ...] = ()
    structured: JSON = None
    elapsed_ms: float = 0.0

    def to_dict(self) -> JSONObject:
        return {
            "text": self.text,
            "is_error": self.is_error,
            "content": list(self.content),
            "structured": self.structured,
            "elapsed_ms": self.elapsed_ms,
        }


# Shared type aliases: JSON values and JSON Schemas.
JSON: TypeAlias = Any
"""Any JSON value: dict, list, str, int, float, bool or None."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object, such as a tool call's arguments."""

JSONSchema: TypeAlias = dict[str, Any]
"""A JSON Schema document (always an object schema once normalised)."""


# Pure JSON helpers shared by the providers, the schema pipeline and the loop's guards.
#
# - ``parse_arguments``: a model's tool-call arguments, parsed tolerantly (``""`` → ``{}``, an
#   object taken as is, JSON repaired when it is nearly right, double-encoded JSON unwrapped);
#   argument text longer than ``llm.maxToolArgumentChars`` is not read at all
#   (``arguments_too_long`` says so).
# - ``canonical_json``: one spelling per value (sorted keys, no whitespace), for fingerprints and
#   for replaying arguments to servers that need a JSON string.
def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


DEFAULT_MAX_ARGUMENT_CHARS = 1_000_000
"""``llm.maxToolArgumentChars`` unless the config says otherwise."""
KEPT_ARGUMENT_CHARS = 200
"""How much of refused argument text a call keeps (as ``raw_arguments``) to show the model."""


def arguments_too_long(size: int, limit: int) -> str:
    """Why a call's arguments were not read: ``size`` characters against ``limit``."""
    return f"arguments of {size} characters exceed the limit of {limit} (llm.maxToolArgumentChars)"


def json_chars(value: Any) -> int:
    """The length of ``value``'s compact JSON text."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


_REPAIR_MAX_CHARS = 32_000
_REPAIR_MAX_DEPTH = 32


def _repair(text: str) -> Any:
    """Repair nearly-valid JSON; None when the text is too big or too deep to try safely.

    json_repair slows down sharply on deep nesting (``"{" * 8000`` takes seconds), so a model's
    garbage must not stall a turn: beyond the bounds the arguments are simply invalid.
    """
    if len(text) > _REPAIR_MAX_CHARS:
        return None
    depth = deepest = 0
    for char in text:
        if char in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "}]":
            depth -= 1
    if deepest > _REPAIR_MAX_DEPTH:
        return None
    # json_repair costs ~60 ms to import: only pay it on the rare broken input.
    import json_repair

    return json_repair.loads(text)


def parse_arguments(
    raw: str | Mapping[str, Any] | None, *, max_chars: int = 0
) -> tuple[JSONObject, str | None]:
    """Parse tool-call arguments as a model sent them.

    Args:
        raw: the argument text, or an object the wire already parsed.
        max_chars: text longer than this is not parsed (nor repaired): the error says so
            (0 = no limit). An object is taken as it is (``turns.bound_arguments`` sizes it).

    Returns:
        ``(arguments, error)``. ``error`` is None on success; otherwise it says why the text could
        not be read as a JSON object, and ``arguments`` is ``{}``.
    """
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if max_chars and len(raw) > max_chars:
        return {}, arguments_too_long(len(raw), max_chars)
    text = raw.strip()
    if not text:
        return {}, None
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        try:
            value = _repair(text)
        except Exception:  # json_repair gives up with assorted errors
            value = None
        if not isinstance(value, dict):
            return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    # double-encoded: "{\"a\": 1}"
    if isinstance(value, str) and value.strip().startswith("{"):
        inner, error = parse_arguments(value, max_chars=max_chars)
        if error is None:
            return inner, None
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None
