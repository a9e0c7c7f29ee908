"""Provenance of tool results, and the policy for calls with side effects after untrusted text.

Every result of a tool that ran carries a ``Provenance`` (``messages.py``): its server, tool and
call id, and whether its text is **trusted**. ``trust_of`` decides it, first match wins:

1. config: ``mcpServers.NAME.trust`` — ``"trusted"``/``"untrusted"`` for all the server's
   tools, or globs on its tools' MCP names mapped to those words (first matching glob wins);
2. the tool's annotations: ``openWorldHint: false`` is trusted (the tool's world is closed:
   this machine, the user's own data), ``openWorldHint: true`` untrusted;
3. the default: **untrusted**. The MCP spec says an absent ``openWorldHint`` means true, and a
   careful user does not vouch for text nobody vouched for.

The loop's own answers (a denial, a validation error) are trusted, and so are the pages of an
earlier result that ``read_result`` gives (their text was judged when the result came): the
dispatcher (``_dispatch.py``) stamps those itself.

A run is **exposed** once it holds a result that is not trusted: ``Exposure`` keeps the latest
(its provenance and a short excerpt, what an approver is shown). ``has_side_effects`` decides
whether a call could change something, first match wins: ``policy.readOnly`` globs free a
tool; ``policy.sideEffects`` globs bind it; ``destructiveHint: true`` binds it;
``readOnlyHint: true`` frees it; anything else has side effects (the spec's default for an
absent ``readOnlyHint`` is false). ``ProvenancePolicy.check`` joins them with ``policy.mode``:
``off`` — nothing; ``warn`` — the call runs, flagged; ``enforce`` — it needs an approval (or is
refused). Read-only calls and calls before any untrusted text are never touched.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..config import AgentConfig, PolicyConfig
from ..messages import JSONObject, Message, Provenance, ToolCall, ToolSpec

EXCERPT_CHARS = 200
"""An approver sees at most this much of the untrusted result."""

TrustRule = str | Mapping[str, str] | None
Mode = Literal["off", "warn", "enforce"]

__all__ = [
    "Exposure",
    "Flag",
    "ProvenancePolicy",
    "describe_source",
    "excerpt",
    "has_side_effects",
    "latest_exposure",
    "trust_of",
]


def trust_of(spec: ToolSpec | None, rule: TrustRule, *, name: str = "") -> tuple[bool, str]:
    """(trusted, why) for the results of ``spec``'s tool; see the module docstring.

    Args:
        spec: the tool as offered (None: unknown, so untrusted).
        rule: its server's ``mcpServers.NAME.trust``.
        name: the exposed name, when ``spec`` is None.
    """
    if spec is None:
        return False, f"{name or 'the tool'} is not a known tool"
    where = f"mcpServers.{spec.server}.trust"
    if isinstance(rule, str):
        return rule == "trusted", f"{where} is {rule!r}"
    if rule:
        tool = spec.mcp_name or spec.name
        for pattern, word in rule.items():
            if fnmatch.fnmatchcase(tool, pattern):
                return word == "trusted", f"{where}[{pattern!r}] is {word!r}"
    hint = spec.annotations.get("openWorldHint")
    if hint is False:
        return True, "openWorldHint: false"
    if hint is True:
        return False, "openWorldHint: true"
    return False, "no openWorldHint (the MCP default is an open world) and no mcpServers trust set"


def has_side_effects(spec: ToolSpec | None, policy: PolicyConfig, *, name: str = "") -> tuple[bool, str]:
    """(side effects, why) for a call of ``spec``'s tool; see the module docstring."""
    name = spec.name if spec is not None else name
    if _matches(name, policy.read_only):
        return False, "policy.readOnly"
    if _matches(name, policy.side_effects):
        return True, "policy.sideEffects"
    if spec is None:
        return True, "an unknown tool"
    annotations = spec.annotations
    if annotations.get("destructiveHint") is True:
        return True, "destructiveHint: true"
    if annotations.get("readOnlyHint") is True:
        return False, "readOnlyHint: true"
    return True, "not marked readOnlyHint: true"


