"""Profile choice: the lowest sufficient runtime-verified model and effort for a tier (AUTO.md). Pure.

A vendor can run a worker when it is worker-capable (the client is installed and answered),
not known to be logged out, has no confirmed hard limit and offers every required capability.
Among its catalogue models that have a tier >= the required one, the lowest sufficient tier wins;
ties go to lower quota pressure (100 - min remaining % over the windows that apply, unknown = 50),
then to the preferred vendor (the planner's), then to catalogue order. A model whose own window
is exhausted is skipped. When every sufficient model of a vendor is blocked by a model-scoped
limit, the ladder takes a cheaper model of the same vendor (marked `downgraded`). An explicit model
or effort that is not available is an error, never a silent fallback. Effort: low / medium / high
/ max per tier, else the highest supported effort below it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._catalogue import Catalogue, ModelEntry, choose_effort
from ivoai.client.orchestration._quota import AuthState, VendorQuota
from ivoai.client.orchestration._scoring import Tier

# What every advisory worker needs from its client (both official clients have these).
WORKER_CAPABILITIES = frozenset({"headless", "read_only", "json_events", "process_local_mcp"})
VENDOR_CAPABILITIES: Mapping[str, frozenset[str]] = {
    "codex": WORKER_CAPABILITIES | {"output_schema", "sandbox"},
    "claude": WORKER_CAPABILITIES | {"cost_report", "model_usage"},
}


@dataclass(frozen=True)
class ProviderFacts:
    """What ivoai verified about one vendor's client at run time."""

    vendor: str
    worker_capable: bool
    auth: AuthState = "unknown"
    client_version: str | None = None
    catalogue: Catalogue | None = None
    capabilities: frozenset[str] = field(default_factory=frozenset)
    note: str = ""


