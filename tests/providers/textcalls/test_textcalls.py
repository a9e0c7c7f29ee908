"""Tool calls written as text and reasoning blocks: every format of llm-wire.md §5, table-tested.

The samples are written the way each model family prints them (exact special tokens, the
newlines its template puts around blocks), with text before and after where models write some.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mcp_agent.messages import ToolSpec
from mcp_agent.providers.textcalls import (
    MAX_MARKERS,
    MAX_SCAN_CHARS,
    TextExtraction,
    convert_value,
    extract_tool_calls,
    split_reasoning,
)

WEATHER = ToolSpec(
    name="weather__get_weather",
    server="weather",
    mcp_name="get_weather",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"},
        },
        "required": ["city"],
    },
)
WRITE = ToolSpec(
    name="files__write_file",
    server="files",
    mcp_name="write_file",
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "port": {"type": "integer"},
            "ratio": {"type": "number"},
            "overwrite": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object"},
            "mode": {"type": ["string", "null"]},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
    },
)
SEARCH = ToolSpec(
    name="brave_search", parameters={"type": "object", "properties": {"query": {"type": "string"}}}
)
CLOCK = ToolSpec(name="get-time", parameters={"type": "object", "properties": {"tz": {"type": "string"}}})
TOOLS = [WEATHER, WRITE, SEARCH, CLOCK]
OFFERED = {t.name for t in TOOLS}

W = "weather__get_weather"
TOKYO = {"city": "Tokyo"}
PARIS = {"city": "Paris"}


def calls_of(result: TextExtraction) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in result.calls]


@contextmanager
def parser_warnings() -> Iterator[list[logging.LogRecord]]:
    """Collect the module's warnings: a parser that raised is logged there, then swallowed."""
    records: list[logging.LogRecord] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = _Collect(level=logging.WARNING)
    log = logging.getLogger("mcp_agent.providers.textcalls")
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)


# --------------------------------------------------------------------------- reasoning


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        pytest.param("Just an answer.", "", "Just an answer.", id="none"),
        pytest.param(
            "<think>\nLet me plan.\n</think>\n\nThe answer.", "Let me plan.", "The answer.", id="qwen3"
        ),
        pytest.param("<think>\n\n</think>\n\nThe answer.", "", "The answer.", id="empty-block"),
        pytest.param(
            "Plan first.\nThen more.\n</think>\n\nThe answer.",
            "Plan first.\nThen more.",
            "The answer.",
            id="r1-no-open",
        ),
        pytest.param(
            "Intro.\n<think>\nstill thinking when max_tokens hit",
            "still thinking when max_tokens hit",
            "Intro.",
            id="unclosed",
        ),
        pytest.param("<think>partial", "partial", "", id="unclosed-only"),
        pytest.param("<think>a</think>B<think>c</think>D", "a\n\nc", "B\n\nD", id="two-blocks"),
        pytest.param("<thinking>hmm</thinking>\nAnswer", "hmm", "Answer", id="thinking-tag"),
        pytest.param("<think>a</think>B</think>C", "a", "B\n\nC", id="stray-close"),
        pytest.param("<think>a<think>b</think>c</think>D", "a<think>b</think>c", "D", id="nested"),
        pytest.param(
            "Qwen wraps reasoning in `<think>` and `</think>` tags.",
            "",
            "Qwen wraps reasoning in `<think>` and `</think>` tags.",
            id="tags-as-code",
        ),
        pytest.param("", "", "", id="empty"),
        pytest.param(
            "<|channel|>analysis<|message|>Simple sum.<|end|><|start|>assistant<|channel|>final<|message|>4.<|return|>",
            "Simple sum.",
            "4.",
            id="harmony",
        ),
        pytest.param("<|channel|>analysis<|message|>cut off", "cut off", "", id="harmony-unclosed-analysis"),
        pytest.param(
            "<|channel|>analysis<|message|>a<|end|><|start|>assistant", "a", "", id="harmony-header-cut-off"
        ),
        pytest.param(
            "gpt-oss marks them with <|channel|> and <|message|> tokens.",
            "",
            "gpt-oss marks them with <|channel|> and <|message|> tokens.",
            id="harmony-tokens-in-prose",
        ),
        pytest.param(
            "Write `<|channel|>final<|message|>` first.",
            "",
            "Write `<|channel|>final<|message|>` first.",
            id="harmony-tokens-as-code",
        ),
    ],
)
def test_split_reasoning(text: str, reasoning: str, content: str) -> None:
    assert split_reasoning(text) == (reasoning, content)


def test_split_reasoning_of_non_text_is_empty() -> None:
    assert split_reasoning(None) == ("", "")  # type: ignore[arg-type]


def test_calls_inside_reasoning_are_ignored() -> None:
    text = (
        '<think>\nI could call <tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>\n'
        '</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'
    )
    result = extract_tool_calls(text, TOOLS)
    assert calls_of(result) == [(W, TOKYO)]
    assert "Rome" in result.reasoning
    assert result.content == ""


def test_r1_reasoning_then_a_call() -> None:
    text = 'The user wants Tokyo.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'
    result = extract_tool_calls(text, TOOLS)
    assert (result.reasoning, calls_of(result)) == ("The user wants Tokyo.", [(W, TOKYO)])


def test_unclosed_think_swallows_calls() -> None:
    text = (
        'Sure.\n<think>maybe <tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}</tool_call>'
    )
    result = extract_tool_calls(text, TOOLS)
    assert result.calls == ()
    assert result.content == "Sure."


# --------------------------------------------------------------------------- every format

QWEN_XML = """I'll check the weather.
<tool_call>
<function=get_weather>
<parameter=city>
Tokyo
</parameter>
<parameter=unit>
celsius
</parameter>
</function>
</tool_call>"""

QWEN_XML_TWO = """<tool_call>
<function=get_weather>
<parameter=city>
Tokyo
</parameter>
</function>
</tool_call>
<tool_call>
<function=get_weather>
<parameter=city>
Paris
</parameter>
<parameter=days>
3
</parameter>
</function>
</tool_call>
Both requested."""

HERMES_TWO = """<tool_call>
{"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}
</tool_call>
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
</tool_call>"""

