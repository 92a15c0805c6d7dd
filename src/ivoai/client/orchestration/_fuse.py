"""The user-wide worker launch fuse, shared by every ivoai process (seed 002; AUTO.md users' asks).

A peer drained a whole plan in minutes with a daemon per worktree; this fuse makes that
impossible for ivoai workers whatever number of sessions run. One file,
`$XDG_STATE_HOME/ivoai/quota/fuse.json` (0600, changed only under the flock `quota/.fuse.lock`,
replaced atomically), holds:

- `active`: every running worker launch of this user (owner = the ivoai process that launched it,
  by PID and kernel start marker; the worker's own PID and marker once spawned);
- `launches`: launch times of the last hour;
- `breakers`: per vendor, a stop until a time, set after a *confirmed* hard limit (60 minutes).

A launch is refused (`FuseOpenError`, with the time it may succeed) when the vendor's breaker is
open, `AUTO_FUSE_CONCURRENT_MAX` launches are active, or `AUTO_FUSE_LAUNCHES_PER_HOUR` happened in
the last hour. Before deciding, entries whose owner died are removed and their workers, if still
alive with the recorded start marker, are reaped (TERM, then KILL, to their whole process group):
orphans never outlive the next start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from ivoai.client.orchestration._errors import FuseOpenError
from ivoai.client.sessions.procinfo import is_same_process, start_marker
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none
from ivoai.common.limits import (
    AUTO_FUSE_BREAKER_SECONDS,
    AUTO_FUSE_CONCURRENT_MAX,
    AUTO_FUSE_LAUNCHES_PER_HOUR,
    AUTO_WORKER_TERM_GRACE_SECONDS,
    JSON_STATE_MAX_BYTES,
)
from ivoai.common.paths import XdgPaths, xdg_paths

FUSE_SCHEMA = 1
HOUR_SECONDS = 3600.0


@dataclass(frozen=True)
class FuseLimits:
    """The fuse's three limits (tests lower them; the defaults are the documented ones)."""

    concurrent: int = AUTO_FUSE_CONCURRENT_MAX
    per_hour: int = AUTO_FUSE_LAUNCHES_PER_HOUR
    breaker_seconds: float = AUTO_FUSE_BREAKER_SECONDS


def reap_group(pid: int, marker: str | None, grace: float = AUTO_WORKER_TERM_GRACE_SECONDS) -> bool:
    """TERM, then KILL, the process group led by `pid` if `pid` still has `marker`; True if signalled.

    Used for processes this process did not spawn (orphans of a dead owner): it cannot wait for
    them, so it watches the leader's identity instead.
    """
    if not is_same_process(pid, marker):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and is_same_process(pid, marker):
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return True


