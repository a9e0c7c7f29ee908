"""Text analysis for the ranker (pure): words, stems, shapes and related words.

The same ``terms`` make the index (tool names, titles, descriptions, parameters) and the query,
so both sides split, drop and stem alike. Queries get more (``terms(expand=True)``): the words a
text's shapes suggest (a URL says ``url``, ``notes.md`` says ``file``), and adjacent words joined
(``check out`` finds ``checkout``). ``expansions`` gives the related tool words of a query term
(``folder`` → ``directory``), from ``_vocabulary.RELATED_WORDS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import pairwise

from ._vocabulary import RELATED_WORDS, STOP_WORDS

__all__ = ["expansions", "shapes", "stem", "terms", "words"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """The lower-case words of ``text``, split at ``__``, ``_``, ``-``, camelCase and punctuation."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


def stem(word: str) -> str:
    """A light suffix stripper: the same stem for ``files``/``file``, ``listing``/``list``,
    ``created``/``create``/``creates``. Not Porter; consistent is all it needs to be."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]  # running -> run, stopped -> stop
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


# --------------------------------------------------------------------------------------------
# shapes

_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\blocalhost:\d+\S*", re.IGNORECASE)
_DOMAIN = re.compile(
    r"\b(?:www\.)?(?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|app|edu|gov|info|co|uk|de|fr|jp|eu|ca|au|nl|ch)\b"
    r"(?:/\S*)?",
    re.IGNORECASE,
)
_ZONE = re.compile(
    r"\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)/[A-Za-z_]+"
)
_CLOCK = re.compile(r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|\b\d{1,2}:\d{2}\b", re.IGNORECASE)
_REVISION = re.compile(r"\bHEAD(?:[~^]\d*)*(?!\w)|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
_SUM = re.compile(r"\d\s*\+\s*\d")
_PATH = re.compile(
    r"(?:^|\s)(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*|\b[\w-]+\.[a-z][a-z0-9]{0,4}\b", re.IGNORECASE
)
_NOT_FILE = re.compile(r"^\d+(\.\d+)*$|^(e\.g|i\.e|etc)\.?$", re.IGNORECASE)
_MEDIA = {
    "image": "png jpg jpeg gif webp bmp svg ico heic tif tiff",
    "audio": "mp3 wav ogg flac m4a aac opus",
    "video": "mp4 mov avi mkv webm",
}
_MEDIA_KIND = {ext: kind for kind, exts in _MEDIA.items() for ext in exts.split()}


def shapes(text: str) -> list[str]:
    """Words for what the text holds besides words: an email address says ``email``; a URL or a
    web address (``example.org/pricing``) ``url``; an IANA zone (``Europe/Berlin``) ``timezone``;
    a clock time (``3pm``, ``14:00``) ``time``; a git revision (``HEAD~1``, a hex hash)
    ``commit``; ``2 + 3`` ``sum``; a file path or a file name with an extension ``file`` and
    ``path``, and an image, audio or video file also its kind and ``media``. Each piece of text
    counts once, as the first of these it is."""
    out: list[str] = []
    if _EMAIL.search(text):
        out.append("email")
    rest = _EMAIL.sub(" ", text)
    if _URL.search(rest) or _DOMAIN.search(rest):
        out.append("url")
    rest = _DOMAIN.sub(" ", _URL.sub(" ", rest))
    if _ZONE.search(rest):
        out += ["timezone", "time"]
        rest = _ZONE.sub(" ", rest)
    if _CLOCK.search(rest):
        out.append("time")
    if _REVISION.search(rest):
        out.append("commit")
    if _SUM.search(rest):
        out.append("sum")
    files = [m.group().strip() for m in _PATH.finditer(rest) if not _NOT_FILE.match(m.group().strip())]
    if files:
        out += ["file", "path"]
    kinds = {_MEDIA_KIND.get(name.rpartition(".")[2].lower()) for name in files if "." in name}
    for kind in sorted(k for k in kinds if k):
        out += [kind, "media"]
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------------
# terms and related words


def terms(text: str, *, expand: bool = False) -> list[str]:
    """The index terms of ``text``: its words less stop words, stemmed. With ``expand`` (queries)
    also the words its shapes suggest (``shapes``) and each two adjacent words joined (``check
    out`` is ``checkout``, ``time zone`` is ``timezone``: a joined word that no tool has matches
    nothing)."""
    out: list[str] = [stem(word) for word in shapes(text)] if expand else []
    found = words(text)
    out += [stem(word) for word in found if word not in STOP_WORDS]
    if expand:
        out += [stem(a + b) for a, b in pairwise(found) if a not in STOP_WORDS and b not in STOP_WORDS]
    return out


def _related(table: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for line in table.strip().splitlines():
        targets, _, everyday = line.partition(":")
        for word in everyday.split():
            key = stem(word)
            out.setdefault(key, []).extend(stem(t) for t in targets.split() if stem(t) != key)
    return {key: tuple(dict.fromkeys(value)) for key, value in out.items()}


_RELATED: Mapping[str, tuple[str, ...]] = _related(RELATED_WORDS)


def expansions(term: str) -> tuple[str, ...]:
    """The related tool words of a query ``term`` (a stem): ``folder`` → ``directory``,
    ``remembered`` → ``memory``, ``knowledge``."""
    return _RELATED.get(term, ())