DS = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
KIMI = "<|tool_calls_section_begin|><|tool_call_begin|>"
KIMI_END = "<|tool_call_end|><|tool_calls_section_end|>"
HARMONY_CALL = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
CALL_JSON = '{"name": "get_weather", "arguments": {"city": "Tokyo"}}'

FORMATS = [
    # Qwen3-Coder XML (§5.1)
    pytest.param(
        QWEN_XML, [(W, {"city": "Tokyo", "unit": "celsius"})], "I'll check the weather.", id="qwen-xml"
    ),
    pytest.param(
        QWEN_XML_TWO, [(W, TOKYO), (W, {"city": "Paris", "days": 3})], "Both requested.", id="qwen-xml-two"
    ),
    pytest.param(
        "<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n</function>",
        [(W, TOKYO)],
        "",
        id="qwen-xml-no-wrapper",
    ),
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n</function>\n"
        "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        [(W, TOKYO), (W, PARIS)],
        "",
        id="qwen-xml-two-in-one-wrapper",
    ),
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n",
        [(W, TOKYO)],
        "",
        id="qwen-xml-cut-off-before-close",
    ),
    pytest.param(
        "<tool_call><function=get_weather><parameter=city>Tokyo</parameter></function></tool_call>",
        [(W, TOKYO)],
        "",
        id="qwen-xml-one-line",
    ),
    # Hermes / Qwen2.5 / Qwen3 (§5.2)
    pytest.param(
        HERMES_TWO,
        [(W, {"city": "Tokyo", "unit": "celsius"}), (W, {"city": "Paris", "unit": "celsius"})],
        "",
        id="hermes-two",
    ),
    pytest.param(
        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>\nOne moment.',
        [(W, TOKYO)],
        "Let me look.\n\nOne moment.",
        id="hermes-text-around",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}',
        [(W, TOKYO)],
        "",
        id="hermes-no-close-at-end",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="hermes-first-close-missing",
    ),
    pytest.param(
        "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Tokyo', 'days': None}}\n</tool_call>",
        [(W, {"city": "Tokyo", "days": None})],
        "",
        id="hermes-python-literals",
    ),
    pytest.param(
        '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n```\n</tool_call>\n```python\nprint(1)\n```',
        [(W, TOKYO)],
        "```python\nprint(1)\n```",
        id="hermes-fenced-inside",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "city": "Tokyo"}\n</tool_call>',
        [(W, TOKYO)],
        "",
        id="hermes-arguments-written-flat",
    ),
    pytest.param(
        '<tool_call>{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Tokyo\\"}"}}</tool_call>',
        [(W, TOKYO)],
        "",
        id="hermes-openai-shape-string-args",
    ),
    # Granite and Phi (§5.7)
    pytest.param(
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
        [(W, TOKYO)],
        "",
        id="granite-3.0",
    ),
    pytest.param(
        '<tool_call>[{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"name": "get_weather", "arguments": {"city": "Paris"}}]',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="granite-3.1",
    ),
    pytest.param(
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]<|/tool_call|>',
        [(W, TOKYO)],
        "",
        id="phi-tags",
    ),
    pytest.param(
        'functools[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
        [(W, TOKYO)],
        "",
        id="phi-4-mini",
    ),
    # Mistral (§5.5)
    pytest.param(
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"name": "get_weather", "arguments": {"city": "Paris"}}]',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="mistral-pre-v11",
    ),
    pytest.param(
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
        [(W, TOKYO)],
        "",
        id="mistral-pre-v11-no-space",
    ),
    pytest.param(
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Tokyo"}[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="mistral-v11",
    ),
    pytest.param(
        '[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Tokyo"}',
        [(W, TOKYO)],
        "",
        id="mistral-v11-call-id",
    ),
    # DeepSeek (§5.6)
    pytest.param(
        DS + 'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Tokyo"}\n```<｜tool▁call▁end｜>'
        '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="deepseek-v3",
    ),
    pytest.param(
        "Checking.\n"
        + DS
        + 'get_weather<｜tool▁sep｜>{"city": "Tokyo"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        [(W, TOKYO)],
        "Checking.",
        id="deepseek-v3.1",
    ),
    pytest.param(
        '<|tool_calls_begin|><|tool_call_begin|>get_weather<|tool_sep|>{"city": "Tokyo"}<|tool_call_end|><|tool_calls_end|>',
        [(W, TOKYO)],
        "",
        id="deepseek-ascii",
    ),
    # Llama (§5.4)
    pytest.param(
        '<function=get_weather>{"city": "Tokyo"}</function>', [(W, TOKYO)], "", id="llama-function-json"
    ),
    pytest.param(
        'Sure.\n<function=get_weather>{"city": "Tokyo"}</function>\n<function=get_weather>{"city": "Paris"}</function>',
        [(W, TOKYO), (W, PARIS)],
        "Sure.",
        id="llama-function-json-two",
    ),
    pytest.param(
        '{"name": "get_weather", "parameters": {"city": "Tokyo"}}',
        [(W, TOKYO)],
        "",
        id="llama-json-parameters",
    ),
    pytest.param(
        '\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n',
        [(W, TOKYO)],
        "",
        id="llama-json-arguments",
    ),
    pytest.param(
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}; {"name": "get_weather", "parameters": {"city": "Paris"}}',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="llama-python-tag",
    ),
    pytest.param(
        '{"name": "get_weather", "parameters": {"city": "Tokyo"}}; {"name": "get_weather", "parameters": {"city": "Paris"}}',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="llama-json-sequence",
    ),
    pytest.param(
        '<|python_tag|>brave_search.call(query="Tokyo weather today")<|eom_id|>',
        [("brave_search", {"query": "Tokyo weather today"})],
        "",
        id="llama-builtin",
    ),
    pytest.param(
        '[get_weather(city="Tokyo", unit="celsius"), get_weather(city="Paris", unit="celsius")]',
        [(W, {"city": "Tokyo", "unit": "celsius"}), (W, {"city": "Paris", "unit": "celsius"})],
        "",
        id="pythonic",
    ),
    pytest.param(
        'I will check.\n[get_weather(city="Tokyo")]\n', [(W, TOKYO)], "I will check.", id="pythonic-line"
    ),
    pytest.param(
        '[\n  get_weather(city="Tokyo"),\n  get_weather(city="Paris")\n]',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="pythonic-multiline",
    ),
    pytest.param(
        'get_weather(city="Tokyo", days=-2)',
        [(W, {"city": "Tokyo", "days": -2})],
        "",
        id="pythonic-bare-call",
    ),
    pytest.param('[get-time(tz="UTC")]', [("get-time", {"tz": "UTC"})], "", id="pythonic-hyphenated-name"),
    # LM Studio (§4.3)
    pytest.param(
        '[TOOL_REQUEST]{"name": "get_weather", "arguments": {"city": "Tokyo"}}[END_TOOL_REQUEST]\nDone.',
        [(W, TOKYO)],
        "Done.",
        id="lmstudio",
    ),
    pytest.param(
        '[TOOL_REQUEST]\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}',
        [(W, TOKYO)],
        "",
        id="lmstudio-no-end",
    ),
    # others (§5.7)
    pytest.param(
        '```json\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n```',
        [(W, TOKYO)],
        "",
        id="fenced-json",
    ),
    pytest.param(
        '```\n[{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"name": "get_weather", "arguments": {"city": "Paris"}}]\n```',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="xlam-fenced-array",
    ),
    pytest.param(
        '[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]', [(W, TOKYO)], "", id="bare-array"
    ),
    pytest.param(
        '<function_calls>\nget_weather(city="Tokyo", days=null)\nget_weather(city="Paris", days=2)\n</function_calls>',
        [(W, {"city": "Tokyo", "days": None}), (W, {"city": "Paris", "days": 2})],
        "",
        id="olmo3",
    ),
    pytest.param(
        "<start_function_call>call:get_weather{city:<escape>London, UK<escape>,days:3}<end_function_call>",
        [(W, {"city": "London, UK", "days": 3})],
        "",
        id="functiongemma",
    ),
    # fenced call JSON that ends the message (small models, xLAM; §5.7, §5.8)
    pytest.param(
        f"I'll check the weather.\n```json\n{CALL_JSON}\n```",
        [(W, TOKYO)],
        "I'll check the weather.",
        id="fenced-after-prose",
    ),
    pytest.param(
        '```json\n{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 2}}\n```',
        [(W, {"city": "Tokyo", "days": 2})],
        "",
        id="fenced-parameters",
    ),
    pytest.param(
        'Both cities:\n```JSON\n[{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"name": "get_weather", "arguments": {"city": "Paris"}}]\n```\n',
        [(W, TOKYO), (W, PARIS)],
        "Both cities:",
        id="fenced-list-after-prose",
    ),
    pytest.param(
        f'Checking.\n```json\n{CALL_JSON}\n```\n\n```json\n{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}\n```',
        [(W, TOKYO), (W, PARIS)],
        "Checking.",
        id="fenced-two-fences",
    ),
    pytest.param(
        f'```\n{CALL_JSON}\n{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}\n```',
        [(W, TOKYO), (W, PARIS)],
        "",
        id="fenced-two-objects-one-fence",
    ),
    # GLM-4.5 / 4.6 / 4.7 (vLLM glm45, glm47 parsers)
    pytest.param(
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Tokyo</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
        [(W, {"city": "Tokyo", "days": 3})],
        "",
        id="glm45",
    ),
    pytest.param(
        "Let me check both.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Tokyo</arg_value>\n</tool_call>"
        "\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
        [(W, TOKYO), (W, PARIS)],
        "Let me check both.",
        id="glm45-two-after-prose",
    ),
    pytest.param(
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Tokyo</arg_value></tool_call>",
        [(W, TOKYO)],
        "",
        id="glm47-one-line",
    ),
    pytest.param("<tool_call>get-time\n</tool_call>", [("get-time", {})], "", id="glm45-no-arguments"),
    pytest.param(
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Tokyo</arg_value>\n",
        [(W, TOKYO)],
        "",
        id="glm45-no-close-at-end",
    ),
    pytest.param(
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Tokyo\n</tool_call>",
        [(W, {"city": "Tokyo\n"})],
        "",
        id="glm45-value-left-open",
    ),
    # Kimi K2 (vLLM kimi_k2 parser)
    pytest.param(
        KIMI + 'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Tokyo"}' + KIMI_END,
        [(W, TOKYO)],
        "",
        id="kimi-k2",
    ),
    pytest.param(
        "Let me check.\n<|tool_calls_section_begin|>\n<|tool_call_begin|>\nfunctions.get_weather:0<|tool_call_argument_begin|>\n"
        '{"city": "Tokyo"}\n<|tool_call_end|>\n<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>'
        '{"city": "Paris"}<|tool_call_end|>\n<|tool_calls_section_end|>',
        [(W, TOKYO), (W, PARIS)],
        "Let me check.",
        id="kimi-k2-two-with-newlines",
    ),
    pytest.param(
        '<|tool_call_section_begin|><|tool_call_begin|>get_weather:0<|tool_call_argument_begin|>{"city": "Tokyo"}'
        "<|tool_call_end|><|tool_call_section_end|>",
        [(W, TOKYO)],
        "",
        id="kimi-k2-singular-section-no-prefix",
    ),
    pytest.param(
        '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|>',
        [(W, TOKYO)],
        "",
        id="kimi-k2-no-section",
    ),
    pytest.param(
        KIMI + 'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Tokyo"}',
        [(W, TOKYO)],
        "",
        id="kimi-k2-cut-off",
    ),
    # gpt-oss harmony (analysis and final channels: HARMONY below)
    pytest.param(HARMONY_CALL + '{"city":"Tokyo"}<|call|>', [(W, TOKYO)], "", id="harmony"),
    pytest.param(
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Tokyo"}<|call|>',
        [(W, TOKYO)],
        "",
        id="harmony-no-start",
    ),
    pytest.param(
        '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Tokyo"}<|call|>',
        [(W, TOKYO)],
        "",
        id="harmony-recipient-in-role",
    ),
    pytest.param(
        "<|channel|>commentary<|message|>Checking both cities.<|end|>"
        + HARMONY_CALL
        + '{"city":"Tokyo"}<|call|>'
        + HARMONY_CALL
        + '{"city":"Paris"}<|call|>',
        [(W, TOKYO), (W, PARIS)],
        "Checking both cities.",
        id="harmony-preamble-two-calls",
    ),
    pytest.param(
        '<|channel|>commentary to=functions.get_weather<|message|>{"city": "Tokyo"}',
        [(W, TOKYO)],
        "",
        id="harmony-cut-off",
    ),
    pytest.param(HARMONY_CALL + "{}<|end|>", [(W, {})], "", id="harmony-no-arguments-end-token"),
]


