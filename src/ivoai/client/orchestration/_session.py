"""One AUTO session as the orchestrator MCP sees it: brief, plan, tasks, workers, limits, metadata.

Every orchestrator tool is a method here (the MCP layer in `_tools` only parses and renders):

- `bootstrap`: the prompt gate, then the SharedContextBrief (its worker prefix fingerprinted in the
  run metrics; governance, seed 001);
- `plan`: validate + score + profiles (`evaluate_plan`, the same decision as `plan --check`), then
  the user's approval (see `approve` in `_tools`); a plan is never run unapproved;
- `spawn` / `spawn_batch`: only tasks ivoai decided to delegate; a task whose dependencies have
  not succeeded waits and is started when they have; a failed dependency blocks it;
- `wait`, `result`, `cancel`, `escalate` (+1 tier, reason 3-1024 characters), artifact reads.

Limits observed by workers are acted on here: a confirmed hard limit is recorded in the quota
ledger and trips the vendor's 60-minute launch breaker; a model-scoped limit is recorded and the
task is retried once on a cheaper model of the same vendor; transient ones are reported with their
back-off. Results handed to the primary pass through governance's context guard: once they would
fill the primary's context past the threshold, later results come in compact form with the
deterministic summary of what came before.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ivoai.client.governance import (
    CompactionPolicy,
    ContextGuard,
    RunMetrics,
    SessionState,
    ToolSpec,
    Turn,
    estimate_tokens,
)
from ivoai.client.orchestration._autoresume import RESUME_PROMPT, AutoResumer, Stalled
from ivoai.client.orchestration._brief import SharedContextBrief, worker_prefix
from ivoai.client.orchestration._classify import LimitKind, LimitVerdict
from ivoai.client.orchestration._errors import OrchestrationUsageError, WorkerNotFoundError
from ivoai.client.orchestration._fuse import LaunchFuse
from ivoai.client.orchestration._gate import GateResult, check_prompt
from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration._plan import Plan, PlanTask
from ivoai.client.orchestration._pool import WorkerEntry, WorkerPool
from ivoai.client.orchestration._quota import (
    HardLimit,
    QuotaWindow,
    VendorQuota,
    claude_event_hard_limit,
    claude_event_window,
)
from ivoai.client.orchestration._runtime import Runtime, RuntimeFacts
from ivoai.client.orchestration._scheduler import PlanReport, TaskDecision, decide_task, evaluate_plan
from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.client.orchestration._state import read_state, write_state
from ivoai.client.orchestration._worker import WorkerIO, WorkerReport
from ivoai.client.orchestration._worker_spec import KnowledgeAccess, WorkerSpec
from ivoai.client.workingcontext import ArtifactStore, StoreLimits
from ivoai.common.errors import IvoaiError
from ivoai.common.ids import random_id
from ivoai.common.limits import (
    ARTIFACT_TTL_MAX_SECONDS,
    AUTO_ESCALATION_REASON_MAX_CHARS,
    AUTO_ESCALATION_REASON_MIN_CHARS,
    AUTO_RESULT_CONTEXT_WINDOW_TOKENS,
    AUTO_WAIT_MAX_SECONDS,
    AUTO_WAIT_MIN_SECONDS,
)
from ivoai.common.paths import XdgPaths
from ivoai.common.redact import redact

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
DEPENDENCY_SUMMARY_MAX_CHARS = 1500
# A result's evidence is re-checked (metadata, owner, TTL) at most this often: a primary polling one
# result should not pay a directory walk per call, and a 7-day TTL does not change within a minute.
EVIDENCE_RECHECK_SECONDS = 60.0  # what a dependent task's prompt gets of each dependency's summary


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


class OrchestratorSession:
    """State and behaviour of one session's orchestrator."""

    def __init__(
        self,
        config: SessionConfig,
        settings: AutoSettings,
        *,
        paths: XdgPaths,
        spool_root: Path,
        store: ArtifactStore | None = None,
        runtime: Runtime | None = None,
        fuse: LaunchFuse | None = None,
        worker_overrides: Callable[[WorkerSpec], WorkerSpec] | None = None,
        lifecycle: Any = None,
    ) -> None:
        self.config = config
        self.lifecycle = lifecycle  # issue 16: Ruflo mirrors worker lifecycles (opaque IDs only)
        self.settings = settings
        self.paths = paths
        self.runtime = runtime or Runtime(settings, paths=paths, env=config.env)
        self.ledger: QuotaLedger = self.runtime.ledger
        self.fuse = fuse or LaunchFuse(paths)
        # Worker evidence lives as long as the store allows (7 days), so a long session's results stay
        # readable; the default 24 h would expire them under a session that is still running.
        self.store = store or ArtifactStore(
            paths.working_context_dir, limits=StoreLimits(ttl_default_seconds=ARTIFACT_TTL_MAX_SECONDS)
        )
        self.metrics = RunMetrics()
        self.guard = ContextGuard(
            CompactionPolicy(name="results", window_tokens=AUTO_RESULT_CONTEXT_WINDOW_TOKENS)
        )
        self.worker_overrides = worker_overrides
        self._lock = threading.RLock()
        self.gate: GateResult | None = None
        self.brief: SharedContextBrief | None = None
        self.plan_doc: Plan | None = None
        self.report: PlanReport | None = None
        self.plan_state: PlanState = "none"
        self.plan_version = 0
        self.approval: str | None = None
        self.tasks: dict[str, TaskRun] = {}
        self.limits: list[dict[str, Any]] = []
        # What the primary was handed, per worker (a re-read replaces, it does not add); "" holds the
        # compaction summary once there is one. Report dicts are built once per finished worker.
        self.returned: dict[str, Turn] = {}
        self._docs: dict[str, tuple[dict[str, Any], str]] = {}
        self._verified: dict[str, float] = {}  # artifact ID -> when `describe` last found it intact
        self.last_checkpoint: dict[str, Any] | None = None
        self.conserved: set[str] = set()  # issue 16: vendors the user chose to spare
        self.conservation: list[dict[str, Any]] = []
        io = WorkerIO(
            self.store, spool_root, dict(config.env), self.metrics.artifacts, self._reprobe, self._on_limit
        )
        self.pool = WorkerPool(io, self.fuse, concurrency=config.workers, on_change=self._on_worker_change)
        self.resumer: AutoResumer | None = None
        if settings.resume_after_reset:
            self.resumer = AutoResumer(
                paths,
                config.session_id,
                windows_max=settings.resume_windows,
                check=self._resume_check,
                cont=self._continue,
                on_change=self.persist,
            )
            previous = read_state(config.session_id, paths) or {}  # a restarted orchestrator takes over
            for doc in ((previous.get("resume") or {}).get("workers")) or []:
                entry = Stalled.from_dict(doc)
                if entry is not None and entry.state == "waiting_for_reset" and entry.vendor:
                    self.resumer.add(entry)
            if self.resumer.entries:
                self.resumer.tick()  # past their reset already: continue them before serving
        self.persist()

    # -- facts ----------------------------------------------------------------------------------

    def facts(self, *, refresh: bool = False) -> RuntimeFacts:
        """Providers and quota (cached 45 s unless `refresh`)."""
        return self.runtime.current(refresh=refresh)

    def _reprobe(self, vendor: str) -> VendorQuota | None:
        try:
            return self.runtime.current(refresh=True, vendors=(vendor,)).quota.get(vendor)
        except (IvoaiError, OSError):
            return None

    # -- bootstrap ------------------------------------------------------------------------------

    def bootstrap(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Gate the request; when ready, keep the brief and fingerprint the worker prefix."""
        request = args.get("request") or args["objective"]
        try:
            gate = check_prompt(
                str(request),
                deliverable=args.get("deliverable"),
                acceptance_criteria=tuple(args.get("acceptance_criteria") or ()),
            )
        except ValueError as exc:
            raise OrchestrationUsageError(f"request: {exc}") from None
        brief = SharedContextBrief.model_validate({k: v for k, v in args.items() if k != "request"})
        with self._lock:
            self.gate = gate
            if gate.state == "ready":
                self.brief = brief
                prefix = worker_prefix(brief, tools=self._tool_specs())
                self.metrics.context.record_prefix(prefix.sha256, prefix.byte_length)
            self.persist()
        doc: dict[str, Any] = {"state": gate.state, "gate": gate.to_dict()}
        if gate.state == "ready":
            doc["brief"] = {"sha256": brief.sha256, "bytes": len(brief.canonical_json().encode())}
            doc["next"] = (
                "Submit a plan with orchestration_plan (at most 12 tasks, each with its seven signals); "
                "ivoai scores it, decides delegation and chooses profiles."
            )
        else:
            doc["next"] = "Ask the user the questions above, then call orchestration_bootstrap again."
        return doc

    def _tool_specs(self) -> tuple[ToolSpec, ...]:
        k = self.config.knowledge
        if k is None:
            return ()
        return tuple(
            ToolSpec(t, "read-only knowledge tool of the session (memory first, then context)")
            for t in sorted(k.read_tools)
        )

    # -- capabilities ---------------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """Clients, models with tiers, quota, limits, pool: what the primary plans against."""
        facts = self.facts()
        vendors = []
        for p in facts.providers:
            q = facts.quota.get(p.vendor)
            models = []
            if p.catalogue is not None:
                models = [
                    {
                        "id": m.id,
                        "tier": m.tier.label if m.tier is not None else None,
                        "efforts": list(m.efforts),
                        "default": m.is_default,
                    }
                    for m in p.catalogue.models
                    if not m.hidden
                ]
            vendors.append(
                {
                    "vendor": p.vendor,
                    "usable": p.worker_capable,
                    "auth": p.auth,
                    "version": p.client_version,
                    "note": p.note or None,
                    "models": models,
                    "quota": {
                        "state": q.state,
                        "stale": q.stale,
                        "pressure": q.pressure(),
                        "hard_limit": None if q.hard_limit is None else q.hard_limit.to_dict(),
                        "blocked_models": sorted(q.blocked_models()),
                        "windows": [
                            {
                                "kind": w.kind,
                                "model": w.model,
                                "used_percent": w.used_percent,
                                "resets_at": w.resets_at,
                            }
                            for w in q.windows
                        ],
                    },
                }
            )
        return {
            "session_id": self.config.session_id,
            "planner": self.config.planner,
            "approval": "--yes" if self.config.approve else "user",
            "vendors": vendors,
            "limits": {
                "max_tasks": 12,
                "workers": self.config.workers,
                "workers_hard_cap": 3,
                "wait_seconds": [AUTO_WAIT_MIN_SECONDS, AUTO_WAIT_MAX_SECONDS],
                "escalation_reason_chars": [
                    AUTO_ESCALATION_REASON_MIN_CHARS,
                    AUTO_ESCALATION_REASON_MAX_CHARS,
                ],
                "task_bytes": 32 * 1024,
            },
            "roles": {
                "research": "light",
                "documentation": "light",
                "implementation": "balanced",
                "review": "strong",
                "security": "strong",
                "ops": "strong",
                "synthesis": "strong",
            },
            "fuse": self.fuse.status(),
            "workers": [e.summary() for e in self.pool.entries()],
        }

    # -- plan -----------------------------------------------------------------------------------

    def check(self, doc: Any) -> PlanReport:
        """Validate and score without keeping anything (the read-only check tool).

        Vendors the user chose to conserve (issue 16) are left out of the profile choice.
        """
        facts = self.facts()
        providers = [p for p in facts.providers if p.vendor not in self.conserved]
        return evaluate_plan(doc, providers, facts.quota.vendors, prefer=self.config.planner)

    def low_windows_for(self, report: PlanReport) -> list[Any]:
        """Fresh authoritative windows at or below the threshold, of vendors the plan's workers would
        use and the user was not asked about yet (issue 16: conservation)."""
        from ivoai.client.orchestration._conserve import low_windows

        vendors = sorted({t.profile.vendor for t in report.tasks if t.delegated and t.profile is not None})
        asked = {d["vendor"] for d in self.conservation}
        facts = self.facts()
        out = []
        for vendor in vendors:
            if vendor in asked:
                continue
            quota = facts.quota.get(vendor)
            low = low_windows(quota, self.settings.conserve_threshold, self.settings.quota_cache_seconds)
            if low:
                out.append(low[0])
        return out

    def record_conservation(self, decision: Any) -> None:
        """Keep the user's keep/conserve answer for the session (conserve: no workers on that vendor)."""
        with self._lock:
            self.conservation.append(decision.to_dict())
            if decision.choice == "conserve":
                self.conserved.add(decision.window.vendor)
            self.persist()

    def submit_plan(self, doc: Any, approval: str) -> tuple[PlanReport, PlanState]:
        """Keep a valid plan as approved (`approval` says by whom); an invalid one changes nothing.

        Raises:
            OrchestrationUsageError: workers of the current plan are still running.
        """
        report = self.check(doc)
        with self._lock:
            if not report.valid or report.plan is None:
                return report, self.plan_state
            running = [e.id for e in self.pool.entries() if not e.done]
            if running:
                raise OrchestrationUsageError(
                    f"workers of the current plan still run ({', '.join(running)}); "
                    "wait for or cancel them first"
                )
            self.plan_doc, self.report = report.plan, report
            self.plan_version += 1
            if approval == "rejected":
                self.plan_state, self.approval = "rejected", None
                self.tasks = {}
            else:
                self.plan_state, self.approval = "approved", approval
                from ivoai.client.orchestration._worktree import head_of

                self.plan_head = head_of(self.config.workdir)  # `session recover` refuses if it moved
                decisions = {d.id: d for d in report.tasks}
                self.tasks = {
                    t.id: TaskRun(
                        t, decisions[t.id], "pending" if decisions[t.id].delegated else "kept_by_primary"
                    )
                    for t in report.plan.tasks
                }
            self.persist()
        return report, self.plan_state

    # -- spawn ----------------------------------------------------------------------------------

    def _run(self, task_id: str) -> TaskRun:
        run = self.tasks.get(task_id)
        if run is None:
            known = ", ".join(self.tasks) or "none (no approved plan)"
            raise WorkerNotFoundError(f"no task {task_id[:64]!r} in the approved plan (tasks: {known})")
        return run

    def spawn(self, task_id: str) -> dict[str, Any]:
        """Start (or schedule after its dependencies) one delegated task.

        Raises:
            OrchestrationUsageError: no approved plan, a task the primary keeps, or one already running.
        """
        with self._lock:
            if self.plan_state != "approved":
                raise OrchestrationUsageError("no approved plan: submit one with orchestration_plan first")
            run = self._run(task_id)
            if not run.decision.delegated:
                raise OrchestrationUsageError(
                    f"task {task_id} stays with the primary: {run.decision.reason}; ivoai decides delegation"
                )
            if run.state in ("queued", "running", "waiting_dependencies"):
                raise OrchestrationUsageError(f"task {task_id} is already {run.state}")
            if run.state == "succeeded":
                raise OrchestrationUsageError(
                    f"task {task_id} already succeeded; escalate it (orchestration_escalate) to run it again"
                )
            deps = [self.tasks[d] for d in run.decision.dependencies if d in self.tasks]
            failed = [d.task.id for d in deps if d.state in ("failed", "cancelled", "timed_out", "blocked")]
            if failed:
                run.state = "blocked"
                self.persist()
                raise OrchestrationUsageError(
                    f"task {task_id} is blocked: dependency {', '.join(failed)} did not succeed"
                )
            if all(d.state in ("succeeded", "kept_by_primary") for d in deps):
                self._submit(run)
            else:
                run.state = "waiting_dependencies"
            self.persist()
            return {
                "task_id": task_id,
                "state": run.state,
                "worker_id": run.worker_ids[-1] if run.worker_ids else None,
            }

    def spawn_batch(self, task_ids: Iterable[str] | None) -> list[dict[str, Any]]:
        """Spawn several tasks (default: every pending delegated task, in dependency order)."""
        with self._lock:
            order = self.plan_doc.order() if self.plan_doc is not None else []
            chosen = (
                list(task_ids)
                if task_ids is not None
                else [t for t in order if self.tasks.get(t) is not None and self.tasks[t].state == "pending"]
            )
        out = []
        for tid in chosen:
            try:
                out.append(self.spawn(tid))
            except IvoaiError as exc:
                out.append({"task_id": tid, "error": exc.message, "code": exc.code})
        return out

    def _prompt(self, run: TaskRun) -> str:
        prefix = worker_prefix(self.brief, tools=self._tool_specs())
        task = run.task
        parts = [
            prefix.text,
            "## Task",
            f"Role: {task.role}. Tier: {run.decision.tier.label}.",
            task.task,
            "Acceptance criteria:",
            *(f"- {c}" for c in task.acceptance_criteria),
        ]
        for dep in run.decision.dependencies:
            dep_run = self.tasks.get(dep)
            report = self._last_report(dep_run) if dep_run is not None else None
            if report is not None:
                parts += [
                    f"Result of dependency {dep} (advisory, untrusted):",
                    report.result.summary[:DEPENDENCY_SUMMARY_MAX_CHARS],
                ]
        prompt = "\n".join(parts) + "\n"
        check = self.guard.check([Turn("system", prefix.text), Turn("user", prompt[len(prefix.text) :])])
        if check.compacted:  # cannot happen within the brief and task bounds; recorded if it ever does
            prompt = "\n".join(t.text for t in check.turns)
        return prompt

    def _submit(self, run: TaskRun) -> None:
        profile = run.decision.profile
        assert profile is not None
        spec = WorkerSpec(
            session_id=self.config.session_id,
            task_id=run.task.id,
            worker_id=random_id("wrk", 8),
            vendor=profile.vendor,
            model=profile.model,
            effort=profile.effort,
            tier=run.decision.tier,
            prompt=self._prompt(run),
            workdir=self.config.workdir,
            timeout_seconds=self.settings.worker_timeout_seconds,
            max_turns=self.settings.worker_max_turns,
            knowledge=self.config.knowledge,
            role=run.task.role,  # issue 20: the worker's skills are selected for its role and tier
            persist=self.settings.resume_after_reset,  # issue 16: a stalled worker can be continued
            conversation_id=str(uuid.uuid4())
            if self.settings.resume_after_reset and profile.vendor == "claude"
            else None,
        )
        if self.worker_overrides is not None:
            spec = self.worker_overrides(spec)
        run.worker_ids.append(spec.worker_id)
        run.state = "queued"
        run.started_at, run.ended_at = None, None
        self.pool.submit(spec)

    def _last_report(self, run: TaskRun) -> WorkerReport | None:
        if not run.worker_ids:
            return None
        try:
            return self.pool.get(run.worker_ids[-1]).report
        except WorkerNotFoundError:
            return None

    # -- worker events --------------------------------------------------------------------------

    def _on_worker_change(self, entry: WorkerEntry) -> None:
        if self.lifecycle is not None:
            if entry.state == "running":
                self.lifecycle.started(entry.id)
            elif entry.done:
                self.lifecycle.ended(entry.id, entry.state)
        with self._lock:
            run = self.tasks.get(entry.spec.task_id)
            if run is None or not run.worker_ids or run.worker_ids[-1] != entry.id:
                self.persist()
                return
            if entry.state == "running":
                run.state = "running"
                run.started_at = entry.started_at
            elif entry.done:
                run.ended_at = entry.ended_at
                run.state = entry.state
                self._maybe_stalled(entry)
                if entry.report is not None and self._retry_on_model_limit(run, entry.report):
                    self.persist()
                    return
                self._release_dependents()
            self.persist()

    # -- auto-resume after reset (issue 16) ---------------------------------------------------------

    def _maybe_stalled(self, entry: WorkerEntry) -> None:
        """A worker a confirmed hard limit stopped, with a kept conversation, waits for the reset."""
        report = entry.report
        if (
            self.resumer is None
            or report is None
            or report.limit is None
            or report.limit.kind is not LimitKind.HARD_LIMIT
            or not report.limit.confirmed
            or not report.conversation_id
        ):
            return
        resets = report.limit.resets_at
        if resets is None:
            hard = self.ledger.view().get(entry.spec.vendor).hard_limit
            resets = hard.resets_at if hard is not None else None
        self.resumer.add(
            Stalled(
                worker_id=entry.id,
                task_id=entry.spec.task_id,
                vendor=entry.spec.vendor,
                model=entry.spec.model,
                effort=entry.spec.effort,
                tier=entry.spec.tier.label,
                conversation=report.conversation_id,
                resets_at=resets,
                since=time.time(),
            )
        )

    def _resume_check(self, vendor: str) -> tuple[bool, float | None]:
        """Quota first: (free now?, the new reset when not). A free vendor's breaker is closed."""
        if vendor == "claude":
            from ivoai.client.orchestration._limitprobe import claude_quota_now

            quota = claude_quota_now(self.config.env)
        else:
            quota = self._reprobe(vendor)
        hard = quota.hard_limit if quota is not None else None
        if hard is not None and hard.confirmed:
            return False, hard.resets_at
        with contextlib.suppress(IvoaiError, OSError):
            self.fuse.clear(vendor)
        return True, None

    def _continue(self, stalled: Stalled) -> str:
        """Start the continuation of a stalled worker in its own conversation; its worker ID."""
        spec = WorkerSpec(
            session_id=self.config.session_id,
            task_id=stalled.task_id,
            worker_id=random_id("wrk", 8),
            vendor=stalled.vendor,
            model=stalled.model,
            effort=stalled.effort,
            tier=Tier.parse(stalled.tier),
            prompt=RESUME_PROMPT,
            workdir=self.config.workdir,
            timeout_seconds=self.settings.worker_timeout_seconds,
            max_turns=self.settings.worker_max_turns,
            knowledge=self.config.knowledge,
            persist=True,
            conversation_id=stalled.conversation if stalled.vendor == "claude" else None,
            resume_conversation=stalled.conversation,
        )
        if self.worker_overrides is not None:
            spec = self.worker_overrides(spec)
        with self._lock:
            run = self.tasks.get(stalled.task_id)
            if run is not None:
                run.worker_ids.append(spec.worker_id)
                run.state = "queued"
                run.started_at, run.ended_at = None, None
            self.pool.submit(spec)
        return spec.worker_id

    def _retry_on_model_limit(self, run: TaskRun, report: WorkerReport) -> bool:
        """A model-scoped limit: run the task once more on a cheaper model of the same vendor."""
        if (
            report.limit is None
            or report.limit.kind is not LimitKind.MODEL_SCOPED
            or run.retried_on_model_limit
        ):
            return False
        facts = self.facts()
        limited = run.decision.profile.model_tier if run.decision.profile is not None else None
        decision = decide_task(
            run.task,
            self._weights(),
            [p for p in facts.providers if p.vendor == report.vendor],
            facts.quota.vendors,
            prefer=report.vendor,
            extra_tiers=run.extra_tiers,
            cheaper_than=limited,
        )
        if decision.profile is None or decision.profile.model == report.model:
            return False
        run.retried_on_model_limit = True
        run.decision = decision
        self._submit(run)
        return True

    def _release_dependents(self) -> None:
        for run in self.tasks.values():
            if run.state != "waiting_dependencies":
                continue
            deps = [self.tasks[d] for d in run.decision.dependencies if d in self.tasks]
            if any(d.state in ("failed", "cancelled", "timed_out", "blocked") for d in deps):
                run.state = "blocked"
            elif all(d.state in ("succeeded", "kept_by_primary") for d in deps):
                self._submit(run)

    def _on_limit(self, vendor: str, verdict: LimitVerdict, infos: list[dict[str, Any]]) -> None:
        """Record what a worker learned about quota; act on confirmed and model-scoped limits."""
        now = time.time()
        try:
            if vendor == "claude" and infos:
                windows = [w for w in (claude_event_window(i, now) for i in infos) if w is not None]
                hard = next((h for h in (claude_event_hard_limit(i, now) for i in infos) if h), None)
                self.ledger.record_windows("claude", windows, hard_limit=hard)
            if verdict.kind is LimitKind.HARD_LIMIT and verdict.confirmed:
                self.ledger.record_hard_limit(
                    HardLimit(vendor, True, "worker", now, verdict.resets_at, verdict.reason)
                )
                self.fuse.trip(vendor, verdict.reason, until=verdict.resets_at)
            elif verdict.kind is LimitKind.MODEL_SCOPED and verdict.model and vendor == "codex":
                window = QuotaWindow(
                    vendor,
                    "weekly",
                    None,
                    verdict.resets_at,
                    None,
                    "codex_exec",
                    now,
                    model=verdict.model,
                    status="rejected",
                )
                self.ledger.record_windows(vendor, [window])
        except (IvoaiError, OSError):
            pass  # the ledger is shared state; the verdict is still in the report
        if verdict.kind is not LimitKind.NONE:
            with self._lock:
                self.limits = [*self.limits[-15:], {"vendor": vendor, "at": now, **verdict.to_dict()}]

    # -- wait / result / cancel / escalate ------------------------------------------------------

    def _entry_ids(
        self, worker_ids: Iterable[str] | None, task_ids: Iterable[str] | None
    ) -> list[str] | None:
        ids: list[str] = list(worker_ids or [])
        for tid in task_ids or []:
            run = self._run(tid)
            if not run.worker_ids:
                raise OrchestrationUsageError(f"task {tid} has no worker yet (state {run.state})")
            ids.append(run.worker_ids[-1])
        return ids or None

    def wait(
        self,
        worker_ids: Iterable[str] | None,
        task_ids: Iterable[str] | None,
        mode: Literal["any", "all"],
        timeout: float,
    ) -> dict[str, Any]:
        """Block until any/all finished (1-300 s)."""
        if not AUTO_WAIT_MIN_SECONDS <= timeout <= AUTO_WAIT_MAX_SECONDS:
            raise OrchestrationUsageError(
                f"timeout_seconds must be {AUTO_WAIT_MIN_SECONDS}-{AUTO_WAIT_MAX_SECONDS}, got {timeout:g}"
            )
        ids = self._entry_ids(worker_ids, task_ids)
        entries, timed_out = self.pool.wait(ids, mode=mode, timeout=timeout)
        return {
            "timed_out": timed_out,
            "mode": mode,
            "workers": [{**e.summary(), "result_available": e.report is not None} for e in entries],
            "tasks": {tid: run.state for tid, run in self.tasks.items()},
        }

    def result(self, worker_id: str | None, task_id: str | None) -> dict[str, Any]:
        """A finished worker's bounded report (compact once the primary's context fills up)."""
        ids = self._entry_ids([worker_id] if worker_id else None, [task_id] if task_id else None)
        if not ids:
            raise OrchestrationUsageError("give worker_id or task_id")
        entry = self.pool.get(ids[0])
        if entry.report is None:
            return {
                "worker_id": entry.id,
                "state": entry.state,
                "ready": False,
                "hint": "still running: call orchestration_wait",
            }
        cached = self._docs.get(entry.id)
        if cached is None:
            built = entry.report.to_dict()
            cached = self._docs[entry.id] = (built, json.dumps(built, ensure_ascii=False))
        doc, text = dict(cached[0]), cached[1]
        now = time.monotonic()
        for ref in entry.report.result.refs:
            if now - self._verified.get(ref.ref.id, -EVIDENCE_RECHECK_SECONDS) < EVIDENCE_RECHECK_SECONDS:
                continue
            try:
                self.store.describe(ref.ref.id)  # the evidence is still there (meta, owner, TTL checked)
                self._verified[ref.ref.id] = now
            except IvoaiError as exc:
                doc["warnings"] = [*doc.get("warnings", []), f"artifact {ref.ref.id}: {exc.code}"]
        with self._lock:
            returned = {**self.returned, entry.id: Turn("tool", text)}
            check = self.guard.check(list(returned.values()), state=self._session_state())
            if check.compacted:
                doc = _compact(doc)
                doc["compaction"] = {
                    "reason": check.reason,
                    "tokens_before": check.tokens_before,
                    "tokens_after": check.tokens_after,
                    "summary": check.summary,
                }
                returned = {
                    "": Turn("system", check.summary or ""),
                    entry.id: Turn("tool", json.dumps(doc, ensure_ascii=False)),
                }
            self.returned = returned
        return {"ready": True, **doc}

    def _session_state(self) -> SessionState:
        changed, tests, nexts, uncertain = [], [], [], []
        for entry in self.pool.entries():
            if entry.report is None:
                continue
            delta = entry.report.result.state_delta
            changed += delta.changed_files
            tests.append(f"{entry.spec.task_id}: {delta.tests.value}")
            nexts += delta.next_steps
            uncertain += delta.uncertain_effects
        goals = (self.brief.objective,) if self.brief is not None else ()
        return SessionState(
            goals=goals,
            changed_files=tuple(changed),
            test_state=tuple(tests),
            next_steps=tuple(nexts),
            uncertain_effects=tuple(uncertain),
        )

    def cancel(self, worker_id: str | None, task_id: str | None) -> dict[str, Any]:
        """Cancel a worker (a queued one never starts; a running one's group is ended)."""
        ids = self._entry_ids([worker_id] if worker_id else None, [task_id] if task_id else None)
        if not ids:
            raise OrchestrationUsageError("give worker_id or task_id")
        entry = self.pool.cancel(ids[0])
        with self._lock:
            if task_id and self.tasks[task_id].state == "waiting_dependencies":
                self.tasks[task_id].state = "cancelled"
        return {"worker_id": entry.id, "state": entry.state}

    def escalate(self, task_id: str, reason: str) -> dict[str, Any]:
        """Raise a task's tier by one and choose its profile again; the reason is recorded.

        Raises:
            OrchestrationUsageError: reason length, a running task, or a task already at MAX.
        """
        reason = reason.strip()
        if not AUTO_ESCALATION_REASON_MIN_CHARS <= len(reason) <= AUTO_ESCALATION_REASON_MAX_CHARS:
            raise OrchestrationUsageError(
                f"reason must be {AUTO_ESCALATION_REASON_MIN_CHARS}-{AUTO_ESCALATION_REASON_MAX_CHARS} "
                f"characters (got {len(reason)})"
            )
        with self._lock:
            run = self._run(task_id)
            if run.state in ("queued", "running"):
                raise OrchestrationUsageError(f"task {task_id} is {run.state}; cancel it before escalating")
            if run.decision.tier is Tier.MAX:
                raise OrchestrationUsageError(f"task {task_id} is already at tier max")
            before = run.decision.tier
            facts = self.facts()
            run.extra_tiers += 1
            decision = decide_task(
                run.task,
                self._weights(),
                facts.providers,
                facts.quota.vendors,
                prefer=self.config.planner,
                extra_tiers=run.extra_tiers,
            )
            run.decision = decision
            run.escalations.append(
                {"from": before.label, "to": decision.tier.label, "reason": redact(reason), "at": time.time()}
            )
            if run.state not in ("kept_by_primary",):
                run.state = "pending" if decision.delegated else "kept_by_primary"
            self.persist()
            return {
                "task_id": task_id,
                "tier": decision.tier.label,
                "previous_tier": before.label,
                "profile": None if decision.profile is None else decision.profile.to_dict(),
                "profile_reason": decision.profile_reason,
                "state": run.state,
            }

    def _weights(self) -> Mapping[str, float]:
        return self.plan_doc.weights if self.plan_doc is not None else {}

    # -- artifacts ------------------------------------------------------------------------------

    def _owner(self, ref: str) -> str:
        """The chain session that owns `ref` (its own when none does: the store then refuses)."""
        try:
            owner = self.store.describe(ref).session_id
        except IvoaiError:
            return self.config.session_id
        return owner if owner in self.config.owners else self.config.session_id

    def artifact_read(self, ref: str) -> tuple[Any, bytes]:
        """The exact bytes of one of this chain's artifacts (ownership, TTL, size, digest checked)."""
        return self.store.read(ref, session_id=self._owner(ref))

    def artifact_read_range(self, ref: str, offset: int, length: int) -> Any:
        """Up to 1 MiB of one of this chain's artifacts, integrity checked."""
        return self.store.read_range(ref, session_id=self._owner(ref), offset=offset, length=length)

    # -- checkpoint (issue 16) ------------------------------------------------------------------

    def checkpoint(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and store the primary's checkpoint (refs must be this chain's artifacts).

        Raises:
            CheckpointRefusedError: control bytes, secret-shaped text, size, or a ref that is not an
                artifact of this chain.
        """
        from ivoai.client.orchestration._checkpoint import (
            CheckpointRefusedError,
            parse_body,
            write_checkpoint,
        )
        from ivoai.client.orchestration._worktree import summarize_worktree

        body = parse_body(args)
        for i, ref in enumerate(body.refs):
            try:
                owner = self.store.describe(ref).session_id
            except IvoaiError:
                owner = None
            if owner not in self.config.owners:
                raise CheckpointRefusedError(
                    f"checkpoint.refs[{i}]: {ref} is not an artifact of this session; refs name evidence "
                    "ivoai stored (orchestration_result lists them)"
                )
        tree = summarize_worktree(self.config.workdir)
        worktree = None
        if tree.git:
            worktree = {"branch": tree.branch, "head": tree.head, "changed": list(tree.changed_names)}
        cp = write_checkpoint(
            self.config.chain_root,
            body,
            source="primary",
            session_id=self.config.session_id,
            vendor=self.config.planner,
            worktree=worktree,
            paths=self.paths,
        )
        with self._lock:
            self.last_checkpoint = {"seq": cp.seq, "written_at": cp.written_at, "source": cp.source}
            self.persist()
        return {
            "chain": cp.chain,
            "seq": cp.seq,
            "written_at": cp.written_at,
            "head": tree.head,
            "next": "Checkpoint kept. A failover or `ivoai session resume|handoff|recover` starts from it; "
            "write a new one after each milestone.",
        }

    # -- metadata -------------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The session's plan metadata (no task text, brief, output or environment)."""
        entries = self.pool.entries() if hasattr(self, "pool") else []
        reports = [e.report for e in entries if e.report is not None]
        usage: dict[str, int] = {}
        for r in reports:
            for k, v in r.usage.items():
                usage[k] = usage.get(k, 0) + v
        costs = [r.cost_usd for r in reports if r.cost_usd is not None]
        return {
            "session_id": self.config.session_id,
            "planner": self.config.planner,
            "updated_at": time.time(),
            "gate": None
            if self.gate is None
            else {"state": self.gate.state, "missing": list(self.gate.missing)},
            "brief": None
            if self.brief is None
            else {"sha256": self.brief.sha256, "bytes": len(self.brief.canonical_json().encode())},
            "plan": {
                "version": self.plan_version,
                "state": self.plan_state,
                "approval": self.approval,
                "head": getattr(self, "plan_head", None),
                "tasks": [t.metadata() for t in self.tasks.values()],
            },
            "workers": [
                e.summary()
                | {
                    "status": e.report.status.value if e.report else None,
                    "models_ran": e.report.models_ran if e.report else [],
                    "skills": e.report.skills if e.report else [],  # issue 20: names only
                }
                for e in entries
            ],
            "limits": list(self.limits),
            "chain": list(self.config.chain) or [self.config.session_id],
            "coordinator": self.config.coordinator,
            "checkpoint": getattr(self, "last_checkpoint", None),
            "resume": self._resume_metadata(),
            "conservation": list(getattr(self, "conservation", [])),
            "metrics": {
                **self.metrics.to_dict(),
                "workers": {
                    s: sum(1 for e in entries if e.state == s)
                    for s in ("queued", "running", "succeeded", "failed", "cancelled", "timed_out")
                },
                "usage": usage,
                "cost_usd": round(sum(costs), 6) if costs else None,
                "results_returned_tokens": sum(estimate_tokens(t.text) for t in self.returned.values()),
            },
        }

    def _resume_metadata(self) -> dict[str, Any] | None:
        resumer: AutoResumer | None = getattr(self, "resumer", None)
        return resumer.metadata() if resumer is not None else None

    def persist(self) -> None:
        """Publish the metadata file; a failure never stops the session."""
        with contextlib.suppress(IvoaiError, OSError):
            write_state(self.config.session_id, self.metadata(), self.paths)

    def close(self) -> None:
        """End the session: cancel every worker (their groups are reaped), write the final metadata."""
        if self.resumer is not None:
            self.resumer.stop()
        self.pool.close()
        if self.lifecycle is not None:
            self.lifecycle.close()
        self.persist()


def _compact(doc: dict[str, Any]) -> dict[str, Any]:
    """A report without findings and projection text (the refs still lead to the exact evidence)."""
    out = dict(doc)
    result = dict(out["result"])
    result["findings"] = []
    out["result"] = result
    if out.get("projection"):
        out["projection"] = {k: v for k, v in out["projection"].items() if k != "text"}
    out["compact"] = True
    return out
