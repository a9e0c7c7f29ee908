"""The oracle model: answers every BFCL entry with its ground truth, in each provider's wire format.

Scripted, no model: ``planned_calls`` turns an entry's possible answer into calls (the first
acceptable value of each parameter, as BFCL lists them; where that is ``""``, "may be omitted",
the parameter is left out, unless its schema requires it; the dicts and lists of dicts BFCL writes as nested possible answers are resolved
the same way; in the Java and JavaScript categories each value is written in the language's
syntax, ``bfcl/literals.py``). Parallel entries: every call in ONE reply. Irrelevance: no call.
Relevance (no possible answer): a call of the first function with its required parameters
filled from the schema (an enum's first value, the default, else a value of the type).

``OracleModel`` is the ``handler`` of ``tests/fakes/model_server.py``'s ``FakeModelServer``
(real HTTP on 127.0.0.1). Each run is told apart by the ``x-bfcl-run`` header the harness puts in
``llm.headers``; ``expect(run, entry)`` sets a run's script. It answers OpenAI chat completions,
Anthropic messages and Gemini ``generateContent`` (non-streamed: ``llm.stream`` false): the
first model call of a run gets the calls, every later one (after the tool results) a short text.
The calls go to the tools the gateway offered for the BFCL functions: the exposed names the
gateway's own naming gives them (``assign_names`` of ``mcp_agent/tools/presentation.py`` over
the entry's functions, server ``bfcl``, no prefix), which must be among the request's tools, or
the answer is a text saying which is missing (the entry then fails).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from mcp_agent.tools.presentation import NamedTool, assign_names
from tests.fakes import anthropic_shapes, gemini_shapes
from tests.fakes.model_server import RecordedRequest, Reply
from tests.fakes.openai_shapes import Call, completion

from .checker import Call as Planned
from .data import ANY_CALL, NO_CALL, Entry
from .literals import literal
from .schema import language_of, mcp_tool

HEADER = "x-bfcl-run"
SERVER = "bfcl"
"""The name of the BFCL server in the gateway's config (``toolPrefix`` empty)."""
NAME = "oracle"
DONE = "Done."
_OMIT = object()
_DICT_TYPES = {"dict", "object", "HashMap", "Hashtable"}
_LIST_TYPES = {"array", "tuple", "list", "Array", "ArrayList"}


def _first(acceptable: list[Any], required: bool = False) -> Any:
    """The first acceptable value; ``""`` (may be omitted) first, or alone, omits the parameter,
    unless the schema requires it (BFCL's checker refuses the omission then too): then the first
    other value, if there is one."""
    if acceptable and acceptable[0] != "":
        return acceptable[0]
    if required:
        return next((value for value in acceptable if value != ""), _OMIT)
    return _OMIT


def _resolved(value: Any, doc: dict[str, Any]) -> Any:
    """A chosen value, its nested possible answers (BFCL's dicts of acceptable lists) resolved."""
    kind = doc.get("type")
    if kind in _DICT_TYPES and isinstance(value, dict):
        return _nested(value)
    items = doc.get("items") or {}
    if kind in _LIST_TYPES and items.get("type") in _DICT_TYPES and isinstance(value, list):
        return [_nested(item) if isinstance(item, dict) else item for item in value]
    return value


def _nested(answer: dict[str, Any]) -> dict[str, Any]:
    if not all(isinstance(v, list) for v in answer.values()):
        return answer  # a literal dict, not a dict of acceptable values
    out: dict[str, Any] = {}
    for key, acceptable in answer.items():
        chosen = _first(acceptable)
        if chosen is not _OMIT:
            out[key] = chosen
    return out


