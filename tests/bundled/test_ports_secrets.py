"""The ports server does not show the secrets in other processes' command lines.

``redact_args`` is table-tested. End to end, a real child process listens on a 127.0.0.1 port
with secrets in its argv, and the real ports server's answers must not contain them: the
child's command line is shown redacted when it runs as the server's user, and not at all when
it runs as another user (as root, with ``setpriv``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from mcp import Client

from .harness import ServerSpec, call, load_server, open_clients

ports = load_server("ports")

R = ports.REDACTED


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # flags with attached and separate values
        ("app --api-key=sk-live-abc123 --port 8000", f"app --api-key={R} --port 8000"),
        ("app --password hunter2 --verbose", f"app --password {R} --verbose"),
        ("app --password --verbose", "app --password --verbose"),  # no value follows
        ("app --token - run", f"app --token {R} run"),
        ("app --authToken=abc --author=bob", f"app --authToken={R} --author=bob"),
        ("app --client-secret s3cr3t", f"app --client-secret {R}"),
        ("openssl s_client -pass pass:hunter2", f"openssl s_client -pass {R}"),
        (
            "java -Djavax.net.ssl.keyStorePassword=changeit -jar a.jar",
            f"java -Djavax.net.ssl.keyStorePassword={R} -jar a.jar",
        ),
        # -p: a password unless it is a port
        ("mysql -u root -phunter2 db", f"mysql -u root -p{R} db"),
        ("mysql -u root -p hunter2", f"mysql -u root -p {R}"),
        ("python -m http.server -p 8000", "python -m http.server -p 8000"),
        (
            "docker run -p 8080:80 -p 127.0.0.1:5432:5432/tcp pg",
            "docker run -p 8080:80 -p 127.0.0.1:5432:5432/tcp pg",
        ),
        ("app -p8080", "app -p8080"),
        # key=value anywhere in an argument
        (
            "env TOKEN=abcdef DB_PASSWORD=xyz PATH=/usr/bin app",
            f"env TOKEN={R} DB_PASSWORD={R} PATH=/usr/bin app",
        ),
        (["sh", "-c", "API_KEY=abc ./run"], f"sh -c API_KEY={R} ./run"),
        ("curl https://x.test/a?api_key=abc&page=2", f"curl https://x.test/a?api_key={R}&page=2"),
        # URL userinfo
        ("psql postgres://app:s3cr3t@db.local:5432/x", f"psql postgres://app:{R}@db.local:5432/x"),
        ("redis-cli -u redis://:pw@host:6379", f"redis-cli -u redis://:{R}@host:6379"),
        ("git clone https://user@host/repo", "git clone https://user@host/repo"),  # no password
        # credential headers and schemes
        (["curl", "-H", "Authorization: Bearer abcdefghijk"], f"curl -H Authorization: {R}"),
        ("curl -H Authorization: Bearer abcdefghijk", f"curl -H Authorization: Bearer {R}"),
        (["curl", "-H", "Cookie: sid=abc; theme=dark"], f"curl -H Cookie: {R}"),
        (["app", "Bearer abcdefghijklmnop"], f"app Bearer {R}"),
        # token shapes
        ("app sk-proj-4f9Kq2xV7LmN8pR3tY6w", f"app sk-{R}"),
        ("app ghp_abcdefghijklmnopqrstuvwxyz0123456789", f"app ghp_{R}"),
        ("app github_pat_11ABCDEFG0123456789_abcdefghij", f"app github_pat_{R}"),
        ("app xoxb-1234-5678-abcdefgh", f"app xoxb-{R}"),
        ("app AKIAIOSFODNN7EXAMPLE", f"app AKIA{R}"),
        ("app eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P", f"app {R}"),
        ("app 0123456789abcdef0123456789abcdef01234567", f"app {R}"),
        ("app aGVsbG8gd29ybGQgdGhpcyBpcyBhIHRlc3Q0MjQy==", f"app {R}"),
        # what stays
        (
            "/home/u/Projects2/SomeVeryLongFolderName/bin/python3 -m uvicorn main:app --host 0.0.0.0",
            "/home/u/Projects2/SomeVeryLongFolderName/bin/python3 -m uvicorn main:app --host 0.0.0.0",
        ),
        ("node next start --keep-alive-timeout 5", "node next start --keep-alive-timeout 5"),
        ("uvicorn a:b --ssl-keyfile /etc/key.pem", "uvicorn a:b --ssl-keyfile /etc/key.pem"),
        ("", ""),
    ],
)
def test_redact_args(argv: str | list[str], expected: str) -> None:
    args = argv.split() if isinstance(argv, str) else argv  # a list where an argument has spaces
    assert " ".join(ports.redact_args(args)) == expected


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("--password", True),
        ("DB_PASSWORD", True),
        ("apiKey", True),
        ("--api-key", True),
        ("x-auth-token", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("--pw", True),
        ("--port", False),
        ("--author", False),
        ("--keep-alive", False),
        ("--ssl-keyfile", False),
        ("PATH", False),
    ],
)
def test_secret_name(name: str, secret: bool) -> None:
    assert ports.secret_name(name) is secret


# --------------------------------------------------------------------------------------------
# end to end: a real listener with secrets in its argv

SECRETS = ("sk-proj-4f9Kq2xV7LmN8pR3tY6wZz", "hunter2-Pa55", "ghp_9aQ2mX7vL0pK3sT8wY1zB4nC6dE5fG2hJ8kL")
LISTENER = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', 0))\n"
    "s.listen()\n"
    "print(s.getsockname()[1], flush=True)\n"
    "time.sleep(120)\n"
)


def start_listener(argv: Sequence[str], executable: str) -> tuple[subprocess.Popen[bytes], int]:
    """Run LISTENER (read from stdin, as ``python -``) under ``argv``; return it and its port."""
    child = subprocess.Popen(
        argv, executable=executable, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(LISTENER.encode())
    child.stdin.close()
    line = child.stdout.readline()
    if not line.strip().isdigit():
        err = stop(child)
        pytest.skip(f"the listener did not start: {err.decode(errors='replace')[-300:]}")
    return child, int(line)


def stop(child: subprocess.Popen[bytes]) -> bytes:
    """Kill the listener, reap it, and return what it wrote on stderr."""
    child.kill()
    child.wait()
    assert child.stdout is not None and child.stderr is not None
    err = child.stderr.read()
    child.stdout.close()
    child.stderr.close()
    return err


# argv[0] is short so that the secrets come within the first CMDLINE_CHARS characters
SECRET_ARGV = ["py", "-", f"--api-key={SECRETS[0]}", "--password", SECRETS[1], f"GH={SECRETS[2]}"]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def ports_server() -> AsyncIterator[Client]:
    with tempfile.TemporaryDirectory() as folder, (Path(folder) / "servers.err").open("w") as log:
        async with open_clients([ServerSpec("ports", "ports")], log) as clients:
            yield clients["ports"]


@pytest.fixture
def own_listener() -> Iterator[tuple[int, int]]:
    child, port = start_listener(SECRET_ARGV, sys.executable)
    try:
        yield child.pid, port
    finally:
        stop(child)


async def test_own_listener_shows_its_command_line_without_secrets(
    ports_server: Client, own_listener: tuple[int, int]
) -> None:
    pid, port = own_listener
    checked, is_error = await call(ports_server, "check_port", {"port": port})
    assert not is_error
    listed, _ = await call(ports_server, "list_listening_ports")
    for text in (checked, listed):
        assert f"pid {pid} " in text
        assert f"py - --api-key={R} --password {R}" in text  # shown, redacted
        for secret in SECRETS:
            assert secret not in text
            assert secret[4:12] not in text  # not even a piece of it


PYTHON_FOR_NOBODY = "/usr/bin/python3"


@pytest.mark.skipif(
    not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("setpriv")),
    reason="needs root and setpriv to run the listener as another user",
)
async def test_another_users_listener_shows_no_command_line(ports_server: Client) -> None:
    if not os.access(PYTHON_FOR_NOBODY, os.X_OK):
        pytest.skip(f"no {PYTHON_FOR_NOBODY} that user nobody could run")
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    argv = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        PYTHON_FOR_NOBODY,
        *SECRET_ARGV[1:],
    ]
    child, port = start_listener(argv, setpriv)
    try:
        text, is_error = await call(ports_server, "check_port", {"port": port})
    finally:
        stop(child)
    assert not is_error
    assert f"pid {child.pid} " in text, text
    line = next(line for line in text.splitlines() if f"pid {child.pid} " in line)
    assert line.endswith(f"pid {child.pid} python3"), line  # name only
    assert "--api-key" not in text
    for secret in SECRETS:
        assert secret not in text
