"""The turn a provider hands back, finished the same way whatever the wire: ids, deltas, calls, usage.

``DeltaReporter`` wraps the caller's ``on_delta``: a callback that raises is logged once and
otherwise ignored, and the count of deltas handed out tells a provider whether asking again would
repeat them. ``finish_turn`` is the last step of every provider, whatever its wire format:
``<think>`` blocks in the content become reasoning; when the turn has no structured calls and
``toolCallStyle`` is not ``native``, calls written as text are extracted (offered tools only, see
``textcalls/``) and the turn then says ``tool_calls``; a call whose arguments exceed
``llm.maxToolArgumentChars`` keeps none of them and carries the error instead
(``bound_arguments``: the loop answers it, the model reads why); usage the server did not report
is estimated (``estimate_usage``) and marked ``estimated``; usage the server reported is trusted
only as far as it makes sense (``trusted_usage``).

A turn's token counts are part of finishing it, so they live here too: the counts a server
reports, read so that they cannot defeat the budget (``token_count``, ``trusted_usage``), and the
counts it did not report, estimated as closely as that server allows (``UsageEstimator``).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import anyio
import httpx

from ..config import LLMConfig
from ..exceptions import ProviderError
from ..messages import (
    DEFAULT_MAX_ARGUMENT_CHARS,
    KEPT_ARGUMENT_CHARS,
    Delta,
    Message,
    ToolCall,
    ToolSpec,
    Turn,
    Usage,
    arguments_too_long,
    json_chars,
)
from .base import DeltaCallback, ModelRequest
from .servers.info import ServerInfo
from .textcalls import extract_tool_calls, split_reasoning

__all__ = [
    "MAX_TOKENS_PER_CALL",
    "MESSAGE_TOKENS",
    "REPLY_TOKENS",
    "UNTRUSTED",
    "DeltaReporter",
    "Piece",
    "TokenCounter",
    "UsageEstimator",
    "approx_prompt_tokens",
    "approx_tokens",
    "bound_arguments",
    "calls_offered",
    "estimate_usage",
    "finish_turn",
    "join_reasoning",
    "new_call_id",
    "output_text",
    "prompt_pieces",
    "reported_usage",
    "sum_counts",
    "template_for",
    "token_count",
    "trusted_usage",
]

logger = logging.getLogger(__name__)


def new_call_id() -> str:
    """A fresh tool-call id: ``call_`` and 24 hex digits."""
    return "call_" + secrets.token_hex(12)


def join_reasoning(*parts: str) -> str:
    """The non-empty pieces of reasoning, separated by a blank line."""
    return "\n\n".join(part for part in parts if part)


class DeltaReporter:
    """``on_delta`` made safe, counting the deltas it hands out.

    Args:
        callback: the caller's ``on_delta`` (None: deltas are only counted). An exception from
            it is logged once and otherwise ignored: a callback must not break the call.

    Attributes:
        count: how many deltas were handed out (asking again is safe only while it is 0).
        text: the text and reasoning handed out (what a stream that broke off had cost).
    """

    def __init__(self, callback: DeltaCallback | None) -> None:
        self._callback = callback
        self._warned = False
        self.count = 0
        self.text = ""

    def __call__(self, delta: Delta) -> None:
        self.count += 1
        self.text += delta.text
        if self._callback is None:
            return
        try:
            self._callback(delta)
        except Exception:
            if not self._warned:
                self._warned = True
                logger.warning("on_delta callback raised; further errors from it are ignored", exc_info=True)

    @contextmanager
    def no_retry_once_reported(self) -> Iterator[None]:
        """A ``ProviderError`` raised in the block is not retried once deltas were handed out."""
        try:
            yield
        except ProviderError as exc:
            if self.count and exc.retryable:
                exc.retryable = False  # pieces were already reported: a retry would repeat them
            raise


def _call_chars(calls: Sequence[ToolCall]) -> int:
    return sum(len(c.name) + len(json.dumps(c.arguments, ensure_ascii=False)) for c in calls)


def estimate_usage(request: ModelRequest, output_chars: int) -> Usage:
    """Usage estimated at about four characters a token, marked ``estimated``.

    The prompt counts every message's content, reasoning and calls (name and arguments) and
    every offered tool's name, description and schema.
    """
    chars = sum(len(m.content) + len(m.reasoning) + _call_chars(m.tool_calls) for m in request.messages)
    for spec in request.tools:
        chars += len(spec.name) + len(spec.description) + len(json.dumps(spec.schema_for("openai")))
    prompt, completion = -(-chars // 4), -(-output_chars // 4)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion, estimated=True
    )


def bound_arguments(calls: Sequence[ToolCall], max_chars: int) -> tuple[ToolCall, ...]:
    """``calls`` with every call whose arguments exceed ``max_chars`` characters emptied (pure).

    The size is that of the argument text as sent (``raw_arguments``) or else of the arguments'
    compact JSON. Such a call keeps no arguments, says why in ``error`` and keeps the first
    ``KEPT_ARGUMENT_CHARS`` characters as ``raw_arguments``; the loop answers it with an error
    result, so the transcript stays valid. 0 = no limit.
    """
    if not max_chars:
        return tuple(calls)
    bounded: list[ToolCall] = []
    for call in calls:
        raw = call.raw_arguments
        size = len(raw) if raw is not None else json_chars(call.arguments)
        if size > max_chars:
            head = raw if raw is not None else json.dumps(call.arguments, ensure_ascii=False, default=str)
            call = replace(
                call,
                arguments={},
                error=arguments_too_long(size, max_chars),
                raw_arguments=head[:KEPT_ARGUMENT_CHARS],
            )
        bounded.append(call)
    return tuple(bounded)


def finish_turn(
    turn: Turn,
    request: ModelRequest,
    *,
    style: str = "auto",
    max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS,
) -> Turn:
    """The turn as the loop gets it (see the module docstring); ``turn`` itself when nothing changes.

    The content is left exactly as it came unless ``<think>`` blocks or calls are taken out of it
    (Gemini replays its parts only while the text matches them). A usage of all zeros counts as
    not reported.

    Args:
        turn: the turn as parsed from the answer.
        request: the request it answers (its tools; its size for the usage estimate).
        style: ``toolCallStyle``; ``native`` turns the text fallback off.
        max_argument_chars: ``llm.maxToolArgumentChars`` (``bound_arguments``).
    """
    content, reasoning, calls, finish = turn.content, turn.reasoning, turn.tool_calls, turn.finish_reason
    think, rest = split_reasoning(content)
    if think:
        content, reasoning = rest, join_reasoning(reasoning, think)
    if not calls and style != "native" and request.tools and content.strip():
        found = extract_tool_calls(content, request.tools)
        if found.calls:
            calls, content, finish = found.calls, found.content, "tool_calls"
            reasoning = join_reasoning(reasoning, found.reasoning)
    calls = bound_arguments(calls, max_argument_chars)
    usage = turn.usage
    output = len(turn.content) + len(turn.reasoning) + _call_chars(turn.tool_calls)
    if usage == Usage():
        usage = estimate_usage(request, output)
    else:
        usage = trusted_usage(usage, lambda: estimate_usage(request, output))
    if (content, reasoning, calls, finish, usage) == (
        turn.content,
        turn.reasoning,
        turn.tool_calls,
        turn.finish_reason,
        turn.usage,
    ):
        return turn
    return replace(
        turn, content=content, reasoning=reasoning, tool_calls=calls, finish_reason=finish, usage=usage
    )


# --------------------------------------------------------------------------------------------
# reported counts, trusted only when they make sense (pure)
#
# The counts feed ``limits.maxTokens`` and every report, so a server must not be able to defeat
# the budget with a negative count, or fill a report with a 309-digit one. The wire parsers read
# each reported field with ``token_count``: a count that is negative or not an integer (a bool, a
# float, a string) becomes ``UNTRUSTED``; ``reported_usage`` builds the ``Usage``. The last step
# every provider shares (``finish_turn``) then calls ``trusted_usage``: an untrusted count
# is replaced by the estimate for that field (``estimate_usage``), a count above
# ``MAX_TOKENS_PER_CALL`` is cut to it, ``total_tokens`` is made at least prompt + completion, and
# a Usage repaired in any of these ways is flagged ``clamped`` (and a warning is logged).


MAX_TOKENS_PER_CALL = 10_000_000
"""The most tokens one model call is believed to use, per field (the largest context windows
hold a few million)."""
UNTRUSTED = -1
"""A reported count that cannot be trusted. Only the wire parsers and ``trusted_usage`` see it:
no Usage leaves a provider with it."""


def token_count(value: Any) -> int:
    """A reported count: 0 when absent, the count when it is a non-negative integer (never a
    bool), ``UNTRUSTED`` otherwise."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return UNTRUSTED


