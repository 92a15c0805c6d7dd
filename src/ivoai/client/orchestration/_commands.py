"""What `ivoai quota` and `ivoai auto plan --check` call (the CLI only parses and renders)."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration._probes import CatalogueCache, offline_providers
from ivoai.client.orchestration._quota import QuotaView, QuotaWindow
from ivoai.client.orchestration._runtime import Runtime
from ivoai.client.orchestration._scheduler import PlanReport, evaluate_plan
from ivoai.client.orchestration._settings import AutoSettings, load_settings
from ivoai.common.errors import TooLargeError, ValidationError
from ivoai.common.limits import AUTO_PLAN_MAX_BYTES
from ivoai.common.paths import XdgPaths, xdg_paths

QUOTA_SCHEMA = "ivoai.quota.v1"


def read_plan_file(path: Path) -> Any:
    """The JSON document in `path` (`-` is stdin), bounded to AUTO_PLAN_MAX_BYTES.

    Raises:
        ValidationError: not readable, not a regular file, or not JSON (line and column named).
        TooLargeError: larger than the limit.
    """
    import sys

    try:
        if str(path) == "-":
            raw = sys.stdin.buffer.read(AUTO_PLAN_MAX_BYTES + 1)
        else:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise ValidationError(f"{path}: not a regular file")
                with os.fdopen(os.dup(fd), "rb") as fh:
                    raw = fh.read(AUTO_PLAN_MAX_BYTES + 1)
            finally:
                os.close(fd)
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read the plan ({exc.strerror or exc})") from None
    if len(raw) > AUTO_PLAN_MAX_BYTES:
        raise TooLargeError(f"{path}: the plan exceeds {AUTO_PLAN_MAX_BYTES} bytes")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise ValidationError(f"{path}: the plan is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


def check_plan_file(path: Path, *, paths: XdgPaths | None = None) -> PlanReport:
    """Validate and score a plan offline: cached catalogues and the ledger as it is; no client runs."""
    paths = paths or xdg_paths()
    settings = load_settings(paths)
    doc = read_plan_file(path)
    providers = offline_providers(CatalogueCache(paths), settings.model_tiers)
    view = QuotaLedger(paths, ttl_seconds=settings.quota_cache_seconds).view()
    return evaluate_plan(doc, providers, view.vendors, parallel_enabled=settings.workers > 0)


@dataclass(frozen=True)
class QuotaReport:
    """What `ivoai quota` shows: every vendor, its windows with pace, and the client facts."""

    view: QuotaView
    clients: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document."""
        vendors = []
        for vendor, q in sorted(self.view.vendors.items()):
            doc = q.to_dict()
            doc["windows"] = [_window_doc(w, self.view.now, self.view.ttl_seconds) for w in q.windows]
            doc["client"] = self.clients.get(vendor, {})
            vendors.append(doc)
        return {
            "schema": QUOTA_SCHEMA,
            "ts": round(self.view.now, 3),
            "ttl_seconds": self.view.ttl_seconds,
            "vendors": vendors,
        }


def _window_doc(w: QuotaWindow, now: float, ttl: float) -> dict[str, Any]:
    doc = w.to_dict()
    pace = w.pace(now)
    doc["remaining_percent"] = w.remaining_percent
    doc["elapsed_percent"] = pace.elapsed_percent if pace else None
    doc["pace_delta"] = pace.delta if pace else None
    doc["stale"] = w.is_stale(now, ttl)
    doc["exhausted"] = w.exhausted
    return doc


def quota_report(
    *, refresh: bool = False, paths: XdgPaths | None = None, settings: AutoSettings | None = None
) -> QuotaReport:
    """Read the ledger; probe the clients whose cache expired (all of them with `refresh`)."""
    paths = paths or xdg_paths()
    settings = settings or load_settings(paths)
    facts = Runtime(settings, paths=paths).current(refresh=refresh)
    clients = {
        p.vendor: {
            "installed": p.worker_capable or "not installed" not in p.note,
            "usable": p.worker_capable,
            "version": p.client_version,
            "auth": p.auth,
            "models": len(p.catalogue.models) if p.catalogue else 0,
            "note": p.note or None,
        }
        for p in facts.providers
    }
    return QuotaReport(facts.quota, clients)


def ledger_view(paths: XdgPaths | None = None) -> QuotaView:
    """The ledger without probing anything (monitor gauges)."""
    return QuotaLedger(paths or xdg_paths()).view(time.time())
