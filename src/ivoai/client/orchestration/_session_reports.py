"""Documents the orchestrator session hands out: capabilities (what the primary plans against), the
plan metadata of its state file, and the primary's checkpoint (issue 16)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ivoai.client.governance import estimate_tokens
from ivoai.client.orchestration._autoresume import AutoResumer
from ivoai.client.orchestration._scoring import ROLE_MIN_TIERS
from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    AUTO_ESCALATION_REASON_MAX_CHARS,
    AUTO_ESCALATION_REASON_MIN_CHARS,
    AUTO_MAX_TASKS,
    AUTO_TASK_TEXT_MAX_BYTES,
    AUTO_WAIT_MAX_SECONDS,
    AUTO_WAIT_MIN_SECONDS,
    AUTO_WORKERS_MAX,
)

if TYPE_CHECKING:
    from ivoai.client.orchestration._session import OrchestratorSession


def capabilities_view(session: OrchestratorSession) -> dict[str, Any]:
    """Clients, models with tiers, quota, limits, pool: what the primary plans against."""
    facts = session.facts()
    vendors = []
    for p in facts.providers:
        q = facts.quota.get(p.vendor)
        models = []
        if p.catalogue is not None:
            models = [
                {
                    "id": m.id,
                    "tier": m.tier.label if m.tier is not None else None,
                    "efforts": list(m.efforts),
                    "default": m.is_default,
                }
                for m in p.catalogue.models
                if not m.hidden
            ]
        vendors.append(
            {
                "vendor": p.vendor,
                "usable": p.worker_capable,
                "auth": p.auth,
                "version": p.client_version,
                "note": p.note or None,
                "models": models,
                "quota": {
                    "state": q.state,
                    "stale": q.stale,
                    "pressure": q.pressure(),
                    "hard_limit": None if q.hard_limit is None else q.hard_limit.to_dict(),
                    "blocked_models": sorted(q.blocked_models()),
                    "windows": [
                        {
                            "kind": w.kind,
                            "model": w.model,
                            "used_percent": w.used_percent,
                            "resets_at": w.resets_at,
                        }
                        for w in q.windows
                    ],
                },
            }
        )
    return {
        "session_id": session.config.session_id,
        "planner": session.config.planner,
        "approval": "--yes" if session.config.approve else "user",
        "vendors": vendors,
        "limits": {
            "max_tasks": AUTO_MAX_TASKS,
            "workers": session.config.workers,
            "workers_hard_cap": AUTO_WORKERS_MAX,
            "wait_seconds": [AUTO_WAIT_MIN_SECONDS, AUTO_WAIT_MAX_SECONDS],
            "escalation_reason_chars": [
                AUTO_ESCALATION_REASON_MIN_CHARS,
                AUTO_ESCALATION_REASON_MAX_CHARS,
            ],
            "task_bytes": AUTO_TASK_TEXT_MAX_BYTES,
        },
        "roles": {role: tier.label for role, tier in ROLE_MIN_TIERS.items()},
        "fuse": session.fuse.status(),
        "workers": [e.summary() for e in session.pool.entries()],
    }


def metadata_view(session: OrchestratorSession) -> dict[str, Any]:
    """The session's plan metadata (no task text, brief, output or environment)."""
    entries = session.pool.entries() if hasattr(session, "pool") else []
    reports = [e.report for e in entries if e.report is not None]
    usage: dict[str, int] = {}
    for r in reports:
        for k, v in r.usage.items():
            usage[k] = usage.get(k, 0) + v
    costs = [r.cost_usd for r in reports if r.cost_usd is not None]
    return {
        "session_id": session.config.session_id,
        "planner": session.config.planner,
        "updated_at": time.time(),
        "gate": None
        if session.gate is None
        else {"state": session.gate.state, "missing": list(session.gate.missing)},
        "brief": None
        if session.brief is None
        else {"sha256": session.brief.sha256, "bytes": len(session.brief.canonical_json().encode())},
        "plan": {
            "version": session.plan_version,
            "state": session.plan_state,
            "approval": session.approval,
            "head": getattr(session, "plan_head", None),
            "tasks": [t.metadata() for t in session.tasks.values()],
        },
        "workers": [
            e.summary()
            | {
                "status": e.report.status.value if e.report else None,
                "models_ran": e.report.models_ran if e.report else [],
                "skills": e.report.skills if e.report else [],  # issue 20: names only
            }
            for e in entries
        ],
        "limits": list(session.limits),
        "chain": list(session.config.chain) or [session.config.session_id],
        "coordinator": session.config.coordinator,
        "checkpoint": getattr(session, "last_checkpoint", None),
        "resume": resume_metadata(session),
        "conservation": list(getattr(session, "conservation", [])),
        "metrics": {
            **session.metrics.to_dict(),
            "workers": {
                s: sum(1 for e in entries if e.state == s)
                for s in ("queued", "running", "succeeded", "failed", "cancelled", "timed_out")
            },
            "usage": usage,
            "cost_usd": round(sum(costs), 6) if costs else None,
            "results_returned_tokens": sum(estimate_tokens(t.text) for t in session.returned.values()),
        },
    }


def resume_metadata(session: OrchestratorSession) -> dict[str, Any] | None:
    resumer: AutoResumer | None = getattr(session, "resumer", None)
    return resumer.metadata() if resumer is not None else None


def write_primary_checkpoint(session: OrchestratorSession, args: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and store the primary's checkpoint (refs must be this chain's artifacts).

    Raises:
        CheckpointRefusedError: control bytes, secret-shaped text, size, or a ref that is not an
            artifact of this chain.
    """
    from ivoai.client.orchestration._checkpoint import (
        CheckpointRefusedError,
        parse_body,
        write_checkpoint,
    )
    from ivoai.client.orchestration._worktree import summarize_worktree

    body = parse_body(args)
    for i, ref in enumerate(body.refs):
        try:
            owner = session.store.describe(ref).session_id
        except IvoaiError:
            owner = None
        if owner not in session.config.owners:
            raise CheckpointRefusedError(
                f"checkpoint.refs[{i}]: {ref} is not an artifact of this session; refs name evidence "
                "ivoai stored (orchestration_result lists them)"
            )
    tree = summarize_worktree(session.config.workdir)
    worktree = None
    if tree.git:
        worktree = {"branch": tree.branch, "head": tree.head, "changed": list(tree.changed_names)}
    cp = write_checkpoint(
        session.config.chain_root,
        body,
        source="primary",
        session_id=session.config.session_id,
        vendor=session.config.planner,
        worktree=worktree,
        paths=session.paths,
    )
    with session._lock:
        session.last_checkpoint = {"seq": cp.seq, "written_at": cp.written_at, "source": cp.source}
        session.persist()
    return {
        "chain": cp.chain,
        "seq": cp.seq,
        "written_at": cp.written_at,
        "head": tree.head,
        "next": "Checkpoint kept. A failover or `ivoai session resume|handoff|recover` starts from it; "
        "write a new one after each milestone.",
    }
