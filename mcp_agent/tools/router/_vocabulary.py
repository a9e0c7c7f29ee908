"""The ranker's word lists (data only): the stop words, and the everyday words for what tool
descriptions say otherwise. ``_text`` reads them; edit them here."""

from __future__ import annotations

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
the left (at ``_query.RELATED`` of its own weight). Read by stem, so one form of each word is
enough (``remember`` also finds ``remembered``). General tool vocabulary: a word belongs here when
it is how people say what tool descriptions commonly say, whichever tools a list holds."""
