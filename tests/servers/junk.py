"""Fixture: prints non-JSON lines on stdout before the handshake and during a call."""

from __future__ import annotations

from _raw import Call, RawServer, main_guard, text

server = RawServer(
    "junk",
    tools=[{"name": "noisy", "description": "Prints junk, then answers.", "inputSchema": {"type": "object"}}],
)


@server.tool("noisy")
def noisy(args: dict, call: Call) -> dict:
    server.write_line(b"progress: 50% done")
    server.write_line(b'{"not": "json-rpc"}')
    return text("quiet now")


if __name__ == "__main__":
    server.write_line(b"Starting junk server v1.0...")
    server.write_line(b"added 48 packages in 2s")
    server.write_line(b"")
    main_guard(server)