@pytest.mark.parametrize(("text", "calls", "content"), FORMATS)
def test_every_format(text: str, calls: list[tuple[str, dict[str, Any]]], content: str) -> None:
    with parser_warnings() as warnings:
        result = extract_tool_calls(text, TOOLS)
    assert calls_of(result) == calls
    assert result.content == content
    assert result.rejected == ()
    assert all(c.error is None for c in result.calls)
    assert warnings == []


@pytest.mark.parametrize(("text", "calls", "content"), FORMATS)
def test_every_format_after_reasoning(
    text: str, calls: list[tuple[str, dict[str, Any]]], content: str
) -> None:
    result = extract_tool_calls("<think>\nThe user wants weather.\n</think>\n\n" + text, TOOLS)
    assert calls_of(result) == calls
    assert result.reasoning == "The user wants weather."


HARMONY = [
    pytest.param(
        "<|channel|>analysis<|message|>Need the weather.<|end|>" + HARMONY_CALL + '{"city":"Tokyo"}<|call|>',
        "Need the weather.",
        [(W, TOKYO)],
        "",
        id="analysis-then-call",
    ),
    pytest.param(
        '<|channel|>analysis<|message|>User asks: "What is 2 + 2?"<|end|>'
        "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
        'User asks: "What is 2 + 2?"',
        [],
        "2 + 2 = 4.",
        id="analysis-then-final",
    ),
    pytest.param(
        "<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant<|channel|>commentary<|message|>**Plan**: "
        "check Tokyo.<|end|>" + HARMONY_CALL + '{"city": "Tokyo"}<|call|>',
        "Plan.",
        [(W, TOKYO)],
        "**Plan**: check Tokyo.",
        id="analysis-preamble-call",
    ),
    pytest.param(
        '<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>{"city": "Tokyo"}<|call|>',
        "",
        [(W, TOKYO)],
        "",
        id="function-call-on-the-analysis-channel",
    ),
    pytest.param(
        "<|channel|>analysis to=python code<|message|>print(2 + 2)<|call|>",
        "print(2 + 2)",
        [],
        "",
        id="built-in-tool-on-the-analysis-channel-is-reasoning",
    ),
    pytest.param(
        "<|channel|>analysis<|message|>Thinking, cut off by max_tokens",
        "Thinking, cut off by max_tokens",
        [],
        "",
        id="analysis-cut-off",
    ),
    pytest.param(
        "<|start|>assistant<|channel|>final<|message|>Done.<|return|>", "", [], "Done.", id="final-only"
    ),
]


