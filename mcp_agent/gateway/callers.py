"""Who is calling: named callers with tokens and scopes, what each may see and do, and the
middleware that names the caller of each request (``CallerAuthMiddleware``, below).

``gateway.callers`` names the callers, each with a bearer token and scopes; ``gateway.authToken``
is the one-caller shorthand (a caller named ``owner`` with every scope). Scopes:

- ``query``: ask (``agent_query``, ``POST /api/v1/query``, the inner tools with ``exposeTools``),
  list the tools, and see and delete one's *own* conversations, runs, events and pending approvals;
- ``approve``: see and resolve every pending approval;
- ``admin``: see everything (every conversation, every run's events, metrics) and delete any
  conversation.

**Tools.** ``gateway.callers.NAME.tools`` (``allow``/``deny`` globs over exposed names,
``tools/allowed.py``) narrows what a caller meets: its ``agent_query`` offers and runs only those
tools, its ``tools/list`` under ``exposeTools`` and ``GET /api/v1/tools`` show only those, and
its call of any other answers exactly as a call of a tool that does not exist. A caller without
``tools`` (and ``owner``, and ``local``) has every tool. ``tool_glob_warnings`` names the globs
that match no tool (a warning at start-up).

A conversation, a run's events and an approval belong to the caller whose query made them;
another caller gets 404 for them, exactly as for ids that never existed.

Without any token the gateway serves one anonymous local caller (``LOCAL``) with every scope:
whoever can reach the loopback port is trusted with everything.

**OAuth callers.** With ``gateway.oauth``, a JWT access token of its issuer names a caller too
(``oauth:<sub>``, with the scopes its token scopes map to: ``mcp_agent/auth/resource.py``). Such
callers are not in the book: they appear at run time, one per user of the issuer. Their tools
come from ``gateway.oauth.tools`` (``OAuthTools``, below): rules that match a token scope or a
claim; a token gets the union of what its matching rules allow, and the deny of any of them wins.

**Shares.** When two or more callers are configured, or any number may appear (OAuth), no caller
may hold more than ``gateway.callerShare`` (default three quarters, rounded up) of any shared
capacity: query slots, queue places, pending approvals, conversations and MCP sessions, so one
caller's flood leaves room for the others. With one caller there is nobody to share with, and
the whole is its own.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..auth.resource import Grant, ProtectedResource, Refusal
from ..config import CallerConfig, GatewayConfig
from ..config.globs import unmatched_globs
from ..config.sections import OAuthToolRule
from ..messages import ToolSpec
from ..tools.allowed import EVERY_TOOL, ToolFilter
from .middleware import send_error

ScopeName = Literal["query", "approve", "admin"]
ALL_SCOPES: frozenset[str] = frozenset({"query", "approve", "admin"})
OWNER = "owner"
"""The name of the caller that ``gateway.authToken`` stands for."""


@dataclass(frozen=True)
class Caller:
    """One caller: its name, its scopes, whether a token identified it, and its tools.

    Attributes:
        name: the caller's name (``owner`` for ``authToken``, ``local`` without tokens).
        scopes: what it may do (``query``, ``approve``, ``admin``).
        authenticated: False for the anonymous local caller of a gateway without tokens.
        tools: the tools it may use (``gateway.callers.NAME.tools``); every tool by default.
    """

    name: str
    scopes: frozenset[str]
    authenticated: bool = True
    tools: ToolFilter = EVERY_TOOL

    def may_use(self, tool: str) -> bool:
        """Whether this caller may see and call the tool of exposed name ``tool``."""
        return self.tools.permits(tool)

    def tools_of(self, specs: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        """The ones of ``specs`` this caller may see, in their order."""
        return self.tools.narrow(specs)

    def can(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def admin(self) -> bool:
        return "admin" in self.scopes

    def sees(self, owner: str | None) -> bool:
        """Whether this caller may see (and act on) something that belongs to ``owner``."""
        return self.admin or owner == self.name

    def sees_approval(self, owner: str | None) -> bool:
        """Whether this caller may see a pending approval of ``owner``'s run."""
        return self.can("approve") or self.sees(owner)


LOCAL = Caller(name="local", scopes=ALL_SCOPES, authenticated=False)
"""The caller of a gateway without tokens: whoever reaches its loopback port."""


