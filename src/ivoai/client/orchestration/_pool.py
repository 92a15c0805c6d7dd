"""The session's worker pool: bounded concurrency (default 2, hard cap 3), a FIFO queue, wait, cancel.

Each of `concurrency` dispatcher threads takes the next queued worker, reserves a launch in the
user-wide fuse (waiting while the user's concurrent-launch limit is reached; failing at once on an
open breaker or the hourly limit), runs it, and releases the slot. Finished workers and their
reports stay in the pool for the session's whole life: nothing is evicted. `wait` blocks on a
condition variable (no polling) for any or all of the given workers, bounded by its timeout.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ivoai.client.orchestration._errors import FuseOpenError, OrchestrationUsageError, WorkerNotFoundError
from ivoai.client.orchestration._fuse import LaunchFuse
from ivoai.client.orchestration._worker import WorkerControl, WorkerIO, WorkerReport, run_worker
from ivoai.client.orchestration._worker_spec import WorkerSpec
from ivoai.client.workingcontext import StateDelta, WorkerResult, WorkerStatus
from ivoai.common.errors import IvoaiError
from ivoai.common.limits import AUTO_WORKERS_DEFAULT, AUTO_WORKERS_MAX

EntryState = Literal["queued", "running", "succeeded", "failed", "cancelled", "timed_out", "partial"]
FUSE_RETRY_SECONDS = 1.0  # how often a queued worker re-asks a full user-wide fuse
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "timed_out", "partial"})

_STATES: dict[WorkerStatus, EntryState] = {
    WorkerStatus.SUCCEEDED: "succeeded",
    WorkerStatus.FAILED: "failed",
    WorkerStatus.CANCELLED: "cancelled",
    WorkerStatus.TIMED_OUT: "timed_out",
    WorkerStatus.PARTIAL: "partial",
}

Runner = Callable[[WorkerSpec, WorkerIO, WorkerControl], WorkerReport]


@dataclass
class WorkerEntry:
    """One worker of the session: its spec, state, timing and (once finished) report."""

    spec: WorkerSpec
    state: EntryState = "queued"
    control: WorkerControl = field(default_factory=WorkerControl)
    report: WorkerReport | None = None
    queued_at: float = field(default_factory=time.time)
    started_at: float | None = None
    ended_at: float | None = None

    @property
    def id(self) -> str:
        """The worker ID (`wrk_…`)."""
        return self.spec.worker_id

    @property
    def done(self) -> bool:
        """Finished in any way."""
        return self.state in TERMINAL

    def summary(self) -> dict[str, object]:
        """Metadata only (no task text, no output): what `wait` and monitor show."""
        return {
            "worker_id": self.id,
            "task_id": self.spec.task_id,
            "state": self.state,
            "vendor": self.spec.vendor,
            "model": self.spec.model,
            "effort": self.spec.effort,
            "tier": self.spec.tier.label,
            "pid": self.control.pid,
            "pid_start": self.control.pid_start,  # issue 16: `session recover` checks it still runs
            "queued_at": self.queued_at,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_seconds": None
            if self.started_at is None
            else round((self.ended_at or time.time()) - self.started_at, 3),
        }


def _failed_report(spec: WorkerSpec, status: WorkerStatus, message: str) -> WorkerReport:
    result = WorkerResult(
        status=status, summary=message[:4000], errors=[message[:2000]], state_delta=StateDelta()
    )
    return WorkerReport(
        spec.worker_id,
        spec.task_id,
        spec.vendor,
        spec.model,
        spec.effort,
        spec.tier,
        result,
        end_reason="not_started",
        tree_check="unchanged",
    )


class WorkerPool:
    """Workers of one session."""

    def __init__(
        self,
        io: WorkerIO,
        fuse: LaunchFuse | None,
        *,
        concurrency: int = AUTO_WORKERS_DEFAULT,
        runner: Runner = run_worker,
        on_change: Callable[[WorkerEntry], None] | None = None,
    ) -> None:
        if not 1 <= concurrency <= AUTO_WORKERS_MAX:
            raise OrchestrationUsageError(
                f"workers must be 1-{AUTO_WORKERS_MAX} (hard cap), got {concurrency}"
            )
        self.io = io
        self.fuse = fuse
        self.concurrency = concurrency
        self.runner = runner
        self.on_change = on_change
        self._entries: dict[str, WorkerEntry] = {}
        self._queue: queue.Queue[WorkerEntry | None] = queue.Queue()
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._dispatch, name=f"ivoai-worker-{i}", daemon=True)
            for i in range(concurrency)
        ]
        for t in self._threads:
            t.start()

    # -- public ---------------------------------------------------------------------------------

    def submit(self, spec: WorkerSpec) -> WorkerEntry:
        """Queue a worker; it starts as soon as a slot (and the user-wide fuse) allows."""
        entry = WorkerEntry(spec)
        with self._cond:
            if self._closed.is_set():
                raise OrchestrationUsageError("the session is ending; no new worker can start")
            self._entries[entry.id] = entry
            self._cond.notify_all()
        self._changed(entry)
        self._queue.put(entry)
        return entry

    def get(self, worker_id: str) -> WorkerEntry:
        """The entry of `worker_id`.

        Raises:
            WorkerNotFoundError: no such worker in this session.
        """
        with self._cond:
            entry = self._entries.get(worker_id)
        if entry is None:
            raise WorkerNotFoundError(f"no worker {worker_id[:64]!r} in this session")
        return entry

    def entries(self) -> list[WorkerEntry]:
        """Every worker of the session, in submission order."""
        with self._cond:
            return list(self._entries.values())

    def wait(
        self, worker_ids: Iterable[str] | None, *, mode: Literal["any", "all"], timeout: float
    ) -> tuple[list[WorkerEntry], bool]:
        """Block until any/all of the workers finished or `timeout` passed; (entries, timed_out)."""
        ids = list(worker_ids) if worker_ids is not None else None
        chosen = [self.get(i) for i in ids] if ids is not None else self.entries()
        deadline = time.monotonic() + timeout

        def ready() -> bool:
            if not chosen:
                return True
            finished = [e.done for e in chosen]
            return any(finished) if mode == "any" else all(finished)

        with self._cond:
            while not ready():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return chosen, True
                self._cond.wait(remaining)
        return chosen, False

    def cancel(self, worker_id: str) -> WorkerEntry:
        """Cancel a worker: a queued one never starts; a running one is ended (TERM -> KILL, its group)."""
        entry = self.get(worker_id)
        with self._cond:
            if entry.state == "queued":
                entry.state = "cancelled"
                entry.ended_at = time.time()
                entry.report = _failed_report(
                    entry.spec, WorkerStatus.CANCELLED, "cancelled before it started"
                )
                self._cond.notify_all()
                notify = True
            else:
                notify = False
            entry.control.cancel.set()
        if notify:
            self._changed(entry)
        return entry

    def close(self, timeout: float = 10.0) -> None:
        """Cancel everything and stop the dispatchers (bounded)."""
        self._closed.set()
        for entry in self.entries():
            if not entry.done:
                self.cancel(entry.id)
        for _ in self._threads:
            self._queue.put(None)
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    # -- dispatch -------------------------------------------------------------------------------

    def _changed(self, entry: WorkerEntry) -> None:
        if self.on_change is not None:
            with contextlib.suppress(IvoaiError, OSError):  # metadata persistence never stops a worker
                self.on_change(entry)

    def _dispatch(self) -> None:
        while True:
            entry = self._queue.get()
            if entry is None:
                return
            if entry.done:
                continue
            self._run(entry)

    def _reserve(self, entry: WorkerEntry) -> object | None:
        """A fuse ticket, or None with the entry finished (refused or cancelled while waiting)."""
        if self.fuse is None:
            return True
        while True:
            try:
                return self.fuse.acquire(
                    entry.spec.vendor, session_id=entry.spec.session_id, worker_id=entry.id
                )
            except FuseOpenError as exc:
                if exc.retry_at is not None:  # breaker or hourly limit: waiting here would hide it
                    self._finish(entry, _failed_report(entry.spec, WorkerStatus.FAILED, exc.message))
                    return None
            except (IvoaiError, OSError) as exc:
                message = f"the launch fuse is unavailable ({getattr(exc, 'message', exc)}); not started"
                self._finish(entry, _failed_report(entry.spec, WorkerStatus.FAILED, message))
                return None
            if entry.control.cancel.wait(FUSE_RETRY_SECONDS):
                self._finish(
                    entry, _failed_report(entry.spec, WorkerStatus.CANCELLED, "cancelled before it started")
                )
                return None

    def _run(self, entry: WorkerEntry) -> None:
        ticket = self._reserve(entry)
        if ticket is None:
            return
        with self._cond:
            if entry.done:  # cancelled meanwhile
                self._release(ticket)
                return
            entry.state = "running"
            entry.started_at = time.time()
            self._cond.notify_all()
        self._changed(entry)
        bind = getattr(ticket, "bind", None)
        entry.control.on_spawn = bind if callable(bind) else None
        try:
            report = self.runner(entry.spec, self.io, entry.control)
        except Exception as exc:  # noqa: BLE001 - a worker's failure is reported, never fatal to the session
            report = _failed_report(entry.spec, WorkerStatus.FAILED, f"internal error: {type(exc).__name__}")
        finally:
            self._release(ticket)
        self._finish(entry, report)

    @staticmethod
    def _release(ticket: object) -> None:
        release = getattr(ticket, "release", None)
        if callable(release):
            # On failure the slot is freed when this process exits (the fuse prunes dead owners).
            with contextlib.suppress(IvoaiError, OSError):
                release()

    def _finish(self, entry: WorkerEntry, report: WorkerReport) -> None:
        with self._cond:
            entry.report = report
            entry.state = _STATES[report.status]
            entry.ended_at = time.time()
            self._cond.notify_all()
        self._changed(entry)
