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

Split by operation: the data types are `_session_types`, what happens on worker events and limits
`_session_events`, the documents handed out (capabilities, metadata, checkpoint) `_session_reports`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

from ivoai.client.governance import (
    CompactionPolicy,
    ContextGuard,
    RunMetrics,
    SessionState,
    ToolSpec,
    Turn,
)
from ivoai.client.orchestration._autoresume import AutoResumer, Stalled
from ivoai.client.orchestration._brief import SharedContextBrief, worker_prefix
from ivoai.client.orchestration._errors import OrchestrationUsageError, WorkerNotFoundError
from ivoai.client.orchestration._fuse import LaunchFuse
from ivoai.client.orchestration._gate import GateResult, check_prompt
from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration._plan import Plan
from ivoai.client.orchestration._pool import WorkerPool
from ivoai.client.orchestration._quota import (
    VendorQuota,
)
from ivoai.client.orchestration._runtime import Runtime, RuntimeFacts
from ivoai.client.orchestration._scheduler import PlanReport, decide_task, evaluate_plan
from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._session_events import (
    continue_stalled,
    on_limit,
    on_worker_change,
    resume_check,
)
from ivoai.client.orchestration._session_reports import (
    capabilities_view,
    metadata_view,
    write_primary_checkpoint,
)
from ivoai.client.orchestration._session_types import PlanState, SessionConfig, TaskRun, TaskState
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.client.orchestration._state import read_state, write_state
from ivoai.client.orchestration._worker import WorkerIO, WorkerReport
from ivoai.client.orchestration._worker_spec import WorkerSpec
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

__all__ = ["OrchestratorSession", "PlanState", "SessionConfig", "TaskRun", "TaskState"]

DEPENDENCY_SUMMARY_MAX_CHARS = 1500
# A result's evidence is re-checked (metadata, owner, TTL) at most this often: a primary polling one
# result should not pay a directory walk per call, and a 7-day TTL does not change within a minute.
EVIDENCE_RECHECK_SECONDS = 60.0  # what a dependent task's prompt gets of each dependency's summary


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
            self.store,
            spool_root,
            dict(config.env),
            self.metrics.artifacts,
            self._reprobe,
            partial(on_limit, self),
        )
        self.pool = WorkerPool(
            io, self.fuse, concurrency=config.workers, on_change=partial(on_worker_change, self)
        )
        self.resumer: AutoResumer | None = None
        if settings.resume_after_reset:
            self.resumer = AutoResumer(
                paths,
                config.session_id,
                windows_max=settings.resume_windows,
                check=partial(resume_check, self),
                cont=partial(continue_stalled, self),
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

    def capabilities(self) -> dict[str, Any]:
        """Clients, models with tiers, quota, limits, pool: what the primary plans against."""
        return capabilities_view(self)

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

    def checkpoint(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and store the primary's checkpoint (refs must be this chain's artifacts).

        Raises:
            CheckpointRefusedError: see `_session_reports.write_primary_checkpoint`.
        """
        return write_primary_checkpoint(self, args)

    def metadata(self) -> dict[str, Any]:
        """The session's plan metadata (no task text, brief, output or environment)."""
        return metadata_view(self)

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
