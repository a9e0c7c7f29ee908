"""Logging in to a remote MCP server that needs OAuth, end to end over real sockets.

The server and its authorization server are the MCP SDK's server-side pieces
(``tests/servers/oauth_protected.py``); ``mcp-agent login`` runs as a real process with
``$MCP_AGENT_BROWSER`` set to a script that follows the authorization redirect; the gateway's
ToolHub then connects with the stored tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_agent.auth.login import log_in, with_scopes
from mcp_agent.auth.token_store import tokens_folder
from mcp_agent.auth.upstream import UpstreamAuth, open_store
from mcp_agent.config import RemoteServerConfig
from mcp_agent.exceptions import LoginFailed
from mcp_agent.state.folder import state_dir
from mcp_agent.tools.hub import open_tool_hub
from tests.auth.conftest import BROWSER, Protected
from tests.servers.oauth_protected import CC_CLIENT
from tests.tools.conftest import FAST_RESTARTS

pytestmark = pytest.mark.anyio

HINT = "needs login: `mcp-agent login p`"


def write_config(folder: Path, url: str, **server: object) -> Path:
    config = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m", "maxRetries": 0},
        "mcpServers": {"p": {"url": url, **server}},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


def cli(*args: str, browser: str | None = BROWSER, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("MCP_AGENT_BROWSER", None)
    if browser is not None:
        env["MCP_AGENT_BROWSER"] = browser
    return subprocess.run(
        [sys.executable, "-m", "mcp_agent", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def store_file() -> Path:
    [path] = tokens_folder(state_dir()).glob("p-*.json")
    return path


async def test_login_then_the_hub_lists_and_calls_with_the_stored_token(protected: Protected, tmp_path):
    config = write_config(tmp_path, protected.url)
    done = cli("login", "p", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "logged in to p" in done.stdout
    assert "Open this URL in a browser to log in:" in done.stderr and "/authorize?" in done.stderr
    assert "code_challenge_method=S256" in done.stderr and "resource=" in done.stderr
    counts = protected.provider.counts
    assert (counts["register"], counts["authorize"], counts["code"]) == (1, 1, 1)

    path = store_file()
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    stored = json.loads(path.read_text())
    assert stored["url"] == protected.url and stored["tokens"]["access_token"] in protected.provider.access

    async with open_tool_hub({"p": RemoteServerConfig(url=protected.url)}, state_dir=state_dir()) as hub:
        assert [(s.status, s.error) for s in hub.status()] == [("up", None)]
        assert sorted(spec.name for spec in hub.list_tools()) == ["p__add", "p__hello"]
        result = await hub.call_tool("p__add", {"a": 2, "b": 3})
        assert (result.text, result.is_error) == ("5.0", False)
    assert counts["authorize"] == 1  # no second login


async def test_a_server_that_needs_a_login_says_so_and_is_not_hammered(protected: Protected):
    config = RemoteServerConfig(url=protected.url)  # no oauth key: the 401's Bearer challenge decides
    async with open_tool_hub({"p": config}, state_dir=state_dir(), restart_policy=FAST_RESTARTS) as hub:
        [status] = hub.status()
        assert (status.status, status.error) == ("failed", HINT)
        result = await hub.call_tool("p__hello", {})
        assert result.is_error
    counts = protected.provider.counts
    assert counts == {"authorize": 0, "code": 0, "refresh": 0, "client_credentials": 0, "register": 0}


async def test_cached_tools_of_a_server_that_needs_a_login_answer_with_the_hint(
    protected: Protected, browser
):
    config = RemoteServerConfig(url=protected.url, oauth={})
    await log_in("p", config, folder=tokens_folder(state_dir()), say=lambda text: None)
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:  # caches the tool list
        assert hub.status()[0].status == "up"
    open_store("p", config, tokens_folder(state_dir())).forget()
    async with open_tool_hub({"p": config}, state_dir=state_dir(), start="wait") as hub:
        assert hub.status()[0].error == HINT
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:  # offered from the cache
        result = await hub.call_tool("p__hello", {})
        assert result.is_error and HINT in result.text, result.text


async def test_an_expired_token_is_refreshed_before_it_is_sent(protected: Protected, browser):
    config = RemoteServerConfig(url=protected.url, oauth={})
    await log_in("p", config, folder=tokens_folder(state_dir()), say=lambda text: None)
    path = store_file()
    stored = json.loads(path.read_text())
    stored["expires_at"] = 1.0  # long expired, as after a night's sleep
    path.write_text(json.dumps(stored))
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:
        assert hub.status()[0].status == "up"
        assert (await hub.call_tool("p__add", {"a": 1, "b": 1})).text == "2.0"
    assert protected.provider.counts["refresh"] == 1
    assert json.loads(path.read_text())["tokens"]["access_token"] != stored["tokens"]["access_token"]


async def test_a_token_refused_mid_run_is_refreshed_once_and_the_call_goes_through(
    protected: Protected, browser
):
    config = RemoteServerConfig(url=protected.url, oauth={})
    await log_in("p", config, folder=tokens_folder(state_dir()), say=lambda text: None)
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:
        assert (await hub.call_tool("p__add", {"a": 1, "b": 2})).text == "3.0"
        protected.provider.expire_access()  # the server no longer takes the token the gateway holds
        result = await hub.call_tool("p__add", {"a": 2, "b": 2})
        assert (result.text, result.is_error) == ("4.0", False)
        assert protected.provider.counts["refresh"] == 1
        protected.provider.revoke_all()  # now the refresh token is gone too: a person must log in
        result = await hub.call_tool("p__add", {"a": 2, "b": 2})
        assert result.is_error and HINT in result.text, result.text
    assert protected.provider.counts["authorize"] == 1  # the gateway never started a login itself


async def test_a_scope_step_up_waits_for_a_login_that_asks_for_the_new_scope(protected: Protected, browser):
    config = RemoteServerConfig(url=protected.url, oauth={})
    folder = tokens_folder(state_dir())
    store = await log_in("p", config, folder=folder, say=lambda text: None)
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:
        assert (await hub.call_tool("p__hello", {})).is_error is False
        protected.provider.step_up = "files:write"  # the server now wants more
        result = await hub.call_tool("p__hello", {})
        assert result.is_error and HINT in result.text, result.text
    assert store.wanted_scopes() == ["files:write"]
    assert protected.provider.counts["authorize"] == 1  # the gateway asked no person by itself
    await log_in("p", config, folder=folder, say=lambda text: None)
    assert "files:write" in protected.provider.asked_scopes
    assert store.wanted_scopes() == []
    async with open_tool_hub({"p": config}, state_dir=state_dir(), start="wait") as hub:
        assert (await hub.call_tool("p__hello", {})).text == "hello from the protected server"


async def test_logout_forgets_the_tokens_and_the_server_needs_a_login_again(protected: Protected, tmp_path):
    config = write_config(tmp_path, protected.url, oauth={})
    assert cli("login", "p", "--config", str(config)).returncode == 0
    assert cli("tools", "--config", str(config)).returncode == 0  # its tool list is cached now
    path = store_file()
    done = cli("logout", "p", "--config", str(config))
    assert done.returncode == 0 and "logged out of p" in done.stdout
    assert not path.exists()
    assert "no login was stored" in cli("logout", "p", "--config", str(config)).stdout
    async with open_tool_hub(
        {"p": RemoteServerConfig(url=protected.url)}, state_dir=state_dir(), start="wait"
    ) as hub:
        assert hub.status()[0].error == HINT
    listed = cli("tools", "--json", "--config", str(config))  # from the cache, starting nothing
    [server] = json.loads(listed.stdout)["servers"]
    assert (server["status"], server["error"], server["from_cache"]) == ("failed", HINT, True)


async def test_login_reuses_the_registration_and_its_redirect_port(protected: Protected, browser):
    config = RemoteServerConfig(url=protected.url, oauth={})
    folder = tokens_folder(state_dir())
    first = await log_in("p", config, folder=folder, say=lambda text: None)
    uri = first.load_client().redirect_uris  # type: ignore[union-attr]
    await log_in("p", config, folder=folder, say=lambda text: None)
    assert protected.provider.counts["register"] == 1
    assert first.load_client().redirect_uris == uri  # type: ignore[union-attr]


def test_login_waits_a_bounded_time_and_says_what_to_do(protected: Protected, tmp_path):
    config = write_config(tmp_path, protected.url)
    done = cli("login", "p", "--config", str(config), "--timeout", "1", browser="true")
    assert done.returncode == 1
    assert "no login within 1 s" in done.stderr and "mcp-agent login p" in done.stderr
    assert "/authorize?" in done.stderr  # the URL was printed for a person to open


def test_login_names_the_servers_when_the_name_is_wrong(tmp_path):
    config = write_config(tmp_path, "http://127.0.0.1:9/mcp")
    done = cli("login", "nope", "--config", str(config))
    assert done.returncode == 2 and "no server 'nope'" in done.stderr and "p" in done.stderr


async def test_client_credentials_log_in_at_start_up_without_a_person(protected: Protected):
    oauth = {"grant": "client_credentials", "clientId": CC_CLIENT[0], "clientSecret": CC_CLIENT[1]}
    config = RemoteServerConfig(url=protected.url, oauth=oauth)
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:
        assert hub.status()[0].status == "up"
        assert (await hub.call_tool("p__add", {"a": 1, "b": 2})).text == "3.0"
    assert protected.provider.counts["client_credentials"] == 1
    assert protected.provider.counts["authorize"] == 0


async def test_client_credentials_with_a_wrong_secret_fail_with_the_reason(protected: Protected):
    oauth = {"grant": "client_credentials", "clientId": CC_CLIENT[0], "clientSecret": "wrong-secret-123"}
    config = RemoteServerConfig(url=protected.url, oauth=oauth)
    async with open_tool_hub({"p": config}, state_dir=state_dir(), restart_policy=FAST_RESTARTS) as hub:
        [status] = hub.status()
        assert status.status == "failed"
        assert status.error is not None and status.error.startswith("login failed:"), status.error
        assert "401" in status.error


async def test_a_refused_login_is_a_clear_error(protected: Protected, monkeypatch):
    script = Path(__file__).resolve().parent / "refusing_browser.py"
    monkeypatch.setenv("MCP_AGENT_BROWSER", f"{sys.executable} {script}")
    config = RemoteServerConfig(url=protected.url)
    with pytest.raises(LoginFailed, match="refused the login: access_denied: no thanks"):
        await log_in("p", config, folder=tokens_folder(state_dir()), say=lambda text: None, timeout=30)


def test_a_static_authorization_header_gets_no_oauth():
    config = RemoteServerConfig(url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer x-static-1"})
    assert UpstreamAuth.for_server("p", config) is None
    assert UpstreamAuth.for_server("p", RemoteServerConfig(url="http://127.0.0.1:9/mcp")) is not None


def test_configured_scopes_join_the_ones_the_server_named():
    url = "http://as/authorize?client_id=c&scope=read+write&state=s"
    assert "scope=read+write+admin" in with_scopes(url, ["write", "admin"])
    assert with_scopes(url, None) == url
    assert "scope=admin" in with_scopes("http://as/authorize?client_id=c", ["admin"])


async def test_no_token_leaves_the_store(protected: Protected, tmp_path, caplog):
    """After a login, a listing, a refresh and a refused token, no token is in any file of the
    state folder but the token store, nor in what the CLI printed or the logs."""
    caplog.set_level("DEBUG")
    config = write_config(tmp_path, protected.url)
    printed = []
    for command in (["-vv", "login", "p"], ["-vv", "tools", "--fresh", "--json"]):
        done = cli(*command, "--config", str(config))
        assert done.returncode == 0, done.stderr
        printed += [done.stdout, done.stderr]
    assert "p__add" in printed[2]
    server = RemoteServerConfig(url=protected.url)
    async with open_tool_hub({"p": server}, state_dir=state_dir()) as hub:
        protected.provider.expire_access()
        assert (await hub.call_tool("p__add", {"a": 1, "b": 2})).text == "3.0"  # after a refresh
        protected.provider.revoke_all()
        assert HINT in (await hub.call_tool("p__add", {"a": 1, "b": 2})).text
    issued = protected.provider.issued
    assert len(issued) >= 4  # two access and two refresh tokens at least
    store = store_file()
    files = [path for path in Path(state_dir()).rglob("*") if path.is_file()]
    assert store in files and len(files) > 1  # the tool cache is there too
    for path in files:
        if path != store:
            text = path.read_bytes().decode(errors="replace")
            assert not [token for token in issued if token in text], path
    for text in [*printed, caplog.text]:
        assert not [token for token in issued if token in text]
