"""The signing keys of an OAuth issuer: its JWKS, fetched with httpx, cached, refetched when a
token names a key id the cache does not hold, and bounded in every way.

- where: ``jwksUrl`` from config, else the ``jwks_uri`` of the issuer's metadata (RFC 8414's
  ``/.well-known/oauth-authorization-server``, then OpenID Connect discovery), found once;
- how long: the keys are kept ``max_age`` seconds; a token whose ``kid`` is not among them makes
  one refetch, but never two within ``refetch_interval`` seconds (a flood of made-up key ids
  costs the issuer at most one request per interval), and concurrent misses share one fetch;
- how much: an answer over ``MAX_BYTES`` or with more than ``MAX_KEYS`` keys is refused, and
  every request has a timeout.

Failures are data: ``key_for`` answers a ``JWK`` or a ``KeyMissing`` (no such key id) or a
``KeysUnavailable`` (the issuer's keys cannot be had now, with why).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx

logger = logging.getLogger(__name__)

MAX_BYTES = 256 * 1024
MAX_KEYS = 64
TIMEOUT_SECONDS = 10.0

JWK = dict[str, Any]


@dataclass(frozen=True)
class KeyMissing:
    """The issuer's keys were read, and none has the token's key id."""

    kid: str | None


@dataclass(frozen=True)
class KeysUnavailable:
    """The issuer's keys could not be fetched (why, for the log and the answer)."""

    reason: str


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414 (the well-known part before the issuer's
    path), then OpenID Connect discovery (after it, and the RFC 8414 style too)."""
    parts = urlsplit(issuer.rstrip("/"))
    path = parts.path

    def at(well_known: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, well_known, "", ""))

    urls = [at(f"/.well-known/oauth-authorization-server{path}")]
    urls.append(at(f"{path}/.well-known/openid-configuration"))
    if path:
        urls.append(at(f"/.well-known/openid-configuration{path}"))
    return urls


async def _get_json(client: httpx.AsyncClient, url: str) -> Any:
    """A JSON document of at most ``MAX_BYTES``; raises ``ValueError`` with why otherwise."""
    async with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
        if response.status_code != 200:
            raise ValueError(f"GET {url} answered {response.status_code}")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body.extend(chunk)
            if len(body) > MAX_BYTES:
                raise ValueError(f"GET {url} answered more than {MAX_BYTES} bytes")
    try:
        return json.loads(bytes(body))
    except ValueError as exc:
        raise ValueError(f"GET {url} answered something that is not JSON ({exc})") from None


class IssuerKeys:
    """The cached JWKS of one issuer (module docstring).

    Args:
        issuer: the issuer's URL (for discovery).
        jwks_url: the JWKS URL; None: discovered from the issuer's metadata.
        max_age: seconds the keys are kept before the next token refetches them.
        refetch_interval: the least time between two fetches caused by unknown key ids.
        clock: monotonic seconds (tests pass their own).
        transport: an httpx transport (tests); None: the network.
    """

    def __init__(
        self,
        issuer: str,
        jwks_url: str | None = None,
        *,
        max_age: float = 3600.0,
        refetch_interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.issuer = issuer
        self.jwks_url = jwks_url
        self.max_age = max_age
        self.refetch_interval = refetch_interval
        self.clock = clock
        self.transport = transport
        self.fetches = 0
        """How many times the JWKS was fetched (the tests read it)."""
        self._keys: list[JWK] | None = None
        self._fetched_at: float | None = None
        self._failure: KeysUnavailable | None = None
        self._lock = anyio.Lock()

    async def key_for(self, kid: str | None) -> JWK | KeyMissing | KeysUnavailable:
        """The key a token's header names (``kid``; without one, the issuer's only key)."""
        now = self.clock()
        keys = self._keys
        stale = self._fetched_at is None or now - self._fetched_at >= self.max_age
        if keys is not None and not stale:
            found = _pick(keys, kid)
            if found is not None:
                return found
        async with self._lock:
            # another request may have fetched while this one waited
            if self._keys is not keys and self._keys is not None:
                found = _pick(self._keys, kid)
                if found is not None:
                    return found
            now = self.clock()
            stale = self._fetched_at is None or now - self._fetched_at >= self.max_age
            recent = self._fetched_at is not None and now - self._fetched_at < self.refetch_interval
            if not stale and recent:  # fetched lately: a made-up kid (or a retry) makes no request
                return self._failure if self._keys is None and self._failure else KeyMissing(kid)
            failure = await self._fetch()
            if failure is not None and self._keys is None:
                return failure
        found = _pick(self._keys or [], kid)
        return found if found is not None else KeyMissing(kid)

    async def fetch_now(self) -> list[JWK] | KeysUnavailable:
        """Fetch the issuer's keys now, whatever the cache holds (``doctor``): the signing keys,
        or why they cannot be had (the URL asked and the reason)."""
        async with self._lock:
            failure = await self._fetch()
        return failure if failure is not None else list(self._keys or [])

    async def _fetch(self) -> KeysUnavailable | None:
        """Fetch the JWKS (after finding its URL); keeps the old keys when this fails."""
        self._fetched_at = self.clock()
        self.fetches += 1
        try:
            async with httpx.AsyncClient(
                transport=self.transport, timeout=TIMEOUT_SECONDS, follow_redirects=False
            ) as client:
                url = self.jwks_url or await self._discover(client)
                document = await _get_json(client, url)
        except (httpx.HTTPError, ValueError) as exc:
            reason = f"cannot fetch the signing keys of {self.issuer}: {exc}{_asked(exc)}"
            logger.warning("%s", reason)
            self._failure = KeysUnavailable(reason)
            return self._failure
        keys = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(keys, list) or not all(isinstance(key, dict) for key in keys):
            self._failure = KeysUnavailable(f"the JWKS of {self.issuer} has no list of keys")
            return self._failure
        if len(keys) > MAX_KEYS:
            self._failure = KeysUnavailable(
                f"the JWKS of {self.issuer} has {len(keys)} keys (at most {MAX_KEYS})"
            )
            return self._failure
        self._failure = None
        self._keys = [key for key in keys if key.get("use", "sig") == "sig"]
        return None

    async def _discover(self, client: httpx.AsyncClient) -> str:
        """The issuer's ``jwks_uri`` from its metadata (remembered once found)."""
        tried: list[str] = []
        for url in metadata_urls(self.issuer):
            try:
                document = await _get_json(client, url)
            except ValueError as exc:
                tried.append(str(exc))
                continue
            if not isinstance(document, dict):
                tried.append(f"GET {url} answered no JSON object")
                continue
            if str(document.get("issuer", "")).rstrip("/") != self.issuer.rstrip("/"):
                tried.append(f"GET {url} names another issuer ({document.get('issuer')!r})")
                continue
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri:
                tried.append(f"GET {url} has no jwks_uri")
                continue
            self.jwks_url = jwks_uri
            return jwks_uri
        raise ValueError("no metadata with a jwks_uri: " + "; ".join(tried))


def _asked(exc: Exception) -> str:
    """`` (GET <url>)`` for a failed request of httpx (whose message does not name the URL)."""
    if isinstance(exc, httpx.RequestError):
        try:
            return f" (GET {exc.request.url})"
        except RuntimeError:  # no request attached
            return ""
    return ""


def _pick(keys: list[JWK], kid: str | None) -> JWK | None:
    if kid is None:
        return keys[0] if len(keys) == 1 else None
    return next((key for key in keys if key.get("kid") == kid), None)
