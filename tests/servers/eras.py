"""Fixture: servers of each protocol era, for ``tests/tools/test_eras.py``.

- ``eras.py stdio reject``: a hand-written handshake-era server (``_raw.py``) that answers
  ``server/discover`` with -32601 (as TypeScript SDK 1.x servers do);
- ``eras.py stdio ignore``: the same, but it never answers ``server/discover`` (the probe's
  timeout path);
- ``eras.py stdio modern``: the SDK's MCPServer (both eras; the 2026-07-28 client gets it);
- ``eras.py http PORT MODE``: the MCPServer over Streamable HTTP behind a filter: ``modern``
  passes everything, ``reject`` answers a ``server/discover`` POST with 400 and a JSON-RPC error
  (an SDK 1.x server without a session does), ``ignore`` never answers it.

Each request method the raw servers get is appended to the file ``$ERA_LOG`` (when set). The
raw servers' tools: ``echo``, ``crash`` (exits). The
MCPServer's tools: ``echo``; ``grow`` (adds a tool named ``name`` and announces it, in both
eras); ``ask`` (answers ``input_required`` with one elicitation: for 2026-07-28 clients); ``wire`` (over HTTP: every POST's routing headers and ``_meta`` keys so far).
"""

import contextlib
import json
import os
import sys
from typing import Any

_WIRE: list[dict[str, Any]] = []


def _log(method: str) -> None:
    path = os.environ.get("ERA_LOG")
    if path:
        with open(path, "a") as file:
            file.write(method + "\n")


def raw(mode: str) -> None:
    """A handshake-era server: it rejects or ignores ``server/discover``."""
    from _raw import RawServer, main_guard, text

    server = RawServer(
        "legacy",
        tools=[
            {"name": "echo", "inputSchema": {"type": "object"}},
            {"name": "crash", "inputSchema": {"type": "object"}},
        ],
    )
    original = server.request

    def request(request_id: Any, method: str, params: dict[str, Any]) -> None:
        _log(method)
        if method == "server/discover" and mode == "ignore":
            return
        original(request_id, method, params)

    server.request = request  # type: ignore[method-assign]

    @server.tool("echo")
    def echo(args: dict[str, Any], call: Any) -> dict[str, Any]:
        return text(str(args.get("text", "")))

    @server.tool("crash")
    def crash(args: dict[str, Any], call: Any) -> dict[str, Any]:
        os._exit(3)

    main_guard(server)


def build() -> Any:
    """The MCPServer of both eras."""
    import mcp_types as types
    from mcp.server.mcpserver import Context, MCPServer

    mcp = MCPServer("eras", version="0.0.1")

    @mcp.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    async def grow(name: str, ctx: Context[Any, Any]) -> str:
        """Add a tool called ``name`` and announce the change."""

        def added() -> str:
            return name

        mcp.add_tool(added, name=name, description=f"added as {name}")
        await ctx.notify_tools_changed()  # 2026-07-28: subscriptions/listen
        with contextlib.suppress(Exception):  # handshake era (no back channel on 2026-07-28)
            await ctx.request_context.session.send_tool_list_changed()
        return f"added {name}"

    @mcp.tool()
    def ask(ctx: Context[Any, Any]) -> Any:
        """Ask the client for a confirmation (2026-07-28: input_required)."""
        return types.InputRequiredResult(
            input_requests={
                "confirm": types.ElicitRequest(
                    params=types.ElicitRequestFormParams(
                        message="Sure?",
                        requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
                    )
                )
            },
            request_state="s1",
        )

    @mcp.tool()
    def wire() -> str:
        """The routing headers and _meta keys of every POST so far (HTTP)."""
        return json.dumps(_WIRE)

    return mcp


def filtered(app: Any, mode: str, record: list[dict[str, Any]] = _WIRE) -> Any:
    """``app`` behind the filter of ``mode`` (see the module docstring), recording each POST in
    ``record``."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        data = json.loads(body) if body else {}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        method = data.get("method") if isinstance(data, dict) else None
        meta = ((data.get("params") or {}).get("_meta") or {}) if isinstance(data, dict) else {}
        record.append(
            {
                "method": method,
                "headers": {
                    k: headers[k] for k in ("mcp-method", "mcp-name", "mcp-protocol-version") if k in headers
                },
                "meta": sorted(meta),
                "logLevel": meta.get("io.modelcontextprotocol/logLevel"),
            }
        )
        if method == "server/discover" and mode == "reject":
            error = {
                "jsonrpc": "2.0",
                "id": "server-error",
                "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
            }
            payload = json.dumps(error).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": payload})
            return
        if method == "server/discover" and mode == "ignore":
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return asgi


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        if sys.argv[2] == "modern":
            build().run()
        else:
            raw(sys.argv[2])
    else:
        import uvicorn

        server = build()
        uvicorn.run(
            filtered(server.streamable_http_app(), sys.argv[3]),
            host="127.0.0.1",
            port=int(sys.argv[2]),
            log_level="warning",
        )
