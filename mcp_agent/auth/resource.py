"""The gateway as an OAuth protected resource: its metadata (RFC 9728), its challenges
(RFC 6750's ``WWW-Authenticate``), and the check of a JWT access token (RFC 9068).

A token passes when its header names a public-key algorithm that ``gateway.oauth.algorithms``
allows and the issuer's key (``jwks.py``) allows too (never ``none``, never an ``HS*`` MAC made
with a public key), its signature verifies, ``iss`` is the issuer, ``aud`` holds the gateway's
audience, and ``exp`` (required) and ``nbf`` hold within the clock skew. Its caller is
``oauth:<claim>`` (the claim ``callerClaim``, default ``sub``): the prefix keeps OAuth users apart
from the named callers of ``gateway.callers``, whose names cannot hold a colon.

Its token scopes (``scopesClaim``: a space-separated string or a list) map to the caller scopes
``query``, ``approve`` and ``admin``: same-named ones (after ``scopePrefix``), or ``scopeMap``.

Failures are data: ``check`` answers a ``Grant`` or a ``Refusal`` (401 ``invalid_token``, 403
``insufficient_scope``, or 503 when the issuer's keys cannot be had), with the reason.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import jwt

from ..config.sections import OAuthResourceConfig
from .jwks import IssuerKeys, KeyMissing, KeysUnavailable

CALLER_SCOPES = ("query", "approve", "admin")
CALLER_PREFIX = "oauth:"
MAX_TOKEN_CHARS = 16 * 1024
MAX_NAME_CHARS = 256
WELL_KNOWN = "/.well-known/oauth-protected-resource"
PASSED_KEPT = 1024
PASSED_SECONDS = 300.0

# which key types each algorithm family may use (a key of another type never verifies it)
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


@dataclass(frozen=True)
class Grant:
    """A token that passed: its caller's name and caller scopes, and what it said (``claims``:
    every claim, which ``gateway.oauth.tools`` rules may read)."""

    name: str
    scopes: frozenset[str]
    token_scopes: frozenset[str]
    subject: str
    expires_at: int | None
    claims: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Refusal:
    """A token that did not pass: the HTTP status, the OAuth error code and the reason."""

    status: int
    error: str
    description: str
    scope: str | None = None


def metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the well-known part goes between the host and the resource's path."""
    parts = urlsplit(resource)
    path = parts.path if parts.path != "/" else ""
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + path, "", ""))


def _quoted(text: str) -> str:
    """A value for a quoted-string of ``WWW-Authenticate``: no quotes, backslashes or controls."""
    return "".join(ch for ch in text if ch.isprintable() and ch not in '"\\')[:300]