@pytest.mark.parametrize(("text", "reasoning", "calls", "content"), HARMONY)
def test_harmony_channels(text: str, reasoning: str, calls: list[Any], content: str) -> None:
    with parser_warnings() as warnings:
        result = extract_tool_calls(text, TOOLS)
    assert (result.reasoning, calls_of(result), result.content) == (reasoning, calls, content)
    assert (result.rejected, warnings) == ((), [])


@pytest.mark.parametrize("text", [p.values[0] for p in HARMONY] + [HARMONY_CALL + "{}<|call|>"])
def test_harmony_split_is_idempotent(text: str) -> None:
    # the providers split reasoning off, then the text fallback splits the content again
    _, content = split_reasoning(text)
    assert split_reasoning(content) == ("", content)
    assert extract_tool_calls(content, TOOLS).reasoning == ""


def test_harmony_tool_result_written_by_the_model_is_no_call() -> None:
    text = '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny": true}<|end|>'
    result = extract_tool_calls(text, TOOLS)
    assert (result.calls, result.rejected, result.content) == ((), (), '{"sunny": true}')


def test_glm_values_are_typed_by_schema_and_strings_kept_whole() -> None:
    text = (
        "<tool_call>write_file\n"
        + "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n"
            for k, v in [
                ("path", "007"),
                ("content", "\n  <b>x</b> </tool_call> y\n"),
                ("port", "3000"),
                ("overwrite", "true"),
                ("tags", '["a", "b"]'),
                ("options", '{"depth": 2}'),
                ("mode", "null"),
            ]
        )
        + "</tool_call>\nDone."
    )
    result = extract_tool_calls(text, TOOLS)
    assert calls_of(result) == [
        (
            "files__write_file",
            {
                "path": "007",
                "content": "\n  <b>x</b> </tool_call> y\n",
                "port": 3000,
                "overwrite": True,
                "tags": ["a", "b"],
                "options": {"depth": 2},
                "mode": None,
            },
        )
    ]
    assert result.content == "Done."


def test_ids_are_generated_and_unique() -> None:
    result = extract_tool_calls(HERMES_TWO, TOOLS)
    ids = [c.id for c in result.calls]
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)
    assert len(set(ids)) == 2


# --------------------------------------------------------------------------- Qwen XML values

QWEN_WRITE = """<tool_call>
<function=write_file>
<parameter=path>
/tmp/a.html
</parameter>
<parameter=content>
<script>
function f() {}
</function>
<parameter=not_a_param>
</script>
</parameter>
<parameter=port>
3000
</parameter>
</function>
</tool_call>"""


def test_qwen_xml_value_may_hold_closing_tags_and_unknown_parameter_tags() -> None:
    (call,) = extract_tool_calls(QWEN_WRITE, TOOLS).calls
    assert call.arguments == {
        "path": "/tmp/a.html",
        "content": "<script>\nfunction f() {}\n</function>\n<parameter=not_a_param>\n</script>",
        "port": 3000,
    }


def test_qwen_xml_known_parameter_after_newline_ends_an_unclosed_value() -> None:
    text = "<function=write_file>\n<parameter=path>\n/tmp/a\n<parameter=port>\n80\n</parameter>\n</function>"
    (call,) = extract_tool_calls(text, TOOLS).calls
    assert call.arguments == {"path": "/tmp/a", "port": 80}


def test_qwen_xml_strips_one_newline_each_side_only() -> None:
    text = "<function=write_file>\n<parameter=content>\n\n  indented\n\n</parameter>\n</function>"
    (call,) = extract_tool_calls(text, TOOLS).calls
    assert call.arguments == {"content": "\n  indented\n"}


