"""Fuzzing the REST API of a real gateway process: never a 500 or a crash, only a classified
answer, and the next valid request is still answered."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ._table import record
from .conftest import Gateway

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ACCEPTED = {200, 307, 400, 404, 405, 413, 415, 429}  # 307: a trailing slash redirected

# any text, lone surrogates included (JSON escapes them as \udXXX)
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=200)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(ANY_TEXT, inner, max_size=5),
    max_leaves=30,
)
LIMIT_KEYS = st.sampled_from(
    ["maxRounds", "max_rounds", "maxTokens", "timeoutSeconds", "maxToolCalls", "earlyStop", "bogus", ""]
)
QUERY_BODIES = st.fixed_dictionaries(
    {},
    optional={
        "query": st.one_of(ANY_TEXT, JSON_VALUES),
        "session_id": st.one_of(ANY_TEXT, JSON_VALUES, st.just("a" * 200)),
        "limits": st.one_of(JSON_VALUES, st.dictionaries(LIMIT_KEYS, JSON_VALUES, max_size=4)),
        "extra": JSON_VALUES,
    },
)


@pytest.fixture(scope="module")
def http(gateway: Gateway) -> Iterator[httpx.Client]:
    with gateway.client() as client:
        yield client


def outcome(response: httpx.Response) -> str:
    status = response.status_code
    assert status in ACCEPTED, (status, response.text[:500])
    if status == 307:
        return "307 redirect"
    assert response.headers["content-type"].startswith("application/json")
    if status >= 400:
        assert response.json()["error"]["type"]
        return f"{status} {response.json()['error']['type']}"
    return "200 answered"


_count = [0]


def check_still_serving(gateway: Gateway, http: httpx.Client) -> None:
    _count[0] += 1
    assert gateway.alive()
    if _count[0] % 25 == 0:
        gateway.assert_healthy(http)


@FUZZ
@given(body=QUERY_BODIES)
def test_query_bodies(gateway: Gateway, http: httpx.Client, body: dict[str, Any]) -> None:
    response = http.post(
        "/api/v1/query", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    record("REST query object", outcome(response))
    check_still_serving(gateway, http)


@FUZZ
@given(body=JSON_VALUES)
def test_any_json_value(gateway: Gateway, http: httpx.Client, body: Any) -> None:
    response = http.post(
        "/api/v1/query", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    record("REST any JSON value", outcome(response))
    check_still_serving(gateway, http)


@FUZZ
@given(raw=st.binary(max_size=400))
def test_raw_bytes(gateway: Gateway, http: httpx.Client, raw: bytes) -> None:
    response = http.post("/api/v1/query", content=raw, headers={"content-type": "application/json"})
    record("REST raw bytes", outcome(response))
    check_still_serving(gateway, http)


@FUZZ
@given(depth=st.integers(1, 200_000), kind=st.sampled_from(["[", '{"a":']))
def test_deep_nesting(gateway: Gateway, http: httpx.Client, depth: int, kind: str) -> None:
    close = "]" if kind == "[" else "}"
    body = kind * depth + ("1" if kind != "[" else "") + close * depth
    response = http.post("/api/v1/query", content=body, headers={"content-type": "application/json"})
    record("REST deep nesting", outcome(response))
    check_still_serving(gateway, http)


@FUZZ
@given(query=ANY_TEXT.filter(str.strip), stream=st.booleans())
def test_any_query_text_streamed_or_not(
    gateway: Gateway, http: httpx.Client, query: str, stream: bool
) -> None:
    headers = {"content-type": "application/json"}
    if stream:
        headers["accept"] = "text/event-stream"
    with http.stream(
        "POST", "/api/v1/query", content=json.dumps({"query": query}), headers=headers
    ) as response:
        if response.headers["content-type"].startswith("text/event-stream"):
            text = response.read().decode()
            assert "event: run_ended" in text and "event: result" in text  # a stream always ends whole
            record("REST query text (SSE)", "200 streamed to the end")
        else:
            response.read()
            record("REST query text" + (" (SSE)" if stream else ""), outcome(response))
    check_still_serving(gateway, http)


@FUZZ
@given(approval=ANY_TEXT, body=JSON_VALUES)
def test_approval_bodies(gateway: Gateway, http: httpx.Client, approval: str, body: Any) -> None:
    path = "/api/v1/approvals/" + quote(approval.encode("utf-8", "surrogatepass"), safe="")
    response = http.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    record("REST approval", outcome(response))
    check_still_serving(gateway, http)


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]),
    path=st.sampled_from(
        ["/api/v1/", "/api/v1/sessions/", "/api/v1/query", "/api/v1/tools", "/metrics", "/x"]
    ),
    tail=st.text(st.characters(codec="ascii", exclude_characters="#?\x00"), max_size=40).map(
        lambda text: quote(text, safe="/")
    ),
)
def test_methods_and_paths(gateway: Gateway, http: httpx.Client, method: str, path: str, tail: str) -> None:
    response = http.request(method, path + tail)
    status = response.status_code
    assert status < 500 or status == 503, (method, path + tail, status, response.text[:300])
    record("REST method x path", str(status))
    check_still_serving(gateway, http)


def test_the_gateway_is_still_healthy_after_the_fuzzing(gateway: Gateway, http: httpx.Client) -> None:
    gateway.assert_healthy(http)
