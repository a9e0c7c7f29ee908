"""``doctor`` with ``gateway.oauth``: the issuer's keys can be fetched (through its metadata, or
``jwksUrl``), else a FAIL that names the URL and the reason. The issuer is the test's real
authorization server (``tests/auth/issuer.py``) on a 127.0.0.1 socket."""

from __future__ import annotations

import io
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_agent.cli.doctor import run_doctor
from mcp_agent.config import parse_config
from tests.auth.issuer import Issuer, serving

pytestmark = pytest.mark.anyio


async def doctor(**oauth: Any) -> list[str]:
    """The lines of ``doctor`` about ``gateway.oauth`` (the model server is not there: its own
    lines fail, which is not what these tests look at)."""
    data = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"},
        "gateway": {"oauth": {"resource": "http://127.0.0.1:8765/mcp", **oauth}},
    }
    out = io.StringIO()
    await run_doctor(parse_config(data, environ={}), out, model_timeout=5)
    lines = out.getvalue().splitlines()
    return [line for line in lines if "gateway.oauth" in line or "OAuth callers" in line]


async def test_the_issuers_keys_are_found_through_its_metadata() -> None:
    async with serving(Issuer()) as issuer:
        issuer.rotate()
        assert await doctor(issuer=issuer.url) == [
            f"[  ok] gateway.oauth: 2 signing keys of {issuer.url} "
            f"({issuer.url}/jwks, named by the issuer's metadata)"
        ]
        assert await doctor(issuer=issuer.url, jwksUrl=f"{issuer.url}/jwks") == [
            f"[  ok] gateway.oauth: 2 signing keys of {issuer.url} ({issuer.url}/jwks)"
        ]


async def test_keys_that_cannot_be_fetched_fail_with_the_url_and_the_reason() -> None:
    async with serving(Issuer()) as issuer:
        missing = await doctor(issuer=issuer.url, jwksUrl=f"{issuer.url}/no-such-jwks")
    assert missing == [
        f"[FAIL] gateway.oauth: cannot fetch the signing keys of {issuer.url}: "
        f"GET {issuer.url}/no-such-jwks answered 404",
        "       OAuth callers would be answered 503 until the issuer's keys can be fetched",
    ]


async def test_an_issuer_that_is_down_fails_with_the_metadata_url() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = await doctor(issuer=f"http://127.0.0.1:{port}")
    assert len(down) == 2
    assert down[0].startswith(
        f"[FAIL] gateway.oauth: cannot fetch the signing keys of http://127.0.0.1:{port}: "
    )
    assert down[0].endswith(f"(GET http://127.0.0.1:{port}/.well-known/oauth-authorization-server)")


async def test_an_issuer_without_a_jwks_uri_fails_saying_what_each_place_answered() -> None:
    class NoJwks(Issuer):
        def metadata(self) -> dict[str, Any]:
            return {key: value for key, value in super().metadata().items() if key != "jwks_uri"}

    async with serving(NoJwks()) as issuer:
        lines = await doctor(issuer=issuer.url)
    assert lines[0] == (
        f"[FAIL] gateway.oauth: cannot fetch the signing keys of {issuer.url}: no metadata with a "
        f"jwks_uri: GET {issuer.url}/.well-known/oauth-authorization-server has no jwks_uri; "
        f"GET {issuer.url}/.well-known/openid-configuration answered 404"
    )


async def test_no_oauth_no_line() -> None:
    out = io.StringIO()
    await run_doctor(parse_config({"llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"}}), out)
    assert "gateway.oauth" not in out.getvalue()


async def test_doctor_passes_with_the_issuers_keys_and_fails_on_a_rule_glob_that_matches_nothing(
    tmp_path: Path,
) -> None:
    """The real CLI, with the echo server (tools ``echo__echo``, ``echo__add``, ...)."""
    from tests.cli.test_main import _models, run_cli, write_config
    from tests.fakes.model_server import running_model_server

    async with serving(Issuer()) as issuer:
        with running_model_server() as model:
            model.handler = _models  # type: ignore[assignment]
            for rules, passes in (
                ([{"scope": "agent:web", "tools": {"allow": ["echo__*"]}}], True),
                ([{"claim": "g", "value": "ops", "tools": {"deny": ["echo__ad"]}}], False),
            ):
                oauth = {"issuer": issuer.url, "resource": "http://127.0.0.1:8765/mcp", "tools": rules}
                path = write_config(tmp_path, model, gateway={"oauth": oauth})
                done = await anyio.to_thread.run_sync(run_cli, "doctor", "--config", str(path))
                assert (done.returncode == 0) is passes, done.stdout + done.stderr
                assert f"[  ok] gateway.oauth: 1 signing keys of {issuer.url}" in done.stdout
                typo = (
                    "[FAIL] gateway.oauth.tools[0].tools.deny: 'echo__ad' matches no tool; nearest: echo__add"
                )
                assert (typo in done.stdout) is not passes, done.stdout