def sum_counts(*counts: int) -> int:
    """The sum of counts read with ``token_count``; ``UNTRUSTED`` when any of them is."""
    return UNTRUSTED if any(count < 0 for count in counts) else sum(counts)


def reported_usage(prompt: int, completion: int, total: int = 0) -> Usage:
    """A Usage of counts read with ``token_count``; a total of 0 (not reported) is the sum."""
    if total == 0:
        total = sum_counts(prompt, completion)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def trusted_usage(usage: Usage, estimate: Callable[[], Usage]) -> Usage:
    """``usage`` with every count it cannot be trusted with repaired, flagged ``clamped`` if so.

    Args:
        usage: as the wire parser built it (``UNTRUSTED`` fields allowed).
        estimate: the estimated usage of the call, asked for only when a field needs it.
    """
    problems: list[str] = []
    estimated: Usage | None = None
    counts: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens"):
        count: int = getattr(usage, name)
        if count < 0:
            estimated = estimated or estimate()
            count = getattr(estimated, name)
            problems.append(f"{name} is not a count (negative or not an integer): estimated as {count}")
        elif count > MAX_TOKENS_PER_CALL:
            count = MAX_TOKENS_PER_CALL
            problems.append(f"{name} is above {MAX_TOKENS_PER_CALL}: cut to it")
        counts[name] = count
    total = usage.total_tokens
    least = counts["prompt_tokens"] + counts["completion_tokens"]
    if total < 0:
        problems.append("total_tokens is not a count (negative or not an integer)")
    elif total > max(MAX_TOKENS_PER_CALL, least):
        problems.append(f"total_tokens is above {MAX_TOKENS_PER_CALL}: cut to it")
        total = MAX_TOKENS_PER_CALL
    elif total < least:
        problems.append("total_tokens is less than prompt + completion")
    total = max(total, least)
    if not problems:
        return usage
    logger.warning("the model server reported token counts that cannot be trusted: %s", "; ".join(problems))
    return replace(
        usage,
        prompt_tokens=counts["prompt_tokens"],
        completion_tokens=counts["completion_tokens"],
        total_tokens=total,
        clamped=True,
    )


