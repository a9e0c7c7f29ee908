"""Approvals asked of the caller: MCP elicitation on a 2025 back channel, and the 2026
input-required round trip; exactly one resolver wins; callers without elicitation are unchanged."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp_agent.events import ApprovalRequested
from mcp_agent.gateway.ask_caller import APPROVAL_SCHEMA, decision, question, wants_forms

from .conftest import Running, answer_of, eventually, make_config, running_gateway
from .test_mcp import connect

ROUTES = [("sse", "legacy"), ("http", "legacy"), ("http", "modern"), ("sse", "modern")]


class Asked:
    """An elicitation callback that answers as told (or waits until ``release``), recording questions."""

    def __init__(self, answer: types.ElicitResult | None) -> None:
        self.answer = answer
        self.questions: list[types.ElicitRequestParams] = []
        self.release = anyio.Event()

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params)
        if self.answer is None:
            await self.release.wait()
            return types.ElicitResult(action="accept", content={"approve": True})
        return self.answer


def approve(yes: bool, reason: str | None = None) -> types.ElicitResult:
    content: dict[str, Any] = {"approve": yes}
    if reason is not None:
        content["reason"] = reason
    return types.ElicitResult(action="accept", content=content)


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_the_caller_is_asked_and_its_yes_runs_the_call(transport: str, era: str) -> None:
    """Approvals could only be answered in the dashboard or over REST."""
    async with running_gateway() as gateway:
        asked = Asked(approve(True))
        async with connect(gateway.url, transport, era, elicitation_callback=asked) as client:
            result = await client.call_tool("agent_query", {"query": "write report.txt"})
        assert answer_of(result) == "write_file said: written"
        assert gateway.tools.written == ["report.txt"]
        [params] = asked.questions
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.message == 'The agent wants to call write_file with {"text": "report.txt"}. Allow it?'
        assert params.requested_schema == APPROVAL_SCHEMA


@pytest.mark.parametrize(("transport", "era"), ROUTES)
@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (approve(False, "not today"), "[DENIED: not today]"),
        (types.ElicitResult(action="decline"), "[DENIED: the caller declined this call]"),
        (types.ElicitResult(action="cancel"), "[DENIED: the caller dismissed the question]"),
    ],
)
async def test_a_no_from_the_caller_denies(
    transport: str, era: str, answer: types.ElicitResult, shown: str
) -> None:
    async with running_gateway() as gateway:
        async with connect(gateway.url, transport, era, elicitation_callback=Asked(answer)) as client:
            result = await client.call_tool("agent_query", {"query": "write secret.txt"})
        assert shown in answer_of(result) and gateway.tools.written == []


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "modern")])
async def test_the_dashboard_can_still_answer_first_and_the_callers_late_answer_changes_nothing(
    transport: str, era: str
) -> None:
    async with running_gateway() as gateway, gateway.client() as http:
        asked = Asked(None)  # the caller does not answer until released
        results: list[Any] = []
        async with (
            connect(gateway.url, transport, era, elicitation_callback=asked) as client,
            anyio.create_task_group() as tg,
        ):

            async def call() -> None:
                results.append(await client.call_tool("agent_query", {"query": "write late.txt"}))

            tg.start_soon(call)
            await eventually(lambda: len(asked.questions) == 1)
            [item] = (await http.get("/api/v1/approvals")).json()["pending"]
            resolved = await http.post(
                f"/api/v1/approvals/{item['id']}", json={"approved": False, "reason": "ops said no"}
            )
            assert resolved.status_code == 200
            again = await http.post(f"/api/v1/approvals/{item['id']}", json={"approved": True})
            assert again.status_code == 404  # exactly one resolver wins
            asked.release.set()  # the caller's yes now comes too late
        assert "[DENIED: ops said no]" in answer_of(results[0]) and gateway.tools.written == []


async def test_a_caller_without_elicitation_waits_for_the_dashboard_as_before(gateway: Running) -> None:
    async with gateway.client() as http, connect(gateway.url, "http", "legacy") as client:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await client.call_tool("agent_query", {"query": "write plain.txt"}))

            tg.start_soon(call)

            async def pending() -> bool:
                return bool((await http.get("/api/v1/approvals")).json()["pending"])

            await eventually(pending)
            [item] = (await http.get("/api/v1/approvals")).json()["pending"]
            await http.post(f"/api/v1/approvals/{item['id']}", json={"approved": True})
    assert answer_of(results[0]) == "write_file said: written"


async def test_a_2026_caller_that_never_comes_back_has_its_run_cancelled() -> None:
    import httpx

    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "agent_query", "arguments": {"query": "write never.txt"}, "_meta": envelope},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "agent_query",
    }
    async with running_gateway() as gateway, httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        gateway.app.tool.queries.parked.retry_window = 0.3
        first = (await http.post("/mcp", json=call, headers=headers)).json()
        assert first["result"]["resultType"] == "input_required"
        assert first["result"]["requestState"].startswith("ask_")
        metrics = gateway.app.service.metrics
        await eventually(lambda: metrics.queries["cancelled"] == 1 and metrics.in_flight == 0)
        assert len(gateway.app.tool.queries.parked) == 0 and gateway.tools.written == []
        # a retry after that, or from another caller, finds nothing
        retry = {
            **call,
            "id": 2,
            "params": {**call["params"], "requestState": first["result"]["requestState"]},
        }
        late = (await http.post("/mcp", json=retry, headers=headers)).json()
        assert "unknown or expired request_state" in late["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    ("capabilities", "forms"),
    [
        (None, False),
        (types.ClientCapabilities(), False),
        (types.ClientCapabilities(elicitation=types.ElicitationCapability()), True),  # 2025-06-18's {}
        (
            types.ClientCapabilities(
                elicitation=types.ElicitationCapability(form=types.FormElicitationCapability())
            ),
            True,
        ),
        (
            types.ClientCapabilities(
                elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability())
            ),
            False,
        ),
    ],
)
def test_which_clients_can_answer_a_form(capabilities: types.ClientCapabilities | None, forms: bool) -> None:
    assert wants_forms(capabilities) is forms


def test_the_question_shows_the_call_and_cuts_long_arguments() -> None:
    event = ApprovalRequested(
        run_id="r", approval_id="a", call_id="c", name="fs__write", arguments={"x": "y" * 5000}
    )
    text = question(event)
    assert text.startswith('The agent wants to call fs__write with {"x": "yyy') and "characters)" in text
    assert len(text) < 2100


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (approve(True), (True, "approved by the caller")),
        (approve(True, " fine "), (True, "fine")),
        (approve(False), (False, "the caller did not approve this call")),
        (types.ElicitResult(action="accept", content={}), (False, "the caller did not approve this call")),
        (
            types.ElicitResult(action="accept", content={"approve": "yes"}),
            (False, "the caller did not approve this call"),
        ),
        (types.ElicitResult(action="decline"), (False, "the caller declined this call")),
    ],
)
def test_decision(answer: types.ElicitResult, expected: tuple[bool, str]) -> None:
    assert decision(answer) == expected


# ------------------------------------------------------------------ who may answer (issue 20)

QUERY_ONLY, APPROVER = "alice-" + "a" * 20, "ops-" + "o" * 20


def callers_config(**approvals: Any) -> Any:
    from mcp_agent.config import CallerConfig

    config = make_config(
        callers={
            "alice": CallerConfig(token=QUERY_ONLY, scopes=["query"]),
            "ops": CallerConfig(token=APPROVER, scopes=["query", "approve"]),
        }
    )
    return config.model_copy(update={"approvals": config.approvals.model_copy(update=approvals)})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(("transport", "era"), ROUTES)
async def test_a_query_only_caller_is_never_asked_about_its_own_gated_call(transport: str, era: str) -> None:
    """A caller with only ``query`` whose client answered elicitations approved its own calls."""
    async with running_gateway(callers_config()) as gateway, gateway.client() as http:
        asked = Asked(approve(True))  # a client that says yes to anything
        results: list[Any] = []
        async with (
            connect(
                gateway.url, transport, era, headers=bearer(QUERY_ONLY), elicitation_callback=asked
            ) as client,
            anyio.create_task_group() as tg,
        ):

            async def call() -> None:
                results.append(await client.call_tool("agent_query", {"query": "write mine.txt"}))

            tg.start_soon(call)

            async def pending() -> list[Any]:
                return (await http.get("/api/v1/approvals", headers=bearer(APPROVER))).json()["pending"]

            await eventually(pending)
            [item] = await pending()
            assert item["caller"] == "alice" and gateway.tools.written == []
            refused = await http.post(
                f"/api/v1/approvals/{item['id']}", json={"approved": True}, headers=bearer(QUERY_ONLY)
            )
            assert refused.status_code == 403
            decided = await http.post(
                f"/api/v1/approvals/{item['id']}",
                json={"approved": False, "reason": "ops said no"},
                headers=bearer(APPROVER),
            )
            assert decided.status_code == 200
        assert asked.questions == []
        assert "[DENIED: ops said no]" in answer_of(results[0]) and gateway.tools.written == []


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "modern")])
async def test_a_caller_with_the_approve_scope_is_asked(transport: str, era: str) -> None:
    async with running_gateway(callers_config()) as gateway:
        asked = Asked(approve(True))
        async with connect(
            gateway.url, transport, era, headers=bearer(APPROVER), elicitation_callback=asked
        ) as client:
            result = await client.call_tool("agent_query", {"query": "write theirs.txt"})
        assert len(asked.questions) == 1
        assert answer_of(result) == "write_file said: written" and gateway.tools.written == ["theirs.txt"]


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "modern")])
async def test_self_approval_is_an_explicit_opt_in(transport: str, era: str) -> None:
    async with running_gateway(callers_config(self_approval=True)) as gateway:
        asked = Asked(approve(True))
        async with connect(
            gateway.url, transport, era, headers=bearer(QUERY_ONLY), elicitation_callback=asked
        ) as client:
            result = await client.call_tool("agent_query", {"query": "write opted.txt"})
        assert len(asked.questions) == 1
        assert answer_of(result) == "write_file said: written" and gateway.tools.written == ["opted.txt"]


class Book:
    """An ApprovalBook that records what it was asked to resolve."""

    def __init__(self) -> None:
        self.resolved: list[tuple[str, bool, str | None]] = []

    async def resolve(
        self, approval_id: str, approved: bool, reason: str = "", *, by: str | None = None
    ) -> bool:
        self.resolved.append((approval_id, approved, by))
        return True


@pytest.mark.parametrize(
    ("scopes", "self_approval", "counted"),
    [({"query"}, False, False), ({"query"}, True, True), ({"query", "approve"}, False, True)],
)
async def test_the_resolver_checks_the_scope_again(
    scopes: set[str], self_approval: bool, counted: bool
) -> None:
    """Whoever put the question, an answer from a caller that may not decide changes nothing."""
    from mcp_agent.gateway.ask_caller import resolve
    from mcp_agent.gateway.callers import Caller

    book = Book()
    caller = Caller("alice", frozenset(scopes))
    await resolve(book, "a1", approve(True), caller, self_approval=self_approval)  # type: ignore[arg-type]
    assert book.resolved == ([("a1", True, "alice")] if counted else [])