class CallerBook:
    """The configured callers, found by their bearer token.

    Args:
        tokens: each caller's token, by caller; empty for a gateway without tokens.
        share: the largest fraction of a shared capacity one caller may hold when there are
            several callers (see ``share_of``).
        open_ended: callers beside these appear at run time (OAuth users): the gateway is not
            open without tokens, and the shares hold whatever the number of tokens.
    """

    def __init__(
        self, tokens: Mapping[Caller, str] | None = None, *, share: float = 0.75, open_ended: bool = False
    ) -> None:
        self._tokens = [(caller, token.encode("utf-8")) for caller, token in (tokens or {}).items()]
        self.share = share
        self.open_ended = open_ended

    @classmethod
    def from_config(
        cls,
        auth_token: str | None,
        callers: Mapping[str, tuple[str, Iterable[str]]],
        *,
        share: float = 0.75,
        open_ended: bool = False,
        tools: Mapping[str, ToolFilter] | None = None,
    ) -> CallerBook:
        """From ``gateway.authToken`` and ``gateway.callers`` (name -> (token, scopes)), with each
        named caller's ``tools`` (by name; a caller not named has every tool)."""
        tokens: dict[Caller, str] = {}
        if auth_token:
            tokens[Caller(name=OWNER, scopes=ALL_SCOPES)] = auth_token
        for name, (token, scopes) in callers.items():
            tokens[Caller(name=name, scopes=frozenset(scopes), tools=(tools or {}).get(name, EVERY_TOOL))] = (
                token
            )
        return cls(tokens, share=share, open_ended=open_ended)

    @property
    def open(self) -> bool:
        """True when no token is configured: every request is the anonymous ``LOCAL`` caller."""
        return not self._tokens and not self.open_ended

    @property
    def callers(self) -> list[Caller]:
        return [caller for caller, _ in self._tokens] or [LOCAL]

    def identify(self, authorization: str | None) -> Caller | None:
        """The caller whose token ``Authorization: Bearer <token>`` carries, or None.

        Every configured token is compared (in constant time each), so the answer's timing does
        not tell which caller, if any, was close.
        """
        given = bearer_token(authorization)
        if given is None:
            return None
        found: Caller | None = None
        for caller, token in self._tokens:
            if hmac.compare_digest(given, token):
                found = caller
        return found

    def share_of(self, limit: int) -> int:
        """How much of ``limit`` one caller may hold: all of it with one caller, else its share.

        0 (no limit) stays 0. Callers that appear at run time (``open_ended``) always share.
        """
        if not limit or (len(self._tokens) < 2 and not self.open_ended):
            return limit
        return max(1, min(limit, math.ceil(limit * self.share)))


def tool_filters(callers: Mapping[str, CallerConfig]) -> dict[str, ToolFilter]:
    """Each of ``gateway.callers``' tools (``tools/allowed.py``), by caller; every tool without."""
    return {
        name: ToolFilter.of(caller.tools.model_dump() if caller.tools is not None else None)
        for name, caller in callers.items()
    }


def tool_glob_warnings(filters: Mapping[str, ToolFilter], names: Iterable[str]) -> list[str]:
    """One line per ``gateway.callers.NAME.tools`` glob (``filters`` by caller) that matches
    none of ``names`` (the tools offered now), with the nearest names, as for the other globs
    (``config/globs.py``): a warning at start-up, a failure in ``doctor``."""
    known = list(names)
    return [
        glob.describe(f"gateway.callers.{name}.tools.{key}")
        for name, only in filters.items()
        for key, patterns in only.globs.items()
        for glob in unmatched_globs(patterns, known)
    ]


class OAuthTools:
    """The tools of each OAuth caller, from ``gateway.oauth.tools`` (``rules``; None: every tool).

    A rule matches a grant whose token scopes hold its ``scope``, or whose claim ``claim`` is its
    ``value`` (a string claim) or holds it (a list claim), or every grant (neither). The grant's
    filter allows what any matching rule allows and denies what any of them denies; a grant that
    matches no rule has no tool. The filter of each set of matching rules is made once, so its
    verdicts are remembered across requests (``ToolFilter``).
    """

    _MAX_KEPT = 256

    def __init__(self, rules: Sequence[OAuthToolRule] | None) -> None:
        self.rules = None if rules is None else list(rules)
        self._filters = [ToolFilter.of(rule.tools.model_dump()) for rule in self.rules or ()]
        self._kept: dict[tuple[int, ...], ToolFilter] = {}

    def filter_for(self, grant: Grant) -> ToolFilter:
        """The tools of the caller ``grant`` names."""
        if self.rules is None:
            return EVERY_TOOL
        matched = tuple(n for n, rule in enumerate(self.rules) if _rule_matches(rule, grant))
        kept = self._kept.get(matched)
        if kept is None:
            if len(self._kept) >= self._MAX_KEPT:
                self._kept.clear()
            kept = self._kept[matched] = _union([self._filters[n] for n in matched])
        return kept

    def filters(self) -> dict[str, ToolFilter]:
        """Each rule's filter, by its place in the config (``gateway.oauth.tools[N]``)."""
        return {f"gateway.oauth.tools[{n}]": only for n, only in enumerate(self._filters)}