# --------------------------------------------------------------------------------------------
# counts a server did not report, estimated as closely as that server allows
#
# Some servers never report usage when streaming (llama-cpp-python, even with
# ``stream_options.include_usage``); a stream that breaks off reports nothing either. The estimate
# then feeds ``limits.maxTokens`` and every report, so it must be near the truth, and it says it is
# an estimate (``Usage.estimated``). Three ways, best first:
#
# 1. **Calibrated** from the same server's own counts: each call that did report usage tells how
#    the server's prompt compares with ``approx_prompt_tokens`` of the same request (its chat
#    template's markers, a default system prompt it adds, tool results it leaves out, its tokenizer),
#    kept apart for requests with and without tools; the latest ratio scales the next estimate of
#    that class. Free: no request.
# 2. **Counted** by the server's tokenizer (``ServerInfo.tokenize_url``: llama.cpp ``/tokenize``,
#    llama-cpp-python ``/extras/tokenize/count``), piece by piece (the tools' block, each message),
#    each distinct piece once (``TokenCounter`` keeps the counts: the system prompt and the tools
#    cost one request for the provider's life, each new message one). A tokenizer that fails once is
#    not asked again.
# 3. **Approximated** here (``approx_tokens``): a text is split as byte-level BPE tokenizers split it
#    (words, single digits, runs of punctuation, whitespace) and each piece counted as those
#    vocabularies usually hold it; within 5 % of SmolLM2's tokenizer on prose, JSON and code (four
#    characters a token was 48 % off on plain words and 30 % on JSON).
#
# The prompt is laid out as the server's chat template would (``prompt_pieces``): ``MESSAGE_TOKENS``
# around each message, the tools as a block of their own, ``REPLY_TOKENS`` for the generation
# prompt. Two layouts: ``chatml``, generic, the tools as JSON lines (the Hermes/Qwen family); and
# llama-cpp-python's ``chatml-function-calling`` (its own template, read in ``llama_chat_format.py``):
# only each tool's name and parameters, under a fixed instruction, and no ``tool`` messages at all
# (that template renders none). A server that drops the tools (``ServerInfo.tools_dropped``, from
# ``doctor``, or seen here: a reported prompt nearer the estimate without the tools than with them)
# gets no tools' block, and a warning once.


