"""Token requests as the authorization server advertises them, the scopes of client credentials,
and the one log line of a failed headless login, over real sockets.

The fixture's authorization server (``tests/servers/oauth_protected.py``) can advertise a
narrower ``token_endpoint_auth_methods_supported`` and then refuses any other client
authentication, as a strict server does.
"""

from __future__ import annotations

import json
import logging

import httpx2
import pytest
from mcp.shared.auth import OAuthMetadata

from mcp_agent.auth.login import log_in
from mcp_agent.auth.token_requests import adjusted, auth_method
from mcp_agent.auth.token_store import tokens_folder
from mcp_agent.config import OAuthConfig, RemoteServerConfig
from mcp_agent.exceptions import LoginFailed
from mcp_agent.state.folder import state_dir
from mcp_agent.tools.hub import open_tool_hub
from tests.auth.conftest import Protected
from tests.auth.test_login import store_file
from tests.servers.oauth_protected import CC_CLIENT
from tests.tools.conftest import FAST_RESTARTS

pytestmark = pytest.mark.anyio

PRE = ("pre-client", "pre-secret-0123456789")


def _quiet(text: str) -> None:
    pass


async def _log_in_and_refresh(protected: Protected, oauth: dict[str, str]) -> None:
    """Log in, then call through a refresh in a fresh hub (no discovery in its process)."""
    config = RemoteServerConfig(url=protected.url, oauth=oauth)
    await log_in("p", config, folder=tokens_folder(state_dir()), say=_quiet)
    assert protected.provider.counts["code"] == 1
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:
        assert (await hub.call_tool("p__add", {"a": 1, "b": 2})).text == "3.0"
        protected.provider.expire_access()
        result = await hub.call_tool("p__add", {"a": 2, "b": 2})
        assert (result.text, result.is_error) == ("4.0", False)
    assert protected.provider.counts["refresh"] == 1


async def test_a_preregistered_client_uses_client_secret_post_when_that_alone_is_offered(
    protected: Protected, browser
):
    protected.provider.token_auth = ["client_secret_post"]
    protected.provider.add_client(*PRE, "client_secret_post")
    await _log_in_and_refresh(protected, {"clientId": PRE[0], "clientSecret": PRE[1]})
    stored = json.loads(store_file().read_text())
    assert stored["authorization_server"]["token_endpoint_auth_methods_supported"] == ["client_secret_post"]
    assert PRE[1] not in store_file().read_text()  # the configured secret stays in agent.json


async def test_a_preregistered_client_sends_no_secret_when_only_none_is_offered(
    protected: Protected, browser
):
    protected.provider.token_auth = ["none"]
    protected.provider.add_client(PRE[0], None, "none")
    await _log_in_and_refresh(protected, {"clientId": PRE[0], "clientSecret": PRE[1]})


async def test_a_preregistered_client_still_uses_client_secret_basic_by_default(
    protected: Protected, browser
):
    protected.provider.add_client(*PRE, "client_secret_basic")  # the SDK's metadata offers both
    await _log_in_and_refresh(protected, {"clientId": PRE[0], "clientSecret": PRE[1]})


async def test_a_method_the_server_does_not_offer_fails_the_login_with_its_reason(
    protected: Protected, browser
):
    protected.provider.token_auth = ["private_key_jwt"]  # nothing a secret can do
    protected.provider.add_client(*PRE, "client_secret_basic")
    config = RemoteServerConfig(url=protected.url, oauth={"clientId": PRE[0], "clientSecret": PRE[1]})
    with pytest.raises(LoginFailed, match="invalid_client"):
        await log_in("p", config, folder=tokens_folder(state_dir()), say=_quiet)


async def test_client_credentials_use_client_secret_post_when_that_alone_is_offered(protected: Protected):
    protected.provider.token_auth = ["client_secret_post"]
    oauth = {"grant": "client_credentials", "clientId": CC_CLIENT[0], "clientSecret": CC_CLIENT[1]}
    async with open_tool_hub(
        {"p": RemoteServerConfig(url=protected.url, oauth=oauth)}, state_dir=state_dir()
    ) as hub:
        assert (hub.status()[0].status, hub.status()[0].error) == ("up", None)
        assert (await hub.call_tool("p__add", {"a": 1, "b": 2})).text == "3.0"
    assert protected.provider.counts["client_credentials"] == 1


