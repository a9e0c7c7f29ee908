"""ports: which process listens on a TCP or UDP port of this machine (an MCP server over stdio).

Run it as ``python servers/ports.py``. Two narrow tools: ``check_port(port)`` answers "is port N
in use, on which address, by which process?", and ``list_listening_ports()`` gives every TCP
listener and bound UDP socket as one compact table. Sockets come from psutil's
``net_connections`` (the kernel's socket tables, IPv4 and IPv6); the owning process is named
where the OS lets us see it. Without that permission (another user's process, or a process in
another container or PID namespace) the answer says "process unknown" and why, rather than
guessing. When psutil finds no TCP listener, or may not see every socket (macOS without root),
``check_port`` also tries a quick TCP connect to 127.0.0.1 and ::1 as a fallback witness.

Command lines carry secrets (``--api-key=sk-...``, ``--password hunter2``, ``TOKEN=...``,
``postgres://app:pw@db``), so an owner is shown as pid and process name only. Only a process of
the user this server runs as also gets its command line, and only after ``redact_args`` has
replaced what looks secret with ``***``: the value of a secret-sounding flag or ``key=value``
(password, token, secret, key, auth, credential, cookie...), the value after ``-p`` unless it is
a port, URL passwords, ``Authorization:``/``Cookie:`` headers, bearer and basic credentials,
well-known token shapes (``sk-``, ``ghp_``, ``github_pat_``, ``xox?-``, ``glpat-``, ``AKIA``,
``AIza``, ``hf_``, JWTs) and long hex or mixed-case base64-like strings. Redaction is a
heuristic, which is why other users' command lines are not shown at all.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import psutil
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

logger = logging.getLogger("servers.ports")

CMDLINE_CHARS = 60
"""A process's command line is cut to this many characters."""
CONNECT_TIMEOUT = 0.5
"""Seconds for the fallback connect test to one loopback address."""

mcp = MCPServer(
    "ports",
    version="1.0.0",
    log_level="WARNING",
    instructions="Answers which process listens on a TCP/UDP port of this machine.",
)


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket or bound UDP socket."""

    proto: str
    """``tcp`` or ``udp``."""
    ip: str
    port: int
    pid: int | None
    """The owning process, or None when the OS does not tell us."""


# --------------------------------------------------------------------------------------------
# gathering (I/O)


def _listener(conn: Any, pid: int | None) -> Listener | None:
    if not conn.laddr:
        return None
    if conn.type == socket.SOCK_STREAM and conn.status == psutil.CONN_LISTEN:
        proto = "tcp"
    elif conn.type == socket.SOCK_DGRAM and not conn.raddr:
        proto = "udp"
    else:
        return None
    return Listener(proto=proto, ip=conn.laddr.ip, port=conn.laddr.port, pid=pid)


def gather_listeners(
    table: Callable[[str], Iterable[Any]] = psutil.net_connections,
) -> tuple[list[Listener], bool]:
    """Every listening TCP socket and unconnected bound UDP socket of the machine.

    Args:
        table: The system-wide socket table (``psutil.net_connections``; tests pass a stand-in).

    Returns:
        The listeners, and whether the list is complete. It is not complete when the OS
        refuses the system-wide table (macOS without root) and only the sockets of processes
        we may inspect could be listed.
    """
    try:
        conns = table("inet")
    except psutil.AccessDenied:
        found: list[Listener] = []
        for proc in psutil.process_iter():
            try:
                for conn in proc.net_connections(kind="inet"):
                    item = _listener(conn, proc.pid)
                    if item is not None:
                        found.append(item)
            except (psutil.Error, OSError):
                continue
        return found, False
    found = [item for conn in conns if (item := _listener(conn, conn.pid)) is not None]
    return found, True


def process_label(pid: int | None, *, privileged: bool) -> str:
    """``pid 42 python3``, or why unknown.

    A process of this server's own user also gets its command line, redacted and cut short:
    ``pid 42 python3: python app.py --token=***``.
    """
    if pid is None:
        return unknown_process(privileged=privileged)
    try:
        proc = psutil.Process(pid)
        name = redact_text(proc.name())
        try:
            cmdline = " ".join(redact_args(proc.cmdline())) if _same_user(proc) else ""
        except (psutil.AccessDenied, psutil.ZombieProcess):
            cmdline = ""
    except psutil.NoSuchProcess:
        return f"pid {pid} (exited)"
    except psutil.Error:
        return f"pid {pid} (name unknown: needs privileges)"
    return f"pid {pid} {name}" + (f": {shorten(cmdline, CMDLINE_CHARS)}" if cmdline else "")


def _same_user(proc: psutil.Process) -> bool:
    """Whether ``proc`` runs as the user this server runs as (never, where uids are unknown)."""
    try:
        return bool(proc.uids().real == os.getuid())
    except (AttributeError, psutil.Error):
        return False


def connect_test(port: int) -> list[str]:
    """The loopback addresses (127.0.0.1, ::1) that accept a TCP connection on ``port``."""
    accepted = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(CONNECT_TIMEOUT)
                sock.connect((host, port))
        except OSError:
            continue
        accepted.append(host)
    return accepted


def is_privileged() -> bool:
    """Whether we run as root (then a hidden owner is in another PID namespace, not forbidden)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


