"""Deterministic context compaction and the offline strategy comparison (seed 001, `protectContext`).

Before *every* provider request (including each request of a long loop) `ContextGuard.check`
estimates the tokens of prefix + turns. Above the threshold it replaces the older turns with a
local, deterministic summary and keeps the complete recent turns (never a partial turn). The
summary always carries the eight categories that blunt truncation loses: goals, constraints,
approvals, changed files, test state, incomplete work, next steps and uncertain effects. They
come from the caller's `SessionState` plus tagged lines (`GOAL:`, `CONSTRAINT:`, `APPROVED:`,
`CHANGED:`, `TEST:`, `TODO:`, `NEXT:`, `UNCERTAIN:`) found in the turns being compacted.

Token counts are an offline estimate (UTF-8 bytes / 4, rounded up), the same for every strategy,
so comparisons are fair and need no tokenizer or network.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ivoai.client.governance._metrics import ContextMetrics
from ivoai.common.errors import ValidationError
from ivoai.common.limits import (
    COMPACTION_CATEGORY_MAX_ITEMS,
    COMPACTION_ITEM_MAX_CHARS,
    COMPACTION_MIN_RECENT_TURNS,
    COMPACTION_RECENT_RATIO_DEFAULT,
    COMPACTION_THRESHOLD_RATIO_DEFAULT,
    COMPACTION_WINDOW_TOKENS_DEFAULT,
    TOKEN_ESTIMATE_BYTES_PER_TOKEN,
)

Role = Literal["system", "user", "assistant", "tool"]

CATEGORIES = (
    "goals",
    "constraints",
    "approvals",
    "changed_files",
    "test_state",
    "incomplete_work",
    "next_steps",
    "uncertain_effects",
)
_TITLES = {
    "goals": "Goals",
    "constraints": "Constraints",
    "approvals": "Approvals",
    "changed_files": "Changed files",
    "test_state": "Test state",
    "incomplete_work": "Incomplete work",
    "next_steps": "Next steps",
    "uncertain_effects": "Uncertain effects",
}
_TAGS = {
    "goal": "goals",
    "constraint": "constraints",
    "approved": "approvals",
    "approval": "approvals",
    "changed": "changed_files",
    "test": "test_state",
    "tests": "test_state",
    "todo": "incomplete_work",
    "incomplete": "incomplete_work",
    "next": "next_steps",
    "uncertain": "uncertain_effects",
}
_TAG_RE = re.compile(r"^\s*(?:[-*]\s*)?([A-Za-z]+)\s*:\s*(.+?)\s*$")


def estimate_tokens(text: str) -> int:
    """Offline token estimate: UTF-8 bytes divided by 4, rounded up."""
    n = len(text.encode("utf-8"))
    return -(-n // TOKEN_ESTIMATE_BYTES_PER_TOKEN)


@dataclass(frozen=True)
class Turn:
    """One message of the conversation."""

    role: Role
    text: str

    @property
    def tokens(self) -> int:
        """Estimated tokens of this turn."""
        return estimate_tokens(self.text)


@dataclass(frozen=True)
class SessionState:
    """What the primary knows must survive compaction; each list is kept in order."""

    goals: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    approvals: tuple[str, ...] = ()
    changed_files: tuple[str, ...] = ()
    test_state: tuple[str, ...] = ()
    incomplete_work: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()
    uncertain_effects: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompactionPolicy:
    """Thresholds of one strategy; the default is the documented one and is never changed at run time."""

    name: str = "default"
    window_tokens: int = COMPACTION_WINDOW_TOKENS_DEFAULT
    threshold_ratio: float = COMPACTION_THRESHOLD_RATIO_DEFAULT
    recent_ratio: float = COMPACTION_RECENT_RATIO_DEFAULT
    min_recent_turns: int = COMPACTION_MIN_RECENT_TURNS

    def __post_init__(self) -> None:
        if self.window_tokens < 1:
            raise ValidationError("window_tokens must be ≥ 1")
        if not 0 < self.threshold_ratio <= 1:
            raise ValidationError("threshold_ratio must be in (0, 1]")
        if not 0 < self.recent_ratio < self.threshold_ratio:
            raise ValidationError("recent_ratio must be in (0, threshold_ratio)")
        if self.min_recent_turns < 1:
            raise ValidationError("min_recent_turns must be ≥ 1")

    @property
    def threshold_tokens(self) -> int:
        """Compact when a request is estimated above this many tokens."""
        return int(self.window_tokens * self.threshold_ratio)


DEFAULT_POLICY = CompactionPolicy()


@dataclass(frozen=True)
class Compaction:
    """The turns to send and, when compacted, why and by how much."""

    turns: tuple[Turn, ...]
    compacted: bool
    reason: str
    tokens_before: int
    tokens_after: int
    summary: str | None = None
    summary_sha256: str | None = None
    dropped_turns: int = 0
    categories: dict[str, int] = field(default_factory=dict)


def _bounded(items: list[str]) -> tuple[list[str], int]:
    """The newest COMPACTION_CATEGORY_MAX_ITEMS items (each cut to its limit) and how many were dropped."""
    clipped = [
        i if len(i) <= COMPACTION_ITEM_MAX_CHARS else i[: COMPACTION_ITEM_MAX_CHARS - 1] + "…" for i in items
    ]
    dropped = max(0, len(clipped) - COMPACTION_CATEGORY_MAX_ITEMS)
    return clipped[dropped:], dropped


def _collect(state: SessionState, dropped: Sequence[Turn]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {c: list(getattr(state, c)) for c in CATEGORIES}
    for turn in dropped:
        for line in turn.text.splitlines():
            m = _TAG_RE.match(line)
            if m and m.group(1).lower() in _TAGS:
                found[_TAGS[m.group(1).lower()]].append(m.group(2))
    return {cat: list(dict.fromkeys(items)) for cat, items in found.items()}


def render_summary(state: SessionState, dropped: Sequence[Turn]) -> tuple[str, dict[str, int]]:
    """The deterministic summary of `dropped` turns plus `state`; all eight categories, always."""
    found = _collect(state, dropped)
    lines = [
        "[ivoai context summary: earlier turns were compacted locally and deterministically]",
        f"Compacted turns: {len(dropped)} ({sum(len(t.text.encode('utf-8')) for t in dropped)} bytes, "
        f"sha256 {_turns_sha(dropped)[:16]})",
    ]
    counts: dict[str, int] = {}
    for cat in CATEGORIES:
        items, omitted = _bounded(found[cat])
        counts[cat] = len(items)
        lines.append(f"{_TITLES[cat]}:")
        lines.extend(f"- {i}" for i in items)
        if not items:
            lines.append("- (none recorded)")
        if omitted:
            lines.append(f"- ({omitted} older entries omitted)")
    return "\n".join(lines) + "\n", counts


def _turns_sha(turns: Sequence[Turn]) -> str:
    h = hashlib.sha256()
    for t in turns:
        h.update(t.role.encode() + b"\x00" + t.text.encode("utf-8") + b"\x00")
    return h.hexdigest()


def protect_context(
    turns: Sequence[Turn],
    *,
    state: SessionState = SessionState(),
    policy: CompactionPolicy = DEFAULT_POLICY,
    prefix_tokens: int = 0,
) -> Compaction:
    """Compact `turns` when prefix + turns exceed the policy's threshold; otherwise return them as is."""
    before = prefix_tokens + sum(t.tokens for t in turns)
    if before <= policy.threshold_tokens:
        return Compaction(tuple(turns), False, "below_threshold", before, before)
    recent_budget = int(policy.window_tokens * policy.recent_ratio)
    keep = 0
    used = 0
    for turn in reversed(turns):
        if keep >= policy.min_recent_turns and used + turn.tokens > recent_budget:
            break
        keep += 1
        used += turn.tokens
    split = len(turns) - keep
    if split <= 0:
        return Compaction(tuple(turns), False, "over_threshold_nothing_to_compact", before, before)
    dropped = turns[:split]
    summary, counts = render_summary(state, dropped)
    kept = (Turn("system", summary), *turns[split:])
    after = prefix_tokens + sum(t.tokens for t in kept)
    reason = "threshold_exceeded" if after <= policy.window_tokens else "threshold_exceeded_still_over_window"
    return Compaction(
        kept,
        True,
        reason,
        before,
        after,
        summary=summary,
        summary_sha256=hashlib.sha256(summary.encode("utf-8")).hexdigest(),
        dropped_turns=split,
        categories=counts,
    )