@dataclass(frozen=True)
class Profile:
    """A chosen vendor / model / effort and why."""

    vendor: str
    model: str
    effort: str | None
    model_tier: Tier
    tier_source: str
    pressure: int
    downgraded: bool = False
    explicit: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the plan report."""
        return {
            "vendor": self.vendor,
            "model": self.model,
            "effort": self.effort,
            "model_tier": self.model_tier.label,
            "tier_source": self.tier_source,
            "quota_pressure": self.pressure,
            "downgraded": self.downgraded,
            "explicit": self.explicit,
        }


@dataclass(frozen=True)
class ProfileChoice:
    """The chosen profile, or None and the reason."""

    profile: Profile | None
    reason: str
    error: bool = False  # an explicit model/effort that is not available


@dataclass(frozen=True)
class _Candidate:
    entry: ModelEntry
    pressure: int
    order: int


def _vendor_skip(p: ProviderFacts, quota: VendorQuota, required_caps: frozenset[str]) -> str | None:
    if not p.worker_capable:
        return f"{p.vendor}: client not usable ({p.note or 'not installed or not answering'})"
    if p.auth == "unauthenticated":
        return f"{p.vendor}: not logged in"
    if quota.hard_limit is not None and quota.hard_limit.confirmed:
        return f"{p.vendor}: confirmed hard limit ({quota.hard_limit.reason})"
    missing = sorted(required_caps - p.capabilities)
    if missing:
        return f"{p.vendor}: lacks {', '.join(missing)}"
    if p.catalogue is None or not p.catalogue.models:
        return f"{p.vendor}: no runtime-verified model catalogue"
    return None


def choose_profile(
    required: Tier,
    providers: Iterable[ProviderFacts],
    quotas: Mapping[str, VendorQuota],
    *,
    vendor: str | None = None,
    model: str | None = None,
    effort: str | None = None,
    prefer: str | None = None,
    required_capabilities: frozenset[str] = WORKER_CAPABILITIES,
    cheaper_than: Tier | None = None,
) -> ProfileChoice:
    """Choose the profile for one task (see the module docstring for the rules).

    `cheaper_than` (after a model-scoped limit, the ladder's first step) keeps only models of a
    lower tier than the limited one: the lowest sufficient among them, else the best of them,
    marked `downgraded`.
    """
    skipped: list[str] = []
    candidates: list[_Candidate] = []
    limited: list[ModelEntry] = []
    for p in providers:
        if vendor is not None and p.vendor != vendor:
            continue
        quota = quotas.get(p.vendor) or VendorQuota(p.vendor)
        why = _vendor_skip(p, quota, required_capabilities)
        if why is not None:
            skipped.append(why)
            continue
        assert p.catalogue is not None
        for i, m in enumerate(p.catalogue.models):
            if model is not None and m.id != model:
                continue
            if m.hidden and model is None:
                continue
            if quota.model_blocked(m.id, m.aliases):
                limited.append(m)
                skipped.append(f"{p.vendor}:{m.id}: its own quota window is exhausted")
                continue
            if m.tier is None and model is None:
                continue
            candidates.append(_Candidate(m, quota.pressure(m.id, m.aliases), i))
    if model is not None:
        return _explicit(model, effort, vendor, candidates, required, skipped)
    if cheaper_than is not None:
        candidates = [c for c in candidates if c.entry.tier is not None and c.entry.tier < cheaper_than]
        if candidates and not any(c.entry.tier is not None and c.entry.tier >= required for c in candidates):
            best = max(candidates, key=lambda c: (c.entry.tier, -c.pressure, -c.order))
            chosen = _chosen(best, required, effort, downgraded=True)
            return ProfileChoice(
                chosen.profile, f"model limit: the cheaper {best.entry.id} runs it below its tier"
            )
    sufficient = [c for c in candidates if c.entry.tier is not None and c.entry.tier >= required]
    if sufficient:
        best = min(sufficient, key=lambda c: (c.entry.tier, c.pressure, c.entry.vendor != prefer, c.order))
        return _chosen(best, required, effort, downgraded=False)
    ladder = _ladder(candidates, limited, required)
    if ladder is not None:
        chosen = _chosen(ladder, required, effort, downgraded=True)
        blocked = ", ".join(sorted(m.id for m in limited if m.vendor == ladder.entry.vendor))
        return ProfileChoice(
            chosen.profile, f"model limit on {blocked}: a cheaper {ladder.entry.vendor} model runs it"
        )
    reasons = "; ".join(skipped) or "no model of a tier >= " + required.label
    return ProfileChoice(None, f"no runtime-verified profile for tier {required.label}: {reasons}")


def _effort_error(m: ModelEntry, effort: str) -> ProfileChoice:
    offers = ", ".join(m.efforts) or "none"
    message = f"effort {effort!r} is not available for {m.vendor}:{m.id} (offers {offers})"
    return ProfileChoice(None, message, error=True)


def _chosen(c: _Candidate, required: Tier, effort: str | None, *, downgraded: bool) -> ProfileChoice:
    m = c.entry
    assert m.tier is not None
    if effort is not None and effort not in m.efforts:
        return _effort_error(m, effort)
    chosen_effort = effort if effort is not None else choose_effort(m, required)
    profile = Profile(m.vendor, m.id, chosen_effort, m.tier, m.tier_source or "", c.pressure, downgraded)
    tier_note = f"tier {m.tier.label} ({m.tier_source})"
    return ProfileChoice(
        profile, f"lowest sufficient: {m.vendor}:{m.id} {tier_note}, quota pressure {c.pressure}"
    )


def _ladder(candidates: list[_Candidate], limited: list[ModelEntry], required: Tier) -> _Candidate | None:
    """A model-scoped limit: the best cheaper model of the same vendor as a blocked sufficient model."""
    blocked_vendors = {m.vendor for m in limited if m.tier is not None and m.tier >= required}
    cheaper = [c for c in candidates if c.entry.vendor in blocked_vendors and c.entry.tier is not None]
    if not cheaper:
        return None
    return max(cheaper, key=lambda c: (c.entry.tier, -c.pressure, -c.order))


def _explicit(
    model: str,
    effort: str | None,
    vendor: str | None,
    candidates: list[_Candidate],
    required: Tier,
    skipped: list[str],
) -> ProfileChoice:
    match = [c for c in candidates if c.entry.id == model]
    if not match:
        why = "; ".join(skipped) if skipped else "not in the runtime-verified catalogue"
        where = f"{vendor}:{model}" if vendor else model
        return ProfileChoice(None, f"explicit model {where} is not available ({why})", error=True)
    c = match[0]
    m = c.entry
    if effort is not None and effort not in m.efforts:
        return _effort_error(m, effort)
    tier = m.tier if m.tier is not None else required
    chosen_effort = effort if effort is not None else choose_effort(m, required)
    profile = Profile(
        m.vendor, m.id, chosen_effort, tier, m.tier_source or "explicit", c.pressure, explicit=True
    )
    return ProfileChoice(profile, f"explicit model {m.vendor}:{m.id} requested by the plan")
