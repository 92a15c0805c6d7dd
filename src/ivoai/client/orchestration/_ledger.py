"""The quota ledger: one normalized snapshot per vendor and window, shared by every ivoai process.

`$XDG_STATE_HOME/ivoai/quota/ledger.json` (0600 in a 0700 directory). Every mutation takes the
flock `quota/.lock`, re-reads the file, merges and publishes it by atomic replacement
(`fsio.atomic_write`), so concurrent ivoai processes (the orchestrator of each session, the
statusline command, `ivoai quota`) never lose each other's observations or see a torn file.
Readers need no lock.

The ledger only *stores*; it never invents. A probe that fails keeps the last observation and
labels it stale with the error; a window whose reset time has passed is dropped (its numbers
describe a finished window: the new one is unknown until observed); a hard limit whose reset has
passed is dropped too.

API used by the scheduler, the workers, `ivoai quota` and (issue 16) the supervisor:
`view()`, `record_probe()`, `record_windows()`, `record_hard_limit()`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ivoai.client.orchestration._quota import (
    VENDORS,
    AuthState,
    HardLimit,
    QuotaState,
    QuotaView,
    QuotaWindow,
    VendorQuota,
    merge_windows,
)
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none
from ivoai.common.limits import QUOTA_CACHE_DEFAULT_SECONDS, QUOTA_LEDGER_MAX_BYTES
from ivoai.common.paths import XdgPaths, xdg_paths

LEDGER_SCHEMA = 1
QUOTA_DIR = "quota"
_AUTH: tuple[AuthState, ...] = ("authenticated", "unauthenticated", "unknown")
_STATES: tuple[QuotaState, ...] = ("known", "pending", "not_exposed", "unknown", "error")


def _hard_limit(doc: Any) -> HardLimit | None:
    if not isinstance(doc, dict):
        return None
    try:
        return HardLimit(
            vendor=str(doc["vendor"]),
            confirmed=bool(doc["confirmed"]),
            source=str(doc["source"])[:64],
            observed_at=float(doc["observed_at"]),
            resets_at=float(doc["resets_at"]) if doc.get("resets_at") is not None else None,
            reason=str(doc.get("reason", ""))[:240],
        )
    except (KeyError, TypeError, ValueError):
        return None


def _vendor_from_doc(vendor: str, doc: Any) -> VendorQuota:
    if not isinstance(doc, dict):
        return VendorQuota(vendor)
    windows = tuple(
        w for w in (QuotaWindow.from_dict(x) for x in doc.get("windows") or [] if isinstance(x, dict)) if w
    )
    observed = doc.get("observed_at")
    return VendorQuota(
        vendor=vendor,
        auth=next((a for a in _AUTH if a == doc.get("auth")), "unknown"),
        state=next((s for s in _STATES if s == doc.get("state")), "unknown"),
        windows=tuple(w for w in windows if w.vendor == vendor),
        hard_limit=_hard_limit(doc.get("hard_limit")),
        observed_at=float(observed) if isinstance(observed, int | float) else None,
        plan_type=str(doc["plan_type"])[:64] if doc.get("plan_type") else None,
        error=str(doc["error"])[:240] if doc.get("error") else None,
    )


class QuotaLedger:
    """The shared, locked, atomically replaced quota file."""

    def __init__(
        self, paths: XdgPaths | None = None, *, ttl_seconds: float = QUOTA_CACHE_DEFAULT_SECONDS
    ) -> None:
        self.paths = paths or xdg_paths()
        self.root = self.paths.state
        self.dir = self.root / QUOTA_DIR
        self.file = self.dir / "ledger.json"
        self.lock = self.dir / ".lock"
        self.ttl_seconds = ttl_seconds

    def _load(self) -> dict[str, VendorQuota]:
        raw = read_private_file_or_none(self.root, self.file, QUOTA_LEDGER_MAX_BYTES)
        if raw is None:
            return {}
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return {}  # a corrupt ledger is replaced by the next observation; unknown stays unknown
        vendors = doc.get("vendors") if isinstance(doc, dict) else None
        if not isinstance(vendors, dict):
            return {}
        return {v: _vendor_from_doc(v, vendors.get(v)) for v in VENDORS if v in vendors}

    def _store(self, vendors: dict[str, VendorQuota]) -> None:
        doc = {"schema": LEDGER_SCHEMA, "vendors": {v: q.to_dict() for v, q in sorted(vendors.items())}}
        atomic_write(self.root, self.file, (json.dumps(doc, sort_keys=True, indent=1) + "\n").encode("utf-8"))

    def _mutate(self, vendor: str, change: Any) -> VendorQuota:
        with file_lock(self.root, self.lock):
            vendors = self._load()
            updated: VendorQuota = change(vendors.get(vendor) or VendorQuota(vendor))
            vendors[vendor] = updated
            self._store(vendors)
        return updated

    def view(self, now: float | None = None) -> QuotaView:
        """Every vendor as stored: expired windows and limits dropped, staleness computed."""
        now = time.time() if now is None else now
        try:
            stored = self._load()
        except (IvoaiError, OSError):
            stored = {}
        vendors = {}
        for vendor in VENDORS:
            q = stored.get(vendor) or VendorQuota(vendor)
            windows = tuple(w for w in q.windows if not w.expired(now))
            hard = q.hard_limit
            if hard is not None and hard.resets_at is not None and hard.resets_at <= now:
                hard = None
            state = q.state
            if state == "known" and not windows:
                state = "pending"
            stale = q.observed_at is None or now - q.observed_at > self.ttl_seconds
            vendors[vendor] = replace(q, windows=windows, hard_limit=hard, state=state, stale=stale)
        return QuotaView(vendors, self.ttl_seconds, now)

    def fresh(self, vendor: str, now: float | None = None) -> bool:
        """True when the vendor was observed within the cache TTL (no need to ask its client again)."""
        q = self.view(now).get(vendor)
        return not q.stale

    def record_probe(self, probe: VendorQuota) -> VendorQuota:
        """Store a probe's result: auth, state, plan, hard limit; its windows merge with known ones."""

        def change(old: VendorQuota) -> VendorQuota:
            return replace(
                probe,
                windows=merge_windows(old.windows, probe.windows),
                plan_type=probe.plan_type or old.plan_type,
            )

        return self._mutate(probe.vendor, change)

    def record_failure(self, vendor: str, error: str, now: float | None = None) -> VendorQuota:
        """A probe failed: keep what was known, label it with the error (`stale` follows from its age)."""
        now = time.time() if now is None else now

        def change(old: VendorQuota) -> VendorQuota:
            state: QuotaState = old.state if old.state != "unknown" else "error"
            return replace(old, state=state, error=error[:240])

        return self._mutate(vendor, change)

    def record_windows(
        self, vendor: str, windows: Iterable[QuotaWindow], *, hard_limit: HardLimit | None = None
    ) -> VendorQuota:
        """In-band observations (statusline, worker events): merge windows, maybe a confirmed limit."""
        new = [w for w in windows if w.vendor == vendor]

        def change(old: VendorQuota) -> VendorQuota:
            merged = merge_windows(old.windows, new)
            latest = max(
                [w.observed_at for w in new] + ([old.observed_at] if old.observed_at else []), default=None
            )
            hard = hard_limit if hard_limit is not None else old.hard_limit
            return replace(
                old,
                windows=merged,
                state="known" if merged else old.state,
                observed_at=latest,
                hard_limit=hard,
            )

        return self._mutate(vendor, change)

    def record_hard_limit(self, limit: HardLimit) -> VendorQuota:
        """A confirmed account-level limit (classifier after a fresh read, or a `rejected` event)."""
        return self._mutate(limit.vendor, lambda old: replace(old, hard_limit=limit))

    def record_auth(self, vendor: str, auth: AuthState) -> VendorQuota:
        """The result of an auth-status probe (`claude auth status`)."""
        return self._mutate(vendor, lambda old: replace(old, auth=auth))

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self.file