MESSAGE_TOKENS = 5
"""Tokens a chat template adds around one message (``<|im_start|>user\\n`` ... ``<|im_end|>\\n``)."""
REPLY_TOKENS = 4
"""Tokens of the generation prompt (``<|im_start|>assistant\\n``)."""
TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
TOOLS_CODA = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
    '"arguments": <args-json-object>}\n</tool_call>'
)
"""How templates of the Hermes/Qwen family offer tools; others are near it in size."""
FUNCTION_CALLING_CODA = (
    "\n\nYou can respond to users messages with either a single message or one or more function calls."
    "\n\nTo respond with a message begin the message with 'message:', use the following format:"
    "\n\nmessage:\n<message>"
    "\n\nTo respond with one or more function calls begin the message with 'functions.<function_name>:', "
    "use the following format:"
    '\n\nfunctions.<function_name>:\n{ "arg1": "value1", "arg2": "value2" }'
    '\nfunctions.<function_name>:\n{ "arg1": "value1", "arg2": "value2" }'
)
"""llama-cpp-python's ``chatml-function-calling`` instruction after the functions."""

_PIECE = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d| ?[^\s\w]+|\s+(?!\S)|\s+|_+")
_SHORT_WORD = 8
"""Letters that one token usually holds; each further ``_LONG_WORD`` letters take one more."""
_LONG_WORD = 5
_PUNCTUATION = 2.5
"""Characters of a run of punctuation per token (``{"``, ``":``, ``"},`` are single tokens)."""
TOKENIZE_SECONDS = 2.0
_CACHED_PIECES = 512


_CACHED_TEXT_CHARS = 65_536
"""Texts up to this long have their count kept (``approx_tokens``); longer ones are counted anew."""


def approx_tokens(text: str) -> int:
    """About how many tokens ``text`` is, without a tokenizer (see the module docstring).

    The count of a text of at most ``_CACHED_TEXT_CHARS`` is kept (the latest ``_CACHED_PIECES``):
    a run counts its system prompt, its question and every earlier message again on each call."""
    return _kept_count(text) if len(text) <= _CACHED_TEXT_CHARS else _count(text)


@functools.lru_cache(maxsize=_CACHED_PIECES)
def _kept_count(text: str) -> int:
    return _count(text)


def _count(text: str) -> int:
    total = 0
    for piece in _PIECE.findall(text):
        body = piece.strip()
        if not body or body[0].isdigit():
            total += 1
        elif body[0].isalpha() or body[0] == "_":
            total += 1 if len(body) <= _SHORT_WORD else 1 + math.ceil((len(body) - _SHORT_WORD) / _LONG_WORD)
        else:
            total += math.ceil(len(body) / _PUNCTUATION)
    return total