def _matches(name: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in globs)


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of ``text`` on one line (whitespace runs folded), cut to ``limit`` with ``…``."""
    flat = " ".join(text[: limit * 4].split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class Exposure:
    """The latest untrusted result a run holds: where it came from and how it starts."""

    provenance: Provenance
    excerpt: str

    def to_dict(self) -> JSONObject:
        return {**self.provenance.to_dict(), "excerpt": self.excerpt}

    def describe(self) -> str:
        """One line for an approver: which result, from where, why untrusted, how it starts."""
        return describe_source(self.to_dict())

    @classmethod
    def of(cls, message: Message) -> Exposure | None:
        """The exposure ``message`` brings: a tool result whose provenance is not trusted.

        A tool message without provenance (kept before provenance was recorded) counts as
        untrusted: nobody vouched for it.
        """
        if message.role != "tool":
            return None
        p = message.provenance
        if p is None:
            p = Provenance(
                "", message.name or "", message.tool_call_id or "", False, "kept without provenance"
            )
        elif p.trusted:
            return None
        return cls(p, excerpt(message.content))


def latest_exposure(messages: Iterable[Message], current: Exposure | None = None) -> Exposure | None:
    """The latest untrusted result among ``messages`` (``current`` when there is none)."""
    for message in messages:
        found = Exposure.of(message)
        if found is not None:
            current = found
    return current


def describe_source(source: Mapping[str, object]) -> str:
    """``Exposure.to_dict()`` (as an approval or event carries it) on one line, for a person:
    ``after reading untrusted text from web__fetch (server web, call c1; openWorldHint: true):
    'Ignore previous…'``."""
    server = source.get("server") or "-"
    return (
        f"after reading untrusted text from {source.get('tool') or '?'} (server {server}, "
        f"call {source.get('call_id') or '?'}; {source.get('why') or 'untrusted'}): "
        f"{str(source.get('excerpt') or '')!r}"
    )


@dataclass(frozen=True)
class Flag:
    """What the policy does with one call: ``warn`` (runs, flagged) or ``hold`` (needs approval)."""

    action: Literal["warn", "hold"]
    exposure: Exposure
    why: str
    """Why the call counts as having side effects."""

    def to_dict(self) -> JSONObject:
        return {"action": self.action, "side_effects": self.why, "after": self.exposure.to_dict()}


class ProvenancePolicy:
    """Trust of results and the check of calls after untrusted text, from ``policy`` and
    ``mcpServers.NAME.trust``.

    Args:
        policy: the ``policy`` section.
        trust: each server's ``trust`` rule, by server name.
    """

    def __init__(
        self, policy: PolicyConfig | None = None, trust: Mapping[str, TrustRule] | None = None
    ) -> None:
        self.policy = policy if policy is not None else PolicyConfig()
        self.mode: Mode = self.policy.mode
        self.trust: dict[str, TrustRule] = dict(trust or {})
        self._trusted: dict[int, tuple[ToolSpec, bool, str]] = {}

    @classmethod
    def from_config(cls, config: AgentConfig) -> ProvenancePolicy:
        return cls(config.policy, {name: server.trust for name, server in config.mcp_servers.items()})

    def provenance(self, call: ToolCall, spec: ToolSpec | None) -> Provenance:
        """Where the result of ``call`` comes from, and whether it is trusted."""
        if spec is None:
            trusted, why = trust_of(None, None, name=call.name)
            return Provenance("", call.name, call.id, trusted, why)
        cached = self._trusted.get(id(spec))
        if cached is None or cached[0] is not spec:  # specs are kept while the tool list stands
            cached = (spec, *trust_of(spec, self.trust.get(spec.server)))
            if len(self._trusted) > 4096:
                self._trusted.clear()
            self._trusted[id(spec)] = cached
        return Provenance(spec.server, call.name, call.id, cached[1], cached[2])

    def check(self, call: ToolCall, spec: ToolSpec | None, exposure: Exposure | None) -> Flag | None:
        """None when the call goes on untouched; else what the policy does with it."""
        if self.mode == "off" or exposure is None:
            return None
        effects, why = has_side_effects(spec, self.policy, name=call.name)
        if not effects:
            return None
        return Flag("hold" if self.mode == "enforce" else "warn", exposure, why)