# --------------------------------------------------------------------------------------------
# redaction (pure)

REDACTED = "***"
_SECRET_WORDS = frozenset(
    {
        *("pass", "password", "passwd", "passphrase", "pwd", "pw", "secret", "secrets"),
        *("token", "tokens", "key", "keys", "apikey", "auth", "authorization", "credential"),
        *("credentials", "cookie", "bearer", "salt", "pat"),
    }
)
_SECRET_PARTS = ("password", "passwd", "secret", "token", "apikey", "credential", "privatekey")
_PORTLIKE = re.compile(r"(?:\[?[0-9a-fA-F.:]*\]?:)?\d{1,5}(?::\d{1,5})?(?:/(?:tcp|udp))?")
_FLAG = re.compile(r"-{1,2}[A-Za-z][\w.-]*")
_TEXT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # URL userinfo: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@"), rf"\1:{REDACTED}@"),
    # credential headers: the whole value
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token)\s*:\s*\S.*"
        ),
        rf"\1: {REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {REDACTED}"),
    # well-known token shapes, their kind kept
    (
        re.compile(
            r"\b(sk-|sk_live_|sk_test_|rk_live_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|"
            r"xox[abposr]-|xapp-|AKIA|ASIA|AIza|hf_|npm_|pypi-)[A-Za-z0-9_-]{8,}"
        ),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), REDACTED),  # JWT
    (re.compile(r"\b[0-9a-fA-F]{32,}\b"), REDACTED),  # long hex
)
_SCHEME = re.compile(r"(?i)bearer|basic|(?:proxy-)?authorization:|cookie:|x-api-key:")
"""An argument whose next argument is a credential: ``-H Authorization: Bearer TOKEN`` split up."""
_KEY_VALUE = re.compile(r"([A-Za-z_][\w.-]*)=([^\s&;,]+)")
_BASE64ISH = re.compile(r"(?<![\w/+=-])[A-Za-z0-9+/_-]{32,}={0,2}")


def secret_name(name: str) -> bool:
    """Whether a flag or key name sounds secret: ``--api-key``, ``DB_PASSWORD``, ``authToken``.

    True when one of its words (split at ``-_.`` and camelCase) is like ``password``, ``token``,
    ``key`` or ``auth``, or when it contains ``password``, ``secret``, ``token`` and the like.
    """
    bare = name.lstrip("-")
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", bare).lower().replace("-", "_").replace(".", "_")
    flat = words.replace("_", "")
    return bool(_SECRET_WORDS & set(words.split("_"))) or any(part in flat for part in _SECRET_PARTS)


def redact_text(text: str) -> str:
    """``text`` with secret-looking parts replaced by ``***`` (one argument, or a name)."""
    for pattern, replacement in _TEXT_RULES:
        text = pattern.sub(replacement, text)
    text = _KEY_VALUE.sub(lambda m: f"{m[1]}={REDACTED}" if secret_name(m[1]) else m[0], text)
    return _BASE64ISH.sub(lambda m: REDACTED if _random_looking(m[0]) else m[0], text)


