"""The system server's ``disk_usage`` is no oracle for whether a path exists.

A path picks a filesystem by its text alone (pure helpers, table-tested); end to end, the real
server, with ``HOME`` set to a folder holding a private key, answers the same for the key, for
missing keys, for a path through the key file, and for a symlink to another mount.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
from mcp import Client

from .harness import ServerSpec, call, load_server, open_clients

system = load_server("system")

_SIZE = re.compile(r"\d+(?:\.\d)? (?:B|KiB|MiB|GiB|TiB|PiB|EiB)|\(\d+\.\d%\)")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "/"),
        ("/etc/../root/.ssh/id_rsa", "/root/.ssh/id_rsa"),
        ("/a//b/./c/", "/a/b/c"),
        ("~", "/home/me"),
        ("~/.ssh/id_rsa", "/home/me/.ssh/id_rsa"),
        ("~root/.ssh/id_rsa", "/srv/~root/.ssh/id_rsa"),  # not expanded: no user lookup
        ("notes.txt", "/srv/notes.txt"),
        ("../../..", "/"),
    ],
)
def test_absolute_works_on_the_text_only(path: str, expected: str) -> None:
    assert system.absolute(path, "/home/me", "/srv") == expected


MOUNTS = ["/", "/home", "/home/me/data", "/proc", "/etc/hosts"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "/"),
        ("/usr/bin", "/"),
        ("/home", "/home"),
        ("/home/me/.ssh/id_rsa", "/home"),
        ("/home/me/data", "/home/me/data"),
        ("/home/me/data/x/y", "/home/me/data"),
        ("/home/me/database", "/home"),  # a prefix of the text is not a parent folder
        ("/homework", "/"),
        ("/etc/hosts", "/etc/hosts"),
        ("/etc/hostsfile", "/"),
    ],
)
def test_containing_mount_is_the_deepest_mount_above_the_path(path: str, expected: str) -> None:
    assert system.containing_mount(path, MOUNTS) == expected
    assert system.containing_mount(path, reversed(MOUNTS)) == expected


def test_containing_mount_falls_back_to_the_root() -> None:
    assert system.containing_mount("/anything", []) == "/"


# --------------------------------------------------------------------------------------------
# end to end


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home folder with a private key in ``.ssh`` and a symlink to another mount."""
    folder = tmp_path_factory.mktemp("home")
    ssh = folder / ".ssh"
    ssh.mkdir(mode=0o700)
    key = ssh / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o600)
    mine = system.containing_mount(str(folder), [p.mountpoint for p in psutil.disk_partitions(all=True)])
    other = next((p.mountpoint for p in psutil.disk_partitions(all=True) if p.mountpoint != mine), None)
    if other is not None:
        (ssh / "elsewhere").symlink_to(other)
    return folder


@pytest.fixture(scope="module")
async def system_server(home: Path) -> AsyncIterator[Client]:
    with tempfile.TemporaryDirectory() as folder, (Path(folder) / "servers.err").open("w") as log:
        async with open_clients([ServerSpec("system", "system", env={"HOME": str(home)})], log) as clients:
            yield clients["system"]


def normalized(text: str, path: str) -> str:
    """The answer with the echoed path and the (moving) sizes blanked out."""
    return _SIZE.sub("<size>", text.replace(path, "<path>"))


async def test_disk_usage_answers_alike_whether_or_not_a_path_exists(
    system_server: Client, home: Path
) -> None:
    assert (home / ".ssh" / "id_ed25519").is_file()
    paths = [
        "~/.ssh/id_ed25519",  # exists: a private key
        "~/.ssh/id_rsa",  # missing, in an existing folder
        "~/.ssh",  # exists: a folder
        "~/.ssh/id_ed25519/inside",  # through a file
        "~/no-such-folder/id_ed25519",  # missing folder
        f"{home}/.ssh/id_ed25519",
        f"{home}/.ssh/id_dsa",
    ]
    if (home / ".ssh" / "elsewhere").is_symlink():
        paths.append("~/.ssh/elsewhere")  # a symlink to another mount is not followed
    answers = {}
    for path in paths:
        text, is_error = await call(system_server, "disk_usage", {"path": path})
        assert not is_error, (path, text)
        answers[path] = normalized(text, path)
    assert len(set(answers.values())) == 1, answers
    assert next(iter(answers.values())).startswith("<path> is on the filesystem mounted at ")


async def test_disk_usage_of_another_users_home_does_not_look_the_user_up(system_server: Client) -> None:
    known, _ = await call(system_server, "disk_usage", {"path": "~root/.ssh/id_rsa"})
    unknown, _ = await call(system_server, "disk_usage", {"path": "~no-such-user-here/.ssh/id_rsa"})
    assert normalized(known, "~root/.ssh/id_rsa") == normalized(unknown, "~no-such-user-here/.ssh/id_rsa")


async def test_disk_usage_of_a_missing_path_names_the_filesystem_it_would_be_on(
    system_server: Client,
) -> None:
    text, is_error = await call(system_server, "disk_usage", {"path": "/no/such/folder"})
    assert not is_error
    assert text.startswith("/no/such/folder is on the filesystem mounted at /")
    assert os.path.ismount(text.split(" mounted at ", 1)[1].split(" ", 1)[0].rstrip(":"))
