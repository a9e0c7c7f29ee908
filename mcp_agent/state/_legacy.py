"""The conversations ``query --session`` kept as JSON files before the state store: moved in once.

Before ``state.url`` existed, ``mcp-agent query --session ID`` wrote ``<state dir>/sessions/ID.json``
(``{"id", "runs", "transcript"}``). ``import_session_files`` copies each such conversation into a
``SessionStore`` (unless the store already has one under that id: the store wins), then renames
the folder to ``sessions.imported``, so the import runs once and the files stay on disk, untouched,
for whoever wants them. A file that cannot be read is left there and named in the log; the folder
is then kept, and the next start tries that file again. What goes into the store has its known
secrets masked, as every transcript the Agent keeps (``loop/_records.kept_transcript``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from .._redact import mask_secrets_in
from ..messages import Message
from .base import SessionStore
from .records import valid_session_id

logger = logging.getLogger(__name__)

IMPORTED_SUFFIX = ".imported"


async def import_session_files(folder: str | os.PathLike[str], sessions: SessionStore) -> int:
    """Copy the JSON conversations in ``folder`` into ``sessions`` once; how many were copied.

    Never raises for a bad file (it is logged and left in place); raises ``StateError`` when the
    store fails (the folder is then left as it was, to try again).
    """
    path = Path(folder)
    if not path.is_dir():
        return 0
    imported, failed = 0, 0
    for file in sorted(path.glob("*.json")):
        session_id = file.stem
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            transcript = tuple(Message.from_dict(mask_secrets_in(m)) for m in data["transcript"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("session file %s cannot be read (%s); left in place", file, exc)
            failed += 1
            continue
        if not valid_session_id(session_id):
            logger.warning("session file %s: %r is not a session id; left in place", file, session_id)
            failed += 1
            continue
        if await sessions.get(session_id) is not None:
            continue  # the store has it already: the store wins
        async with sessions.hold(session_id) as session:
            if session.transcript:
                continue
            await sessions.save(session, transcript)
        imported += 1
    if not failed:
        target = path.with_name(path.name + IMPORTED_SUFFIX)
        try:
            path.rename(target)
        except OSError as exc:  # a second import only re-reads files the store has
            logger.warning("could not rename %s after importing it: %s", path, exc)
    if imported:
        logger.info("imported %d conversation(s) from %s into the state store", imported, path)
    return imported
