"""Model catalogues from the real clients, and each model's capability tier.

Facts come from the installed client at run time (only such *runtime-verified* models are ever
chosen): Codex answers `model/list` over `codex app-server` (id, display name, supported reasoning
efforts, default, hidden); Claude answers the `initialize` control request of `claude -p
--input-format stream-json` (`models`: value, resolvedModel, supportedEffortLevels). Both work
without a login. A catalogue is cached per client version (`$XDG_CACHE_HOME/ivoai/catalogues/`).

A model's *tier* (the highest task tier it is trusted with) is not something either client
reports, and guessing it from a name would be inference, which the seeds forbid. It comes from,
in order: the user's `[auto.model_tiers]` config (`"codex:MODEL" = "strong"`), then the reviewed
table below (checked against the catalogues of codex 0.171.0 and claude 2.1.197 on 2026-12-01,
from each model's own catalogue description and price), then one rule: the client's own default
model serves every tier, with the effort carrying the tier. A model with no tier is listed but
never chosen.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ivoai.client.orchestration._scoring import Tier

EFFORT_ORDER = ("minimal", "low", "medium", "high", "xhigh", "max", "ultra")
TIER_EFFORT: Mapping[Tier, str] = {
    Tier.LIGHT: "low",
    Tier.BALANCED: "medium",
    Tier.STRONG: "high",
    Tier.MAX: "max",
}

REVIEWED_ON = "2026-12-01"
REVIEWED_TIERS: Mapping[tuple[str, str], Tier] = {
    # codex 0.171.0 `model/list`
    ("codex", "gpt-6-luna"): Tier.LIGHT,  # "Fast and affordable model for easier tasks."
    ("codex", "gpt-6.1-terra"): Tier.BALANCED,  # "Efficient model ..."
    ("codex", "gpt-6.2-sol"): Tier.STRONG,  # "Fast, go-to model for coding and everyday work." (default)
    ("codex", "gpt-6.2-astra"): Tier.MAX,  # "Our most capable model for complex coding ..."
    # claude 2.1.197 `initialize` models (aliases are stable across model generations)
    ("claude", "haiku"): Tier.LIGHT,  # "Fastest for quick answers", $1/$5 per Mtok
    ("claude", "sonnet"): Tier.STRONG,  # "Efficient for routine tasks", $3/$15 per Mtok
    ("claude", "opus"): Tier.MAX,  # "Best for everyday, complex tasks", $5/$25 per Mtok
    ("claude", "opus[1m]"): Tier.MAX,
}
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._+-]{0,63}$")


@dataclass(frozen=True)
class ModelEntry:
    """One model as the installed client reports it, plus the tier ivoai assigns."""

    vendor: str
    id: str
    display: str
    efforts: tuple[str, ...] = ()
    default_effort: str | None = None
    is_default: bool = False
    hidden: bool = False
    resolved: str | None = None  # Claude: the full model an alias resolves to
    tier: Tier | None = None
    tier_source: str | None = None  # "config", "reviewed", "client_default"

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other names a model-scoped quota window may use for this model."""
        return tuple(a for a in (self.resolved, self.id.split("[")[0]) if a)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (tier as its label)."""
        doc = asdict(self)
        doc["efforts"] = list(self.efforts)
        doc["tier"] = self.tier.label if self.tier is not None else None
        return doc


@dataclass(frozen=True)
class Catalogue:
    """The models one installed client version offers."""

    vendor: str
    client_version: str
    source: str
    fetched_at: float
    models: tuple[ModelEntry, ...] = field(default_factory=tuple)

    def get(self, model_id: str) -> ModelEntry | None:
        """The entry for `model_id` (exact ID), or None."""
        return next((m for m in self.models if m.id == model_id), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (what the cache stores; tiers are re-derived on load)."""
        return {
            "vendor": self.vendor,
            "client_version": self.client_version,
            "source": self.source,
            "fetched_at": self.fetched_at,
            "models": [m.to_dict() for m in self.models],
        }


def assign_tiers(catalogue: Catalogue, overrides: Mapping[str, Tier] | None = None) -> Catalogue:
    """The catalogue with each model's tier from config, the reviewed table or the default-model rule."""
    overrides = overrides or {}
    out = []
    for m in catalogue.models:
        tier: Tier | None
        if (t := overrides.get(f"{m.vendor}:{m.id}")) is not None:
            tier, source = t, "config"
        elif (t := REVIEWED_TIERS.get((m.vendor, m.id))) is not None:
            tier, source = t, "reviewed"
        elif m.is_default and not m.hidden:
            tier, source = Tier.MAX, "client_default"
        else:
            tier, source = None, None
        out.append(ModelEntry(**{**asdict(m), "tier": tier, "tier_source": source}))
    return Catalogue(
        catalogue.vendor, catalogue.client_version, catalogue.source, catalogue.fetched_at, tuple(out)
    )