def test_qwen_xml_values_are_typed_by_schema() -> None:
    text = (
        "<tool_call>\n<function=write_file>\n"
        + "".join(
            f"<parameter={k}>\n{v}\n</parameter>\n"
            for k, v in [
                ("path", "007"),
                ("port", "3000"),
                ("ratio", "0.5"),
                ("overwrite", "True"),
                ("tags", '["a", "b"]'),
                ("options", "{'depth': 2, 'follow': None}"),
                ("mode", "null"),
                ("limit", "None"),
            ]
        )
        + "</function>\n</tool_call>"
    )
    (call,) = extract_tool_calls(text, TOOLS).calls
    assert call.arguments == {
        "path": "007",
        "port": 3000,
        "ratio": 0.5,
        "overwrite": True,
        "tags": ["a", "b"],
        "options": {"depth": 2, "follow": None},
        "mode": None,
        "limit": None,
    }


@pytest.mark.parametrize(
    ("text", "schema", "expected"),
    [
        ("3000", {"type": "integer"}, 3000),
        (" -7 ", {"type": "integer"}, -7),
        ("3.0", {"type": "integer"}, 3),
        ("3.5", {"type": "integer"}, "3.5"),
        ("lots", {"type": "integer"}, "lots"),
        ("2.5", {"type": "number"}, 2.5),
        ("7", {"type": "number"}, 7),
        ("1e400", {"type": "number"}, "1e400"),
        ("nan", {"type": "number"}, "nan"),
        ("3.5", {"type": ["integer", "number"]}, 3.5),
        ("true", {"type": "boolean"}, True),
        ("False", {"type": "boolean"}, False),
        ("yes", {"type": "boolean"}, "yes"),
        ("[1, 2]", {"type": "array"}, [1, 2]),
        ("['a', 'b']", {"type": "array"}, ["a", "b"]),
        ('{"a": 1}', {"type": "array"}, '{"a": 1}'),
        ('{"a": 1}', {"type": "object"}, {"a": 1}),
        ("{'a': None, 'b': True}", {"type": "object"}, {"a": None, "b": True}),
        ("not an object", {"type": "object"}, "not an object"),
        ("null", {"type": ["string", "null"]}, None),
        ("null", {"type": "string"}, "null"),
        ("None", {"type": "integer"}, None),
        ("null", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, None),
        ("5", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 5),
        ("null", {"type": "string", "nullable": True}, None),
        ("3000", {"type": ["string", "integer"]}, "3000"),
        ("007", {"type": "string"}, "007"),
        ("42", {}, "42"),
        ("42", None, "42"),
        ("x", {"enum": ["x", "y"]}, "x"),
    ],
)
def test_convert_value(text: str, schema: Any, expected: Any) -> None:
    assert convert_value(text, schema) == expected


# --------------------------------------------------------------------------- what is NOT a call

NOT_CALLS = [
    pytest.param('The API answers {"status": "ok"} when it is healthy.', id="prose-with-json"),
    pytest.param('{"status": "ok"}', id="json-answer"),
    pytest.param('{"name": "Tokyo", "population": 37400000}', id="json-with-a-name-key"),
    pytest.param('{"name": "get_weather"}', id="bare-json-without-arguments"),
    pytest.param(
        'To call it, send {"name": "get_weather", "arguments": {"city": "Tokyo"}} to the server.',
        id="example-call-in-prose",
    ),
    pytest.param(
        'For example:\n```json\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n```\nThat is the shape.',
        id="fenced-example-in-prose",
    ),
    pytest.param(
        '[{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"note": "x"}]',
        id="array-with-a-non-call",
    ),
    pytest.param(
        "Hermes models wrap calls in <tool_call> tags; Mistral uses [TOOL_CALLS].", id="markers-in-prose"
    ),
    pytest.param("See <function=get_weather> in the docs.", id="function-tag-in-prose"),
    pytest.param("[link text](https://example.com) and [note(this)]", id="brackets"),
    pytest.param("print(get_weather)", id="python-code"),
    pytest.param(
        'Here is the record:\n```json\n{"name": "Tokyo", "population": 37400000}\n```',
        id="fenced-data-at-the-end",
    ),
    pytest.param(
        '```json\n{"name": "get_weather", "arguments": {"city": "Tokyo"}, "result": "sunny"}\n```',
        id="fenced-call-shape-with-more-keys",
    ),
    pytest.param(
        'The tool is defined as:\n```json\n{"name": "get_weather", "parameters": {"type": "object", '
        '"properties": {"city": {"type": "string"}}}}\n```',
        id="fenced-tool-definition",
    ),
    pytest.param(
        '{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}',
        id="bare-tool-definition",
    ),
    pytest.param(f"Like this:\n```python\n{CALL_JSON}\n```", id="fenced-as-python"),
    pytest.param(
        f'```json\n{CALL_JSON}\n```\n```json\n{{"status": "ok"}}\n```', id="fenced-call-then-fenced-data"
    ),
    pytest.param(f"```json\n{CALL_JSON}", id="fence-never-closed"),
    pytest.param("```json\n[1, 2, 3]\n```", id="fenced-list-of-numbers"),
    pytest.param(f'```json\n[{CALL_JSON}, {{"note": "x"}}]\n```', id="fenced-list-with-a-non-call"),
    pytest.param("GLM writes <tool_call>name and then argument tags.", id="glm-marker-in-prose"),
    pytest.param("<tool_call>get_weather\nsome text</tool_call>", id="glm-name-without-arguments-or-close"),
    pytest.param(
        "Kimi opens calls with <|tool_calls_section_begin|> and closes them with <|tool_calls_section_end|>.",
        id="kimi-tokens-in-prose",
    ),
    pytest.param(
        "Harmony headers look like <|channel|>commentary to=functions.x <|constrain|>json.",
        id="harmony-header-in-prose",
    ),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("text", NOT_CALLS)
def test_not_a_call(text: str) -> None:
    result = extract_tool_calls(text, TOOLS)
    assert result.calls == ()
    assert result.content == text.strip()
    assert result.rejected == ()


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>',
        "<tool_call>\n<function=delete_everything>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>",
        '[TOOL_CALLS]delete_everything[ARGS]{"path": "/"}',
        '{"name": "delete_everything", "arguments": {}}',
        '[delete_everything(path="/")]',
        DS + 'delete_everything<｜tool▁sep｜>{"path": "/"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        '```json\n{"name": "delete_everything", "arguments": {"path": "/"}}\n```',
        "<tool_call>delete_everything\n<arg_key>path</arg_key>\n<arg_value>/</arg_value>\n</tool_call>",
        KIMI + 'functions.delete_everything:0<|tool_call_argument_begin|>{"path": "/"}' + KIMI_END,
        '<|channel|>commentary to=functions.delete_everything <|constrain|>json<|message|>{"path": "/"}<|call|>',
    ],
)
def test_unknown_tool_stays_in_content(text: str) -> None:
    result = extract_tool_calls(text, TOOLS)
    assert result.calls == ()
    assert result.content == text.strip()
    assert result.rejected == ("delete_everything",)


