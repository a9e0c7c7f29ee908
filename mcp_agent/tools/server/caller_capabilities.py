"""The calling client's capabilities on an exposed call to a 2026-07-28 server.

In the 2026-07-28 era each request declares its client's capabilities in its own ``_meta``
(``io.modelcontextprotocol/clientCapabilities``), and a server asks (``input_required``) only for
what they include (SEP-2322: the ``input-required-result-capability-check`` scenario of the
conformance suite). The client of an exposed call is the one that answers the server's
questions, so the server should see what that client declared, not what the gateway's session
declares for every call:

- ``sampling``, ``elicitation`` and ``roots`` (``ASKS``) are the calling client's, as its
  channel says it can carry them (``CallerChannel.capabilities``: a 2026 client's, whose rounds
  go back to it untouched; a 2025 client's with a back channel; none without one), and only
  those the gateway's own session declares (it relays questions: ``ServerRelay.asks``);
- everything else is the gateway's own: its ``extensions`` (the Tasks claim: the gateway reads a
  task result itself, ``tasks.py``) and its ``experimental``.

A call without a channel (the agent's own loop, ``agent_query``) keeps the gateway's own. A
handshake-era server read the capabilities once, at ``initialize``: nothing to do per call.

Two paths send a ``tools/call`` to a 2026 server. ``raw_call.py`` writes its ``_meta`` itself and
merges with ``forwarded``. The SDK's ``ClientSession`` stamps its own capabilities on every
request after it adopted a discover result, over whatever the request carried; so its
dispatcher, passed to it with the public ``dispatcher`` parameter, is a ``CallerDispatcher``: a
``JSONRPCDispatcher`` (public) whose ``send_raw_request`` (public), for a ``tools/call`` sent
inside ``speaking_for``, puts the merged capabilities in place of the stamped ones. Over stdio
that is the only path; over HTTP the SDK's path is taken by tools with ``x-mcp-header``
arguments and with ``MCP_AGENT_RAW_CALLS=0``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.shared.dispatcher import CallOptions
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import CLIENT_CAPABILITIES_META_KEY

ASKS = ("sampling", "elicitation", "roots")
"""The capabilities that say what a server may ask its client: the calling client's to declare."""


def forwarded(own: Mapping[str, Any], caller: types.ClientCapabilities) -> dict[str, Any]:
    """The ``clientCapabilities`` of an exposed call (pure): ``own`` (the gateway's session's, as
    JSON) with its ``ASKS`` replaced by what ``caller`` declared of them; one the gateway does not
    declare is never forwarded (it could not carry the question), one the caller did not declare
    is dropped."""
    declared = caller.model_dump(by_alias=True, mode="json", exclude_none=True)
    capabilities = {key: value for key, value in own.items() if key not in ASKS}
    for key in ASKS:
        if key in own and key in declared:
            capabilities[key] = declared[key]
    return capabilities


_caller: ContextVar[types.ClientCapabilities | None] = ContextVar(
    "mcp_agent_caller_capabilities", default=None
)


@contextmanager
def speaking_for(caller: types.ClientCapabilities | None) -> Iterator[None]:
    """The ``tools/call`` the SDK's session sends inside declares ``caller``'s capabilities
    (``forwarded``); None: the session's own."""
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


class CallerDispatcher(JSONRPCDispatcher[TransportContext]):
    """The SDK session's dispatcher: a ``tools/call`` sent inside ``speaking_for`` declares the
    calling client's capabilities (module docstring); everything else goes as the session wrote it."""

    async def send_raw_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        opts: CallOptions | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        caller = _caller.get()
        if caller is not None and method == "tools/call" and params is not None:
            meta = params.get("_meta")
            if isinstance(meta, Mapping):
                own = meta.get(CLIENT_CAPABILITIES_META_KEY)
                if isinstance(own, Mapping):  # a modern stamp: a handshake-era request has none
                    meta = {**meta, CLIENT_CAPABILITIES_META_KEY: forwarded(own, caller)}
                    params = {**params, "_meta": meta}
        return await super().send_raw_request(method, params, opts, **kwargs)