def _filler(schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    return {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(
        schema.get("type", "string"), "example"
    )


def planned_calls(entry: Entry) -> list[Planned]:
    """The calls the oracle makes for ``entry``, under BFCL's function names."""
    if entry.category in NO_CALL:
        return []
    if entry.category in ANY_CALL:
        tool = mcp_tool(entry.functions[0], entry.category)
        schema = tool["inputSchema"]
        required = schema.get("required", [])
        properties = schema.get("properties", {})
        return [(tool["name"], {name: _filler(properties.get(name, {})) for name in required})]
    docs = {function["name"]: function for function in entry.functions}
    language = language_of(entry.category)
    calls: list[Planned] = []
    for answer in entry.ground_truth:
        [(name, parameters)] = answer.items()
        properties = docs[name]["parameters"].get("properties", {})
        required = set(docs[name]["parameters"].get("required", []))
        arguments: dict[str, Any] = {}
        for parameter, acceptable in parameters.items():
            chosen = _first(acceptable, parameter in required)
            if chosen is _OMIT:
                continue
            doc = properties.get(parameter, {})
            value = _resolved(chosen, doc)
            if language != "python":
                nested = (doc.get("items") or {}).get("type")
                value = literal(value, language, str(doc.get("type", "any")), nested)
            arguments[parameter] = value
        calls.append((name, arguments))
    return calls


def exposed_names(entry: Entry) -> dict[str, str]:
    """BFCL name -> the name the gateway offers the model (its own naming, no prefix)."""
    names, _ = assign_names([NamedTool(SERVER, f["name"], "") for f in entry.functions])
    return {mcp_name: exposed for (_, mcp_name), exposed in names.items()}


def offered(family: str, body: dict[str, Any]) -> set[str]:
    """The tool names in one request of ``family``."""
    tools = body.get("tools") or []
    if family == "openai":
        return {t.get("function", {}).get("name", "") for t in tools}
    if family == "anthropic":
        return {t.get("name", "") for t in tools}
    return {d.get("name", "") for t in tools for d in t.get("functionDeclarations", [])}


def family_of(path: str) -> str | None:
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith(":generateContent"):
        return "gemini"
    return None


@dataclass
class _Run:
    calls: list[tuple[str, dict[str, Any]]]
    names: dict[str, str]
    requests: int = 0
    missing: list[str] = field(default_factory=list)


class OracleModel:
    """The scripts of the runs in flight, by run id; thread-safe (the fake server's thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._ids = itertools.count()

    def expect(self, run: str, entry: Entry) -> None:
        with self._lock:
            self._runs[run] = _Run(planned_calls(entry), exposed_names(entry))

    def done(self, run: str) -> list[str]:
        """Forget ``run``; returns the BFCL names it could not find among the offered tools."""
        with self._lock:
            gone = self._runs.pop(run, None)
        return gone.missing if gone else []

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.method == "GET":  # health checks and model listings
            return Reply.json({"object": "list", "data": [{"id": NAME, "object": "model"}], "models": []})
        family = family_of(request.path)
        run_id = request.headers.get(HEADER, "")
        with self._lock:
            run = self._runs.get(run_id)
            if family is None or run is None:
                return Reply.json({"error": {"message": f"no such run or path: {request.path}"}}, status=404)
            run.requests += 1
            first = run.requests == 1
        if not first or not run.calls:
            return _text(family, DONE)
        tools = offered(family, request.json)
        calls: list[tuple[str, dict[str, Any]]] = []
        for name, arguments in run.calls:
            exposed = run.names.get(name, name)
            if exposed not in tools:
                run.missing.append(name)
                return _text(family, f"oracle: no tool offered for {name} (as {exposed})")
            calls.append((exposed, arguments))
        return _calls(family, calls, self._ids)


def _text(family: str, text: str) -> Reply:
    if family == "openai":
        return Reply.json(completion(content=text, model=NAME))
    if family == "anthropic":
        return Reply.json(anthropic_shapes.message(text))
    return Reply.json(gemini_shapes.response(text))


def _calls(family: str, calls: list[tuple[str, dict[str, Any]]], ids: Any) -> Reply:
    if family == "openai":
        return Reply.json(
            completion(content=None, calls=[Call(n, a, id=f"call_{next(ids)}") for n, a in calls], model=NAME)
        )
    if family == "anthropic":
        return Reply.json(anthropic_shapes.message(calls=[(f"toolu_{next(ids)}", n, a) for n, a in calls]))
    return Reply.json(gemini_shapes.response(calls=list(calls)))
