"""Publishing a session record document, import-light (the launcher writes records while its client runs).

The record's shape is `records.SessionRecord`; this module only writes the document it becomes, as
`$XDG_STATE_HOME/ivoai/sessions/<id>.json` (0600 in 0700, atomic rename, no fsync: see
`common.lightio`).
"""

from __future__ import annotations

import os

from ivoai.client.sessions.ids import is_session_id
from ivoai.common.lightio import json_dumps, open_private_dirs, write_atomic

SESSIONS_DIR = "sessions"


def publish_record(state_root: str, doc: dict[str, object]) -> None:
    """Write a session record document as `<state>/sessions/<id>.json` (private, atomic).

    Raises:
        UnsafePathError: an unsafe directory on the way; ValueError: an ID ivoai could not have issued.
    """
    sid = doc.get("id")
    if not is_session_id(sid):
        raise ValueError("invalid session ID")
    fd = open_private_dirs(state_root, SESSIONS_DIR)
    try:
        write_atomic(fd, f"{sid}.json", (json_dumps(doc) + "\n").encode("utf-8"))
    finally:
        os.close(fd)
