"""Where the tokens of remote servers live: one private file per server in the state folder.

``<state dir>/oauth/<server>-<hash>.json`` (the folder 0700, the file 0600, written atomically:
``state/folder.py``) holds what the MCP SDK's OAuth client asks its ``TokenStorage`` to keep for
one server: the tokens, when the access token expires (an absolute time, so that a restart knows
it), the client registration, and the authorization server's metadata (where a refresh goes). It is bound to the server's URL: tokens stored for another URL
are not handed out. ``TokenStore`` implements the SDK's ``TokenStorage`` protocol; every token
it reads or writes is remembered as a secret (``_redact.py``), so no log line, error, trace or
recording of this process shows it. No other file holds a token.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._redact import remember_secrets
from ..state.folder import state_dir, write_private

if TYPE_CHECKING:  # the SDK's models are loaded when a token is read: `tools` on a warm cache loads no SDK
    from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

logger = logging.getLogger(__name__)

FOLDER = "oauth"
"""The token folder inside the state folder."""


def login_hint(name: str) -> str:
    """What a server that needs a login says, in its status and in its tools' answers."""
    return f"needs login: `mcp-agent login {name}`"


def store_path(folder: Path, server: str) -> Path:
    """The file of ``server`` in ``folder`` (a safe name, and a hash so names never collide)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", server)[:64]
    digest = hashlib.sha256(server.encode()).hexdigest()[:8]
    return folder / f"{safe}-{digest}.json"


def tokens_folder(state: str | os.PathLike[str] | None = None) -> Path:
    """The token folder of the state folder ``state`` (default: the configured one)."""
    return Path(state if state is not None else state_dir()) / FOLDER


class TokenStore:
    """The stored login of one server (the SDK's ``TokenStorage``).

    Reads go to the file each time (it is small, and ``mcp-agent login`` in another process may
    have just written it); a file that cannot be read or parsed counts as no login (logged).

    Args:
        server: the server's name in agent.json.
        url: its URL; what is stored for another URL is ignored.
        folder: the token folder (``tokens_folder()``).
        client: a client registered beforehand (``oauth.clientId``): handed out as the
            registration instead of what is stored.
    """

    def __init__(
        self, server: str, url: str, folder: Path, *, client: OAuthClientInformationFull | None = None
    ) -> None:
        self.server = server
        self.url = url
        self.path = store_path(folder, server)
        self.client = client

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning(
                "tool server %s: the stored login in %s is unreadable: %s", self.server, self.path, exc
            )
            return {}
        if not isinstance(data, dict) or data.get("url") != self.url:
            return {}
        return data

    def has_tokens(self) -> bool:
        """Whether tokens are stored (without loading the SDK)."""
        return isinstance(self._read().get("tokens"), dict)

    def _write(self, data: dict[str, Any]) -> None:
        data["url"] = self.url
        write_private(self.path, json.dumps(data, indent=1, sort_keys=True))

    def stamp(self) -> float | None:
        """When the file last changed (None: there is none): a cheap way to see a new login."""
        try:
            return self.path.stat().st_mtime_ns / 1e9
        except OSError:
            return None

    def load_tokens(self) -> tuple[OAuthToken | None, float | None]:
        """The stored tokens and when the access token expires (time.time(); None: not said)."""
        data = self._read()
        raw = data.get("tokens")
        if not isinstance(raw, dict):
            return None, None
        from mcp.shared.auth import OAuthToken

        try:
            tokens = OAuthToken.model_validate(raw)
        except ValueError:
            return None, None
        remember_secrets(value for value in (tokens.access_token, tokens.refresh_token) if value)
        expires_at = data.get("expires_at")
        return tokens, float(expires_at) if isinstance(expires_at, (int, float)) else None

    def load_client(self) -> OAuthClientInformationFull | None:
        """The client registration: the configured one, else the stored one (None: none)."""
        if self.client is not None:
            return self.client
        raw = self._read().get("client")
        if not isinstance(raw, dict):
            return None
        from mcp.shared.auth import OAuthClientInformationFull

        try:
            client = OAuthClientInformationFull.model_validate(raw)
        except ValueError:
            return None
        if client.client_secret:
            remember_secrets([client.client_secret])
        return client

    # ------------------------------------------------------------ TokenStorage

    async def get_tokens(self) -> OAuthToken | None:
        return self.load_tokens()[0]

    async def set_tokens(self, tokens: OAuthToken) -> None:
        remember_secrets(value for value in (tokens.access_token, tokens.refresh_token) if value)
        data = self._read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.load_client()

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if client_info.client_secret:
            remember_secrets([client_info.client_secret])
        data = self._read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)

    # ------------------------------------------------- the authorization server

    def save_metadata(self, metadata: OAuthMetadata) -> None:
        """Keep the authorization server's metadata (its token endpoint and the client
        authentication it offers): a refresh in a later process goes there, as advertised."""
        dumped = metadata.model_dump(mode="json", exclude_none=True)
        data = self._read()
        if data.get("authorization_server") != dumped:
            data["authorization_server"] = dumped
            self._write(data)

    def load_metadata(self) -> OAuthMetadata | None:
        raw = self._read().get("authorization_server")
        if not isinstance(raw, dict):
            return None
        from mcp.shared.auth import OAuthMetadata

        try:
            return OAuthMetadata.model_validate(raw)
        except ValueError:
            return None

    # ---------------------------------------------------------------- step-up

    def want_scopes(self, scope: str) -> None:
        """Remember the scopes a server asked for (``insufficient_scope``) for the next login."""
        data = self._read()
        wanted = [*data.get("wanted_scopes", []), *scope.split()]
        data["wanted_scopes"] = list(dict.fromkeys(wanted))
        self._write(data)

    def wanted_scopes(self) -> list[str]:
        """The scopes servers asked for since the last login."""
        wanted = self._read().get("wanted_scopes")
        return [str(item) for item in wanted] if isinstance(wanted, list) else []

    # ------------------------------------------------------------------ logout

    def forget_tokens(self) -> None:
        """Drop the tokens, keep the registration (``mcp-agent login`` starts this way)."""
        data = self._read()
        if data.pop("tokens", None) is not None:
            data.pop("expires_at", None)
            self._write(data)

    def forget_wanted_scopes(self) -> None:
        data = self._read()
        if data.pop("wanted_scopes", None) is not None:
            self._write(data)

    def forget(self) -> bool:
        """Drop everything stored for the server (``mcp-agent logout``); whether there was anything."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True
