"""The orchestrator session's data: a task's run state and what the launcher hands the orchestrator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ivoai.client.orchestration._plan import PlanTask
from ivoai.client.orchestration._scheduler import TaskDecision
from ivoai.client.orchestration._worker_spec import KnowledgeAccess

TaskState = Literal[
    "kept_by_primary",
    "pending",
    "waiting_dependencies",
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "timed_out",
    "partial",
    "blocked",
]
PlanState = Literal["none", "approved", "rejected"]


@dataclass
class TaskRun:
    """A task's mutable run state (metadata only)."""

    task: PlanTask
    decision: TaskDecision
    state: TaskState = "pending"
    extra_tiers: int = 0
    worker_ids: list[str] = field(default_factory=list)
    escalations: list[dict[str, Any]] = field(default_factory=list)
    retried_on_model_limit: bool = False
    started_at: float | None = None
    ended_at: float | None = None

    def metadata(self) -> dict[str, Any]:
        """What the session record may hold about this task."""
        d = self.decision
        return {
            "id": d.id,
            "role": d.role,
            "dependencies": list(d.dependencies),
            "score": d.score,
            "tier": d.tier.label,
            "benefit": d.benefit,
            "overhead": d.overhead,
            "delegated": d.delegated,
            "profile": None
            if d.profile is None
            else {
                "vendor": d.profile.vendor,
                "model": d.profile.model,
                "effort": d.profile.effort,
                "tier_source": d.profile.tier_source,
                "downgraded": d.profile.downgraded,
            },
            "state": self.state,
            "worker_ids": list(self.worker_ids),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_seconds": None
            if self.started_at is None or self.ended_at is None
            else round(self.ended_at - self.started_at, 3),
            "escalations": list(self.escalations),
        }


@dataclass(frozen=True)
class SessionConfig:
    """What the launcher hands the orchestrator (the runtime file of the session)."""

    session_id: str
    planner: str
    workdir: str
    approve: bool = False  # `ivoai auto --yes`
    workers: int = 2
    knowledge: KnowledgeAccess | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # Issue 16: the AUTO chain this primary belongs to (the first session, then each failover's);
    # checkpoints are kept per chain and artifacts of earlier primaries of the chain stay readable.
    chain: tuple[str, ...] = ()
    coordinator: str = "native"  # `ruflo` when the safe-profile gate passed (see _ruflo)

    @property
    def chain_root(self) -> str:
        """The chain's first session (the key of its checkpoint)."""
        return self.chain[0] if self.chain else self.session_id

    @property
    def owners(self) -> tuple[str, ...]:
        """Sessions whose artifacts this orchestrator may read: its own first, then the chain's."""
        return (self.session_id, *(s for s in reversed(self.chain) if s != self.session_id))
