"""The tool router: which tools each round offers when there are too many to offer them all.

Small models read every tool definition in every round: with the 50-odd tools of six ordinary
MCP servers that is thousands of prompt tokens before the question, and they choose worse among
many tools. When the tools exceed ``llm.toolBudget``, each round offers

- the best-ranked tools for the conversation so far (``rank``),
- the tools pinned in config (``llm.pinnedTools``, globs on exposed names),
- the tools already used in this run, and those ``find_tools`` named,
- and ``find_tools(query)``, with which the model pulls in any other tool: its result lists the
  matching tools with one-line descriptions, and they are offered from the next round on.

A call to a real tool that is not offered this round still runs (the model may know it from
``find_tools``, from the unknown-tool list or from an earlier turn); it then counts as used.

The ranker is BM25F (Robertson's BM25 over weighted fields), written here rather than taken from
a library: it is 40 lines, needs no numpy (``rank_bm25`` does), and the parts that matter for tool
names are ours anyway: splitting ``server__getCurrentTime`` into words, light stemming, field
weights and a short table of synonyms. Fields, by weight: the exposed name's words (server and
tool), the title, the description, parameter names and parameter descriptions. The query is the
conversation: the latest user message counts most, earlier user messages and the assistant's
latest words less; tool results can be weighted in, but are not by default (``query_terms``). The index is built once per tool
list and kept while the list is the same (``ToolRouter.index``). Everything here is pure.

The default rule (``toolBudget: "auto"``): routing is on when the model server is a local one
(llama.cpp, llama-cpp-python, Ollama, LM Studio, Lemonade) or the model's context window is known
to be at most 16,384 tokens; then at most ``AUTO_BUDGET`` tools are offered (``find_tools``
included, pinned and used tools on top). Hosted models and large windows get every tool.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from .._types import JSONObject
from ..messages import Message, ToolResult, ToolSpec
from .base import ToolSource

__all__ = [
    "AUTO_BUDGET",
    "FIND_TOOLS",
    "LOCAL_KINDS",
    "SMALL_WINDOW",
    "Budget",
    "RoutedTools",
    "ToolIndex",
    "ToolRouter",
    "find_tools_spec",
    "query_terms",
    "terms",
]

FIND_TOOLS = "find_tools"
AUTO_BUDGET = 9
"""Tools per round under ``toolBudget: "auto"`` when routing is on: 8 ranked and ``find_tools``."""
SMALL_WINDOW = 16_384
"""A context window of at most this many tokens turns routing on under ``auto``."""
LOCAL_KINDS = frozenset({"llamacpp", "llama-cpp-python", "ollama", "lmstudio", "lemonade"})
"""Model servers that run on the user's machine: routing is on for them under ``auto``."""
MIN_RANKED = 3
"""However small a share budget, a round offers at least this many ranked tools."""
FOUND_LISTED = 6
"""How many tools one ``find_tools`` answer lists."""

# --------------------------------------------------------------------------------------------
# words

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "a an and are as at be been but by can could do does did for from get got has have how i if in "
    "into is it its let me my of on or our please show tell that the their them then there these "
    "this those to us was we what when where which who why will with would you your give "
    "want need some any all about using use "
    # quantifiers and filler that name no task ("everything" is also a server's name)
    "every each everything anything something nothing stuff thing things just also "
    # what every tool is, and a name's introduction: they say nothing about which tool
    "tool tools call called named"
)
_STOP = frozenset(_STOP_WORDS.split())

_RELATED_WORDS = """
file: document documents
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
allowed access: permission permissions permitted accessible allow
compress gzip: zip archive
url web fetch: download scrape crawl browse visit website webpage site link online internet http https
diff: compare comparison difference differ delta
log: history recent latest last
status: uncommitted dirty untracked pending modified
branch: checkout
reset: undo revert unstage
git repository: repo
commit revision: sha hash tag head
time: clock hour hours minute minutes oclock date day today tonight morning evening
current: now currently
timezone time: tz utc gmt zone
convert: translate
memory knowledge: remember recall memorize forget know knew
observation: fact facts note notes detail
entity: person people contact someone
relation: relationship
process: program programs app application task pid
cpu process: processor load busy
memory: ram swap
disk: storage space drive partition volume mount
port listen: listening socket bound bind service services connection connections tcp udp
environment variable: env envvar envvars var vars
sum add: plus total calculate compute addition
echo: repeat parrot
"""
"""Everyday words and the words tool descriptions use for the same thing, one topic a line:
``tool words: everyday words``. A query word adds the tool words at ``RELATED`` weight. Keyed by
stem, so ``remembered`` finds what ``remember`` does. General tool vocabulary, not this eval's."""


