"""Stop a launched session: signal its ivoai process only when PID *and* start marker match."""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass

from ivoai.client.sessions.errors import InvalidSessionIdError, SessionNotRunningError, SessionRecordError
from ivoai.client.sessions.procinfo import is_same_process, is_zombie
from ivoai.client.sessions.records import SESSION_ID_PREFIX, SessionStore, check_session_id, now
from ivoai.common.limits import TERM_GRACE_SECONDS

# The launcher ends its client within TERM_GRACE_SECONDS (TERM -> KILL), then tears down the
# proxy (another grace period at most) and writes the final record: wait a little longer than both.
STOP_WAIT_SECONDS = 2 * TERM_GRACE_SECONDS + 2.0


@dataclass(frozen=True)
class StopResult:
    """What `session stop` did."""

    id: str
    signalled: bool
    stopped: bool  # the ivoai process is gone within the wait


def stop_session(
    store: SessionStore, session_id: str, *, wait_seconds: float = STOP_WAIT_SECONDS
) -> StopResult:
    """Send SIGTERM to the session's ivoai process, which ends the client and tears down its helpers.

    Raises:
        SessionNotFoundError: no such record.
        SessionNotRunningError: the session ended, or its PID is gone or now belongs to another
            process (start marker mismatch); nothing is signalled.
    """
    record = store.load(session_id)
    if record.state == "ended":
        raise SessionNotRunningError(f"session {session_id} already ended; nothing was signalled")
    if not is_same_process(record.pid, record.pid_start):
        raise SessionNotRunningError(
            f"session {session_id} is not running (its process is gone or the PID now belongs to another "
            "process); nothing was signalled"
        )
    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        return StopResult(session_id, signalled=False, stopped=True)
    deadline = time.monotonic() + wait_seconds
    delay = 0.01
    while time.monotonic() < deadline:
        if not is_same_process(record.pid, record.pid_start) or is_zombie(record.pid):
            return StopResult(session_id, signalled=True, stopped=True)
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return StopResult(session_id, signalled=True, stopped=False)


def sweep_stale(store: SessionStore, *, keep: str | None = None) -> list[str]:
    """Clean up after `lost` sessions (their ivoai process died without tearing down); return notes.

    For each lost record: stop its compression proxy if that process still has the recorded start
    marker (TERM to its own process group), remove its runtime directory, and mark it ended with
    reason `lost`. Runtime directories without any record are removed too. `keep` (the calling
    session) is never touched.
    """
    notes: list[str] = []
    run = store.root / "run"
    records, _ = store.list()
    known = {r.id for r in records}
    for record in records:
        if record.id == keep or record.status() != "lost":
            continue
        if record.helper_pid and is_same_process(record.helper_pid, record.helper_start):
            try:
                os.killpg(record.helper_pid, signal.SIGTERM)
                notes.append(f"stopped the orphaned compression proxy of lost session {record.id}")
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(run / record.id, ignore_errors=True)
        record.state = "ended"
        record.end_reason = "lost"
        record.ended_at = now()
        try:
            store.write(record)
        except (SessionRecordError, OSError):
            continue
    try:
        entries = os.listdir(run)
    except FileNotFoundError:
        entries = []
    for name in entries:
        if name == keep or name in known or not name.startswith(SESSION_ID_PREFIX):
            continue
        try:
            check_session_id(name)
        except InvalidSessionIdError:
            continue  # not a name ivoai creates: left alone, never deleted by assumption
        shutil.rmtree(run / name, ignore_errors=True)
    return notes
