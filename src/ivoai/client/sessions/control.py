"""Stop a launched session: signal its ivoai process only when PID *and* start marker match."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from ivoai.client.sessions.errors import SessionNotRunningError
from ivoai.client.sessions.procinfo import is_same_process, is_zombie
from ivoai.client.sessions.records import SessionStore
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
