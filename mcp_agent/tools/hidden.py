"""Hidden instructions in tool definitions: text a person reviewing a tool would not see, and
text addressed to the model rather than describing the tool.

A tool's description (and each description inside its schemas) goes to the model verbatim, so
a server can write instructions there ("tool poisoning"). ``findings(definition)`` looks for two
kinds of signs, pure functions with no I/O:

- **invisible text** (``invisible``): Unicode tag characters (U+E0000–E007F, which render as
  nothing and spell ASCII), zero-width characters and other format characters (category ``Cf``:
  U+200B–U+200F, U+2060–U+2064, U+FEFF, soft hyphen…), bidirectional controls (U+202A–U+202E,
  U+2066–U+2069), variation selectors (U+FE00–FE0F, U+E0100–E01EF) and control characters other
  than tab and newline;
- **instructions to the model** (``RULES``, a short list, each with the published
  tool-poisoning example it catches in ``tests/tools/test_hidden.py``): ``<IMPORTANT>``-style
  tags, "ignore previous instructions", keeping something from the user ("do not tell the user"),
  pointers at secret files (``~/.ssh``, ``id_rsa``, ``mcp.json``…), and redirecting what another
  tool sends ("send all emails to", "change the recipient").

A finding is a sign for a person to look at (``doctor``, the dashboard, a warning in the log),
not a verdict: it withholds nothing by itself. ``visible(text)`` writes the invisible
characters as ``\\uXXXX`` escapes, for showing such text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RULES", "Finding", "findings", "hidden_chars", "invisible", "scan_text", "visible"]

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a tag addressed to the model",
        re.compile(r"<\s*/?\s*(important|system|instructions?|secret|hidden|admin)\s*>", re.IGNORECASE),
    ),
    (
        "ignore earlier instructions",
        re.compile(
            r"\b(ignore|disregard|forget|override)\b[^.\n]{0,30}\b(previous|prior|above|earlier|all|other|system)\b"
            r"[^.\n]{0,20}\b(instructions?|prompts?|rules|directions|guidelines)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "keep it from the user",
        re.compile(
            r"\b(do not|don't|never|without)\s+(\w+\s+){0,2}?(tell|telling|mention|mentioning|inform|informing|"
            r"notify|notifying|reveal|revealing|alert|alerting)\b[^.\n]{0,80}\b(the\s+)?user\b",
            re.IGNORECASE,
        ),
    ),
    (
        "a secret file",
        re.compile(
            r"(~|\$HOME|%USERPROFILE%)[/\\]\.(ssh|aws|gnupg|cursor|kube|docker)\b|\bid_(rsa|dsa|ecdsa|ed25519)\b"
            r"|\bmcp\.json\b|\.(netrc|pgpass)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "redirect what a tool sends",
        re.compile(
            r"\b(send|forward|redirect|bcc)\s+all\s+(\w+\s+)?(e-?mails?|messages?|data|files?|payments?)\s+to\b"
            r"|\b(change|set|replace|redirect)\s+the\s+recipients?\b",
            re.IGNORECASE,
        ),
    ),
)
"""``(what it means, pattern)``: instructions addressed to the model (see the module docstring)."""

_EXCERPT = 60


@dataclass(frozen=True)
class Finding:
    """One sign of a hidden instruction.

    Attributes:
        where: the field it is in: ``description``, ``inputSchema.properties.x.description``….
        what: ``invisible characters`` or the rule's meaning (``RULES``).
        excerpt: the text found, invisible characters written as ``\\uXXXX``.
    """

    where: str
    what: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}: {self.excerpt}"

    def to_dict(self) -> dict[str, str]:
        return {"where": self.where, "what": self.what, "excerpt": self.excerpt}


def invisible(char: str) -> bool:
    """Whether ``char`` shows nothing to a reader (see the module docstring)."""
    code = ord(char)
    if char in "\t\n\r":
        return False
    if 0xE0000 <= code <= 0xE007F or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return True
    return unicodedata.category(char) in ("Cf", "Cc")


def visible(text: str) -> str:
    """``text`` with each invisible character written as ``\\uXXXX`` (``\\UXXXXXXXX`` beyond)."""
    return "".join(
        (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}") if invisible(c) else c for c in text
    )


def _decoded_tags(text: str) -> str:
    """What tag characters spell (U+E0020–E007E are ASCII shifted by U+E0000)."""
    return "".join(chr(ord(c) - 0xE0000) for c in text if 0xE0020 <= ord(c) <= 0xE007E)


_EMOJI_JOINERS = "\u200d\ufe0e\ufe0f"
"""The zero-width joiner and text/emoji presentation selectors: part of an emoji sequence when
they follow a symbol (👨‍👩‍👧, ❤️), hidden text anywhere else."""


def hidden_chars(text: str) -> list[str]:
    """The invisible characters of ``text``, less those that are part of an emoji sequence."""
    found: list[str] = []
    for index, char in enumerate(text):
        if not invisible(char):
            continue
        before = text[index - 1] if index else ""
        if (
            char in _EMOJI_JOINERS
            and before
            and (unicodedata.category(before) == "So" or before in _EMOJI_JOINERS)
        ):
            continue
        found.append(char)
    return found


def scan_text(text: str, where: str) -> list[Finding]:
    """The findings in one piece of text (``where`` names it)."""
    found: list[Finding] = []
    hidden = hidden_chars(text)
    if hidden:
        spelled = _decoded_tags(text)
        names = sorted({f"U+{ord(c):04X}" for c in hidden})
        excerpt = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        if spelled:
            excerpt += f"; the tag characters spell {spelled[:_EXCERPT]!r}"
        found.append(Finding(where, f"{len(hidden)} invisible characters", excerpt))
    # the rules read what the model reads: the text with its tag characters spelled out
    readable = "".join(c for c in text if not invisible(c)) + ("\n" + _decoded_tags(text) if hidden else "")
    for what, pattern in RULES:
        match = pattern.search(readable)
        if match:
            start = max(match.start() - 10, 0)
            excerpt = " ".join(readable[start : match.end() + 10].split())
            found.append(Finding(where, what, excerpt[: _EXCERPT * 2]))
    return found


def _texts(value: Any, where: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    """Every ``description`` and ``title`` string inside a schema, with its path (bounded)."""
    if depth > 32:
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}"
            if key in ("description", "title") and isinstance(item, str):
                yield path, item
            else:
                yield from _texts(item, path, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value[:1000]):
            yield from _texts(item, f"{where}[{index}]", depth + 1)


def findings(definition: Mapping[str, Any]) -> list[Finding]:
    """The findings in a tool's definition (``pins.definition``: description, title, schemas)."""
    found: list[Finding] = []
    for field in ("description", "title"):
        text = definition.get(field)
        if isinstance(text, str):
            found.extend(scan_text(text, field))
    for field in ("inputSchema", "outputSchema"):
        for where, text in _texts(definition.get(field), field):
            found.extend(scan_text(text, where))
    return found