@dataclass(frozen=True)
class Piece:
    """One part of a prompt: its text and the template tokens around it."""

    text: str
    markers: int = 0


def _tool_lines(tools: Sequence[ToolSpec]) -> str:
    functions = (
        {"name": t.name, "description": t.description, "parameters": t.schema_for("openai")} for t in tools
    )
    return "\n".join(json.dumps({"type": "function", "function": f}, ensure_ascii=False) for f in functions)


def _message_text(message: Message) -> str:
    calls = "".join(
        "\n" + json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        for call in message.tool_calls
    )
    return message.content + calls


def _function_calling(request: ModelRequest, tools: bool) -> list[Piece]:
    """llama-cpp-python's ``chatml-function-calling`` layout (see the module docstring)."""
    offered = tools and bool(request.tools)
    pieces: list[Piece] = []
    if offered:
        functions = "".join(
            f"\nfunctions.{t.name}:\n{json.dumps(t.schema_for('openai'))}\n" for t in request.tools
        )
        pieces.append(
            Piece("\n\nYou have access to the following functions:\n" + functions + FUNCTION_CALLING_CODA)
        )
    for message in request.messages:
        if message.role == "tool":
            continue
        text = (
            "message:\n" if offered and message.content and message.role == "assistant" else ""
        ) + message.content
        calls = "".join(f"functions.{c.name}:\n{json.dumps(c.arguments)}" for c in message.tool_calls)
        pieces.append(
            Piece(text + calls, MESSAGE_TOKENS + (MESSAGE_TOKENS - 3 if calls and message.content else 0))
        )
    pieces.append(Piece("", REPLY_TOKENS))
    return pieces


def template_for(info: ServerInfo) -> str:
    """The prompt layout of ``info``'s server: ``chatml-function-calling`` for llama-cpp-python
    unless it was seen to drop tools (then it runs the model's own template), else ``chatml``."""
    return (
        "chatml-function-calling"
        if info.kind == "llama-cpp-python" and info.tools_dropped is not True
        else "chatml"
    )


def prompt_pieces(request: ModelRequest, *, tools: bool = True, template: str = "chatml") -> list[Piece]:
    """The prompt of ``request`` as ``template`` lays it out (see the module docstring): the
    tools' block (when ``tools`` and there are any), each message with ``MESSAGE_TOKENS``, the
    generation prompt."""
    if template == "chatml-function-calling":
        return _function_calling(request, tools)
    pieces: list[Piece] = []
    if tools and request.tools:
        pieces.append(Piece(TOOLS_PREAMBLE + _tool_lines(request.tools) + TOOLS_CODA))
    pieces.extend(Piece(_message_text(message), MESSAGE_TOKENS) for message in request.messages)
    pieces.append(Piece("", REPLY_TOKENS))
    return pieces


def approx_prompt_tokens(request: ModelRequest, *, tools: bool = True, template: str = "chatml") -> int:
    """``approx_tokens`` of the prompt of ``request`` (``prompt_pieces``)."""
    pieces = prompt_pieces(request, tools=tools, template=template)
    return sum(piece.markers + approx_tokens(piece.text) for piece in pieces)


def output_text(turn: Turn) -> str:
    """What the model wrote: reasoning, text and calls (names and arguments)."""
    calls = "".join(
        json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False) for c in turn.tool_calls
    )
    return turn.reasoning + turn.content + calls


