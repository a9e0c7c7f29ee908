"""The ranker (pure): the index and its fields, the conversation as a query, and ranking."""

from __future__ import annotations

import pytest

from mcp_agent.messages import Message, ToolCall, ToolSpec
from mcp_agent.tools.router import QUOTED, RELATED, ToolIndex, query_terms, terms, text_query


def spec(name: str, description: str = "", title: str | None = None, **params: str) -> ToolSpec:
    properties = {key: {"type": "string", "description": doc} for key, doc in params.items()}
    return ToolSpec(
        name=name,
        description=description,
        title=title,
        parameters={"type": "object", "properties": properties},
    )


def stem(word: str) -> str:
    [term] = terms(word)
    return term


def test_queries_add_related_words_at_a_share_of_their_weight() -> None:
    assert terms("folder", expand=True) == [stem("folder")]
    assert text_query("folder") == {stem("folder"): 1.0, stem("directory"): RELATED}
    assert text_query("folder", 0.5) == {stem("folder"): 0.5, stem("directory"): 0.5 * RELATED}


TOOLS = [
    spec("time__get_current_time", "Get current time in a specific timezone", timezone="IANA timezone name"),
    spec("time__convert_time", "Convert time between timezones", source_timezone="", target_timezone=""),
    spec(
        "fs__read_text_file",
        "Read the complete contents of a file as text.",
        "Read Text File",
        path="file path",
    ),
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
    assert ranked.index("ports__check_port") < ranked.index(
        "git__git_log"
    )  # the earlier question still counts


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


# --------------------------------------------------------------------------------------------
# what each ranking technique does (each test fails without its technique)


def ranked(tools: list[ToolSpec], question: str) -> list[str]:
    return ToolIndex.build(tools).rank(query_terms([Message.user(question)]))


def test_a_tool_that_says_the_word_beats_one_that_says_a_related_word() -> None:
    """Related words count ``RELATED`` (< 1) of their word: at full weight these two would tie and
    list order would put the directory tool first."""
    tools = [spec("a__create_directory", "Create a directory."), spec("b__create_folder", "Create a folder.")]
    assert ranked(tools, "new folder")[0] == "b__create_folder"
    assert ranked(tools, "new dir")[0] == "a__create_directory"


def test_related_words_find_a_tool_that_shares_no_word_with_the_question() -> None:
    tools = [
        spec("notes__echo", "Say it back."),
        spec("kg__add_observation", "Add to the knowledge graph memory."),
    ]
    assert ranked(tools, "Did you remember my birthday?")[0] == "kg__add_observation"


def test_quoted_text_counts_less_than_the_request_around_it() -> None:
    assert text_query("commit 'update docs'") == {
        stem("commit"): 1.0,
        stem("update"): QUOTED,
        stem("doc"): QUOTED,
        stem("updatedoc"): QUOTED,
    }
    tools = [
        spec("docs__update_docs", "Update the documentation pages.", docs="which docs to update"),
        spec("git__git_commit", "Records changes to the repository", message="the commit message"),
    ]
    assert ranked(tools, "Make a commit saying 'update docs'")[0] == "git__git_commit"
    assert ranked(tools, "Make a commit saying update docs")[0] == "docs__update_docs"


def test_apostrophes_inside_words_are_not_quotes() -> None:
    assert text_query("Alice's cat isn't here")[stem("cat")] == 1.0


def test_joined_words_find_a_compound_name() -> None:
    tools = [spec("a__inspect", "Inspect a thing."), spec("git__checkout", "Switch to another branch.")]
    assert ranked(tools, "check out main")[0] == "git__checkout"


def test_the_first_sentence_of_a_description_weighs_more_than_the_rest() -> None:
    """Both tools say ``read`` once; the longer one says it in its first sentence, which says what
    the tool does. Weighed alike, the shorter one would win on length."""
    tools = [
        spec("a__copy_file", "Copy a file. Faster than to read it and write it again."),
        spec(
            "b__get_file",
            "Read a file. Handles many text encodings and gives detailed error messages "
            "when the file cannot be opened, with the path it tried.",
        ),
    ]
    assert ranked(tools, "read")[0] == "b__get_file"


def test_enum_values_and_nested_parameters_are_indexed() -> None:
    top = ToolSpec(
        name="sys__top",
        description="The heaviest processes.",
        parameters={
            "type": "object",
            "properties": {"sort_by": {"type": "string", "enum": ["cpu", "memory"]}},
        },
    )
    nested = ToolSpec(
        name="kg__add",
        description="Add facts.",
        parameters={
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"entityName": {"type": "string", "description": "whose relatives"}},
                    },
                }
            },
        },
    )
    tools = [spec("a__other", "Other things."), top, nested]
    assert ranked(tools, "cpu")[0] == "sys__top"
    assert ranked(tools, "entity")[0] == "kg__add"
    assert ranked(tools, "relatives")[0] == "kg__add"


def test_a_server_named_like_a_common_word_does_not_catch_it() -> None:
    tools = [
        spec("everything__echo", "Echoes back the input."),
        spec("kg__drop_nodes", "Delete entities."),
    ]
    assert ranked(tools, "forget everything about Bob")[0] == "kg__drop_nodes"


@pytest.mark.parametrize(
    ("question", "best"),
    [
        ("Get example.org/pricing", "web__fetch"),
        ("What is 09:00 Europe/Paris in Asia/Tokyo?", "time__convert_time"),
        ("Show me cat.jpg", "fs__read_media_file"),
        ("What did HEAD~1 change?", "git__git_show"),
    ],
)
def test_shapes_pick_the_tool(question: str, best: str) -> None:
    tools = [
        spec("fs__read_text_file", "Read a file as text.", path="the file's path"),
        spec("fs__read_media_file", "Read an image or audio file as media.", path="the file's path"),
        spec("git__git_show", "Shows the contents of a commit.", revision=""),
        spec("time__convert_time", "Convert time between timezones", source_timezone="", target_timezone=""),
        spec("web__fetch", "Get the readable text of a web page.", url="the page's URL"),
    ]
    assert ranked(tools, question)[0] == best
