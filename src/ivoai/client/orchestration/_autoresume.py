"""Auto-resume after a reset (opt-in, `auto.resume_after_reset = true`): each stalled worker, once.

A worker is *stalled* when a confirmed hard limit of its vendor ended it (its report's limit
verdict). With auto-resume on, workers keep their vendor conversation (`WorkerSpec.persist`), so
the orchestrator records the stalled worker (task, vendor, model, effort, tier, the conversation
ID, the reset time: metadata only) in the session's plan metadata, where `ivoai monitor` shows it
(`waiting_for_reset`, `continued`, `continued_elsewhere`, `gave_up`).

When the reset time passes, the orchestrator's resumer:

1. **checks quota first** with a fresh read of that vendor; still limited (the reset moved, or a
   longer window is exhausted) counts one more window and waits for the new reset, at most
   `auto.resume_windows` windows per session (then `gave_up`); a read that shows the limit is over
   also closes the vendor's launch breaker early;
2. **claims** the worker's idempotency marker, `$XDG_STATE_HOME/ivoai/auto/resume/<session>/
   <worker>.claim`, created with `O_CREAT | O_EXCL` (0600 in 0700): of any number of ivoai
   processes racing for one stalled worker (two orchestrators of one session), exactly one creates
   it; the others record `continued_elsewhere`. A marker is never removed, so no continuation ever
   runs twice, across restarts too;
3. **continues** the worker in its own conversation (`codex exec resume THREAD` /
   `claude -p --resume SESSION`) with a short continuation prompt (the task text is already in
   that conversation: nothing else is resent) as a new worker of the same task.

An orchestrator that starts for a session which already has stalled workers (the client restarted
it) takes them over from the metadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ivoai.client.sessions.records import check_session_id
from ivoai.common.fsio import ensure_private_dir
from ivoai.common.paths import XdgPaths

RESUME_PROMPT = (
    "The usage limit that stopped your previous turn on this task has reset. Continue the task "
    "exactly where you stopped, stay read-only, and finish with the JSON answer asked for at the "
    "start of this conversation."
)
IDLE_CHECK_SECONDS = 60.0  # the resumer re-checks at least this often (a clock jump, a new entry)
STATES = ("waiting_for_reset", "continued", "continued_elsewhere", "gave_up")


@dataclass
class Stalled:
    """One worker a confirmed limit stopped (metadata only)."""

    worker_id: str
    task_id: str
    vendor: str
    model: str
    effort: str | None
    tier: str
    conversation: str
    resets_at: float | None
    state: str = "waiting_for_reset"
    continued_by: str | None = None
    since: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plan-metadata form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Any) -> Stalled | None:
        """Parse a metadata entry (None when malformed)."""
        if not isinstance(doc, dict):
            return None
        try:
            resets = doc.get("resets_at")
            return cls(
                worker_id=str(doc["worker_id"])[:64],
                task_id=str(doc["task_id"])[:64],
                vendor=str(doc["vendor"]) if doc["vendor"] in ("codex", "claude") else "",
                model=str(doc["model"])[:128],
                effort=str(doc["effort"])[:16] if doc.get("effort") else None,
                tier=str(doc["tier"])[:16],
                conversation=str(doc["conversation"])[:128],
                resets_at=float(resets) if isinstance(resets, int | float) else None,
                state=doc["state"] if doc.get("state") in STATES else "waiting_for_reset",
                continued_by=str(doc["continued_by"])[:64] if doc.get("continued_by") else None,
                since=float(doc.get("since") or 0.0),
            )
        except (KeyError, TypeError, ValueError):
            return None


def claim(paths: XdgPaths, session_id: str, worker_id: str) -> bool:
    """Create the worker's idempotency marker; True only for the one process that created it."""
    if not worker_id.replace("_", "").isalnum():
        return False
    session_dir = paths.state / "auto" / "resume" / check_session_id(session_id)
    directory = ensure_private_dir(paths.state, session_dir)
    try:
        fd = os.open(
            directory / f"{worker_id}.claim",
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"pid": os.getpid(), "at": time.time()}, fh)
    return True


class AutoResumer:
    """Waits for resets and continues stalled workers once (a daemon thread of the orchestrator).

    `check(vendor)` returns True when a fresh read shows the vendor is no longer limited (and the
    new reset time otherwise); `cont(entry)` starts the continuation and returns its worker ID.
    """

    def __init__(
        self,
        paths: XdgPaths,
        session_id: str,
        *,
        windows_max: int,
        check: Callable[[str], tuple[bool, float | None]],
        cont: Callable[[Stalled], str],
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.paths = paths
        self.session_id = session_id
        self.windows_max = windows_max
        self.windows_used = 0
        self.check = check
        self.cont = cont
        self.on_change = on_change
        self.clock = clock
        self.entries: dict[str, Stalled] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, entry: Stalled) -> None:
        """Remember a stalled worker (and start waiting for its reset)."""
        with self._lock:
            if entry.worker_id in self.entries:
                return
            self.entries[entry.worker_id] = entry
        self._ensure_thread()
        self._wake.set()

    def metadata(self) -> dict[str, Any]:
        """What the plan metadata (and `monitor`) shows."""
        with self._lock:
            return {
                "windows_used": self.windows_used,
                "windows_max": self.windows_max,
                "workers": [e.to_dict() for e in self.entries.values()],
            }

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ivoai-autoresume", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop waiting (pending entries stay in the metadata for the next orchestrator)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)

    def _next_wait(self) -> float:
        with self._lock:
            waiting = [e.resets_at for e in self.entries.values() if e.state == "waiting_for_reset"]
        if not waiting:
            return IDLE_CHECK_SECONDS
        known = [t for t in waiting if t is not None]
        soonest = min(known) if known else self.clock() + IDLE_CHECK_SECONDS
        return max(0.0, min(IDLE_CHECK_SECONDS, soonest - self.clock()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._next_wait())
            self._wake.clear()
            if self._stop.is_set():
                return
            with contextlib.suppress(Exception):  # a failed round is retried at the next wake-up
                self.tick()

    def tick(self, now: float | None = None) -> list[str]:
        """Handle every stalled worker whose reset passed; the IDs of the continuations started."""
        now = self.clock() if now is None else now
        started: list[str] = []
        with self._lock:
            due = [
                e
                for e in self.entries.values()
                if e.state == "waiting_for_reset" and (e.resets_at is None or e.resets_at <= now)
            ]
            vendors = sorted({e.vendor for e in due})
        for vendor in vendors:
            free, new_reset = self.check(vendor)
            with self._lock:
                mine = [e for e in due if e.vendor == vendor]
                if not free:
                    self.windows_used += 1
                    for e in mine:
                        if self.windows_used >= self.windows_max:
                            e.state = "gave_up"
                        else:
                            e.resets_at = new_reset if new_reset is not None else now + IDLE_CHECK_SECONDS
                    continue
            for entry in mine:
                if not claim(self.paths, self.session_id, entry.worker_id):
                    entry.state = "continued_elsewhere"
                    continue
                try:
                    entry.continued_by = self.cont(entry)
                except Exception:  # noqa: BLE001 - claimed: it is never tried again, say so
                    entry.state = "gave_up"
                    continue
                entry.state = "continued"
                started.append(entry.continued_by)
        if due:
            self.on_change()
        return started