def _rule_matches(rule: OAuthToolRule, grant: Grant) -> bool:
    if rule.scope is not None:
        return rule.scope in grant.token_scopes
    if rule.claim is not None:
        value = grant.claims.get(rule.claim)
        if isinstance(value, list):
            return rule.value in value
        return isinstance(value, str) and value == rule.value
    return True


def _union(filters: Sequence[ToolFilter]) -> ToolFilter:
    """What any of ``filters`` allows, less what any of them denies (none: no tool at all)."""
    if not filters:
        return ToolFilter(allow=())
    allows = [only.allow for only in filters]
    allow = (
        None
        if any(globs is None for globs in allows)
        else _unique(g for globs in allows for g in globs or ())
    )
    deny = _unique(glob for only in filters for glob in only.deny)
    if allow is None and not deny:
        return EVERY_TOOL
    return ToolFilter(allow=allow, deny=deny)


def _unique(globs: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(globs))


def gateway_tool_glob_warnings(gateway: GatewayConfig, names: Iterable[str]) -> list[str]:
    """``tool_glob_warnings`` for ``gateway.callers`` and for the rules of ``gateway.oauth.tools``."""
    known = list(names)
    warnings = tool_glob_warnings(tool_filters(gateway.callers), known)
    rules = OAuthTools(gateway.oauth.tools if gateway.oauth is not None else None)
    warnings += [
        glob.describe(f"{place}.tools.{key}")
        for place, only in rules.filters().items()
        for key, patterns in only.globs.items()
        for glob in unmatched_globs(patterns, known)
    ]
    return warnings


def bearer_token(header: str | None) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    return given.strip().encode("latin-1", "replace")  # the header's own bytes (ASGI decodes latin-1)


# Who is calling: the bearer token names a caller (401 without one), its scopes gate the route (403).
#
# The caller is put in the ASGI scope twice: as ``scope["mcp_agent.caller"]`` for our handlers
# (``caller_of``), and as the MCP SDK's ``AuthenticatedUser`` in ``scope["user"]``, which makes the
# SDK bind every SSE and Streamable HTTP session to the caller that opened it (another caller's
# request for that session gets 404, as for a session that does not exist).
#
# Health and the dashboard page answer GET without a token (health then says only status and
# version); a gateway without tokens lets everything through as the anonymous ``LOCAL`` caller.
# CORS preflights are never challenged.
DEFAULT_EXEMPT = frozenset({"/api/v1/health", "/", "/index.html", "/favicon.ico"})
CALLER_KEY = "mcp_agent.caller"
_CALLER_NOW: ContextVar[Caller | None] = ContextVar("mcp_agent.caller_now", default=None)


def required_scope(method: str, path: str) -> str | None:
    """The scope a route needs; None when any known caller may use it (the handler filters)."""
    if path == "/metrics":
        return "admin"
    if path.startswith("/api/v1/approvals/") and method == "POST":
        return "approve"
    if path.startswith("/api/v1/tools/pins"):  # tool definitions and accepting them: the operator's
        return "admin"
    if path in ("/api/v1/approvals", "/api/v1/events", "/api/v1/tools", "/api/v1/health"):
        return None
    return "query"  # queries, conversations and every MCP route


def caller_of(scope: Scope) -> Caller | None:
    """The caller of this request: None when a gateway with tokens got none (exempt routes)."""
    caller = scope.get(CALLER_KEY)
    return caller if isinstance(caller, Caller) else None


def caller_now() -> Caller | None:
    """The caller of the HTTP request this code runs for, where no request is at hand: the MCP
    SDK asks ``get_tool_input_schema(name)`` of a 2026-07-28 ``tools/call`` before dispatch, and
    another caller's tool must have no schema there, as an unknown tool has none. None outside
    a request (stdio) and for a request without a caller.

    A context variable, set by ``CallerAuthMiddleware`` around the request's own handling: read
    it only in code that runs inline in that request, never in a task a session keeps.
    """
    return _CALLER_NOW.get()


