"""What the orchestrator session does when a worker changes state or learns about quota.

A finished worker's task is updated and its dependents released; a confirmed hard limit is recorded
in the quota ledger and trips the vendor's launch breaker, and a worker it stopped with a kept
conversation waits for the reset (issue 16, auto-resume); a model-scoped limit retries the task once
on a cheaper model of the same vendor. Each function takes the session and runs under its lock
where it changes task state.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from ivoai.client.orchestration._autoresume import RESUME_PROMPT, Stalled
from ivoai.client.orchestration._classify import LimitKind, LimitVerdict
from ivoai.client.orchestration._pool import WorkerEntry
from ivoai.client.orchestration._quota import (
    HardLimit,
    QuotaWindow,
    claude_event_hard_limit,
    claude_event_window,
)
from ivoai.client.orchestration._scheduler import decide_task
from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._session_types import TaskRun
from ivoai.client.orchestration._worker import WorkerReport
from ivoai.client.orchestration._worker_spec import WorkerSpec
from ivoai.common.errors import IvoaiError
from ivoai.common.ids import random_id

if TYPE_CHECKING:
    from ivoai.client.orchestration._session import OrchestratorSession


def on_worker_change(session: OrchestratorSession, entry: WorkerEntry) -> None:
    if session.lifecycle is not None:
        if entry.state == "running":
            session.lifecycle.started(entry.id)
        elif entry.done:
            session.lifecycle.ended(entry.id, entry.state)
    with session._lock:
        run = session.tasks.get(entry.spec.task_id)
        if run is None or not run.worker_ids or run.worker_ids[-1] != entry.id:
            session.persist()
            return
        if entry.state == "running":
            run.state = "running"
            run.started_at = entry.started_at
        elif entry.done:
            run.ended_at = entry.ended_at
            run.state = entry.state
            maybe_stalled(session, entry)
            if entry.report is not None and retry_on_model_limit(session, run, entry.report):
                session.persist()
                return
            release_dependents(session)
        session.persist()


def maybe_stalled(session: OrchestratorSession, entry: WorkerEntry) -> None:
    """A worker a confirmed hard limit stopped, with a kept conversation, waits for the reset."""
    report = entry.report
    if (
        session.resumer is None
        or report is None
        or report.limit is None
        or report.limit.kind is not LimitKind.HARD_LIMIT
        or not report.limit.confirmed
        or not report.conversation_id
    ):
        return
    resets = report.limit.resets_at
    if resets is None:
        hard = session.ledger.view().get(entry.spec.vendor).hard_limit
        resets = hard.resets_at if hard is not None else None
    session.resumer.add(
        Stalled(
            worker_id=entry.id,
            task_id=entry.spec.task_id,
            vendor=entry.spec.vendor,
            model=entry.spec.model,
            effort=entry.spec.effort,
            tier=entry.spec.tier.label,
            conversation=report.conversation_id,
            resets_at=resets,
            since=time.time(),
        )
    )


def resume_check(session: OrchestratorSession, vendor: str) -> tuple[bool, float | None]:
    """Quota first: (free now?, the new reset when not). A free vendor's breaker is closed."""
    if vendor == "claude":
        from ivoai.client.orchestration._limitprobe import claude_quota_now

        quota = claude_quota_now(session.config.env)
    else:
        quota = session._reprobe(vendor)
    hard = quota.hard_limit if quota is not None else None
    if hard is not None and hard.confirmed:
        return False, hard.resets_at
    with contextlib.suppress(IvoaiError, OSError):
        session.fuse.clear(vendor)
    return True, None


def continue_stalled(session: OrchestratorSession, stalled: Stalled) -> str:
    """Start the continuation of a stalled worker in its own conversation; its worker ID."""
    spec = WorkerSpec(
        session_id=session.config.session_id,
        task_id=stalled.task_id,
        worker_id=random_id("wrk", 8),
        vendor=stalled.vendor,
        model=stalled.model,
        effort=stalled.effort,
        tier=Tier.parse(stalled.tier),
        prompt=RESUME_PROMPT,
        workdir=session.config.workdir,
        timeout_seconds=session.settings.worker_timeout_seconds,
        max_turns=session.settings.worker_max_turns,
        knowledge=session.config.knowledge,
        persist=True,
        conversation_id=stalled.conversation if stalled.vendor == "claude" else None,
        resume_conversation=stalled.conversation,
    )
    if session.worker_overrides is not None:
        spec = session.worker_overrides(spec)
    with session._lock:
        run = session.tasks.get(stalled.task_id)
        if run is not None:
            run.worker_ids.append(spec.worker_id)
            run.state = "queued"
            run.started_at, run.ended_at = None, None
        session.pool.submit(spec)
    return spec.worker_id


def retry_on_model_limit(session: OrchestratorSession, run: TaskRun, report: WorkerReport) -> bool:
    """A model-scoped limit: run the task once more on a cheaper model of the same vendor."""
    if report.limit is None or report.limit.kind is not LimitKind.MODEL_SCOPED or run.retried_on_model_limit:
        return False
    facts = session.facts()
    limited = run.decision.profile.model_tier if run.decision.profile is not None else None
    decision = decide_task(
        run.task,
        session._weights(),
        [p for p in facts.providers if p.vendor == report.vendor],
        facts.quota.vendors,
        prefer=report.vendor,
        extra_tiers=run.extra_tiers,
        cheaper_than=limited,
    )
    if decision.profile is None or decision.profile.model == report.model:
        return False
    run.retried_on_model_limit = True
    run.decision = decision
    session._submit(run)
    return True


def release_dependents(session: OrchestratorSession) -> None:
    for run in session.tasks.values():
        if run.state != "waiting_dependencies":
            continue
        deps = [session.tasks[d] for d in run.decision.dependencies if d in session.tasks]
        if any(d.state in ("failed", "cancelled", "timed_out", "blocked") for d in deps):
            run.state = "blocked"
        elif all(d.state in ("succeeded", "kept_by_primary") for d in deps):
            session._submit(run)


def on_limit(
    session: OrchestratorSession, vendor: str, verdict: LimitVerdict, infos: list[dict[str, Any]]
) -> None:
    """Record what a worker learned about quota; act on confirmed and model-scoped limits."""
    now = time.time()
    try:
        if vendor == "claude" and infos:
            windows = [w for w in (claude_event_window(i, now) for i in infos) if w is not None]
            hard = next((h for h in (claude_event_hard_limit(i, now) for i in infos) if h), None)
            session.ledger.record_windows("claude", windows, hard_limit=hard)
        if verdict.kind is LimitKind.HARD_LIMIT and verdict.confirmed:
            session.ledger.record_hard_limit(
                HardLimit(vendor, True, "worker", now, verdict.resets_at, verdict.reason)
            )
            session.fuse.trip(vendor, verdict.reason, until=verdict.resets_at)
        elif verdict.kind is LimitKind.MODEL_SCOPED and verdict.model and vendor == "codex":
            window = QuotaWindow(
                vendor,
                "weekly",
                None,
                verdict.resets_at,
                None,
                "codex_exec",
                now,
                model=verdict.model,
                status="rejected",
            )
            session.ledger.record_windows(vendor, [window])
    except (IvoaiError, OSError):
        pass  # the ledger is shared state; the verdict is still in the report
    if verdict.kind is not LimitKind.NONE:
        with session._lock:
            session.limits = [*session.limits[-15:], {"vendor": vendor, "at": now, **verdict.to_dict()}]
