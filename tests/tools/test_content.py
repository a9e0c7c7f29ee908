"""MCP result content → text for the model: every part type, the everything server's shapes."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_agent.tools.content import base64_size, content_images, content_to_text, format_size

TINY_PNG = "A" * 5380  # the everything server's tiny image is 5380 base64 characters
BLOB = base64.b64encode(b"\x1f\x8b" + b"\x00" * 1498).decode()  # 1500 bytes


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


@pytest.mark.parametrize(
    ("content", "structured", "expected"),
    [
        # empty
        ([], None, ""),
        ([text("")], None, ""),
        # text parts joined by newlines, in order; annotations ignored
        ([text("one")], None, "one"),
        ([text("one"), text("two", annotations={"audience": ["user"], "priority": 0.5})], None, "one\ntwo"),
        # everything: get-tiny-image = text + image + text
        (
            [
                text("This is a tiny image:"),
                {"type": "image", "data": TINY_PNG, "mimeType": "image/png"},
                text("The image above is the MCP tiny image."),
            ],
            None,
            "This is a tiny image:\n[image: image/png, 4.0 kB]\nThe image above is the MCP tiny image.",
        ),
        # everything: get-annotated-message with includeImage
        (
            [
                text(
                    "Error: Operation failed",
                    annotations={"priority": 1.0, "audience": ["user", "assistant"]},
                ),
                {
                    "type": "image",
                    "data": TINY_PNG,
                    "mimeType": "image/png",
                    "annotations": {"priority": 0.5},
                },
            ],
            None,
            "Error: Operation failed\n[image: image/png, 4.0 kB]",
        ),
        # audio
        ([{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}], None, "[audio: audio/wav, 3 B]"),
        # image without mime type or data
        ([{"type": "image", "data": "AAAA"}], None, "[image: 3 B]"),
        ([{"type": "image"}], None, "[image]"),
        # everything: get-resource-links {count: 2}
        (
            [
                text("Here are 2 resource links to resources available in this server:"),
                {
                    "type": "resource_link",
                    "uri": "demo://resource/dynamic/blob/1",
                    "name": "Blob Resource 1",
                    "mimeType": "application/octet-stream",
                    "description": "Resource 1: binary blob",
                },
                {
                    "type": "resource_link",
                    "uri": "demo://resource/dynamic/text/2",
                    "name": "Text Resource 2",
                    "mimeType": "text/plain",
                },
            ],
            None,
            "Here are 2 resource links to resources available in this server:\n"
            "[resource link: demo://resource/dynamic/blob/1 (Blob Resource 1, application/octet-stream)"
            " - Resource 1: binary blob]\n"
            "[resource link: demo://resource/dynamic/text/2 (Text Resource 2, text/plain)]",
        ),
        # everything: gzip-file-as-resource (default) → a link only
        (
            [
                {
                    "type": "resource_link",
                    "uri": "file:///tmp/README.md.gz",
                    "name": "README.md.gz",
                    "mimeType": "application/gzip",
                }
            ],
            None,
            "[resource link: file:///tmp/README.md.gz (README.md.gz, application/gzip)]",
        ),
        ([{"type": "resource_link", "uri": "demo://x"}], None, "[resource link: demo://x]"),
        ([{"type": "resource_link"}], None, "[resource link: (no uri)]"),
        # everything: get-resource-reference {resourceType: Text} → embedded text resource
        (
            [
                text("Returning resource reference for Resource 1:"),
                {
                    "type": "resource",
                    "resource": {
                        "uri": "demo://resource/static/document/1.md",
                        "mimeType": "text/markdown",
                        "text": "# Doc\nbody",
                    },
                },
                text("You can access this resource using the URI: demo://resource/static/document/1.md"),
            ],
            None,
            "Returning resource reference for Resource 1:\n"
            "[resource: demo://resource/static/document/1.md, text/markdown]\n# Doc\nbody\n"
            "You can access this resource using the URI: demo://resource/static/document/1.md",
        ),
        # everything: gzip-file-as-resource {outputType: resource} → embedded blob resource
        (
            [
                {
                    "type": "resource",
                    "resource": {"uri": "file:///tmp/x.gz", "mimeType": "application/gzip", "blob": BLOB},
                }
            ],
            None,
            "[resource: file:///tmp/x.gz, application/gzip, 1.5 kB]",
        ),
        ([{"type": "resource", "resource": {"text": "bare"}}], None, "[resource]\nbare"),
        ([{"type": "resource"}], None, "[resource]"),
        ([{"type": "resource", "resource": "not a dict"}], None, "[resource]"),
        # structuredContent: shown only when there is no text (everything: get-structured-content)
        (
            [text('{"temperature":22.5,"conditions":"Partly cloudy","humidity":65}')],
            {"temperature": 22.5, "conditions": "Partly cloudy", "humidity": 65},
            '{"temperature":22.5,"conditions":"Partly cloudy","humidity":65}',
        ),
        ([], {"temperature": 22.5, "city": "Zürich"}, '{"temperature":22.5,"city":"Zürich"}'),
        ([text("")], {"a": [1, 2]}, '{"a":[1,2]}'),
        (
            [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
            {"ok": True},
            '[image: image/png, 3 B]\n{"ok":true}',
        ),
        ([], [1, 2], "[1,2]"),
        ([], "plain", '"plain"'),
        ([], 0, "0"),
        # unknown and malformed parts never crash
        ([{"type": "video", "data": "..."}], None, "[video content]"),
        ([{"text": "no type"}], None, "[content part without a type]"),
        (["a string"], None, "[unrecognised content part: str]"),
        ([None, 5], None, "[unrecognised content part: NoneType]\n[unrecognised content part: int]"),
        ([{"type": "text", "text": None}], None, ""),
        ([{"type": "text", "text": 42}], None, ""),
    ],
)
def test_content_to_text(content: list[Any], structured: Any, expected: str) -> None:
    assert content_to_text(content, structured) == expected


def test_image_data_is_never_in_the_text() -> None:
    data = base64.b64encode(bytes(range(256)) * 20).decode()
    out = content_to_text([{"type": "image", "data": data, "mimeType": "image/jpeg"}])
    assert data[:40] not in out
    assert out == "[image: image/jpeg, 5.1 kB]"


def test_embedded_text_resource_is_capped_with_a_note() -> None:
    body = "x" * 100 + "TAIL"
    out = content_to_text(
        [
            {
                "type": "resource",
                "resource": {"uri": "file:///big.txt", "mimeType": "text/plain", "text": body},
            }
        ],
        max_resource_chars=100,
    )
    assert out == "[resource: file:///big.txt, text/plain]\n" + "x" * 100 + (
        "\n[... 4 more characters of this resource not shown]"
    )


def test_resource_cap_of_zero_means_no_cap() -> None:
    body = "y" * 20_000
    out = content_to_text(
        [{"type": "resource", "resource": {"uri": "u", "text": body}}], max_resource_chars=0
    )
    assert out.endswith(body)


def test_long_uris_and_descriptions_are_clipped() -> None:
    out = content_to_text([{"type": "resource_link", "uri": "u" * 1000, "description": "d" * 1000}])
    assert len(out) < 700


def test_structured_content_that_json_cannot_write() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert content_to_text([], loop) == "[[...]]"
    assert content_to_text([], {("a", 1): 2}) == "{('a', 1): 2}"


def test_content_that_is_not_a_list() -> None:
    assert content_to_text(None) == ""  # type: ignore[arg-type]
    assert content_to_text("text") == ""  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "size"),
    [(b"", 0), (b"a", 1), (b"ab", 2), (b"abc", 3), (b"abcd", 4), (bytes(5380 * 3 // 4), 4035)],
)
def test_base64_size(raw: bytes, size: int) -> None:
    encoded = base64.b64encode(raw).decode()
    assert base64_size(encoded) == size == len(raw)
    # line-wrapped base64 (MIME style) decodes to the same size
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    assert base64_size(wrapped) == size


@settings(deadline=None)
@given(st.binary(max_size=300))
def test_base64_size_matches_the_decoded_length(raw: bytes) -> None:
    assert base64_size(base64.b64encode(raw).decode()) == len(raw)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1000, "1.0 kB"),
        (3900, "3.9 kB"),
        (999_949, "999.9 kB"),
        (1_200_000, "1.2 MB"),
    ],
)
def test_format_size(size: int, text: str) -> None:
    assert format_size(size) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(deadline=None)
@given(st.lists(json_values, max_size=5), json_values, st.integers(min_value=0, max_value=50))
def test_never_raises(content: list[Any], structured: Any, cap: int) -> None:
    assert isinstance(content_to_text(content, structured, max_resource_chars=cap), str)


# --------------------------------------------------------------------------------------------
# images for models that read them

PNG_HEAD = b"\x89PNG\r\n\x1a\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        # an image part, as the everything server sends it
        (
            {"type": "image", "data": b64(PNG_HEAD + b"1"), "mimeType": "image/png"},
            [("image/png", b64(PNG_HEAD + b"1"))],
        ),
        # an embedded resource whose blob is an image
        (
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///a.jpg",
                    "mimeType": "image/jpeg",
                    "blob": b64(b"\xff\xd8\xff\xe0x"),
                },
            },
            [("image/jpeg", b64(b"\xff\xd8\xff\xe0x"))],
        ),
        # the bytes say GIF: the declared type is corrected (APIs refuse a mismatch)
        (
            {"type": "image", "data": b64(b"GIF89a..."), "mimeType": "image/png"},
            [("image/gif", b64(b"GIF89a..."))],
        ),
        (
            {"type": "image", "data": b64(b"RIFF\0\0\0\0WEBPVP8 "), "mimeType": "image/png"},
            [("image/webp", b64(b"RIFF\0\0\0\0WEBPVP8 "))],
        ),
        # unknown bytes keep the declared type (the provider decides whether it can send it)
        (
            {"type": "image", "data": b64(b"<svg/>"), "mimeType": "image/SVG+xml"},
            [("image/svg+xml", b64(b"<svg/>"))],
        ),
        # line-wrapped base64 is joined
        (
            {"type": "image", "data": base64.encodebytes(PNG_HEAD * 20).decode(), "mimeType": "image/png"},
            [("image/png", b64(PNG_HEAD * 20))],
        ),
        # not images: audio, a text resource, a blob of another type, a link
        ({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}, []),
        ({"type": "resource", "resource": {"uri": "file:///a", "mimeType": "image/png", "text": "x"}}, []),
        (
            {
                "type": "resource",
                "resource": {"uri": "file:///a", "mimeType": "application/pdf", "blob": b64(b"%PDF")},
            },
            [],
        ),
        ({"type": "resource_link", "uri": "file:///a.png", "mimeType": "image/png"}, []),
        # broken: not base64, empty, no type, no data, not a dict
        ({"type": "image", "data": "not base64!", "mimeType": "image/png"}, []),
        ({"type": "image", "data": "", "mimeType": "image/png"}, []),
        ({"type": "image", "data": b64(PNG_HEAD)}, []),
        ({"type": "image", "mimeType": "image/png"}, []),
        ("image", []),
    ],
)
def test_content_images(part: Any, expected: list[tuple[str, str]]) -> None:
    images = content_images([text("before"), part, text("after")])
    assert [(image.mime_type, image.data) for image in images] == expected


def test_content_images_keeps_the_order_and_never_raises_on_junk() -> None:
    parts = [{"type": "image", "data": b64(PNG_HEAD + bytes([n])), "mimeType": "image/png"} for n in range(3)]
    assert [image.data for image in content_images(parts)] == [p["data"] for p in parts]
    assert content_images("not a list") == []  # type: ignore[arg-type]
    assert content_images([None, 3, {"type": "resource", "resource": "x"}]) == []  # type: ignore[list-item]
