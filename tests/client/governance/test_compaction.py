"""Deterministic compaction: thresholds before every request, categories kept, recent turns complete."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ivoai.client.governance import (
    CATEGORIES,
    DEFAULT_POLICY,
    CompactionPolicy,
    ContextGuard,
    SessionState,
    Turn,
    compare_context_strategies,
    estimate_tokens,
    protect_context,
)
from ivoai.common.errors import ValidationError

POLICY = CompactionPolicy(name="test", window_tokens=1000, threshold_ratio=0.8, recent_ratio=0.3)


def _turn(i: int, size: int = 400) -> Turn:
    return Turn("user" if i % 2 == 0 else "assistant", f"turn {i}: " + "w" * size)


def test_token_estimate_is_bytes_over_four_rounded_up() -> None:
    assert [estimate_tokens(s) for s in ("", "a", "abcd", "abcde", "é")] == [0, 1, 1, 2, 1]


def test_below_the_threshold_turns_are_returned_unchanged() -> None:
    turns = [_turn(0), _turn(1)]
    r = protect_context(turns, policy=POLICY)
    assert not r.compacted and r.turns == tuple(turns) and r.reason == "below_threshold"


def test_above_the_threshold_older_turns_become_a_summary_and_recent_turns_stay_complete() -> None:
    turns = [_turn(i) for i in range(12)]
    turns[1] = Turn("user", "GOAL: ship the store\nCONSTRAINT: no network\nAPPROVED: delete tmp files")
    turns[2] = Turn("assistant", "CHANGED: src/a.py\nTEST: 3 failing in test_b.py\nTODO: fix test_b")
    turns[3] = Turn("assistant", "NEXT: rerun pytest\nUNCERTAIN: did the migration run twice?")
    state = SessionState(goals=("keep evidence exact",), approvals=("user approved GC",))
    r = protect_context(turns, state=state, policy=POLICY)
    assert r.compacted and r.reason == "threshold_exceeded"
    assert r.tokens_after < r.tokens_before and r.tokens_after <= POLICY.window_tokens
    summary = r.turns[0]
    assert summary.role == "system" and r.summary == summary.text
    for expected in (
        "keep evidence exact", "ship the store", "no network", "user approved GC", "delete tmp files",
        "src/a.py", "3 failing in test_b.py", "fix test_b", "rerun pytest", "did the migration run twice?",
    ):  # fmt: skip
        assert expected in summary.text
    assert all(r.categories[c] >= 1 for c in CATEGORIES)
    kept = r.turns[1:]
    assert kept == tuple(turns[-len(kept) :])  # complete, unmodified, in order
    assert len(kept) >= POLICY.min_recent_turns and r.dropped_turns == len(turns) - len(kept)


def test_compaction_is_deterministic() -> None:
    turns = [_turn(i) for i in range(12)]
    a = protect_context(turns, policy=POLICY)
    b = protect_context(list(turns), policy=POLICY)
    assert a == b and a.summary_sha256 is not None


def test_a_huge_last_turn_is_kept_whole_never_cut() -> None:
    turns = [_turn(0), _turn(1), Turn("tool", "x" * 8000)]
    r = protect_context(turns, policy=POLICY)
    assert r.turns[-1] == turns[-1] and r.reason == "threshold_exceeded_still_over_window"


def test_the_guard_checks_before_every_request_in_a_loop() -> None:
    guard = ContextGuard(POLICY)
    turns: list[Turn] = []
    compacted_at = []
    for i in range(20):
        turns.append(_turn(i, 300))
        result = guard.check(turns)
        if result.compacted:
            compacted_at.append(i)
            turns = list(result.turns)
    assert guard.metrics.checks == 20
    assert compacted_at and compacted_at[0] == 10  # the first request estimated above 800 tokens
    assert guard.metrics.compactions == len(compacted_at)
    assert guard.metrics.last_summary_sha256 is not None


def test_strategy_comparison_is_offline_and_changes_no_default() -> None:
    before = replace(DEFAULT_POLICY)
    turns = [_turn(i, 40_000) for i in range(30)]
    reports = compare_context_strategies(turns)
    assert [r.name for r in reports] == ["default", "early", "late"]
    assert before == DEFAULT_POLICY and DEFAULT_POLICY.threshold_ratio == 0.8
    assert all(r.tokens_before == reports[0].tokens_before for r in reports)
    assert reports[1].tokens_after <= reports[0].tokens_after
    assert 0 < reports[0].ratio < 1


def test_invalid_policies_are_rejected() -> None:
    with pytest.raises(ValidationError, match="threshold_ratio"):
        CompactionPolicy(threshold_ratio=1.5)
    with pytest.raises(ValidationError, match="recent_ratio"):
        CompactionPolicy(recent_ratio=0.9)