def _random_looking(run: str) -> bool:
    """A long run with upper case, lower case and digits that is not an absolute path."""
    return (
        not run.startswith("/")
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
    )


def redact_args(argv: Sequence[str]) -> list[str]:
    """A command line with secrets replaced by ``***``; see the module docstring for what counts.

    Besides what ``redact_text`` finds in each argument, the argument after a secret-sounding
    flag (``--password hunter2``) or of an auth scheme (``Authorization: Bearer TOKEN`` given
    as three arguments) is hidden, and so is the value of ``-p`` (``-p secret``, ``-psecret``)
    unless it looks like a port or a port mapping (``-p 8080:80``).
    """
    out: list[str] = []
    flag: str | None = None  # the flag (or auth scheme) whose value may come next
    for arg in argv:
        if flag is not None and (arg == "-" or not arg.startswith("-")) and not _SCHEME.fullmatch(arg):
            out.append(arg if flag == "-p" and _PORTLIKE.fullmatch(arg) else REDACTED)
            flag = None
            continue
        secret_flag = bool(_FLAG.fullmatch(arg)) and secret_name(arg)
        flag = arg if arg == "-p" or secret_flag or _SCHEME.fullmatch(arg) else None
        if arg.startswith("-p") and not secret_flag and not _PORTLIKE.fullmatch(arg[2:] or "0"):
            out.append("-p" + REDACTED)  # -pSECRET (mysql)
        else:
            out.append(redact_text(arg))
    return out


# --------------------------------------------------------------------------------------------
# formatting (pure)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending with "…" when cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unknown_process(*, privileged: bool) -> str:
    """Why the owner of a socket cannot be named."""
    if privileged:
        return "process unknown (not visible from here: another container or PID namespace)"
    return "process unknown (needs privileges: run this server as root to see it)"


def endpoint(ip: str, port: int) -> str:
    """``127.0.0.1:80`` or ``[::1]:80``."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def scope(ip: str) -> str:
    """Who can reach a socket bound to ``ip``, in a few words."""
    if ip in ("0.0.0.0", ""):
        return "IPv4, all interfaces"
    if ip == "::":
        return "IPv6, all interfaces (usually IPv4 too)"
    if ip.startswith("127.") or ip == "::1":
        return f"IPv{6 if ':' in ip else 4}, loopback only"
    return f"IPv{6 if ':' in ip else 4}, one interface"


def group(listeners: Iterable[Listener]) -> dict[tuple[str, str, int], list[int | None]]:
    """Sockets keyed by (proto, ip, port), sorted by port, proto, ip; the owning pids sorted.

    Several pids on one key are processes sharing one socket (pre-fork servers) or
    ``SO_REUSEPORT`` siblings.
    """
    keyed: dict[tuple[str, str, int], set[int | None]] = {}
    for item in listeners:
        keyed.setdefault((item.proto, item.ip, item.port), set()).add(item.pid)
    order = sorted(keyed, key=lambda k: (k[2], k[0], ":" in k[1], k[1]))
    return {key: sorted(keyed[key], key=lambda p: -1 if p is None else p) for key in order}


def owners(pids: list[int | None], labels: Mapping[int | None, str]) -> str:
    """The first owner's label, plus how many more processes share the socket."""
    known: list[int | None] = [p for p in pids if p is not None]
    if not known:
        return labels[None]
    more = len(known) - 1
    return labels[known[0]] + (f" (+{more} more process{'es' if more > 1 else ''})" if more else "")