class CallerAuthMiddleware:
    """Identifies the caller by its bearer token and checks the route's scope (module docstring).

    With ``resource`` (``gateway.oauth``), a token that is no static caller's is checked as an
    OAuth access token; the answers then follow RFC 6750 and RFC 9728: a 401 names the resource
    metadata in ``WWW-Authenticate`` (with ``error="invalid_token"`` and the reason for a token
    that failed), a missing scope is a 403 ``insufficient_scope``. The metadata paths are exempt.
    """

    def __init__(
        self,
        app: ASGIApp,
        book: CallerBook,
        exempt: Collection[str] = DEFAULT_EXEMPT,
        *,
        resource: ProtectedResource | None = None,
    ) -> None:
        self.app = app
        self.book = book
        self.resource = resource
        self.exempt = frozenset(exempt) | (resource.metadata_paths if resource is not None else frozenset())
        self.oauth_tools = OAuthTools(resource.config.tools if resource is not None else None)
        self._users = {caller: _user(caller) for caller in book.callers if caller.authenticated}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.book.open:
            scope[CALLER_KEY] = LOCAL
            await self._call(LOCAL, scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        exempt = method in ("GET", "HEAD") and path in self.exempt
        authorization = Headers(scope=scope).get("authorization")
        caller = self.book.identify(authorization)
        grant: Grant | Refusal | None = None
        given = bearer_token(authorization)
        if caller is None and self.resource is not None and given is not None:
            grant = await self.resource.check(given.decode("latin-1"))
            if isinstance(grant, Grant):
                caller = Caller(
                    name=grant.name, scopes=grant.scopes, tools=self.oauth_tools.filter_for(grant)
                )
        if caller is None:
            if method == "OPTIONS" or exempt:
                await self.app(scope, receive, send)
                return
            if isinstance(grant, Refusal):
                await self._refuse(send, grant)
                return
            await send_error(
                send,
                401,
                "missing or wrong bearer token (send Authorization: Bearer <your caller token>)",
                "unauthorized",
                {"WWW-Authenticate": self._challenge()},
            )
            return
        needed = None if exempt else required_scope(method, path)
        if needed is not None and not caller.can(needed) and method != "OPTIONS":
            message = f"caller {caller.name!r} lacks the {needed!r} scope for {method} {path}"
            if isinstance(grant, Grant) and self.resource is not None:
                await self._refuse(
                    send, Refusal(403, "insufficient_scope", message, self.resource.token_scope_for(needed))
                )
                return
            await send_error(send, 403, message, "forbidden")
            return
        scope[CALLER_KEY] = caller
        scope["user"] = self._users.get(caller) or _user(caller)
        await self._call(caller, scope, receive, send)

    async def _call(self, caller: Caller, scope: Scope, receive: Receive, send: Send) -> None:
        token = _CALLER_NOW.set(caller)
        try:
            await self.app(scope, receive, send)
        finally:
            _CALLER_NOW.reset(token)

    def _challenge(self) -> str:
        if self.resource is None:
            return 'Bearer realm="mcp_agent"'
        return self.resource.challenge()

    async def _refuse(self, send: Send, refusal: Refusal) -> None:
        """An OAuth refusal: its status, its error and reason in the body and the challenge."""
        assert self.resource is not None
        headers = {"WWW-Authenticate": self.resource.challenge(refusal)}
        if refusal.status == 503:
            # The issuer's keys could not be had: nothing is known against the token. RFC 6750 §3
            # defines challenges for 400/401/403 only, the MCP spec's authorization error table
            # has only those, and RFC 9110 §11.6.1 leaves a challenge on other statuses to "MAY"
            # for when other credentials would change the answer. A challenge here could tell a
            # client its good token failed and send its user to log in again for nothing: a 503
            # with Retry-After, and no challenge.
            headers = {"Retry-After": "5"}
        await send_error(send, refusal.status, refusal.description, refusal.error, headers)


def _user(caller: Caller) -> AuthenticatedUser:
    """The SDK's user for ``caller``: it binds each MCP session to the caller that opened it."""
    return AuthenticatedUser(AccessToken(token="-", client_id=caller.name, scopes=sorted(caller.scopes)))