class ProtectedResource:
    """The gateway's OAuth side: metadata, challenges and the check of a token.

    Args:
        config: ``gateway.oauth``.
        resource: the gateway's resource URL (``GatewayConfig.oauth_resource``).
        keys: the issuer's keys (default: from ``config``).
        clock: the time, in seconds since the epoch, for how long a token that passed is kept.
    """

    def __init__(
        self,
        config: OAuthResourceConfig,
        resource: str,
        *,
        keys: IssuerKeys | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.resource = resource
        self.audience = config.audience or resource
        self.keys = keys or IssuerKeys(
            config.issuer,
            config.jwks_url,
            max_age=config.jwks_cache_seconds,
            refetch_interval=config.jwks_refetch_seconds,
        )
        self.clock = clock
        self._passed: dict[bytes, tuple[Grant, float]] = {}
        self.metadata_url = metadata_url(resource)
        self.metadata_paths = frozenset({WELL_KNOWN, urlsplit(self.metadata_url).path})

    # ---------------------------------------------------------------- what clients read

    def metadata(self) -> dict[str, Any]:
        """The protected resource metadata document (RFC 9728 §2)."""
        scopes = sorted(set(self.config.required_scopes) | set(self.scope_names()))
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp_agent gateway",
        }
        if scopes:
            document["scopes_supported"] = scopes
        return document

    def scope_names(self) -> list[str]:
        """The token scopes that give caller scopes."""
        if self.config.scope_map is not None:
            return list(self.config.scope_map)
        return [self.config.scope_prefix + scope for scope in CALLER_SCOPES]

    def token_scope_for(self, caller_scope: str) -> str:
        """The token scope(s) that give ``caller_scope``, space-separated (a challenge's ``scope``)."""
        if self.config.scope_map is not None:
            names = [name for name, given in self.config.scope_map.items() if caller_scope in given]
        else:
            names = [self.config.scope_prefix + caller_scope]
        return " ".join(sorted(set(self.config.required_scopes) | set(names[:1])))

    def challenge(self, refusal: Refusal | None = None) -> str:
        """``WWW-Authenticate`` for a request without a token (None) or with a refused one."""
        parts = [f'resource_metadata="{self.metadata_url}"']
        scope = (refusal.scope if refusal is not None else None) or " ".join(self.config.required_scopes)
        if refusal is not None:
            parts[:0] = [f'error="{refusal.error}"', f'error_description="{_quoted(refusal.description)}"']
        if scope:
            parts.append(f'scope="{_quoted(scope)}"')
        return "Bearer " + ", ".join(parts)

    # ---------------------------------------------------------------- checking a token

    async def check(self, token: str) -> Grant | Refusal:
        """Whether ``token`` (the bearer token, as sent) passes; see the module docstring.

        A client sends the same token with each request: a token that passed is remembered (by
        its SHA-256, at most ``PASSED_KEPT`` of them) until its ``exp`` and at most
        ``PASSED_SECONDS``, which saves the signature check (about 70 µs of CPU) on the next.
        """
        if len(token) > MAX_TOKEN_CHARS:
            return _invalid(f"the token is longer than {MAX_TOKEN_CHARS} characters")
        digest = hashlib.sha256(token.encode("utf-8", "replace")).digest()
        now = self.clock()
        kept = self._passed.get(digest)
        if kept is not None and now < kept[1]:
            return kept[0]
        self._passed.pop(digest, None)
        checked = await self._check(token)
        if isinstance(checked, Grant):
            until = now + PASSED_SECONDS
            if checked.expires_at is not None:
                until = min(until, checked.expires_at + self.config.clock_skew_seconds)
            if len(self._passed) >= PASSED_KEPT:
                self._passed.pop(next(iter(self._passed)))
            self._passed[digest] = (checked, until)
        return checked

    async def _check(self, token: str) -> Grant | Refusal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return _invalid("the token is not a well-formed JWT")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.config.algorithms:
            return _invalid(
                f"the token's algorithm {alg!r} is not allowed (only {', '.join(self.config.algorithms)})"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            return _invalid("the token's key id is not a string")
        found = await self.keys.key_for(kid)
        if isinstance(found, KeysUnavailable):
            return Refusal(503, "temporarily_unavailable", found.reason)
        if isinstance(found, KeyMissing):
            return _invalid(f"the token's key id {kid!r} is not among the issuer's keys")
        if found.get("alg") not in (None, alg) or found.get("kty") != _KEY_TYPES.get(alg[:2]):
            return _invalid(f"the issuer's key {kid!r} is not for algorithm {alg}")
        try:
            key = jwt.PyJWK(found, algorithm=alg)
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.config.issuer,
                leeway=self.config.clock_skew_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            return _invalid(_why(exc, self))
        return self._grant(claims)

    def _grant(self, claims: dict[str, Any]) -> Grant | Refusal:
        subject = claims.get(self.config.caller_claim)
        if not isinstance(subject, str) or not subject or len(subject) > MAX_NAME_CHARS:
            return _invalid(f"the token has no usable {self.config.caller_claim!r} claim to name its caller")
        token_scopes = _scopes(claims.get(self.config.scopes_claim))
        missing = [scope for scope in self.config.required_scopes if scope not in token_scopes]
        if missing:
            return Refusal(
                403,
                "insufficient_scope",
                f"the token lacks the scope {' '.join(missing)}",
                " ".join(self.config.required_scopes),
            )
        expires = claims.get("exp")
        return Grant(
            name=CALLER_PREFIX + subject,
            scopes=self.caller_scopes(token_scopes),
            token_scopes=token_scopes,
            subject=subject,
            expires_at=int(expires) if isinstance(expires, int | float) else None,
            claims=claims,
        )

    def caller_scopes(self, token_scopes: Iterable[str]) -> frozenset[str]:
        """The caller scopes that ``token_scopes`` give."""
        if self.config.scope_map is not None:
            given: set[str] = set()
            for scope in token_scopes:
                given.update(self.config.scope_map.get(scope, ()))
            return frozenset(given)
        prefix = self.config.scope_prefix
        return frozenset(
            scope[len(prefix) :]
            for scope in token_scopes
            if scope.startswith(prefix) and scope[len(prefix) :] in CALLER_SCOPES
        )


def _scopes(value: object) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def _invalid(description: str) -> Refusal:
    return Refusal(401, "invalid_token", description)


def _why(exc: jwt.PyJWTError, resource: ProtectedResource) -> str:
    """The reason, in words, for a token pyjwt refused."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "the token has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "the token is not valid yet (nbf or iat in the future)"
    if isinstance(exc, jwt.InvalidAudienceError):
        return f"the token's audience is not this gateway ({resource.audience})"
    if isinstance(exc, jwt.InvalidIssuerError):
        return f"the token's issuer is not {resource.config.issuer}"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "the token's signature does not verify"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the token has no {exc.claim!r} claim"
    if isinstance(exc, jwt.InvalidKeyError | jwt.InvalidAlgorithmError):
        return "the token's algorithm does not fit the issuer's key"
    if isinstance(exc, jwt.DecodeError):
        return "the token is not a well-formed JWT"
    return f"the token is not valid ({type(exc).__name__})"
