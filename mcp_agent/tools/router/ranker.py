"""The ranker (pure): BM25F over a tool list, and the conversation as a query against it.

Top to bottom: the word lists (data: the stop words and the everyday words for what tool
descriptions say otherwise; edit them here), text analysis (words, stems, shapes and related
words, the same for tools and queries), ``ToolIndex`` (BM25F over a tool list's weighted
fields) and ``query_terms`` (the conversation as a weighted query). ``routing.py`` decides what
a round offers from the ranks.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ...messages import Message, ToolSpec

_STOP = (
    "a an and are as at be been but by can could do does did for from get got has have how i if in "
    "into is it its let me my of on or our please show tell that the their them then there these "
    "this those to us was we what when where which who why will with would you your give "
    "want need some any all about using use "
    # quantifiers and filler that name no task ("everything" is also a server's name)
    "every each everything anything something nothing stuff thing things just also "
    # what every tool is, and a name's introduction: they say nothing about which tool
    "tool tools call called named"
)
STOP_WORDS = frozenset(_STOP.split())
"""Words that say nothing about which tool: left out of the index and of queries alike."""

RELATED_WORDS = """
file: document
directory: folder dir subfolder subdirectory ls
read content: open view print cat peek
write: save put overwrite
edit change replace: modify fix correct typo tweak patch amend alter insert
move: rename relocate mv
copy: duplicate cp
delete: remove erase drop forget wipe discard purge rm unlink trash destroy
create: make new build generate
search: find locate lookup grep seek
list: ls enumerate
size: large big bigger biggest largest small smaller smallest huge heavy bytes kb mb gb
image media: photo picture pic screenshot icon
audio media: sound song music recording voice
info metadata: details properties stat attributes
allowed access: permission permitted accessible allow
compress gzip: zip archive
url web fetch: download scrape crawl browse visit website webpage site link online internet http https
diff: compare comparison difference differ delta
log: history recent latest last
status: uncommitted dirty untracked pending modified
branch: checkout
reset: undo revert unstage
git repository: repo
commit revision: sha hash tag
time: clock hour minute date day today tonight morning evening
current: now currently
timezone time: tz utc gmt zone
convert: translate
memory knowledge: remember recall memorize forget know knew
observation: fact note detail
entity: person people contact someone
relation: relationship
process: program app application task pid
cpu process: processor load busy
memory: ram swap
disk: storage space drive partition volume mount
port listen: listening socket bound bind service connection tcp udp
environment variable: env envvar var
sum add: plus total calculate compute addition
echo: repeat parrot
"""
"""One topic a line, ``tool words: everyday words``: a query word on the right adds the words on
the left (at ``RELATED`` of its own weight). Read by stem, so one form of each word is
enough (``remember`` also finds ``remembered``). General tool vocabulary: a word belongs here when
it is how people say what tool descriptions commonly say, whichever tools a list holds."""


# ---------------------------------------------------------------- text analysis
#
# Text analysis for the ranker (pure): words, stems, shapes and related words.
#
# The same ``terms`` make the index (tool names, titles, descriptions, parameters) and the query,
# so both sides split, drop and stem alike. Queries get more (``terms(expand=True)``): the words a
# text's shapes suggest (a URL says ``url``, ``notes.md`` says ``file``), and adjacent words joined
# (``check out`` finds ``checkout``). ``expansions`` gives the related tool words of a query term
# (``folder`` → ``directory``), from ``RELATED_WORDS`` (above).
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


# ------------------------------------------------------------------------ index
#
# The tool index (pure): BM25F (Robertson's BM25 over weighted fields) over one tool list.
#
# Written here rather than taken from a library: it is 40 lines and needs no numpy (``rank_bm25``
# does), and the parts that matter for tools are ours anyway (the text analysis above). A tool's fields, by
# weight: its name's words (the tool's 3, the server's 1), the title 2, the description's first
# sentence 1.5 (what the tool does) and the rest 0.5 (how, caveats, other tools' names), the
# parameters' names 1.5 and their descriptions and enum values 0.5, nested objects' too.
_FIELD_WEIGHTS = {
    "name": 3.0,
    "server": 1.0,
    "title": 2.0,
    "summary": 1.5,
    "description": 0.5,
    "param": 1.5,
    "param_doc": 0.5,
}
_K1 = 1.2
_B = 0.75
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def _params(schema: object, names: list[str], docs: list[str], depth: int = 0) -> None:
    """The parameter names, descriptions and enum values of ``schema``'s properties, and of
    the objects nested in them (arrays of objects too), three levels deep."""
    if not isinstance(schema, Mapping) or depth > 3:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            names.append(str(name))
            if isinstance(sub, Mapping):
                if isinstance(sub.get("description"), str):
                    docs.append(sub["description"])
                enum = sub.get("enum")
                if isinstance(enum, list):
                    docs.extend(str(value) for value in enum if isinstance(value, str))
                _params(sub, names, docs, depth + 1)
    _params(schema.get("items"), names, docs, depth + 1)


def _fields(spec: ToolSpec) -> dict[str, str]:
    """The text of each of ``spec``'s fields, by field name."""
    server, _, tool = spec.name.rpartition("__")
    names: list[str] = []
    docs: list[str] = []
    _params(spec.parameters, names, docs)
    parts = _SENTENCE_END.split(" ".join(spec.description.split()), maxsplit=1)
    summary, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    return {
        "name": tool or spec.name,
        "server": " ".join(part for part in (server, spec.server) if part),
        "title": spec.title or "",
        "summary": summary,
        "description": rest,
        "param": " ".join(names),
        "param_doc": " ".join(docs),
    }