async def test_client_credentials_ask_for_the_configured_scopes_not_the_challenges(protected: Protected):
    protected.provider.challenge_scope = "files:read files:write"
    oauth = {
        "grant": "client_credentials",
        "clientId": CC_CLIENT[0],
        "clientSecret": CC_CLIENT[1],
        "scopes": ["files:read"],
    }
    config = RemoteServerConfig(url=protected.url, oauth=oauth)
    async with open_tool_hub({"p": config}, state_dir=state_dir()) as hub:
        assert hub.status()[0].status == "up"
        assert protected.provider.cc_scopes == ["files:read"]
        protected.provider.step_up = "files:write"  # now a call needs more: the server says which
        result = await hub.call_tool("p__hello", {})
        assert (result.text, result.is_error) == ("hello from the protected server", False)
    assert protected.provider.cc_scopes == ["files:read", "files:write"]
    assert protected.provider.counts["client_credentials"] == 2


async def test_client_credentials_without_scopes_ask_for_the_challenges(protected: Protected):
    protected.provider.challenge_scope = "files:read files:write"
    oauth = {"grant": "client_credentials", "clientId": CC_CLIENT[0], "clientSecret": CC_CLIENT[1]}
    async with open_tool_hub(
        {"p": RemoteServerConfig(url=protected.url, oauth=oauth)}, state_dir=state_dir()
    ) as hub:
        assert hub.status()[0].status == "up"
    assert protected.provider.cc_scopes == ["files:read", "files:write"]


async def test_a_failed_client_credentials_login_is_one_line_per_attempt(protected: Protected, caplog):
    caplog.set_level(logging.DEBUG)
    secret = "wrong-secret-0123456789"
    oauth = {"grant": "client_credentials", "clientId": CC_CLIENT[0], "clientSecret": secret}
    config = RemoteServerConfig(url=protected.url, oauth=oauth)
    async with open_tool_hub({"p": config}, state_dir=state_dir(), restart_policy=FAST_RESTARTS) as hub:
        assert hub.status()[0].status == "failed"
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    assert "Traceback" not in caplog.text and "OAuth flow error" not in caplog.text
    lines = [
        record.getMessage()
        for record in caplog.records
        if "login failed" in record.getMessage() and record.levelno >= logging.INFO
    ]
    assert lines, caplog.text
    assert all("(retry" in line for line in lines), lines  # one line per attempt: the connection's
    for line in lines:
        assert line.startswith("tool server p: login failed: Token exchange failed (401)"), line
        assert "check mcpServers.p.oauth.clientId and clientSecret in agent.json" in line, line
    assert secret not in caplog.text
    assert not [token for token in protected.provider.issued if token in caplog.text]


# ------------------------------------------------------------------ the pure parts

METADATA = {"issuer": "http://as", "authorization_endpoint": "http://as/a", "token_endpoint": "http://as/t"}


def _metadata(methods: list[str] | None) -> OAuthMetadata:
    return OAuthMetadata.model_validate({**METADATA, "token_endpoint_auth_methods_supported": methods})


def test_the_method_follows_what_is_advertised():
    assert auth_method(None, grant="authorization_code") == "client_secret_basic"
    assert (
        auth_method(["client_secret_post", "client_secret_basic"], grant="refresh_token")
        == "client_secret_basic"
    )
    assert auth_method(["client_secret_post"], grant="client_credentials") == "client_secret_post"
    assert auth_method(["none"], grant="authorization_code") == "none"
    assert auth_method(["none"], grant="client_credentials") == "client_secret_basic"  # needs a secret


def test_only_token_requests_of_a_preregistered_client_are_touched():
    basic = {"Authorization": "Basic eDp5", "Content-Type": "application/x-www-form-urlencoded"}
    token = httpx2.Request("POST", "http://as/t", headers=basic, data={"grant_type": "refresh_token"})
    oauth = OAuthConfig(client_id="c", client_secret="s")
    post = adjusted(token, oauth, _metadata(["client_secret_post"]))
    assert "authorization" not in post.headers
    assert post.content == b"grant_type=refresh_token&client_id=c&client_secret=s"
    assert adjusted(token, oauth, None) is token  # nothing known: as the SDK built it
    assert (
        adjusted(token, OAuthConfig(), _metadata(["client_secret_post"])) is token
    )  # registered by the server
    other = httpx2.Request("POST", "http://as/register", json={"grant_type": "refresh_token"})
    assert adjusted(other, oauth, _metadata(["client_secret_post"])) is other
