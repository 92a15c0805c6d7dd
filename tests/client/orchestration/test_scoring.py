"""The scheduler arithmetic of AUTO.md, including its two worked delegation examples."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ivoai.client.orchestration._scoring import (
    QUALITY_WEIGHTS,
    ROLE_MIN_TIERS,
    SIGNAL_NAMES,
    Signals,
    Tier,
    capability_score,
    delegation,
    role_min_tier,
    tier_for_score,
)


def _signals(**values: int) -> Signals:
    base = dict.fromkeys(SIGNAL_NAMES, 0)
    base.update(values)
    return Signals(**base)


def test_worked_example_all_signals_5_latency_50_stays_with_the_primary() -> None:
    s = _signals(**{**dict.fromkeys(SIGNAL_NAMES, 5), "latency_sensitivity": 50})
    d = delegation(s, requested=True)
    assert (d.benefit, d.overhead, d.delegated) == (5, 46, False)
    assert "uneconomic" in d.reason


def test_worked_example_high_parallel_value_is_delegated_76_vs_35() -> None:
    s = _signals(
        complexity=70,
        risk=60,
        verification_need=70,
        context_breadth=60,
        parallel_value=90,
        latency_sensitivity=80,
        reasoning_depth=0,
    )
    d = delegation(s, requested=True)
    assert (d.benefit, d.overhead, d.delegated) == (76, 35, True)


def test_delegation_needs_the_planners_request_and_parallelism() -> None:
    s = _signals(
        complexity=70,
        risk=60,
        verification_need=70,
        context_breadth=60,
        parallel_value=90,
        latency_sensitivity=80,
    )
    assert delegation(s, requested=False).delegated is False
    off = delegation(s, requested=True, parallel_enabled=False)
    assert off.delegated is False and "disabled" in off.reason
    assert (off.benefit, off.overhead) == (76, 35)


def test_default_score_is_the_weighted_mean_rounded_half_up() -> None:
    # 30*50 + 25*51 + 20*0 + 15*0 + 10*0 = 2775 -> 27.75 -> 28
    assert capability_score(_signals(complexity=50, risk=51)) == 28
    assert capability_score(_signals(complexity=25, risk=20)) == 13  # (750 + 500) / 100 = 12.5 -> 13
    assert capability_score(_signals(**dict.fromkeys(SIGNAL_NAMES, 100))) == 100


def test_unscored_signals_do_not_move_the_score() -> None:
    a = _signals(complexity=40, parallel_value=0, latency_sensitivity=0)
    b = _signals(complexity=40, parallel_value=100, latency_sensitivity=100)
    assert capability_score(a) == capability_score(b) == 12


def test_quality_profile_weights_risk_and_verification_more() -> None:
    s = _signals(risk=100, verification_need=100)
    assert capability_score(s) == 40
    assert capability_score(s, QUALITY_WEIGHTS) == 55


def test_custom_weights_are_normalized_by_their_sum() -> None:
    s = _signals(complexity=80, risk=20)
    assert capability_score(s, {"complexity": 1, "risk": 1}) == 50
    assert capability_score(s, {"complexity": 3.0, "risk": 1.0}) == 65


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"complexity": -1, "risk": 2}, "non-negative"),
        ({"complexity": 0, "risk": 0}, "more than 0"),
        ({"parallel_value": 5}, "unknown signal"),
        ({"complexity": float("nan")}, "finite"),
    ],
)
def test_invalid_custom_weights_are_refused(weights: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        capability_score(_signals(), weights)


@pytest.mark.parametrize(
    ("score", "tier"),
    [
        (0, Tier.LIGHT),
        (24, Tier.LIGHT),
        (25, Tier.BALANCED),
        (49, Tier.BALANCED),
        (50, Tier.STRONG),
        (74, Tier.STRONG),
        (75, Tier.MAX),
        (100, Tier.MAX),
    ],
)
def test_tier_boundaries(score: int, tier: Tier) -> None:
    assert tier_for_score(score) is tier


def test_role_minimum_tiers_are_the_documented_ones_and_unknown_roles_have_none() -> None:
    assert {k: v.label for k, v in ROLE_MIN_TIERS.items()} == {
        "research": "light",
        "documentation": "light",
        "implementation": "balanced",
        "review": "strong",
        "security": "strong",
        "ops": "strong",
        "synthesis": "strong",
    }
    assert role_min_tier("Review") is Tier.STRONG
    assert role_min_tier("wizard") is None


@pytest.mark.parametrize("bad", [-1, 101, True, 3.5, "7"])
def test_a_signal_outside_0_100_or_not_an_integer_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="complexity"):
        _signals(complexity=bad)  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 100), min_size=7, max_size=7))
def test_score_is_always_between_min_and_max_of_the_scored_signals(values: list[int]) -> None:
    s = Signals(*values)
    scored = [s.complexity, s.risk, s.reasoning_depth, s.verification_need, s.context_breadth]
    assert min(scored) <= capability_score(s) <= max(scored)
