"""What `ivoai monitor` shows: live sessions, their effective provider, bypass reason, last result."""

from __future__ import annotations

import time
from typing import Any

from ivoai.client.compression.telemetry import Telemetry
from ivoai.client.sessions.records import SessionRecord, SessionStore
from ivoai.common.paths import XdgPaths

MONITOR_SCHEMA = "ivoai.monitor.v1"


def session_row(
    record: SessionRecord, last_event: dict[str, Any] | None, paths: XdgPaths | None = None
) -> dict[str, Any]:
    """One monitor row (bounded metadata only); AUTO details are read below `paths` (default: XDG)."""
    last = last_event if last_event is not None else record.last_compression
    if last is not None:
        last = {k: v for k, v in last.items() if k not in ("schema", "session_id")}
    return {
        "id": record.id,
        "executor": record.executor,
        "status": record.status(),
        "pid": record.pid,
        "started_at": record.started_at,
        "requested_provider": record.requested_provider,
        "effective_provider": record.effective_provider,
        "bypass": record.bypass,
        "bypass_reason": record.bypass_reason,
        "fallback": record.fallback,
        "knowledge_sources": len(record.knowledge_sources),
        "last_compression": last,
        "auto": _auto(record, paths),
    }


def _auto(record: SessionRecord, paths: XdgPaths | None) -> dict[str, Any] | None:
    """AUTO sessions: plan, workers and recent limits (issue 15)."""
    if record.auto is None:
        return None
    from ivoai.client.orchestration._monitor import session_auto

    return session_auto(
        record.id, record.auto, live=record.status() == "live", paths=paths or SessionStore().paths
    )


def snapshot(
    store: SessionStore | None = None, telemetry: Telemetry | None = None, *, include_ended: bool = False
) -> dict[str, Any]:
    """The current monitor document: live (and lost) sessions, newest first."""
    store = store or SessionStore()
    telemetry = telemetry or Telemetry(store.paths.state)
    records, problems = store.list()
    last = telemetry.last_by_session()
    rows = [
        session_row(r, last.get(r.id), store.paths) for r in records if include_ended or r.status() != "ended"
    ]
    from ivoai.client.orchestration._monitor import gauges

    return {
        "schema": MONITOR_SCHEMA,
        "ts": round(time.time(), 3),
        "sessions": rows,
        "problems": problems,
        "quota": gauges(store.paths),
    }