class ContextGuard:
    """Checks the threshold before each provider request and records what it did in ContextMetrics."""

    def __init__(
        self, policy: CompactionPolicy = DEFAULT_POLICY, metrics: ContextMetrics | None = None
    ) -> None:
        self.policy = policy
        self.metrics = metrics if metrics is not None else ContextMetrics()

    def check(
        self, turns: Sequence[Turn], *, state: SessionState = SessionState(), prefix_tokens: int = 0
    ) -> Compaction:
        """Call before every provider request; returns the turns to send."""
        result = protect_context(turns, state=state, policy=self.policy, prefix_tokens=prefix_tokens)
        m = self.metrics
        m.checks += 1
        if result.compacted:
            m.compactions += 1
            m.last_reason = result.reason
            m.last_tokens_before = result.tokens_before
            m.last_tokens_after = result.tokens_after
            m.last_summary_sha256 = result.summary_sha256
        return result


@dataclass(frozen=True)
class StrategyReport:
    """Offline figures of one strategy on one conversation."""

    name: str
    compacted: bool
    tokens_before: int
    tokens_after: int
    kept_turns: int
    dropped_turns: int
    summary_bytes: int
    preserved: dict[str, int]

    @property
    def ratio(self) -> float:
        """tokens_after / tokens_before (1.0 when nothing was compacted)."""
        return self.tokens_after / self.tokens_before if self.tokens_before else 1.0


def compare_context_strategies(
    turns: Sequence[Turn],
    *,
    state: SessionState = SessionState(),
    strategies: Sequence[CompactionPolicy] | None = None,
    prefix_tokens: int = 0,
) -> list[StrategyReport]:
    """Run each strategy on the same input, offline; changes no default and no input."""
    chosen = (
        list(strategies)
        if strategies is not None
        else [
            DEFAULT_POLICY,
            replace(DEFAULT_POLICY, name="early", threshold_ratio=0.6, recent_ratio=0.2),
            replace(DEFAULT_POLICY, name="late", threshold_ratio=0.95, recent_ratio=0.3),
        ]
    )
    reports = []
    for policy in chosen:
        r = protect_context(turns, state=state, policy=policy, prefix_tokens=prefix_tokens)
        reports.append(
            StrategyReport(
                name=policy.name,
                compacted=r.compacted,
                tokens_before=r.tokens_before,
                tokens_after=r.tokens_after,
                kept_turns=len(r.turns) - (1 if r.compacted else 0),
                dropped_turns=r.dropped_turns,
                summary_bytes=len(r.summary.encode("utf-8")) if r.summary else 0,
                preserved=dict(r.categories),
            )
        )
    return reports