@dataclass(frozen=True)
class ToolIndex:
    """A BM25F index over one tool list (pure, built once per list).

    Attributes:
        names: the tools' exposed names, in list order.
        weights: per tool, each term's field-weighted frequency.
        lengths: per tool, its field-weighted length.
        idf: each term's inverse document frequency.
    """

    names: tuple[str, ...]
    weights: tuple[Mapping[str, float], ...]
    lengths: tuple[float, ...]
    idf: Mapping[str, float]
    average: float = 1.0

    @classmethod
    def build(cls, tools: Sequence[ToolSpec]) -> ToolIndex:
        weights: list[dict[str, float]] = []
        for spec in tools:
            tf: dict[str, float] = {}
            for name, text in _fields(spec).items():
                for term in terms(text):
                    tf[term] = tf.get(term, 0.0) + _FIELD_WEIGHTS[name]
            weights.append(tf)
        df = Counter(term for tf in weights for term in tf)
        n = len(tools)
        idf = {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}
        lengths = tuple(sum(tf.values()) for tf in weights)
        average = sum(lengths) / n if n else 1.0
        return cls(tuple(spec.name for spec in tools), tuple(weights), lengths, idf, average or 1.0)

    def scores(self, query: Mapping[str, float]) -> list[float]:
        """Each tool's BM25F score for ``query`` (term → weight), in list order."""
        out = []
        for tf, length in zip(self.weights, self.lengths, strict=True):
            norm = _K1 * (1 - _B + _B * length / self.average)
            score = 0.0
            for term, weight in query.items():
                f = tf.get(term)
                if f:
                    score += weight * self.idf[term] * f * (_K1 + 1) / (f + norm)
            out.append(score)
        return out

    def rank(self, query: Mapping[str, float]) -> list[str]:
        """The tools' names, best first; ties (and tools that match nothing) keep list order."""
        scores = self.scores(query)
        order = sorted(range(len(self.names)), key=lambda i: (-scores[i], i))
        return [self.names[i] for i in order]

    def matches(self, query: Mapping[str, float]) -> list[str]:
        """The tools that match ``query`` at all, best first."""
        scores = self.scores(query)
        order = sorted((i for i in range(len(self.names)) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return [self.names[i] for i in order]


# ------------------------------------------------------------------------ query
#
# The conversation as a query (pure): which words, weighted by where they stand.
#
# The latest user message counts most, earlier user messages less the older they are, the
# assistant's words since the latest user message little, and tool results not at all unless
# weighted in. Within a message, quoted text counts less (it is what a tool should work on, not
# which tool), and each word adds its related tool words (``expansions``) at a share of its
# own weight. A term keeps the largest weight it gets anywhere.
LATEST_USER = 1.0
EARLIER_USER = 0.4
ASSISTANT = 0.3
TOOL_RESULTS = 0.0
"""Tool results are left out of the query by default: measured on the labelled set with a
2,000-character unrelated result after each question, recall@8 is 0.992 at 0 and at 0.1 and
0.975 at 0.3 (``bench/bench_router.py``), and the set has no question that a result would help."""
_RESULT_CHARS = 2_000
_LOOKBACK = 12
RELATED = 0.7
"""A related word (``expansions``) counts this share of the word that suggested it: ``make a
folder`` asks for ``create`` and ``directory``, but a tool that says ``folder`` itself fits better."""
QUOTED = 0.3
"""Quoted text (``'fix login bug'``) is what a tool should work on, not which tool: its words
count this share of the message's."""
_QUOTE = re.compile(r"""(?<!\w)(['"`\u2018\u201c])(.+?)(?:\1|[\u2019\u201d])(?!\w)""")


def text_query(text: str, weight: float = 1.0, into: dict[str, float] | None = None) -> dict[str, float]:
    """``text`` as a weighted query (term → weight), merged into ``into`` keeping each term's
    largest weight: its terms (``terms``) at ``weight``, quoted text at ``QUOTED`` of it, and the
    related words of each at ``RELATED`` of what their word got."""
    query = {} if into is None else into

    def put(term: str, value: float) -> None:
        if query.get(term, 0.0) < value:
            query[term] = value

    quoted = " ".join(match.group(2) for match in _QUOTE.finditer(text))
    plain = _QUOTE.sub(" ", text)
    for part, share in ((plain, 1.0), (quoted, QUOTED)):
        if not part or weight * share <= 0:
            continue
        for term in terms(part, expand=True):
            put(term, weight * share)
            for related in expansions(term):
                put(related, weight * share * RELATED)
    return query


def query_terms(
    messages: Sequence[Message], *, tool_results: float = TOOL_RESULTS, earlier: float = EARLIER_USER
) -> dict[str, float]:
    """The conversation as a weighted query: term → weight (the largest weight it appears with).

    The latest user message counts ``LATEST_USER``; earlier user messages ``earlier`` (halved for
    each older one); the assistant's words since the latest user message ``ASSISTANT``; the
    first ``_RESULT_CHARS`` of each tool result since then ``tool_results`` (0, the default, leaves
    them out). Each message is read by ``text_query``.
    Only the last ``_LOOKBACK`` user messages are read.
    """
    query: dict[str, float] = {}

    def add(text: str, weight: float) -> None:
        if weight > 0:
            text_query(text, weight, query)

    latest = True
    seen_users = 0
    for message in reversed(messages):
        if message.role == "user":
            add(message.content, LATEST_USER if latest else earlier * 0.5 ** (seen_users - 1))
            latest = False
            seen_users += 1
            if seen_users >= _LOOKBACK:
                break
        elif latest and message.role == "assistant":
            add(message.content, ASSISTANT)
            for call in message.tool_calls:
                add(call.name, ASSISTANT)
        elif latest and message.role == "tool":
            add(message.content[:_RESULT_CHARS], tool_results)
    return query