def test_block_with_known_and_unknown_calls_keeps_its_text() -> None:
    text = '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"name": "rm", "arguments": {}}]'
    result = extract_tool_calls(text, TOOLS)
    assert calls_of(result) == [(W, TOKYO)]
    assert result.rejected == ("rm",)
    assert result.content == text


def test_an_unknown_block_does_not_hide_a_known_one() -> None:
    text = (
        '<tool_call>{"name": "rm", "arguments": {"note": "<tool_call>"}}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}</tool_call>'
    )
    result = extract_tool_calls(text, TOOLS)
    assert calls_of(result) == [(W, TOKYO)]
    assert result.content == '<tool_call>{"name": "rm", "arguments": {"note": "<tool_call>"}}</tool_call>'


def test_no_tools_offered_means_no_calls() -> None:
    result = extract_tool_calls(HERMES_TWO, [])
    assert result.calls == ()
    assert result.content == HERMES_TWO


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("weather__get_weather", W),
        ("get_weather", W),  # the server prefix dropped
        ("Get_Weather", W),
        ("WEATHER__GET_WEATHER", W),
        ("functions.get_weather", W),
        ("write_file", "files__write_file"),
        ("brave_search", "brave_search"),
    ],
)
def test_loose_names_map_to_the_exposed_name(written: str, expected: str) -> None:
    text = f'<tool_call>{{"name": "{written}", "arguments": {{}}}}</tool_call>'
    assert [c.name for c in extract_tool_calls(text, TOOLS).calls] == [expected]


def test_ambiguous_short_name_is_rejected() -> None:
    tools = [ToolSpec("a__read_file", mcp_name="read_file"), ToolSpec("b__read_file", mcp_name="read_file")]
    text = '<tool_call>{"name": "read_file", "arguments": {}}</tool_call>'
    result = extract_tool_calls(text, tools)
    assert (result.calls, result.rejected) == ((), ("read_file",))


def test_exact_name_wins_over_a_short_name() -> None:
    tools = [ToolSpec("read_file"), ToolSpec("fs__read_file", mcp_name="read_file")]
    text = '<tool_call>{"name": "read_file", "arguments": {}}</tool_call>'
    assert [c.name for c in extract_tool_calls(text, tools).calls] == ["read_file"]


# --------------------------------------------------------------------------- broken arguments


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            '<tool_call>{"name": "get_weather", "arguments": "city is Tokyo"}</tool_call>',
            id="hermes-args-not-json",
        ),
        pytest.param(
            '<tool_call>{"name": "get_weather", "arguments": [1, 2]}</tool_call>', id="hermes-args-a-list"
        ),
        pytest.param(
            '<tool_call>{"name": "get_weather", "arguments" {"city" "Tokyo"}}</tool_call>',
            id="hermes-object-broken",
        ),
        pytest.param("[TOOL_CALLS]get_weather[ARGS]city=Tokyo", id="mistral-v11-args-not-json"),
        pytest.param("<function=get_weather>{city = Tokyo</function>", id="llama-function-args-broken"),
        pytest.param(
            DS + "get_weather<｜tool▁sep｜>city Tokyo<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            id="deepseek-args-not-json",
        ),
        pytest.param('[get_weather("Tokyo")]', id="pythonic-positional"),
        pytest.param("[get_weather(city=tokyo_var)]", id="pythonic-not-a-literal"),
        pytest.param("[get_weather(city=b'Tokyo')]", id="pythonic-bytes"),
        pytest.param("[get_weather(**{'city': 'Tokyo'})]", id="pythonic-kwargs"),
        pytest.param(
            "<start_function_call>call:get_weather{city<end_function_call>", id="functiongemma-broken"
        ),
        pytest.param(
            "<tool_call>get_weather\n<arg_key>city</arg_key>\nTokyo\n</tool_call>", id="glm-key-without-value"
        ),
        pytest.param(
            KIMI + "functions.get_weather:0<|tool_call_argument_begin|>city=Tokyo" + KIMI_END,
            id="kimi-args-not-json",
        ),
        pytest.param(HARMONY_CALL + "city: Tokyo<|call|>", id="harmony-args-not-json"),
        pytest.param(HARMONY_CALL + "[1, 2]<|call|>", id="harmony-args-a-list"),
    ],
)
def test_broken_arguments_give_a_call_with_an_error(text: str) -> None:
    result = extract_tool_calls(text, TOOLS)
    (call,) = result.calls
    assert call.name == W
    assert call.error
    assert call.raw_arguments
    assert call.arguments == {}


def test_call_too_broken_and_too_long_to_repair_still_names_its_tool() -> None:
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"text": "' + "x" * 120_000 + "</tool_call>\nDone."
    )
    result = extract_tool_calls(text, TOOLS)
    (call,) = result.calls
    assert call.name == W
    assert call.error is not None and "not valid JSON" in call.error
    assert call.raw_arguments is not None and len(call.raw_arguments) > 120_000
    assert result.content == "Done."


def test_pythonic_dict_keys_become_strings() -> None:
    (call,) = extract_tool_calls("[write_file(options={1: 'a', None: 'b', 'c': {'d': (1, 2)}})]", TOOLS).calls
    assert call.arguments == {"options": {"1": "a", "null": "b", "c": {"d": [1, 2]}}}


