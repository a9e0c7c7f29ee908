"""The ranker (pure): words, stems, the index, the conversation as a query."""

from __future__ import annotations

import pytest

from mcp_agent.messages import Message, ToolCall, ToolSpec
from mcp_agent.tools.router import RELATED, ToolIndex, query_terms, shapes, terms, text_query, words


def spec(name: str, description: str = "", title: str | None = None, **params: str) -> ToolSpec:
    properties = {key: {"type": "string", "description": doc} for key, doc in params.items()}
    return ToolSpec(name=name, description=description, title=title, parameters={"type": "object", "properties": properties})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("time__get_current_time", ["time", "get", "current", "time"]),
        ("everything__get-tiny-image", ["everything", "get", "tiny", "image"]),
        ("fs__readTextFile", ["fs", "read", "text", "file"]),
        ("HTTPServer parseJSONBody", ["http", "server", "parse", "json", "body"]),
        ("What's at /etc/hosts?", ["what", "s", "at", "etc", "hosts"]),
        ("", []),
    ],
)
def test_words_split_names_and_prose(text: str, expected: list[str]) -> None:
    assert words(text) == expected


@pytest.mark.parametrize(
    ("a", "b"),
    [("files", "file"), ("directories", "directory"), ("listing", "list"), ("created", "create"),
     ("creates", "create"), ("running", "run"), ("stopped", "stop"), ("branches", "branch")],
)
def test_forms_of_a_word_share_a_stem(a: str, b: str) -> None:
    assert terms(a) == terms(b)


def stem(word: str) -> str:
    [term] = terms(word)
    return term


def test_stop_words_go_and_queries_expand() -> None:
    assert terms("What is the time in the folder?") == [stem("time"), stem("folder")]
    assert terms("folder", expand=True) == [stem("folder")]
    assert text_query("folder") == {stem("folder"): 1.0, stem("directory"): RELATED}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fetch https://example.com/a.html", ["url"]),
        ("read notes/todo.md", ["file", "path"]),
        ("open config.yaml", ["file", "path"]),
        ("add 3.5 and 4.25", []),
        ("is port 8000 in use", []),
    ],
)
def test_shapes_say_url_or_file(text: str, expected: list[str]) -> None:
    assert shapes(text) == expected


TOOLS = [
    spec("time__get_current_time", "Get current time in a specific timezone", timezone="IANA timezone name"),
    spec("time__convert_time", "Convert time between timezones", source_timezone="", target_timezone=""),
    spec("fs__read_text_file", "Read the complete contents of a file as text.", "Read Text File", path="file path"),
    spec("fs__list_directory", "Get a detailed listing of all files and directories in a path.", path=""),
    spec("git__git_log", "Shows the commit logs", repo_path="", max_count=""),
    spec("ports__check_port", "Check whether a TCP port on this machine is in use.", port="TCP port number"),
]


@pytest.mark.parametrize(
    ("question", "best"),
    [
        ("What time is it in Tokyo?", "time__get_current_time"),
        ("Convert 3pm London to New York time", "time__convert_time"),
        ("Show me what's in the folder ~/src", "fs__list_directory"),
        ("Read notes.txt", "fs__read_text_file"),
        ("Show the commit history of the repo", "git__git_log"),
        ("Is port 8000 in use?", "ports__check_port"),
    ],
)
def test_the_right_tool_ranks_first(question: str, best: str) -> None:
    index = ToolIndex.build(TOOLS)
    assert index.rank(query_terms([Message.user(question)]))[0] == best


def test_ranking_keeps_every_tool_and_list_order_on_ties() -> None:
    index = ToolIndex.build(TOOLS)
    assert index.rank({}) == [t.name for t in TOOLS]
    assert sorted(index.rank({stem("time"): 1.0})) == sorted(t.name for t in TOOLS)
    assert index.matches({"nothing": 1.0}) == []


def test_an_empty_tool_list_ranks_nothing() -> None:
    assert ToolIndex.build([]).rank({stem("time"): 1.0}) == []


def test_the_latest_user_message_weighs_most() -> None:
    messages = [
        Message.user("Is port 8000 in use?"),
        Message.assistant("It is free."),
        Message.user("What time is it in Tokyo?"),
    ]
    query = query_terms(messages)
    assert query[stem("time")] == 1.0 and 0 < query[stem("port")] < 1.0
    index = ToolIndex.build(TOOLS)
    ranked = index.rank(query)
    assert ranked[0] == "time__get_current_time"
    assert ranked.index("ports__check_port") < ranked.index("git__git_log")  # the earlier question still counts


def test_tool_results_count_only_when_weighted() -> None:
    call = ToolCall("c1", "fs__list_directory", {"path": "."})
    messages = [
        Message.user("Tidy up this folder"),
        Message.assistant("", tool_calls=(call,)),
        Message.tool(call, "[FILE] notes.txt\n[FILE] commit-log.txt"),
    ]
    query = query_terms(messages, tool_results=0.1)
    assert query[stem("tidy")] == 1.0
    assert query[stem("notes")] == 0.1
    assert stem("notes") not in query_terms(messages)
