"""Quota and provider facts for a caller, with the 45-second cache rule (composition of ledger + probes).

`current(refresh=False)` reads the shared ledger; a vendor whose last observation is older than
the cache TTL (or every vendor with `refresh=True`) is probed again through its real client, both
vendors concurrently. A failed probe keeps the cached values labelled stale, with the error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from ivoai.client.agents.executors import discover
from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration._probes import CatalogueCache, VendorProbe, probe_vendor
from ivoai.client.orchestration._profiles import VENDOR_CAPABILITIES, ProviderFacts
from ivoai.client.orchestration._quota import QuotaView
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.common.errors import IvoaiError
from ivoai.common.paths import XdgPaths, xdg_paths


@dataclass(frozen=True)
class RuntimeFacts:
    """Providers (for profile choice) and the quota view, observed together."""

    providers: tuple[ProviderFacts, ...]
    quota: QuotaView

    def provider(self, vendor: str) -> ProviderFacts | None:
        """One vendor's facts."""
        return next((p for p in self.providers if p.vendor == vendor), None)


class Runtime:
    """Reads the ledger and probes the real clients when the cache says so."""

    def __init__(
        self, settings: AutoSettings, *, paths: XdgPaths | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.paths = paths or xdg_paths()
        self.env = dict(os.environ if env is None else env)
        self.ledger = QuotaLedger(self.paths, ttl_seconds=settings.quota_cache_seconds)
        self.cache = CatalogueCache(self.paths)
        self._probed: dict[str, ProviderFacts] = {}  # the last probe's facts, reused while they are fresh

    def _probe(self, vendor: str) -> VendorProbe:
        tiers = self.settings.model_tiers
        return probe_vendor(vendor, self.env, self.cache, tiers)

    def _cached_facts(self, vendor: str, view: QuotaView) -> ProviderFacts:
        if vendor in self._probed:
            return self._probed[vendor]
        found = discover(vendor, self.env)
        cat = self.cache.latest(vendor, self.settings.model_tiers)
        if found is None:
            return ProviderFacts(vendor, False, note=f"{vendor} is not installed")
        auth = view.get(vendor).auth
        version = cat.client_version if cat is not None else None
        return ProviderFacts(vendor, True, auth, version, cat, VENDOR_CAPABILITIES[vendor])

    def current(
        self, *, refresh: bool = False, vendors: tuple[str, ...] = ("codex", "claude")
    ) -> RuntimeFacts:
        """Facts for `vendors`, probing the ones whose cache expired (all of them with `refresh`)."""
        view = self.ledger.view()
        due = [v for v in vendors if refresh or self._due(v, view)]
        probes: dict[str, VendorProbe] = {}
        if due:
            with ThreadPoolExecutor(max_workers=len(due)) as pool:
                probes = dict(zip(due, pool.map(self._probe, due), strict=True))
        for vendor, done in probes.items():
            self._record(vendor, done)
            self._probed[vendor] = done.facts
        view = self.ledger.view()
        providers = []
        for vendor in vendors:
            probe = probes.get(vendor)
            facts = probe.facts if probe is not None else self._cached_facts(vendor, view)
            if facts.auth == "unknown" and view.get(vendor).auth != "unknown":
                facts = replace(facts, auth=view.get(vendor).auth)
            providers.append(facts)
        return RuntimeFacts(tuple(providers), view)

    def _due(self, vendor: str, view: QuotaView) -> bool:
        """Codex is asked again once its quota is older than the TTL; Claude has no quota query, so
        only when its login is unknown or its catalogue is not cached yet."""
        q = view.get(vendor)
        if q.auth == "unknown":
            return True
        if vendor == "codex":
            return q.stale
        return self.cache.latest(vendor) is None

    def _record(self, vendor: str, probe: VendorProbe) -> None:
        try:
            if probe.quota is not None and probe.quota.state == "error" and probe.quota.observed_at is None:
                self.ledger.record_failure(vendor, probe.quota.error or "probe failed")
            elif probe.quota is not None:
                self.ledger.record_probe(probe.quota)
            elif probe.facts.auth != "unknown":
                self.ledger.record_auth(vendor, probe.facts.auth)
        except (IvoaiError, OSError):
            pass  # the ledger is shared state, not a precondition: the facts are still returned

    def now(self) -> float:
        """Wall-clock time (one place, for tests that read it)."""
        return time.time()