def format_check(
    port: int,
    listeners: list[Listener],
    labels: Mapping[int | None, str],
    *,
    complete: bool,
    accepted: list[str] | None,
) -> str:
    """The answer of ``check_port``: in use or free, each socket with its address and owner.

    Args:
        port: The port asked about.
        listeners: The sockets on that port (any protocol).
        labels: pid → process label (``None`` → the "process unknown" text).
        complete: Whether the socket table was complete.
        accepted: Loopback addresses that accepted a connect test, or None if not tried.
    """
    mine = group(item for item in listeners if item.port == port)
    tcp = [(k, v) for k, v in mine.items() if k[0] == "tcp"]
    udp = [(k, v) for k, v in mine.items() if k[0] == "udp"]
    lines = []
    if tcp:
        lines.append(f"TCP port {port} is in use (listening):")
        lines += [f"- {endpoint(ip, port)} ({scope(ip)}): {owners(p, labels)}" for (_, ip, _), p in tcp]
    elif accepted:
        where = " and ".join(accepted)
        lines.append(
            f"TCP port {port} is in use: a connection to {where} was accepted, but the listening "
            f"process is not visible here ({labels[None]})."
        )
    else:
        refused = " (a connection to 127.0.0.1 and ::1 was refused)" if accepted is not None else ""
        lines.append(f"TCP port {port} is free: nothing listens on it, IPv4 or IPv6{refused}.")
    if udp:
        lines.append(f"UDP port {port} is bound:")
        lines += [f"- {endpoint(ip, port)} ({scope(ip)}): {owners(p, labels)}" for (_, ip, _), p in udp]
    else:
        lines.append(f"UDP port {port} is not bound.")
    if not complete:
        lines.append(
            "Note: the OS hid the system-wide socket table, so sockets of other users may be missing."
        )
    return "\n".join(lines)


def format_table(listeners: list[Listener], labels: Mapping[int | None, str], *, complete: bool) -> str:
    """The answer of ``list_listening_ports``: one row per socket, sorted by port."""
    rows = group(listeners)
    if not rows:
        text = "No listening TCP ports and no bound UDP ports found."
    else:
        width = max(len(endpoint(ip, port)) for _, ip, port in rows)
        lines = [
            f"{len(rows)} sockets (TCP listening, UDP bound), sorted by port:",
            f"{'proto':<6}{'address':<{width + 2}}process",
        ]
        for (proto, ip, port), pids in rows.items():
            name = proto + ("6" if ":" in ip else "")
            lines.append(f"{name:<6}{endpoint(ip, port):<{width + 2}}{owners(pids, labels)}")
        text = "\n".join(lines)
    if not complete:
        text += "\nNote: the OS hid the system-wide socket table, so sockets of other users may be missing."
    return text


def _labels(listeners: Iterable[Listener]) -> dict[int | None, str]:
    privileged = is_privileged()
    labels: dict[int | None, str] = {None: unknown_process(privileged=privileged)}
    for item in listeners:
        if item.pid not in labels:
            labels[item.pid] = process_label(item.pid, privileged=privileged)
    return labels


# --------------------------------------------------------------------------------------------
# tools

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


@mcp.tool(
    annotations=_READ_ONLY,
    structured_output=False,
    description=(
        "Check whether a TCP port on this machine is in use. Returns, for each listening socket on "
        "that port, the address it is bound to (IPv4/IPv6, loopback or all interfaces) and the process "
        "that owns it (pid and name; the command line only for this server's own user, secrets "
        "hidden), or says the port is free; also says whether a UDP socket is bound to the same port "
        "number. The answer is complete; do not call again for the same port."
    ),
)
def check_port(port: Annotated[int, Field(ge=1, le=65535, description="TCP port number, 1-65535.")]) -> str:
    listeners, complete = gather_listeners()
    mine = [item for item in listeners if item.port == port]
    has_tcp = any(item.proto == "tcp" for item in mine)
    accepted = None if has_tcp else connect_test(port)
    return format_check(port, mine, _labels(mine), complete=complete, accepted=accepted)


@mcp.tool(
    annotations=_READ_ONLY,
    structured_output=False,
    description=(
        "List every listening TCP port and bound UDP port on this machine as a table sorted by port: "
        "protocol (tcp/tcp6/udp/udp6), address:port, and the owning process (pid and name; the command "
        "line only for this server's own user, secrets hidden). The list is complete; do not call "
        "again for the same question."
    ),
)
def list_listening_ports() -> str:
    listeners, complete = gather_listeners()
    return format_table(listeners, _labels(listeners), complete=complete)


def main() -> None:
    """Serve the tools over stdio."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    mcp.run()


if __name__ == "__main__":
    main()