def test_pythonic_hyphenated_names_in_values_stay_as_written() -> None:
    text = '[get-time(tz="x-y(z)"), get_weather(city="a, get-time(")]'
    assert calls_of(extract_tool_calls(text, TOOLS)) == [
        ("get-time", {"tz": "x-y(z)"}),
        (W, {"city": "a, get-time("}),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>{name: 'get_weather', arguments: {city: 'Tokyo',}}</tool_call>",
        HARMONY_CALL + '{"city": "Tokyo"<|call|>',
    ],
)
def test_repaired_arguments_keep_the_raw_text(text: str) -> None:
    (call,) = extract_tool_calls(text, TOOLS).calls
    assert (call.name, call.arguments, call.error) == (W, TOKYO, None)
    assert call.raw_arguments is not None


# --------------------------------------------------------------------------- never raises, never hangs


def test_a_parser_failure_keeps_the_text() -> None:
    # a tool whose schema is not a mapping makes the XML parser fail; the text must survive
    odd = ToolSpec("odd", parameters=None)  # type: ignore[arg-type]
    text = "<function=odd>\n<parameter=x>\n1\n</parameter>\n</function>"
    with parser_warnings() as warnings:
        result = extract_tool_calls(text, [odd])
    assert result.content == text
    assert result.calls == ()
    assert len(warnings) == 1


def test_an_extraction_failure_keeps_the_text() -> None:
    broken = ToolSpec(None)  # type: ignore[arg-type]
    with parser_warnings() as warnings:
        result = extract_tool_calls("<think>x</think>Hello", [broken])
    assert (result.reasoning, result.content, result.calls) == ("x", "Hello", ())
    assert len(warnings) == 1


def test_non_text_input() -> None:
    assert extract_tool_calls(None, TOOLS) == TextExtraction(content="")  # type: ignore[arg-type]


ADVERSARIAL = {
    "hermes-opens": "<tool_call>{" * 2000,
    "hermes-open-quote": '<tool_call>{"name": "get_weather", "arguments": "' + "x\\" * 8000,
    "xml-params": "<function=write_file>\n" + "<parameter=content>\n<parameter=path>\n" * 600,
    "xml-functions": "<tool_call><function=get_weather>" * 600,
    "nested-brackets": "[" * 10000 + "]" * 10000,
    "nested-braces": '{"a":' * 4000,
    "mistral": "[TOOL_CALLS]get_weather[ARGS]{" * 1500,
    "deepseek": DS * 800,
    "python-tag": "<|python_tag|>{" * 1500,
    "pythonic-lines": "[get_weather(\n" * 1500,
    "think": "<think>" * 2000 + "</think>" * 2000,
    "gemma": "<start_function_call>call:get_weather{a:{b:[" * 600,
    "quotes": "<tool_call>" + "{'\"" * 6000,
    "function-json": "<function=get_weather>{" * 1000,
    "function-params": "<function=get_weather><parameter=city>" * 500,
    "function-params-lines": "<function=x>\n<parameter=a>\n" * 600,
    "olmo": "<function_calls>\n" * 1200,
    "gemma-heads": "<start_function_call>call:get_weather{" * 400,
    "lmstudio": "[TOOL_REQUEST]{" * 1500,
    "phi": "functools[{" * 1500,
    "python-tag-builtin": "<|python_tag|>" * 1500,
    "deepseek-unreadable-last": (DS + "x<｜tool▁sep｜>[END]") * 700 + "<｜tool▁call▁begin｜>x",
    "bare-brackets": "[ARGS]" * 3000,
    "functools-garbage": "functools[weather__get_weather, x " * 600,
    "gemma-mismatched": "<start_function_call>call:get_weather{a:[}<end_function_call>" * 200,
    "fences-of-calls-then-prose": f"```json\n{CALL_JSON}\n```\n" * 300 + "and some prose",
    "fence-opens": "```json\n{" * 2000,
    "fences-bare": "```\n[" * 2000,
    "glm-keys": "<tool_call>get_weather\n" + "<arg_key>city</arg_key><arg_value>" * 800,
    "glm-calls": "<tool_call>get_weather\n<arg_key>" * 800,
    "kimi": KIMI * 800,
    "kimi-args": (KIMI + "functions.get_weather:0<|tool_call_argument_begin|>{") * 500,
    "harmony-headers": "<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{" * 400,
    "harmony-tokens": "<|channel|><|message|><|start|><|constrain|>" * 600,
    "harmony-analysis": "<|channel|>analysis<|message|>x<|end|>" * 800,
}


@pytest.mark.parametrize("args", ["{city:[}", "{items:[1,2}", "{a:{b:[}}"])
def test_functiongemma_mismatched_brackets_are_unreadable_not_a_hang(args: str) -> None:
    # a list closed by "}" once read an empty value forever (no progress), eating memory
    result = extract_tool_calls(f"<start_function_call>call:get_weather{args}<end_function_call>", TOOLS)
    [call] = result.calls
    assert call.error == "arguments are not readable" and call.raw_arguments == args


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_input_finishes_fast(text: str) -> None:
    assert len(text) >= 10_000
    started = time.perf_counter()
    with parser_warnings() as warnings:
        result = extract_tool_calls(text, TOOLS)
    assert time.perf_counter() - started < 10  # "does not hang"; the benchmark has the real figure
    assert {c.name for c in result.calls} <= OFFERED
    assert warnings == []


LONG_ADVERSARIAL = {
    # each failed JSON reading once counted the newlines of the whole text before it: quadratic
    "hermes-opens": "<tool_call>{" * 400_000,
    "function-json": "<function=get_weather>{" * 200_000,
    "lmstudio": '[TOOL_REQUEST]{"name": "get_weather", ' * 120_000,
    "hermes-open-strings": '<tool_call>{"a": "' * 300_000,
    "think": "<think>" * 200_000,
    "fence-opens": "```json\n{" * 200_000,
    "harmony-calls": '<|channel|>commentary to=functions.get_weather<|message|>{"a": "' * 30_000,
    "glm-values": "<tool_call>get_weather\n<arg_key>a</arg_key><arg_value>" * 30_000,
}


@pytest.mark.parametrize("text", LONG_ADVERSARIAL.values(), ids=LONG_ADVERSARIAL.keys())
def test_a_long_adversarial_answer_is_read_in_bounded_time(text: str) -> None:
    assert len(text) >= 1_000_000
    started = time.perf_counter()
    result = extract_tool_calls(text, TOOLS)
    assert time.perf_counter() - started < 30  # "does not hang": minutes before, well under a second now
    assert len(result.calls) <= MAX_MARKERS


