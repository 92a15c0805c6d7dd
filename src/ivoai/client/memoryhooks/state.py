"""Flusher bookkeeping in `$XDG_STATE_HOME/ivoai/memoryhooks/state.json` (import-light: `os`, `json`).

Written only by the process holding the flush lock (one flusher at a time), read by hook processes
(the backoff) and by `ivoai memory hooks status`. Never a credential or event content: counts, times,
destination names and one-line error messages (already redacted).

Fields: `schema`, `sent_events`, `duplicate_events`, `rejected_events`, `corrupt_lines`,
`last_sent_at` (any client) and `clients.<agent>.last_sent_at`, `last_success_at`, `last_attempt_at`,
`last_error` (`{"message", "code", "destination", "at"}` or null), `last_rejection`, `failures`
(consecutive), `next_attempt_at` (hook processes start no flusher before it).
"""

from __future__ import annotations

import json
import os
import time

from ivoai.client.memoryhooks.locations import HOOKS_DIR, STATE_FILE
from ivoai.client.memoryhooks.spool import read_json_object
from ivoai.common.lightio import open_private_dirs, write_atomic
from ivoai.common.limits import MEMORY_HOOK_FLUSH_BACKOFF_MAX_SECONDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STATE_SCHEMA = 1
STATE_MAX_BYTES = 256 * 1024


def load(state_root: str) -> dict[str, Any]:
    """The state document (empty when missing or unreadable: bookkeeping never blocks a hook)."""
    try:
        fd = os.open(
            os.path.join(state_root, HOOKS_DIR, STATE_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except OSError:
        return {}
    return read_json_object(fd, STATE_MAX_BYTES)


def save(state_root: str, doc: dict[str, Any]) -> None:
    """Publish the state atomically (private file in the 0700 hooks directory)."""
    doc["schema"] = STATE_SCHEMA
    doc["updated_at"] = time.time()
    fd = open_private_dirs(state_root, HOOKS_DIR)
    try:
        write_atomic(fd, STATE_FILE, json.dumps(doc, sort_keys=True, indent=1).encode())
    finally:
        os.close(fd)


def flush_due(state_root: str, now: float | None = None) -> bool:
    """False while a failed flush's backoff is running."""
    due = load(state_root).get("next_attempt_at")
    return not isinstance(due, int | float) or (time.time() if now is None else now) >= due


def backoff_seconds(failures: int) -> float:
    """1, 2, 4 … seconds after consecutive failures, capped at MEMORY_HOOK_FLUSH_BACKOFF_MAX_SECONDS."""
    return float(min(MEMORY_HOOK_FLUSH_BACKOFF_MAX_SECONDS, 2 ** max(0, failures - 1)))