class TokenCounter:
    """A server's tokenizer endpoint, each distinct text counted once.

    Args:
        client: the provider's HTTP client.
        llm: the ``llm`` section (model name, key, headers).
    """

    def __init__(self, client: httpx.AsyncClient, llm: LLMConfig) -> None:
        self.client = client
        self.model = llm.model
        self.headers = dict(llm.headers)
        if llm.api_key:
            self.headers["Authorization"] = f"Bearer {llm.api_key}"
        self.requests = 0
        """Tokenizer requests made (for measurements)."""
        self.broken = False
        self._counts: OrderedDict[str, int] = OrderedDict()

    async def count(self, info: ServerInfo, texts: Sequence[str]) -> list[int] | None:
        """The token count of each text, or None when the server has no tokenizer (or it failed)."""
        if self.broken or info.tokenize_url is None or info.kind not in ("llamacpp", "llama-cpp-python"):
            return None
        missing = list(dict.fromkeys(text for text in texts if text and text not in self._counts))
        failures: list[Exception] = []
        async with anyio.create_task_group() as group:
            for text in missing:
                group.start_soon(self._ask, info, text, failures)
        if failures:  # a tokenizer is a help, never a failure
            self.broken = True
            logger.warning(
                "the model server's tokenizer failed (%s); estimating token counts without it", failures[0]
            )
            return None
        counts = [self._counts.get(text, 0) for text in texts]
        for text in missing:
            self._counts.move_to_end(text)
        while len(self._counts) > _CACHED_PIECES:
            self._counts.popitem(last=False)
        return counts

    async def _ask(self, info: ServerInfo, text: str, failures: list[Exception]) -> None:
        assert info.tokenize_url is not None
        if info.kind == "llamacpp":
            body: dict[str, object] = {"content": text, "add_special": False, "parse_special": False}
        else:
            body = {"input": text, "model": self.model}
        self.requests += 1
        try:
            response = await self.client.post(
                info.tokenize_url, json=body, headers=self.headers, timeout=httpx.Timeout(TOKENIZE_SECONDS)
            )
            response.raise_for_status()
            data = response.json()
            count = data.get("count") if info.kind == "llama-cpp-python" else data.get("tokens")
            count = len(count) if isinstance(count, list) else count
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"unexpected answer from {info.tokenize_url}: {str(data)[:120]}")
        except Exception as exc:
            failures.append(exc)
            return
        self._counts[text] = count


def calls_offered(turn: Turn, request: ModelRequest) -> bool:
    """Whether ``turn`` calls a tool that ``request`` offered (by its exact name)."""
    offered = {spec.name for spec in request.tools}
    return any(call.name in offered for call in turn.tool_calls)


