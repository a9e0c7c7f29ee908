"""The state folder is resolved in one place, the default state database lives there, and what
we create there is the user's alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mcp_agent.config import AgentConfig
from mcp_agent.exceptions import ConfigError
from mcp_agent.state.folder import create_private, open_private, private_state_dir, state_dir, write_private


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MCP_AGENT_STATE_DIR": "/srv/agent", "XDG_STATE_HOME": "/xdg"}, "/srv/agent"),
        ({"MCP_AGENT_STATE_DIR": "", "XDG_STATE_HOME": "/xdg"}, "/xdg/mcp-agent"),
        ({"XDG_STATE_HOME": "/xdg"}, "/xdg/mcp-agent"),
        ({"HOME": "/home/ada"}, "/home/ada/.local/state/mcp-agent"),
    ],
)
def test_state_dir(env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MCP_AGENT_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert state_dir() == Path(expected)
    assert AgentConfig().state_url(state_dir() / "state.db") == f"sqlite:///{expected}/state.db"


# --------------------------------------------------------------------------------------------
# private by default: what we create is the user's alone, a folder that is not ours is refused


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_folder_and_its_missing_parents_are_created_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(tmp_path / "a" / "b" / "state"))
    folder = private_state_dir()
    assert folder == tmp_path / "a" / "b" / "state"
    assert [_mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", folder)] == [0o700] * 3


def test_a_state_folder_of_another_user_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 4242, 4242)
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(folder))
    with pytest.raises(ConfigError) as caught:
        private_state_dir()
    message = str(caught.value)
    assert "belongs to another user (uid 4242" in message
    assert "MCP_AGENT_STATE_DIR" in message and f"chown {os.geteuid()} {folder}" in message


@pytest.mark.parametrize(
    ("mode", "who"), [(0o777, "group and others"), (0o770, "its group"), (0o703, "others")]
)
def test_a_state_folder_others_may_write_into_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int, who: str
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(folder))
    with pytest.raises(ConfigError) as caught:
        private_state_dir()
    assert f"is writable by {who} (mode {mode:04o})" in str(caught.value)
    assert f"chmod 700 {folder}" in str(caught.value) and "MCP_AGENT_STATE_DIR" in str(caught.value)
    assert _mode(folder) == mode  # refused, not changed


def test_a_state_folder_others_may_only_read_is_tightened_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "older"  # as an earlier version left it
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "state.db").write_bytes(b"")
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(folder))
    assert private_state_dir() == folder
    assert _mode(folder) == 0o700
    assert "was readable by other users (mode 0755" in caplog.text and "now 0700" in caplog.text
    caplog.clear()
    private_state_dir()
    assert not caplog.text  # once


def test_a_state_folder_that_is_a_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(tmp_path / "file"))
    with pytest.raises(ConfigError, match="is not a folder"):
        private_state_dir()


def test_an_uncreatable_state_folder_is_left_to_its_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(tmp_path / "file" / "state"))
    assert private_state_dir() == tmp_path / "file" / "state"  # each writer logs why it cannot write


def test_private_files_are_0600_however_they_are_written(tmp_path: Path) -> None:
    write_private(tmp_path / "new" / "atomic.json", "{}")
    assert (_mode(tmp_path / "new"), _mode(tmp_path / "new" / "atomic.json")) == (0o700, 0o600)
    assert os.listdir(tmp_path / "new") == ["atomic.json"]  # no temporary file left
    older = tmp_path / "older.jsonl"
    older.write_text("old")
    older.chmod(0o644)
    with open_private(older) as file:
        file.write("new")
    assert (older.read_text(), _mode(older)) == ("new", 0o600)
    assert create_private(tmp_path / "empty.db") and _mode(tmp_path / "empty.db") == 0o600
    assert not create_private(older) and older.read_text() == "new"  # left as it is
