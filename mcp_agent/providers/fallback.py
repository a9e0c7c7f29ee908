"""FallbackProvider: several models behind one Provider, tried in order (``llm.fallbacks``).

Say a local Ollama first and a hosted API second. Each model call goes to the first model; when
it fails in a way another model can fix, the next one is asked, and so on. The loop still sees
one Provider; the turn says which model answered (``Turn.model``).

**When to move on** (``falls_back``), after the failing provider's own retries:

- it could not be reached: refused, DNS, TLS, connect timeout;
- it broke: a 5xx (Anthropic's 529 included), a timeout, a connection cut off, a stream that
  broke before any output;
- it is rate-limited: a 429, quotas included (a daily quota will not clear for hours, but
  another provider has its own).

**When not to**, the error is the run's, at once:

- 400, 413, 422: the request itself is wrong; another server would refuse it too, or worse,
  accept something the first one was right to refuse;
- 401, 403, 404, a bad URL, an answer that is not from the API at all (a web page): the config
  is wrong (a key, a model name, an endpoint), and a fallback would hide that while spending
  another provider's money;
- a context-length error: the loop trims the history and asks again, which is the cure; moving
  a conversation that is too long to another model would hide that it grows without bound;
- any failure after the model's answer began to stream: its text was already handed out, and
  another model's answer would follow it in the same turn.

When the last model tried fails too, the call fails with that model's error (its class, status
and flags), its message naming every model tried and why each failed.

A model that failed is **tried last for** ``cooldown_seconds`` (30 s, or the server's retry hint
when longer), so that a run does not wait for a dead or rate-limited server's retries on every
round; it is never skipped, and a success puts it back in its place.

``fallback_configs`` turns ``llm.fallbacks`` into whole ``llm`` sections: a key an entry leaves
out is the primary's, except the server's own (``provider``, ``apiKey``, ``headers``,
``capabilities``) when the entry names an endpoint on another server (scheme, host and port):
a key for one API is never sent to another host.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from .._redact import redact_url
from ..config import LLMConfig
from ..exceptions import ContextLengthError, ProviderConnectionError, ProviderError
from ..messages import Delta, Turn
from .base import DeltaCallback, ModelRequest, Provider
from .http.errors import BAD_URL
from .servers.endpoints import resolve_endpoint
from .servers.info import ServerInfo, server_info_of

__all__ = [
    "DEFAULT_COOLDOWN",
    "SERVER_KEYS",
    "Candidate",
    "FallbackProvider",
    "fallback_configs",
    "falls_back",
]

logger = logging.getLogger(__name__)

DEFAULT_COOLDOWN = 30.0
"""Seconds a model that failed is tried last."""

SERVER_KEYS = frozenset({"provider", "api_key", "headers", "capabilities"})
"""Keys an entry inherits from the primary only when both name the same server."""


def _origin(llm: LLMConfig) -> tuple[str, str]:
    parts = urlsplit(resolve_endpoint(llm).base_url)
    return parts.scheme.lower(), parts.netloc.lower()


def fallback_configs(llm: LLMConfig) -> list[LLMConfig]:
    """Each entry of ``llm.fallbacks`` as a whole ``llm`` section (see the module docstring)."""
    out: list[LLMConfig] = []
    for entry in llm.fallbacks:
        given = entry.model_fields_set - {"fallbacks"}
        inherited = set(LLMConfig.model_fields) - given - {"fallbacks"}
        if "endpoint" in given and _origin(entry) != _origin(llm):
            inherited -= SERVER_KEYS
        values = {name: getattr(entry, name) for name in given}
        values.update({name: getattr(llm, name) for name in inherited})
        out.append(LLMConfig(**values))
    return out


def falls_back(error: ProviderError) -> bool:
    """Whether another model may succeed where this error came from (see the module docstring)."""
    if isinstance(error, ContextLengthError):
        return False
    if error.status is not None:
        return error.status in (408, 429) or error.status >= 500
    if isinstance(error, ProviderConnectionError):
        return not error.message.startswith(BAD_URL)
    return error.retryable


@dataclass
class Candidate:
    """One model of the chain.

    Attributes:
        name: the model's configured name (``Turn.model`` of its answers).
        where: its endpoint, for messages (credentials masked).
        provider: the provider that calls it.
        resting_until: the clock time until which it is tried last (after a failure).
    """

    name: str
    where: str
    provider: Provider
    resting_until: float = 0.0

    @classmethod
    def of(cls, llm: LLMConfig, provider: Provider) -> Candidate:
        """The candidate ``provider``, named after its config."""
        return cls(llm.model, redact_url(resolve_endpoint(llm).base_url), provider)

    @property
    def label(self) -> str:
        return f"{self.name} at {self.where}"


class FallbackProvider:
    """A Provider over several, tried in order (see the module docstring).

    Args:
        candidates: the models, primary first.
        cooldown_seconds: how long a model that failed is tried last.
        clock: a monotonic clock (inject one in tests).
    """

    def __init__(
        self,
        candidates: Sequence[Candidate],
        *,
        cooldown_seconds: float = DEFAULT_COOLDOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not candidates:
            raise ValueError("FallbackProvider needs at least one provider")
        self.candidates = list(candidates)
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock

    @property
    def server_info(self) -> ServerInfo:
        """What the primary model's server is (``info.server_info_of``)."""
        return server_info_of(self.candidates[0].provider)

    def order(self) -> list[Candidate]:
        """The candidates in the order the next call tries them: resting ones last."""
        now = self.clock()
        return sorted(self.candidates, key=lambda c: c.resting_until > now)

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        """Ask each model in turn until one answers. See ``Provider.complete`` for the contract."""
        failures: list[tuple[Candidate, ProviderError]] = []
        order = self.order()
        for position, candidate in enumerate(order):
            reported = False

            def relay(delta: Delta) -> None:
                nonlocal reported
                reported = True
                if on_delta is not None:
                    on_delta(delta)

            try:
                turn = await candidate.provider.complete(request, relay)
            except ProviderError as exc:
                failures.append((candidate, exc))
                last = position == len(order) - 1
                if reported or last or not falls_back(exc):
                    raise _failed(failures) from exc
                candidate.resting_until = self.clock() + max(self.cooldown_seconds, exc.retry_after or 0.0)
                logger.warning(
                    "model %s failed (%s); trying %s", candidate.label, exc, order[position + 1].label
                )
                continue
            candidate.resting_until = 0.0
            return turn if turn.model else replace(turn, model=candidate.name)
        raise AssertionError("unreachable")


def _failed(failures: Sequence[tuple[Candidate, ProviderError]]) -> ProviderError:
    """The last failure, its message naming every model tried (alone: the error as it is)."""
    last = failures[-1][1]
    if len(failures) == 1:
        return last
    tried = "; then ".join(f"{candidate.label}: {error}" for candidate, error in failures)
    error = type(last)(
        f"every model tried failed: {tried}",
        request_id=last.request_id,
        terminal=last.terminal,
        retryable=last.retryable,
        retry_after=last.retry_after,
    )
    error.status = last.status
    return error
