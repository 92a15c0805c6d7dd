"""What `ivoai monitor` adds for AUTO: a session's plan and workers, quota gauges, the launch fuse."""

from __future__ import annotations

import time
from typing import Any

from ivoai.client.orchestration._fuse import LaunchFuse
from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration._state import read_state
from ivoai.common.errors import IvoaiError
from ivoai.common.paths import XdgPaths


def session_auto(
    session_id: str, record_auto: dict[str, Any] | None, *, live: bool, paths: XdgPaths
) -> dict[str, Any] | None:
    """The plan and workers of an AUTO session: live from the orchestrator, else from the record."""
    if record_auto is None:
        return None
    state = read_state(session_id, paths) if live else None
    plan = (state or {}).get("plan") or record_auto.get("plan") or {}
    workers = (state or {}).get("workers") or record_auto.get("workers") or []
    return {
        "planner": record_auto.get("planner"),
        "plan_state": plan.get("state", "none"),
        "approval": plan.get("approval"),
        "tasks": [
            {k: t.get(k) for k in ("id", "state", "tier", "score", "delegated", "duration_seconds")}
            for t in plan.get("tasks") or []
        ],
        "workers": [
            {k: w.get(k) for k in ("worker_id", "task_id", "state", "vendor", "model", "duration_seconds")}
            for w in workers
        ],
        "limits": ((state or {}).get("limits") or record_auto.get("limits") or [])[-3:],
        # issue 16: stalled workers waiting for their window's reset, and what became of them
        "resume": [
            {k: w.get(k) for k in ("worker_id", "task_id", "vendor", "state", "resets_at", "continued_by")}
            for w in (((state or {}).get("resume") or record_auto.get("resume") or {}).get("workers") or [])
        ],
        "coordinator": (record_auto.get("coordinator") or {}).get("coordinator"),
        "incoming": (record_auto.get("incoming") or {}).get("kind"),
    }


def gauges(paths: XdgPaths, now: float | None = None) -> dict[str, Any]:
    """Quota windows with pace per vendor, and the user-wide launch fuse; no client is asked."""
    now = time.time() if now is None else now
    view = QuotaLedger(paths).view(now)
    vendors = []
    for vendor, q in sorted(view.vendors.items()):
        windows = []
        for w in q.windows:
            pace = w.pace(now)
            windows.append(
                {
                    "kind": w.kind,
                    "model": w.model,
                    "used_percent": w.used_percent,
                    "remaining_percent": w.remaining_percent,
                    "pace_delta": pace.delta if pace else None,
                    "resets_at": w.resets_at,
                    "stale": w.is_stale(now, view.ttl_seconds),
                }
            )
        vendors.append(
            {
                "vendor": vendor,
                "auth": q.auth,
                "state": q.state,
                "stale": q.stale,
                "hard_limit": None if q.hard_limit is None else q.hard_limit.to_dict(),
                "windows": windows,
            }
        )
    try:
        fuse = LaunchFuse(paths).status(now)
    except (IvoaiError, OSError):
        fuse = None
    return {"vendors": vendors, "fuse": fuse}
