"""The scheduler's decision for a whole plan: validate, score, tier, delegate, choose profiles. Pure.

`evaluate_plan` is what both `ivoai auto plan --check` (offline: cached catalogues, the quota
ledger as it is, no client started) and the orchestrator's `orchestration_plan` tool run, so the
two always agree. Its `--json` form carries `valid`, `errors` (each with `field` and `message`)
and per task `id`, `score`, `tier`, `benefit`, `overhead`, `delegated`, `reason` and `profile`
(null when none; `profile_reason` says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._plan import Plan, PlanIssue, PlanTask, validate_plan
from ivoai.client.orchestration._profiles import Profile, ProfileChoice, ProviderFacts, choose_profile
from ivoai.client.orchestration._quota import VendorQuota
from ivoai.client.orchestration._scoring import (
    Tier,
    capability_score,
    delegation,
    role_min_tier,
    tier_for_score,
)

REPORT_SCHEMA = "ivoai.auto.plan-check.v1"


@dataclass(frozen=True)
class TaskDecision:
    """Everything the scheduler decided about one task."""

    id: str
    role: str
    dependencies: tuple[str, ...]
    score: int
    score_tier: Tier
    tier: Tier  # required: the higher of the score's tier and the role's minimum
    benefit: int
    overhead: int
    delegated: bool
    reason: str
    profile: Profile | None
    profile_reason: str

    def to_dict(self) -> dict[str, Any]:
        """The per-task `--json` contract (plus a few more fields)."""
        return {
            "id": self.id,
            "role": self.role,
            "dependencies": list(self.dependencies),
            "score": self.score,
            "score_tier": self.score_tier.label,
            "tier": self.tier.label,
            "benefit": self.benefit,
            "overhead": self.overhead,
            "delegated": self.delegated,
            "reason": self.reason,
            "profile": None if self.profile is None else self.profile.to_dict(),
            "profile_reason": self.profile_reason,
        }


@dataclass(frozen=True)
class PlanReport:
    """Validation errors or the decision per task."""

    valid: bool
    errors: tuple[PlanIssue, ...] = ()
    tasks: tuple[TaskDecision, ...] = ()
    plan: Plan | None = field(default=None, compare=False)

    def decision(self, task_id: str) -> TaskDecision | None:
        """The decision for one task ID."""
        return next((t for t in self.tasks if t.id == task_id), None)

    def to_dict(self) -> dict[str, Any]:
        """`{valid, errors, tasks}` exactly as `ivoai auto plan --check --json` prints it."""
        return {
            "schema": REPORT_SCHEMA,
            "valid": self.valid,
            "errors": [e.to_dict() for e in self.errors],
            "tasks": [t.to_dict() for t in self.tasks],
        }


def decide_task(
    task: PlanTask,
    weights: Mapping[str, float],
    providers: Iterable[ProviderFacts],
    quotas: Mapping[str, VendorQuota],
    *,
    parallel_enabled: bool = True,
    prefer: str | None = None,
    extra_tiers: int = 0,
    cheaper_than: Tier | None = None,
) -> TaskDecision:
    """Score, tier (raised by the role minimum and `extra_tiers` escalations) and profile for one task."""
    score = capability_score(task.signals, weights)
    score_tier = tier_for_score(score)
    role_tier = role_min_tier(task.role) or Tier.LIGHT
    tier = Tier(min(Tier.MAX, max(score_tier, role_tier) + extra_tiers))
    d = delegation(task.signals, requested=task.delegate, parallel_enabled=parallel_enabled)
    choice: ProfileChoice
    if d.delegated or task.model is not None:
        choice = choose_profile(
            tier,
            providers,
            quotas,
            vendor=task.vendor,
            model=task.model,
            effort=task.effort,
            prefer=prefer,
            cheaper_than=cheaper_than,
        )
    else:
        choice = ProfileChoice(None, "not delegated: the primary does this task itself")
    delegated, reason = d.delegated, d.reason
    if delegated and choice.profile is None:
        delegated, reason = False, f"{d.reason}, but {choice.reason}"
    return TaskDecision(
        id=task.id,
        role=task.role,
        dependencies=task.dependencies,
        score=score,
        score_tier=score_tier,
        tier=tier,
        benefit=d.benefit,
        overhead=d.overhead,
        delegated=delegated,
        reason=reason,
        profile=choice.profile,
        profile_reason=choice.reason,
    )


def evaluate_plan(
    doc: Any,
    providers: Iterable[ProviderFacts],
    quotas: Mapping[str, VendorQuota],
    *,
    parallel_enabled: bool = True,
    prefer: str | None = None,
) -> PlanReport:
    """Validate the plan document, then decide every task. Invalid: no decisions, every error."""
    plan, issues = validate_plan(doc)
    if plan is None:
        return PlanReport(False, tuple(issues))
    providers = list(providers)
    decisions = []
    errors: list[PlanIssue] = []
    for i, task in enumerate(plan.tasks):
        decision = decide_task(
            task, plan.weights, providers, quotas, parallel_enabled=parallel_enabled, prefer=prefer
        )
        decisions.append(decision)
        if (task.model is not None or task.effort is not None) and decision.profile is None:
            errors.append(
                PlanIssue(
                    f"tasks[{i}].model" if task.model else f"tasks[{i}].effort", decision.profile_reason
                )
            )
    return PlanReport(not errors, tuple(errors), tuple(decisions), plan)
