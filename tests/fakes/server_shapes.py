"""What each model server answers when asked what it is: routes for ``FakeModelServer.routes``.

    server.routes.update(llamacpp_routes(n_ctx=4096))

Shapes from the servers' own code (llama.cpp ``tools/server/server-context.cpp``
``get_res_props``/``get_res_models``, Ollama ``api/types.go`` ``ShowResponse`` and
``ProcessModelResponse``, LM Studio's REST API v0/v1 docs, vLLM's ``/version`` and model card,
llama-cpp-python ``llama_cpp/server/app.py``) and, for llama-cpp-python, from the recorded bytes in
``recorded/llama-cpp-python`` (``models-A.json``, ``B-error-404.txt`` and the ``.headers`` files:
``server: uvicorn``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_agent.messages import Message, ToolCall, ToolSpec
from mcp_agent.providers.base import ModelRequest

from .model_server import PROBE_PATHS, RecordedRequest, Reply

SAMPLES = Path(__file__).parent / "recorded" / "llama-cpp-python"
"""Recorded bytes of llama-cpp-python 0.3.36 (copied from ``docs/reference/wire-samples``)."""

Routes = dict[str, Any]


def _json(data: Any, status: int = 200, **headers: str) -> Reply:
    return Reply.json(data, status=status, headers=headers)


def llamacpp_props(n_ctx: int = 4096, build: str = "b6500-1a2b3c4d") -> dict[str, Any]:
    return {
        "default_generation_settings": {"params": {"n_predict": -1, "temperature": 0.8}, "n_ctx": n_ctx},
        "total_slots": 1,
        "model_alias": "smollm2",
        "model_path": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
        "modalities": {"vision": False, "video": False, "audio": False},
        "chat_template": "{% for message in messages %}...{% endfor %}",
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "build_info": build,
        "is_sleeping": False,
    }


def llamacpp_routes(n_ctx: int = 4096, *, props: bool = True) -> Routes:
    """llama-server: ``/props`` (unless ``props`` is False: ``--no-endpoint-props``... it still
    answers ``/v1/models`` with ``owned_by: "llamacpp"`` and ``meta.n_ctx``)."""
    server = {"server": "llama.cpp"}
    routes: Routes = {
        "/v1/models": _json(
            {
                "models": [{"name": "smollm2", "model": "smollm2"}],
                "object": "list",
                "data": [
                    {
                        "id": "smollm2",
                        "object": "model",
                        "created": 1_796_123_509,
                        "owned_by": "llamacpp",
                        "meta": {"vocab_type": 2, "n_vocab": 49152, "n_ctx": n_ctx, "n_ctx_train": 8192},
                    }
                ],
            },
            **server,
        )
    }
    routes["/props"] = (
        _json(llamacpp_props(n_ctx), **server)
        if props
        else Reply(status=404, headers=server, body=b"File Not Found")
    )
    routes["/tokenize"] = lambda request: _json({"tokens": list(range(_words(request, "content")))}, **server)
    return routes


def _words(request: RecordedRequest, field: str) -> int:
    """A stand-in tokenizer: one token per word."""
    return len(str(request.json.get(field, "")).split())


def ollama_routes(
    version: str = "0.12.3", *, trained: int = 40960, num_ctx: int | None = None, loaded: int | None = None
) -> Routes:
    parameters = 'stop "<|im_start|>"\nstop "<|im_end|>"' + (f"\nnum_ctx {num_ctx}" if num_ctx else "")
    show = {
        "parameters": parameters,
        "template": "{{ .Prompt }}",
        "details": {
            "format": "gguf",
            "family": "qwen3",
            "parameter_size": "8.2B",
            "quantization_level": "Q4_K_M",
        },
        "model_info": {
            "general.architecture": "qwen3",
            "qwen3.context_length": trained,
            "qwen3.embedding_length": 4096,
        },
        "capabilities": ["completion", "tools", "thinking"],
    }
    ps = {"models": []}
    if loaded:
        ps["models"] = [
            {"name": "qwen3:8b", "model": "qwen3:8b", "size": 6_000_000_000, "context_length": loaded}
        ]
    return {"/api/version": _json({"version": version}), "/api/show": _json(show), "/api/ps": _json(ps)}


def lmstudio_routes(*, max_context: int = 32768, loaded: int | None = None) -> Routes:
    entry = {
        "id": "qwen3-8b",
        "object": "model",
        "type": "llm",
        "publisher": "lmstudio-community",
        "arch": "qwen3",
        "compatibility_type": "gguf",
        "quantization": "Q4_K_M",
        "state": "loaded" if loaded else "not-loaded",
        "max_context_length": max_context,
    }
    unknown = _json({"error": "Unexpected endpoint or method. (GET /props)"})  # LM Studio: 200 with an error
    v1 = {
        "models": [
            {"type": "llm", "key": "qwen3-8b", "max_context_length": max_context, "loaded_instances": []}
        ]
    }
    if loaded:
        v1["models"][0]["loaded_instances"] = [{"id": "qwen3-8b", "config": {"context_length": loaded}}]
    routes: Routes = {path: unknown for path in PROBE_PATHS}
    routes["/api/v0/models"] = _json({"object": "list", "data": [entry]}, **{"x-powered-by": "Express"})
    routes["/api/v1/models"] = _json(v1)
    return routes


def vllm_routes(version: str = "0.10.1", *, max_model_len: int = 32768) -> Routes:
    uvicorn = {"server": "uvicorn"}
    not_found = _json({"detail": "Not Found"}, status=404, **uvicorn)
    routes: Routes = {path: not_found for path in PROBE_PATHS}
    routes["/version"] = _json({"version": version}, **uvicorn)
    routes["/openapi.json"] = _json(
        {"openapi": "3.1.0", "info": {"title": "FastAPI", "version": "0.1.0"}}, **uvicorn
    )
    routes["/v1/models"] = _json(
        {
            "object": "list",
            "data": [
                {
                    "id": "Qwen/Qwen3-8B",
                    "object": "model",
                    "created": 1_796_123_509,
                    "owned_by": "vllm",
                    "root": "Qwen/Qwen3-8B",
                    "parent": None,
                    "max_model_len": max_model_len,
                    "permission": [],
                }
            ],
        },
        **uvicorn,
    )
    return routes


def llama_cpp_python_routes(*, openapi: bool = True, version: str = "0.3.36") -> Routes:
    """llama-cpp-python 0.3.36 as recorded: FastAPI 404s behind uvicorn, ``/v1/models`` of
    ``models-A.json``; ``/openapi.json`` with its title (unless ``openapi`` is False); the
    tokenizer at ``/extras/tokenize/count`` (one token per word here)."""
    uvicorn = {"server": "uvicorn"}
    recorded_404 = json.loads((SAMPLES / "B-error-404.txt").read_text().split("\n\n", 1)[1])
    not_found = _json(recorded_404, status=404, **uvicorn)
    routes: Routes = {path: not_found for path in PROBE_PATHS}
    if openapi:
        routes["/openapi.json"] = _json(
            {
                "openapi": "3.1.0",
                "info": {"title": "🦙 llama.cpp Python API", "version": version},
                "paths": {},
            },
            **uvicorn,
        )
    routes["/v1/models"] = _json(json.loads((SAMPLES / "models-A.json").read_text()), **uvicorn)
    routes["/extras/tokenize/count"] = lambda request: _json({"count": _words(request, "input")}, **uvicorn)
    return routes


# ---------------------------------------------------------------------------------- recorded runs


@dataclass(frozen=True)
class RecordedRun:
    """One recorded request to llama-cpp-python and the prompt tokens it really took.

    Attributes:
        name: which run (``A tools``: server A, ``req-tools.json``).
        server: ``A`` (``--chat_format chatml-function-calling``) or ``B`` (the GGUF's own
            template, which drops tools); C is A with a smaller ``--n_ctx``.
        request: the request as the loop would have made it.
        prompt_tokens: the server's own count (its answer's ``usage``, or its context error's
            "N in the messages").
    """

    name: str
    server: str
    request: ModelRequest
    prompt_tokens: int


def _request(body: dict[str, Any]) -> ModelRequest:
    messages = []
    for m in body["messages"]:
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
            for c in m.get("tool_calls") or ()
        )
        messages.append(
            Message(
                m["role"],
                m.get("content") or "",
                calls,
                tool_call_id=m.get("tool_call_id"),
                name=m.get("name"),
            )
        )
    tools = [
        ToolSpec(t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"])
        for t in body.get("tools") or ()
    ]
    return ModelRequest(tuple(messages), tuple(tools))


def _logged_body(name: str) -> dict[str, Any]:
    """The request body in a proxy log (``###`` header lines, then the JSON)."""
    line = next(line for line in (SAMPLES / name).read_text().splitlines() if line.startswith('{"model"'))
    return dict(json.loads(line))


def recorded_runs() -> list[RecordedRun]:
    """Every recorded llama-cpp-python run whose real prompt size is known."""

    def body(name: str) -> dict[str, Any]:
        return dict(json.loads((SAMPLES / name).read_text()))

    def used(name: str) -> int:
        return int(body(name)["usage"]["prompt_tokens"])

    runaway = "A-runaway-3071-tokens-no-max_tokens.txt"
    answer = next(line for line in (SAMPLES / runaway).read_text().splitlines() if line.startswith('{"id"'))
    runaway_usage = json.loads(answer)["usage"]
    overflow = json.loads((SAMPLES / "C-ctx-error.txt").read_text().split("\n\n", 1)[1])["error"]["message"]
    in_messages = int(re.search(r"\((\d+) in the messages", overflow).group(1))  # type: ignore[union-attr]
    return [
        RecordedRun("A plain", "A", _request(body("req-plain.json")), used("A-chat-plain.json")),
        RecordedRun("B plain", "B", _request(body("req-plain.json")), used("B-chat-plain.json")),
        RecordedRun("A tools", "A", _request(body("req-tools.json")), used("A-chat-tools.json")),
        RecordedRun("B tools", "B", _request(body("req-tools.json")), used("B-chat-tools.json")),
        RecordedRun("A runaway", "A", _request(_logged_body(runaway)), int(runaway_usage["prompt_tokens"])),
        RecordedRun("C ctx", "C", _request(body("req-ctx.json")), in_messages),
    ]