class UsageEstimator:
    """One provider's estimates of the usage its server did not report (see the module docstring).

    ``settle(request, turn, info)`` is called with every turn: a turn with reported usage teaches
    the calibration; a turn whose usage was estimated (``Usage.estimated``) gets the best estimate.
    """

    def __init__(self, client: httpx.AsyncClient, llm: LLMConfig) -> None:
        self.counter = TokenCounter(client, llm)
        self.reported: dict[bool, tuple[ModelRequest, int]] = {}
        """The latest call whose usage was reported and its prompt tokens, by "had tools" (the
        ratio to its approximation is worked out only when an estimate needs it)."""
        self.tools_dropped: bool | None = None
        """Seen here: the server's prompts are as long as they would be without the tools (True),
        or the model called a tool it was offered (False: it saw them)."""
        self.judge_tools = True
        """Whether token counts may decide ``tools_dropped``; False where a direct measure
        decides it instead (``doctor``'s ``check_tools_kept``)."""
        self._block: tuple[tuple[tuple[ToolSpec, ...], str], int] | None = None
        """The latest tool set's block, in tokens (``_tools_block``)."""

    def _layout(self, info: ServerInfo) -> tuple[bool, str]:
        """(count the tools, the template) for ``info``'s server, with what was seen here."""
        dropped = info.tools_dropped if info.tools_dropped is not None else self.tools_dropped
        return not dropped, template_for(replace(info, tools_dropped=dropped))

    def observe(
        self, request: ModelRequest, usage: Usage, info: ServerInfo, turn: Turn | None = None
    ) -> None:
        """Learn from a call whose usage the server reported (``turn``: what it answered).

        Whether the server drops the tools it is offered: a call to an offered tool (native, or
        written as text by name) proves the model saw them, whatever the counts say; only
        without one do the token counts decide (``_check_tools``), once.
        """
        if request.tools and info.tools_dropped is None and turn is not None and calls_offered(turn, request):
            self.tools_dropped = False
        if usage.estimated or usage.clamped or usage.prompt_tokens <= 0:
            return
        if request.tools and info.tools_dropped is None and self.tools_dropped is None and self.judge_tools:
            self._check_tools(request, usage.prompt_tokens, info)
        self.reported[bool(request.tools)] = (request, usage.prompt_tokens)

    def _tools_block(self, request: ModelRequest, template: str) -> int:
        """``approx_tokens`` of the tools' block of ``request`` in ``template`` (``chatml``: the
        block is a piece of its own, so ``offered`` is ``without`` plus it); kept for the latest
        tool set, which every call of a run offers again, while the check cannot tell yet."""
        tools = tuple(request.tools)
        if self._block is not None and self._block[0] == (tools, template):
            return self._block[1]
        tokens = approx_prompt_tokens(ModelRequest((), tools), tools=True, template=template) - (
            approx_prompt_tokens(ModelRequest(()), tools=False, template=template)
        )
        self._block = ((tools, template), tokens)
        return tokens

    def ratio(self, request: ModelRequest, info: ServerInfo) -> float | None:
        """Reported / approximated prompt tokens of the latest reported call of ``request``'s class."""
        if (seen := self.reported.get(bool(request.tools))) is None:
            return None
        tools, template = self._layout(info)
        approx = approx_prompt_tokens(seen[0], tools=tools, template=template)
        return min(max(seen[1] / approx, 0.2), 5.0) if approx > 0 else None

    def _check_tools(self, request: ModelRequest, reported: int, info: ServerInfo) -> None:
        """Decide whether the server drops tools, when the tools are a large part of the prompt."""
        template = template_for(info)
        without = approx_prompt_tokens(request, tools=False, template=template)
        if template == "chatml":
            offered = without + self._tools_block(request, template)
        else:
            offered = approx_prompt_tokens(request, tools=True, template=template)
        if offered < 1.5 * without or reported < 0.5 * without:
            return  # too close to tell, or a count below any prompt (a prompt cache's: Ollama's)
        self.tools_dropped = abs(reported - without) < abs(reported - offered)
        if self.tools_dropped:
            logger.warning(
                "the model server seems to drop the tools it is offered (prompt_tokens %d, about the prompt "
                "without them): its chat template has no tool support%s",
                reported,
                "; start llama-cpp-python with --chat_format chatml-function-calling"
                if info.kind == "llama-cpp-python"
                else "",
            )

    async def estimate(self, request: ModelRequest, turn: Turn, info: ServerInfo) -> Usage:
        """The best estimate of the usage of ``turn``, marked ``estimated``."""
        tools, template = self._layout(info)
        pieces = prompt_pieces(request, tools=tools, template=template)
        written = output_text(turn)
        ratio = self.ratio(request, info)
        texts = [written] if ratio is not None else [*(piece.text for piece in pieces), written]
        counted = await self.counter.count(info, texts)
        if ratio is not None:
            prompt = round(approx_prompt_tokens(request, tools=tools, template=template) * ratio)
        elif counted is not None:
            prompt = sum(piece.markers for piece in pieces) + sum(counted[:-1])
        else:
            prompt = approx_prompt_tokens(request, tools=tools, template=template)
        completion = counted[-1] if counted is not None else approx_tokens(written)
        return Usage(prompt, completion, prompt + completion, estimated=True)

    async def settle(self, request: ModelRequest, turn: Turn, info: ServerInfo) -> Turn:
        """``turn`` with its usage estimated as well as possible, or (reported) learned from."""
        if not turn.usage.estimated:
            self.observe(request, turn.usage, info, turn)
            return turn
        if request.tools and info.tools_dropped is None and calls_offered(turn, request):
            self.tools_dropped = False
        return replace(turn, usage=await self.estimate(request, turn, info))