class LaunchFuse:
    """The shared fuse file and its operations (each one locked, read-modify-write, atomic)."""

    def __init__(self, paths: XdgPaths | None = None, limits: FuseLimits | None = None) -> None:
        self.paths = paths or xdg_paths()
        self.root = self.paths.state
        self.file = self.root / "quota" / "fuse.json"
        self.lock = self.root / "quota" / ".fuse.lock"
        self.limits = limits or FuseLimits()
        self.owner = (os.getpid(), start_marker(os.getpid()))

    def _load(self) -> dict[str, Any]:
        raw = read_private_file_or_none(self.root, self.file, JSON_STATE_MAX_BYTES)
        try:
            doc = json.loads(raw) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        doc.setdefault("active", [])
        doc.setdefault("launches", [])
        doc.setdefault("breakers", {})
        return doc

    def _store(self, doc: dict[str, Any]) -> None:
        doc["schema"] = FUSE_SCHEMA
        atomic_write(self.root, self.file, (json.dumps(doc, sort_keys=True) + "\n").encode("utf-8"))

    def _prune(self, doc: dict[str, Any], now: float) -> list[tuple[int, str | None]]:
        """Drop old launches, expired breakers and dead owners' entries; return orphans to reap."""
        doc["launches"] = [
            t for t in doc["launches"] if isinstance(t, int | float) and now - t < HOUR_SECONDS
        ]
        doc["breakers"] = {
            v: b for v, b in doc["breakers"].items() if isinstance(b, dict) and float(b.get("until", 0)) > now
        }
        alive, orphans = [], []
        for entry in doc["active"]:
            if not isinstance(entry, dict):
                continue
            if is_same_process(int(entry.get("owner_pid", 0)), entry.get("owner_start")):
                alive.append(entry)
            elif isinstance(entry.get("pid"), int):
                orphans.append((int(entry["pid"]), entry.get("start")))
        doc["active"] = alive
        return orphans

    def acquire(
        self, vendor: str, *, session_id: str, worker_id: str, now: float | None = None
    ) -> FuseTicket:
        """Reserve one launch, or refuse.

        Raises:
            FuseOpenError: breaker open, too many running launches, or too many in the last hour.
        """
        now = time.time() if now is None else now
        with file_lock(self.root, self.lock):
            doc = self._load()
            orphans = self._prune(doc, now)
            breaker = doc["breakers"].get(vendor)
            refusal: FuseOpenError | None = None
            if breaker is not None:
                until = float(breaker["until"])
                when = time.strftime("%H:%M", time.localtime(until))
                refusal = FuseOpenError(
                    f"{vendor} launches are stopped until {when} after a confirmed limit "
                    f"({str(breaker.get('reason', ''))[:120]})",
                    retry_at=until,
                )
            elif len(doc["active"]) >= self.limits.concurrent:
                refusal = FuseOpenError(
                    f"{len(doc['active'])} worker launches already run for this user (limit "
                    f"{self.limits.concurrent} across all ivoai sessions); wait for one to finish"
                )
            elif len(doc["launches"]) >= self.limits.per_hour:
                oldest = min(doc["launches"])
                refusal = FuseOpenError(
                    f"{len(doc['launches'])} worker launches in the last hour "
                    f"(limit {self.limits.per_hour}); a runaway loop is stopped here",
                    retry_at=oldest + HOUR_SECONDS,
                )
            else:
                doc["active"].append(
                    {
                        "id": worker_id,
                        "vendor": vendor,
                        "session": session_id,
                        "owner_pid": self.owner[0],
                        "owner_start": self.owner[1],
                        "pid": None,
                        "start": None,
                        "since": now,
                    }
                )
                doc["launches"].append(now)
            self._store(doc)
        for pid, marker in orphans:
            reap_group(pid, marker)
        if refusal is not None:
            raise refusal
        return FuseTicket(self, worker_id)

    def _update(self, worker_id: str, change: Any) -> None:
        with file_lock(self.root, self.lock):
            doc = self._load()
            doc["active"] = [
                e for e in (change(e) if e.get("id") == worker_id else e for e in doc["active"]) if e
            ]
            self._store(doc)

    def trip(
        self, vendor: str, reason: str, *, until: float | None = None, now: float | None = None
    ) -> float:
        """Open the vendor's breaker (after a confirmed hard limit); return until when."""
        now = time.time() if now is None else now
        until = max(until or 0.0, now + self.limits.breaker_seconds)
        with file_lock(self.root, self.lock):
            doc = self._load()
            doc["breakers"][vendor] = {"until": until, "reason": reason[:240], "since": now}
            self._store(doc)
        return until

    def clear(self, vendor: str) -> bool:
        """Close the vendor's breaker early: a fresh quota read showed the limit is over (issue 16)."""
        with file_lock(self.root, self.lock):
            doc = self._load()
            had = doc["breakers"].pop(vendor, None) is not None
            if had:
                self._store(doc)
        return had

    def status(self, now: float | None = None) -> dict[str, Any]:
        """Active launches, launches in the last hour and open breakers (for `monitor`)."""
        now = time.time() if now is None else now
        try:
            doc = self._load()
        except OSError:
            doc = {"active": [], "launches": [], "breakers": {}}
        self._prune(doc, now)
        return {
            "active": len(doc["active"]),
            "active_limit": self.limits.concurrent,
            "launches_last_hour": len(doc["launches"]),
            "launches_per_hour_limit": self.limits.per_hour,
            "breakers": {
                v: {"until": b["until"], "reason": b.get("reason", "")} for v, b in doc["breakers"].items()
            },
        }


class FuseTicket:
    """One reserved launch: `bind` the spawned PID, `release` when the worker ended."""

    def __init__(self, fuse: LaunchFuse, worker_id: str) -> None:
        self.fuse = fuse
        self.worker_id = worker_id
        self.released = False

    def bind(self, pid: int) -> None:
        """Record the worker's PID and start marker (so a later start can reap it as an orphan)."""
        marker = start_marker(pid)
        self.fuse._update(self.worker_id, lambda e: {**e, "pid": pid, "start": marker})

    def release(self) -> None:
        """Free the slot; idempotent."""
        if not self.released:
            self.released = True
            self.fuse._update(self.worker_id, lambda e: None)