def _stem(word: str) -> str:
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


def _related(table: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for line in table.strip().splitlines():
        targets, _, everyday = line.partition(":")
        for word in everyday.split():
            out.setdefault(_stem(word), []).extend(_stem(t) for t in targets.split() if _stem(t) != _stem(word))
    return {key: tuple(dict.fromkeys(value)) for key, value in out.items()}


_SYNONYMS: Mapping[str, tuple[str, ...]] = _related(_RELATED_WORDS)


def words(text: str) -> list[str]:
    """The lower-case words of ``text``, split at ``__``, ``_``, ``-``, camelCase and punctuation."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\blocalhost:\d+\S*", re.IGNORECASE)
_DOMAIN = re.compile(
    r"\b(?:www\.)?(?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|app|edu|gov|info|co|uk|de|fr|jp|eu|ca|au|nl|ch)\b(?:/\S*)?",
    re.IGNORECASE,
)
_ZONE = re.compile(r"\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)/[A-Za-z_]+")
_CLOCK = re.compile(r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|\b\d{1,2}:\d{2}\b", re.IGNORECASE)
_REVISION = re.compile(r"\bHEAD(?:[~^]\d*)*(?![\w])|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
_SUM = re.compile(r"\d\s*\+\s*\d")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b")
_PATH = re.compile(r"(?:^|\s)(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*|\b[\w-]+\.[a-z][a-z0-9]{0,4}\b", re.IGNORECASE)
_NOT_FILE = re.compile(r"^\d+(\.\d+)*$|^(e\.g|i\.e|etc)\.?$", re.IGNORECASE)
_MEDIA = {
    "image": "png jpg jpeg gif webp bmp svg ico heic tif tiff",
    "audio": "mp3 wav ogg flac m4a aac opus",
    "video": "mp4 mov avi mkv webm",
}
_MEDIA_KIND = {ext: kind for kind, exts in _MEDIA.items() for ext in exts.split()}


def shapes(text: str) -> list[str]:
    """Words for what the text holds besides words: a URL or a web address says ``url``; a file
    path or a file name with an extension says ``file`` and ``path`` (an image, audio or video
    file also ``media`` and its kind); an IANA zone ``timezone``; a clock time ``time``; a git
    revision (``HEAD~1``, a hex hash) ``commit``; ``2 + 3`` says ``sum``; an email address ``email``."""
    out: list[str] = []
    if _URL.search(text) or _DOMAIN.search(text):
        out.append("url")
    rest = _EMAIL.sub(" ", _DOMAIN.sub(" ", _URL.sub(" ", text)))
    if _ZONE.search(rest):
        out += ["timezone", "time"]
        rest = _ZONE.sub(" ", rest)
    if _CLOCK.search(rest):
        out.append("time")
    if _REVISION.search(rest):
        out.append("commit")
    if _SUM.search(rest):
        out.append("sum")
    if _EMAIL.search(text):
        out.append("email")
    files = [m.group().strip() for m in _PATH.finditer(rest) if not _NOT_FILE.match(m.group().strip())]
    if files:
        out += ["file", "path"]
    kinds = {_MEDIA_KIND.get(name.rpartition(".")[2].lower()) for name in files if "." in name}
    for kind in sorted(k for k in kinds if k):
        out += [kind, "media"]
    return list(dict.fromkeys(out))


def terms(text: str, *, expand: bool = False) -> list[str]:
    """The index terms of ``text``: its words less stop words, stemmed; with ``expand`` (queries),
    also the words its shapes suggest (``shapes``), each pair of adjacent words joined (``check
    out`` is ``checkout``) and the related words of each (``expansions``)."""
    out: list[str] = [_stem(word) for word in shapes(text)] if expand else []
    found = words(text)
    for word in found:
        if word not in _STOP:
            out.append(_stem(word))
    if expand:
        out += [_stem(a + b) for a, b in pairwise(found) if a not in _STOP and b not in _STOP]
    return out


def expansions(term: str) -> tuple[str, ...]:
    """The related tool words of a query ``term`` (a stem): ``folder`` → ``directory``."""
    return _SYNONYMS.get(term, ())


# --------------------------------------------------------------------------------------------
# the index

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


# --------------------------------------------------------------------------------------------
# the query

LATEST_USER = 1.0
EARLIER_USER = 0.4
ASSISTANT = 0.3
TOOL_RESULTS = 0.0
"""Tool results are left out of the query by default: measured on the labelled set with a
2,000-character unrelated result after each question, recall@8 is 0.983 at 0 and 0.975 at 0.1
(``bench/bench_router.py``), and the set has no question that a result would help."""
_RESULT_CHARS = 2_000
_LOOKBACK = 12


RELATED = 0.7
"""A related word (``expansions``) counts this share of the word that suggested it."""
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


# --------------------------------------------------------------------------------------------
# the budget and the router


@dataclass(frozen=True)
class Budget:
    """How many tools one round may offer: a ``count`` (``find_tools`` included), or a ``share``
    of ``window`` tokens that the offered definitions may take."""

    count: int | None = None
    share: float | None = None
    window: int | None = None

    def over(self, tools: Sequence[ToolSpec]) -> bool:
        """Whether offering all of ``tools`` would break this budget."""
        if self.count is not None:
            return len(tools) > self.count
        return definition_tokens(tools) > self._room()

    def _room(self) -> float:
        return (self.share or 0.0) * (self.window or 0)


def definition_tokens(tools: Iterable[ToolSpec]) -> int:
    """About how many prompt tokens ``tools``' definitions take: their JSON as sent, at four
    characters a token."""
    return sum(_definition_chars(spec) for spec in tools) // 4


def _definition_chars(spec: ToolSpec) -> int:
    return len(
        json.dumps(
            {"name": spec.name, "description": spec.description, "parameters": spec.schema_for("openai")},
            ensure_ascii=False,
        )
    )


def find_tools_spec(name: str = FIND_TOOLS) -> ToolSpec:
    """The ``find_tools`` tool as offered to the model."""
    return ToolSpec(
        name=name,
        description=(
            "Search all available tools by keywords when none of the tools offered fits the task. "
            "Lists matching tools with one-line descriptions; they can be called from the next turn on."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, in a few words."}
            },
            "required": ["query"],
        },
        server="router",
        mcp_name=FIND_TOOLS,
        annotations={"readOnlyHint": True},
    )


TokenBudget = int | float | Literal["auto"]


class ToolRouter:
    """The router of one agent: its budget rule, its pinned globs and the cached index.

    Args:
        budget: ``llm.toolBudget``: ``"auto"``, a count of tools per round (0: never route), or a
            share (0..1) of the model's context window for the offered definitions.
        pinned: ``llm.pinnedTools``: globs on exposed names of tools offered every round.
    """

    def __init__(self, budget: TokenBudget = "auto", pinned: Sequence[str] = ()) -> None:
        self.budget = budget
        self.pinned = tuple(pinned)
        self._tools: tuple[ToolSpec, ...] | None = None
        self._index: ToolIndex | None = None

    def budget_for(self, *, kind: str = "unknown", context_window: int | None = None) -> Budget | None:
        """The budget for a model server of ``kind`` with ``context_window``; None: no routing."""
        if self.budget == "auto":
            small = context_window is not None and context_window <= SMALL_WINDOW
            return Budget(count=AUTO_BUDGET) if kind in LOCAL_KINDS or small else None
        if isinstance(self.budget, int):
            return Budget(count=self.budget) if self.budget > 0 else None
        if context_window:  # a share
            return Budget(share=self.budget, window=context_window)
        return Budget(count=AUTO_BUDGET)  # a share of an unknown window: the auto count meanwhile

    def index(self, tools: Sequence[ToolSpec]) -> ToolIndex:
        """The index of ``tools``: built when the list changed, else the cached one."""
        key = tuple(tools)
        if self._index is None or self._tools != key:  # the same objects compare by identity first
            self._tools, self._index = key, ToolIndex.build(key)
        return self._index

    def is_pinned(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, glob) for glob in self.pinned)

    def for_run(self, source: ToolSource, budget: Budget) -> RoutedTools:
        """``source`` (a ToolSource) routed for one run under ``budget``."""
        return RoutedTools(source, self, budget)


@dataclass
class RoutedTools:
    """A ToolSource for one run: the source's tools plus ``find_tools`` while routing is on.

    ``select`` picks what one round offers; ``call_tool`` answers ``find_tools`` itself and
    passes every other call on. ``found`` holds the tools ``find_tools`` has named.
    """

    source: ToolSource
    router: ToolRouter
    budget: Budget
    found: set[str] = field(default_factory=set)

    @property
    def find_name(self) -> str:
        names = {spec.name for spec in self.source.list_tools()}
        return FIND_TOOLS if FIND_TOOLS not in names else f"router__{FIND_TOOLS}"

    def list_tools(self) -> Sequence[ToolSpec]:
        tools = list(self.source.list_tools())
        if not self.budget.over(tools):
            return tools
        return [*tools, find_tools_spec(self.find_name)]

    def select(
        self, offered: Sequence[ToolSpec], messages: Sequence[Message], used: Iterable[str] = ()
    ) -> list[ToolSpec]:
        """What one round offers, out of ``offered`` (this run's tools less the withdrawn ones), in
        their order: everything while the budget holds, else the best-ranked tools for
        ``messages`` plus the pinned, ``used`` and found ones, ``find_tools``, and the loop's
        own tools (``read_result``: not the servers', so never ranked out)."""
        finder = [spec for spec in offered if spec.name == self.find_name and spec.server == "router"]
        tools = [spec for spec in offered if spec not in finder]
        if not self.budget.over(tools):  # (routing stays on when the ledger withdrew find_tools)
            return list(tools)
        keep = set(used) | self.found
        listed = self.source.list_tools()
        known = {spec.name for spec in listed}  # the loop's own tools (read_result) are always offered
        chosen = {
            spec.name
            for spec in tools
            if spec.name in keep or self.router.is_pinned(spec.name) or spec.name not in known
        }
        index = self.router.index(listed)
        ranked = [name for name in index.rank(query_terms(messages)) if name not in chosen]
        by_name = {spec.name: spec for spec in tools}
        ranked = [name for name in ranked if name in by_name]
        if self.budget.count is not None:
            chosen.update(ranked[: max(self.budget.count - 1 - len(chosen), MIN_RANKED)])
        else:
            room = self.budget._room() - definition_tokens([*finder, *(by_name[n] for n in chosen)])
            for n, name in enumerate(ranked):
                cost = _definition_chars(by_name[name]) // 4
                if n >= MIN_RANKED and cost > room:
                    break
                chosen.add(name)
                room -= cost
        return [spec for spec in offered if spec.name in chosen or spec in finder]

    async def call_tool(self, name: str, arguments: JSONObject, *, timeout: float | None = None) -> ToolResult:
        if name != self.find_name or any(spec.name == name for spec in self.source.list_tools()):
            return await self.source.call_tool(name, arguments, timeout=timeout)
        return self.find(str(arguments.get("query", "")))

    def find(self, query: str) -> ToolResult:
        """``find_tools``' answer: the tools matching ``query``, now offered from the next round."""
        weights = text_query(query)
        if not weights:
            return ToolResult("error: give find_tools a few words saying what the tool should do", is_error=True)
        tools = {spec.name: spec for spec in self.source.list_tools()}
        names = [n for n in self.router.index(list(tools.values())).matches(weights) if n in tools][:FOUND_LISTED]
        if not names:
            return ToolResult(f"no results: no tool matches {query!r}; try other words")
        self.found.update(names)
        lines = [f"- {name}: {_one_line(tools[name].description)}" for name in names]
        head = f"Tools matching {query!r} (call them directly; they are offered from your next turn on):"
        return ToolResult("\n".join([head, *lines]))


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"