def choose_effort(model: ModelEntry, tier: Tier) -> str | None:
    """The tier's effort (low/medium/high/max), else the highest supported effort below it, else None."""
    wanted = TIER_EFFORT[tier]
    if wanted in model.efforts:
        return wanted
    below = [e for e in EFFORT_ORDER[: EFFORT_ORDER.index(wanted)] if e in model.efforts]
    return below[-1] if below else None


def _str(value: Any, limit: int = 256) -> str:
    return value[:limit] if isinstance(value, str) else ""


def codex_catalogue(result: Mapping[str, Any], client_version: str, now: float | None = None) -> Catalogue:
    """A catalogue from Codex's `model/list` result (`ModelListResponse.data`)."""
    models = []
    for raw in result.get("data") or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            continue
        efforts = tuple(
            e["reasoningEffort"]
            for e in raw.get("supportedReasoningEfforts") or []
            if isinstance(e, dict) and e.get("reasoningEffort") in EFFORT_ORDER
        )
        models.append(
            ModelEntry(
                vendor="codex",
                id=raw["id"][:128],
                display=_str(raw.get("displayName")) or raw["id"][:128],
                efforts=efforts,
                default_effort=raw.get("defaultReasoningEffort")
                if raw.get("defaultReasoningEffort") in efforts
                else None,
                is_default=raw.get("isDefault") is True,
                hidden=raw.get("hidden") is True,
            )
        )
    return Catalogue(
        "codex", client_version, "codex app-server model/list", now or time.time(), tuple(models)
    )


def claude_catalogue(response: Mapping[str, Any], client_version: str, now: float | None = None) -> Catalogue:
    """A catalogue from the `initialize` control response's `models` (the `default` alias is folded)."""
    raw_models = [
        m for m in response.get("models") or [] if isinstance(m, dict) and isinstance(m.get("value"), str)
    ]
    default = next((m for m in raw_models if m["value"] == "default"), None)
    default_resolved = default.get("resolvedModel") if default else None
    models = []
    for raw in raw_models:
        if raw["value"] == "default":
            continue  # an alias of another entry; that entry is marked as the default instead
        efforts = tuple(e for e in raw.get("supportedEffortLevels") or [] if e in EFFORT_ORDER)
        resolved = raw.get("resolvedModel") if isinstance(raw.get("resolvedModel"), str) else None
        models.append(
            ModelEntry(
                vendor="claude",
                id=raw["value"][:128],
                display=_str(raw.get("displayName")) or raw["value"][:128],
                efforts=efforts,
                is_default=resolved is not None and resolved == default_resolved,
                resolved=resolved[:128] if resolved else None,
            )
        )
    return Catalogue(
        "claude", client_version, "claude initialize control request", now or time.time(), tuple(models)
    )


def catalogue_from_dict(doc: Mapping[str, Any]) -> Catalogue | None:
    """Parse a cached catalogue; None when malformed (it is then fetched again)."""
    try:
        models = tuple(
            ModelEntry(
                vendor=str(m["vendor"]),
                id=str(m["id"]),
                display=str(m.get("display") or m["id"]),
                efforts=tuple(e for e in m.get("efforts") or [] if e in EFFORT_ORDER),
                default_effort=m.get("default_effort") if isinstance(m.get("default_effort"), str) else None,
                is_default=m.get("is_default") is True,
                hidden=m.get("hidden") is True,
                resolved=m.get("resolved") if isinstance(m.get("resolved"), str) else None,
            )
            for m in doc["models"]
        )
        version = str(doc["client_version"])
        if not _VERSION_RE.match(version) or doc["vendor"] not in ("codex", "claude"):
            return None
        return Catalogue(str(doc["vendor"]), version, str(doc["source"]), float(doc["fetched_at"]), models)
    except (KeyError, TypeError, ValueError):
        return None


def safe_version(version: str) -> str:
    """A client version usable in a cache file name.

    Raises:
        ValueError: anything that is not a plain version string.
    """
    if not _VERSION_RE.match(version):
        raise ValueError(f"unusable client version {version[:40]!r}")
    return version


def dumps(catalogue: Catalogue) -> bytes:
    """The cache file's bytes."""
    return (json.dumps(catalogue.to_dict(), sort_keys=True, indent=1) + "\n").encode("utf-8")
