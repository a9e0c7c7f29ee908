"""The ranker's text analysis (pure): words, stems, stop words, shapes, joined words, related words."""

from __future__ import annotations

import pytest

from mcp_agent.tools.router import expansions, shapes, stem, terms, words


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
    [
        ("files", "file"),
        ("directories", "directory"),
        ("listing", "list"),
        ("created", "create"),
        ("creates", "create"),
        ("running", "run"),
        ("stopped", "stop"),
        ("branches", "branch"),
    ],
)
def test_forms_of_a_word_share_a_stem(a: str, b: str) -> None:
    assert terms(a) == terms(b)


def test_stop_words_go() -> None:
    assert terms("What is the time in the folder?") == [stem("time"), stem("folder")]


def test_words_that_name_no_task_are_stop_words() -> None:
    """Quantifiers (``everything`` is also a server's name), ``tool`` (every tool is one) and a
    name's introduction (``a file called X``) say nothing about which tool."""
    assert terms("Drop everything about Bob with the tool") == [stem("drop"), stem("bob")]
    assert terms("a file called notes") == [stem("file"), stem("notes")]


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Scrape the text from example.org/pricing", ["url"]),  # a web address without a scheme
        ("what is on www.python.org", ["url"]),
        ("Convert 09:30 Europe/Berlin to Asia/Kolkata", ["timezone", "time"]),  # not a file path
        ("call me at 3pm", ["time"]),
        ("Compare HEAD~2 with main", ["commit"]),
        ("what did 3f2a9c1e change", ["commit"]),
        ("Calculate 2 + 40", ["sum"]),
        ("Show me the photo cat.jpg", ["file", "path", "image", "media"]),
        ("play intro.mp3", ["file", "path", "audio", "media"]),
        ("write to bob@acme.com", ["email"]),  # not a web address
        ("is 1234567 a prime", []),  # digits alone are no hash
    ],
)
def test_shapes_say_what_else_a_text_holds(text: str, expected: list[str]) -> None:
    assert shapes(text) == expected


def test_queries_also_get_shapes_and_joined_words() -> None:
    assert terms("check out notes.md") == [stem("check"), stem("out"), stem("notes"), stem("md")]
    expanded = terms("check out notes.md", expand=True)
    assert {stem("file"), stem("path"), stem("checkout"), stem("outnotes")} <= set(expanded)
    assert stem("timezone") in terms("the time zone of Lima", expand=True)
    assert stem("checkout") not in terms("check the out", expand=True)  # a stop word between


@pytest.mark.parametrize(
    ("word", "related"),
    [
        ("folder", "directory"),
        ("folders", "directory"),
        ("remembered", "memory"),
        ("scraping", "url"),  # read by stem: every form of a word finds its related words
        ("comparing", "diff"),
        ("renamed", "move"),
        ("photo", "image"),
        ("biggest", "size"),
    ],
)
def test_related_words_are_read_by_stem(word: str, related: str) -> None:
    assert stem(related) in expansions(stem(word))


def test_a_word_is_not_its_own_related_word() -> None:
    assert expansions(stem("folder")) == (stem("directory"),)
    assert expansions(stem("nonsense")) == ()
