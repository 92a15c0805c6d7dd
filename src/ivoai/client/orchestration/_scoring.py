"""The scheduler's arithmetic, exactly as the original states it (AUTO.md): pure, no I/O.

- Seven signals per task, integers 0-100, all required.
- Capability score: round-half-up of sum(w_i * s_i) / W over five of them; default weights
  complexity 30, risk 25, reasoning_depth 20, verification_need 15, context_breadth 10 (W = 100);
  custom weights are non-negative with a positive sum and are normalized by that sum.
- Tiers: 0-24 LIGHT, 25-49 BALANCED, 50-74 STRONG, 75-100 MAX; a role raises the tier to its minimum.
- Delegation (decided here, never by the planner):
  benefit  = (45*parallel_value + 20*verification_need + 20*risk + 15*context_breadth + 50) div 100
  overhead = 25 + (100 - complexity)*20 div 100 + latency_sensitivity*5 div 100
  delegate iff benefit > overhead, the planner asked for it and parallelism is enabled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction

from ivoai.common.validate import is_int

SIGNAL_NAMES = (
    "complexity",
    "risk",
    "reasoning_depth",
    "context_breadth",
    "verification_need",
    "parallel_value",
    "latency_sensitivity",
)
SCORED_SIGNALS = ("complexity", "risk", "reasoning_depth", "verification_need", "context_breadth")
DEFAULT_WEIGHTS: Mapping[str, int] = {
    "complexity": 30,
    "risk": 25,
    "reasoning_depth": 20,
    "verification_need": 15,
    "context_breadth": 10,
}
QUALITY_WEIGHTS: Mapping[str, int] = {
    "complexity": 20,
    "risk": 30,
    "reasoning_depth": 20,
    "verification_need": 25,
    "context_breadth": 5,
}
WEIGHT_PROFILES: Mapping[str, Mapping[str, int]] = {"default": DEFAULT_WEIGHTS, "quality": QUALITY_WEIGHTS}


class Tier(IntEnum):
    """Capability tiers, ordered: a higher tier can do what a lower one can."""

    LIGHT = 0
    BALANCED = 1
    STRONG = 2
    MAX = 3

    @property
    def label(self) -> str:
        """The lower-case name used in JSON and the CLI (`light` … `max`)."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: str) -> Tier:
        """`light|balanced|strong|max` (any case).

        Raises:
            ValueError: anything else.
        """
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown tier {value!r}: expected light, balanced, strong or max") from None


ROLE_MIN_TIERS: Mapping[str, Tier] = {
    "research": Tier.LIGHT,
    "documentation": Tier.LIGHT,
    "implementation": Tier.BALANCED,
    "review": Tier.STRONG,
    "security": Tier.STRONG,
    "ops": Tier.STRONG,
    "synthesis": Tier.STRONG,
}


@dataclass(frozen=True)
class Signals:
    """The seven task signals, each an integer 0-100."""

    complexity: int
    risk: int
    reasoning_depth: int
    context_breadth: int
    verification_need: int
    parallel_value: int
    latency_sensitivity: int

    def __post_init__(self) -> None:
        for name in SIGNAL_NAMES:
            value = getattr(self, name)
            if not is_int(value, 0, 100):
                raise ValueError(f"signal {name} must be an integer 0-100, got {value!r}")

    def as_dict(self) -> dict[str, int]:
        """The signals by name, in the documented order."""
        return {name: getattr(self, name) for name in SIGNAL_NAMES}


def check_weights(weights: Mapping[str, float]) -> dict[str, Fraction]:
    """Validate custom weights (the five scored signals, non-negative, sum > 0) as exact fractions.

    Raises:
        ValueError: an unknown or missing signal, a negative or non-finite weight, or a zero sum.
    """
    unknown = sorted(set(weights) - set(SCORED_SIGNALS))
    if unknown:
        raise ValueError(f"weights: unknown signal(s) {unknown}; weighted signals are {list(SCORED_SIGNALS)}")
    out: dict[str, Fraction] = {}
    for name in SCORED_SIGNALS:
        value = weights.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"weights.{name} must be a finite number")
        if value < 0:
            raise ValueError(f"weights.{name} must be non-negative")
        out[name] = Fraction(value)
    if sum(out.values()) <= 0:
        raise ValueError("weights must sum to more than 0")
    return out


def capability_score(signals: Signals, weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> int:
    """Integer round-half-up of the weighted mean of the five scored signals (0-100).

    Raises:
        ValueError: invalid weights (see `check_weights`).
    """
    w = check_weights(weights)
    total = sum(w.values())
    mean = sum(w[name] * getattr(signals, name) for name in SCORED_SIGNALS) / total
    return int(math.floor(mean + Fraction(1, 2)))


def tier_for_score(score: int) -> Tier:
    """0-24 LIGHT, 25-49 BALANCED, 50-74 STRONG, 75-100 MAX."""
    if score < 25:
        return Tier.LIGHT
    if score < 50:
        return Tier.BALANCED
    if score < 75:
        return Tier.STRONG
    return Tier.MAX


def role_min_tier(role: str) -> Tier | None:
    """The minimum tier of a known role (case-insensitive), or None for an unknown role."""
    return ROLE_MIN_TIERS.get(role.lower())


@dataclass(frozen=True)
class Delegation:
    """ivoai's delegation decision for one task, with the two integers it compared."""

    benefit: int
    overhead: int
    delegated: bool
    reason: str


def delegation(signals: Signals, *, requested: bool, parallel_enabled: bool = True) -> Delegation:
    """Delegate iff benefit > overhead, the planner asked for it and parallelism is enabled."""
    s = signals
    benefit = (
        45 * s.parallel_value + 20 * s.verification_need + 20 * s.risk + 15 * s.context_breadth + 50
    ) // 100
    overhead = 25 + (100 - s.complexity) * 20 // 100 + s.latency_sensitivity * 5 // 100
    if not requested:
        return Delegation(benefit, overhead, False, "the planner kept this task (delegate: false)")
    if not parallel_enabled:
        return Delegation(benefit, overhead, False, "parallel workers are disabled for this session")
    if benefit <= overhead:
        return Delegation(
            benefit,
            overhead,
            False,
            f"uneconomic: benefit {benefit} <= overhead {overhead}; the primary keeps it",
        )
    return Delegation(benefit, overhead, True, f"benefit {benefit} > overhead {overhead}")
