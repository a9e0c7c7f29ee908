"""OAuth: the gateway logging in to remote MCP servers, and checking the tokens of its callers.

Logging in to remote servers (the gateway as an OAuth client, with the MCP SDK's
``mcp.client.auth``): ``token_store.py`` (the private token file of each server),
``upstream.py`` (the OAuth client on a server's HTTP connection while the gateway serves: stored
tokens, refresh, client credentials, "needs login"), ``login.py`` (``mcp-agent login`` and
``logout``: the browser, the loopback redirect receiver), ``token_requests.py`` (the SDK's token
requests adjusted: client authentication as advertised, the scopes of client credentials).

The gateway as a protected resource (its callers' JWT access tokens, checked with pyjwt):
``resource.py`` (the RFC 9728 metadata, the challenges, the check of a token) and ``jwks.py``
(the issuer's signing keys, fetched and cached).
"""