def test_calls_are_looked_for_in_the_head_of_a_long_answer_only() -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}</tool_call>'
    filler = "word " * (MAX_SCAN_CHARS // 5)
    result = extract_tool_calls(f"{call}\n{filler}{call}", TOOLS)
    assert calls_of(result) == [(W, TOKYO)]
    assert result.content == f"{filler}{call}".strip()
    many = "<tool_call>{}</tool_call> " * (MAX_MARKERS + 10) + call
    assert calls_of(extract_tool_calls(many, TOOLS)) == []


def test_a_value_holding_its_closing_tag_reads_whole() -> None:
    text = '<tool_call>{"name": "write_file", "arguments": {"content": "x</tool_call>y" }}</tool_call> done'
    result = extract_tool_calls(text, TOOLS)
    assert calls_of(result) == [("files__write_file", {"content": "x</tool_call>y"})]
    assert result.content == "done"


# fmt: off
FRAGMENTS = [
    "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", ">", "\n",
    "<|tool_call|>", "<|/tool_call|>", "functools[", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[TOOL_REQUEST]",
    "[END_TOOL_REQUEST]", "<|python_tag|>", "<|eom_id|>", "<function_calls>", "</function_calls>",
    "<start_function_call>", "call:", "<escape>", "<end_function_call>", "<think>", "</think>", "```json\n",
    "```", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
    '{"name": ', '"arguments": ', '"parameters": ', "{", "}", "[", "]", "(", ")", "=", ",", ";", '"', "'",
    "get_weather", "weather__get_weather", "delete_everything", "rm", "brave_search", "get-time", "city",
    "port", "content", "null", "true", "None", "3000", "Tokyo", " ",
    "```JSON\n", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>", "functions.get_weather:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
    "<|tool_calls_section_end|>", "<|start|>", "assistant", "<|channel|>", "analysis", "commentary", "final",
    " to=functions.get_weather", " to=functions.rm", "<|constrain|>", "json", "<|message|>", "<|call|>",
    "<|end|>", "<|return|>", "`",
]
# fmt: on


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    with parser_warnings() as warnings:
        result = extract_tool_calls(text, TOOLS)
    assert isinstance(result.content, str)
    assert {c.name for c in result.calls} <= OFFERED
    assert warnings == []


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=40))
def test_format_fragments_never_raise_nor_call_unoffered_tools(parts: list[str]) -> None:
    text = "".join(parts)
    with parser_warnings() as warnings:
        result = extract_tool_calls(text, TOOLS)
        reasoning, _ = split_reasoning(text)
    assert {c.name for c in result.calls} <= OFFERED
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", c.id) for c in result.calls)
    assert all(isinstance(c.arguments, dict) for c in result.calls)
    assert result.reasoning == reasoning
    assert warnings == []


PROSE = st.text(
    alphabet=st.characters(whitelist_categories=("L", "N", "Zs"), whitelist_characters=".,!?\n"), max_size=80
)


@settings(max_examples=200, deadline=None)
@given(PROSE, PROSE, st.sampled_from(["Tokyo", "São Paulo", 'a "quoted" city', "x\ny"]))
def test_a_call_between_prose_is_found_and_the_prose_kept(before: str, after: str, city: str) -> None:
    block = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": ' + json.dumps(city) + "}}\n</tool_call>"
    )
    result = extract_tool_calls(f"{before}\n{block}\n{after}", TOOLS)
    assert calls_of(result) == [(W, {"city": city})]
    assert result.content == "\n\n".join(p.strip() for p in (before, after) if p.strip())


# fmt: off
WHOLE_MESSAGE_ONLY = {
    "llama-json-parameters", "llama-json-arguments", "llama-json-sequence", "pythonic-bare-call",
    "pythonic-multiline", "fenced-json", "xlam-fenced-array", "bare-array",
}
ENDS_MESSAGE_ONLY = {  # fenced call JSON: prose may come before, never after
    "fenced-after-prose", "fenced-parameters", "fenced-list-after-prose", "fenced-two-fences",
    "fenced-two-objects-one-fence",
}
# fmt: on
EMBEDDABLE = [p for p in FORMATS if p.id not in WHOLE_MESSAGE_ONLY | ENDS_MESSAGE_ONLY and p.values[2] == ""]
FENCED = [p for p in FORMATS if p.id in ENDS_MESSAGE_ONLY | {"fenced-json", "xlam-fenced-array"}]


@settings(max_examples=200, deadline=None)
@given(PROSE, st.sampled_from(FENCED))
def test_fenced_calls_after_prose_are_found_and_the_prose_kept(before: str, sample: Any) -> None:
    text, calls, content = sample.values
    result = extract_tool_calls(f"{before}\n{text}", TOOLS)
    assert calls_of(result) == calls
    assert result.content == f"{before}\n{content}".strip()


@settings(max_examples=100, deadline=None)
@given(PROSE.filter(lambda p: p.strip() != ""), st.sampled_from(FENCED))
def test_fenced_calls_followed_by_prose_stay_content(after: str, sample: Any) -> None:
    text = f"{sample.values[0]}\n{after}"
    result = extract_tool_calls(text, TOOLS)
    assert (result.calls, result.content) == ((), text.strip())


@settings(max_examples=300, deadline=None)
@given(PROSE, PROSE, st.sampled_from(EMBEDDABLE))
def test_every_marked_format_is_found_between_prose(before: str, after: str, sample: Any) -> None:
    text, calls, _ = sample.values
    result = extract_tool_calls(f"{before}\n{text}\n{after}", TOOLS)
    assert calls_of(result) == calls
    assert result.content == "\n\n".join(p.strip() for p in (before, after) if p.strip())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(EMBEDDABLE), min_size=1, max_size=4), st.lists(PROSE, min_size=5, max_size=5))
def test_several_formats_in_one_message_are_all_found_in_order(samples: list[Any], proses: list[str]) -> None:
    # a call left open runs to the end of the message: nothing after it is another call
    assume(not any(sample.id.endswith("no-close-at-end") for sample in samples[:-1]))
    text, expected = "", []
    for prose, sample in zip(proses, samples, strict=False):
        text += f"{prose}\n{sample.values[0]}\n"
        expected += sample.values[1]
    result = extract_tool_calls(text + proses[-1], TOOLS)
    assert calls_of(result) == expected
