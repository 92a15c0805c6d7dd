"""Run one advisory worker: spawn, bound, watch, reap, prove the tree unchanged, store, report.

Order (seeds 000 and 002):

1. `git status --porcelain` of the work tree (no optional locks, no fsmonitor), the "before".
2. Spawn the official client in its **own process group** with the allowlisted environment, the
   prompt on stdin, stdout (the JSONL events) copied to a private spool file as it arrives.
3. Enforce the limits while it runs: wall clock, turns, event bytes; cancellation. Any of them
   ends it with a bounded TERM -> KILL of its whole group; after the leader exits the group gets a
   final KILL, so no grandchild survives it.
4. `git status` again: any difference is a read-only violation, reported (and the run failed).
5. Exact output goes to the ArtifactStore **first** (the event log through governance's trusted
   import, the final answer through `capture`); only then is the bounded `WorkerReport` built
   (status, summary, findings, advisory state delta, refs; usage, cost, the model that actually
   ran), at most AUTO_WORKER_RESULT_MAX_BYTES of JSON.

A worker killed mid-output leaves exactly the bytes it wrote, stored as one complete artifact (the
store publishes whole artifacts or none).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ivoai.client.agents.executors import discover
from ivoai.client.governance import ArtifactMetrics, import_tool_output
from ivoai.client.orchestration._classify import LimitKind, LimitVerdict, classify
from ivoai.client.orchestration._quota import VendorQuota
from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._worker_events import EventState
from ivoai.client.orchestration._worker_spec import (
    RESULT_SCHEMA,
    WorkerSpec,
    claude_argv,
    claude_mcp_config,
    codex_argv,
    worker_env,
)
from ivoai.client.workingcontext import (
    ArtifactStore,
    Budget,
    Capture,
    EvidenceRole,
    ResultRef,
    StateDelta,
    WorkerResult,
    WorkerStatus,
    capture,
)
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from ivoai.common.limits import (
    AUTO_GIT_STATUS_MAX_BYTES,
    AUTO_GIT_STATUS_TIMEOUT_SECONDS,
    AUTO_WORKER_LINE_MAX_BYTES,
    AUTO_WORKER_RESULT_MAX_BYTES,
    AUTO_WORKER_STDERR_MAX_BYTES,
    AUTO_WORKER_TERM_GRACE_SECONDS,
    WORKER_ERROR_MAX_CHARS,
    WORKER_FINDING_MAX_CHARS,
    WORKER_FINDINGS_MAX,
    WORKER_SUMMARY_MAX_CHARS,
)
from ivoai.common.redact import redact

POLL_SECONDS = 0.05  # how often a running worker's limits and cancellation are checked
TIER_BUDGETS = {
    Tier.LIGHT: Budget.LIGHT,
    Tier.BALANCED: Budget.BALANCED,
    Tier.STRONG: Budget.STRONG,
    Tier.MAX: Budget.MAX,
}
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```\s*$", re.DOTALL)


@dataclass
class WorkerReport:
    """What the primary receives about one worker: bounded, advisory, with refs to the evidence."""

    worker_id: str
    task_id: str
    vendor: str
    model: str
    effort: str | None
    tier: Tier
    result: WorkerResult
    models_ran: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    duration_seconds: float = 0.0
    exit_code: int | None = None
    end_reason: str = "exited"
    tree_check: str = "unchanged"  # unchanged | changed | not_a_git_work_tree | unavailable
    violations: list[str] = field(default_factory=list)
    limit: LimitVerdict | None = None
    projection: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    conversation_id: str | None = None  # the kept vendor conversation (auto-resume), when there is one
    skills: list[str] = field(default_factory=list)  # issue 20: the skills attached (names)

    @property
    def status(self) -> WorkerStatus:
        """The run's status (that of its WorkerResult)."""
        return self.result.status

    def to_dict(self) -> dict[str, Any]:
        """JSON form, at most AUTO_WORKER_RESULT_MAX_BYTES (findings, then warnings, are cut to fit)."""
        doc = {
            "worker_id": self.worker_id,
            "task_id": self.task_id,
            "vendor": self.vendor,
            "model_requested": self.model,
            "models_ran": self.models_ran,
            "model_ran_source": "claude modelUsage"
            if self.vendor == "claude"
            else "requested (codex exec does not report it)",
            "effort": self.effort,
            "tier": self.tier.label,
            "status": self.result.status.value,
            "result": self.result.model_dump(mode="json"),
            "usage": self.usage,
            "cost_usd": self.cost_usd,
            "duration_seconds": round(self.duration_seconds, 3),
            "exit_code": self.exit_code,
            "end_reason": self.end_reason,
            "tree_check": self.tree_check,
            "violations": self.violations,
            "limit": None if self.limit is None else self.limit.to_dict(),
            "projection": self.projection,
            "warnings": self.warnings,
            "skills": self.skills,
        }
        return _fit(doc)


def _size(doc: Any) -> int:
    return len(json.dumps(doc, ensure_ascii=False).encode("utf-8"))


def _fit(doc: dict[str, Any]) -> dict[str, Any]:
    """Cut the report to AUTO_WORKER_RESULT_MAX_BYTES, least important parts first."""
    while _size(doc) > AUTO_WORKER_RESULT_MAX_BYTES and doc["warnings"]:
        doc["warnings"].pop()
    while _size(doc) > AUTO_WORKER_RESULT_MAX_BYTES and doc["result"]["findings"]:
        doc["result"]["findings"].pop()
        doc["truncated"] = True
    if _size(doc) > AUTO_WORKER_RESULT_MAX_BYTES and doc["projection"] is not None:
        doc["projection"] = {k: v for k, v in doc["projection"].items() if k != "text"}
        doc["truncated"] = True
    return doc


@dataclass
class WorkerControl:
    """The pool's handle on a running worker: its PID once spawned, and cancellation."""

    cancel: threading.Event = field(default_factory=threading.Event)
    pid: int | None = None
    pid_start: str | None = None  # the worker's kernel start marker (issue 16: recover checks it)
    on_spawn: Callable[[int], None] | None = None


def git_tree_state(workdir: str) -> frozenset[bytes] | None:
    """`git status --porcelain -z` entries of the work tree, or None when it is not a git work tree.

    Runs with optional locks off (a status must not write the index) and fsmonitor disabled
    (no repository-controlled program runs).
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_OPTIONAL_LOCKS": "0",
        "LC_ALL": "C",
        "HOME": os.environ.get("HOME", "/nonexistent"),
        "GIT_TERMINAL_PROMPT": "0",
    }
    try:
        proc = subprocess.run(
            [
                "git",
                "-c",
                "core.fsmonitor=false",
                "--no-optional-locks",
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=none",
            ],
            cwd=workdir,
            capture_output=True,
            timeout=AUTO_GIT_STATUS_TIMEOUT_SECONDS,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or len(proc.stdout) > AUTO_GIT_STATUS_MAX_BYTES:
        return None
    return frozenset(e for e in proc.stdout.split(b"\0") if e)


def _stop_group(proc: subprocess.Popen[bytes], grace: float = AUTO_WORKER_TERM_GRACE_SECONDS) -> None:
    """Bounded TERM -> KILL of the worker's process group; then a KILL sweep of any member left."""
    pgid = proc.pid
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _drain(stream: Any, keep: bytearray, limit: int) -> None:
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        room = limit - len(keep)
        if room > 0:
            keep += chunk[:room]


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    path.chmod(PRIVATE_DIR_MODE)
    return path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE
    )
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def parse_answer(text: str) -> tuple[str, list[str], StateDelta | None, list[str]]:
    """(summary, findings, state delta, warnings) from a worker's final answer (JSON or plain text)."""
    warnings: list[str] = []
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), str):
        return (
            redact(text.strip())[:WORKER_SUMMARY_MAX_CHARS],
            [],
            None,
            ["the answer was not the requested JSON"],
        )
    findings = [
        redact(str(f))[:WORKER_FINDING_MAX_CHARS]
        for f in (doc.get("findings") or [])
        if isinstance(f, str) and f
    ]
    if len(findings) > WORKER_FINDINGS_MAX:
        warnings.append(
            f"{len(findings) - WORKER_FINDINGS_MAX} findings beyond {WORKER_FINDINGS_MAX} were cut"
        )
        findings = findings[:WORKER_FINDINGS_MAX]
    delta = None
    if isinstance(doc.get("state_delta"), dict):
        try:
            delta = StateDelta.model_validate(doc["state_delta"])
        except ValueError as exc:
            warnings.append(
                f"the proposed state delta was invalid and was dropped ({str(exc).splitlines()[0][:200]})"
            )
    return redact(doc["summary"])[:WORKER_SUMMARY_MAX_CHARS], findings, delta, warnings


@dataclass
class WorkerIO:
    """What a worker run needs from its surroundings (the pool provides it)."""

    store: ArtifactStore
    spool_root: Path
    env: Mapping[str, str]
    metrics: ArtifactMetrics
    reprobe: Callable[[str], VendorQuota | None] | None = None
    on_limit: Callable[[str, LimitVerdict, list[dict[str, Any]]], None] | None = None


def run_worker(spec: WorkerSpec, io: WorkerIO, control: WorkerControl) -> WorkerReport:
    """Run `spec` to the end (or its limits, or cancellation) and return its bounded report."""
    started = time.monotonic()
    spool = _private_dir(io.spool_root / spec.worker_id)
    try:
        return _run(spec, io, control, spool, started)
    finally:
        shutil.rmtree(spool, ignore_errors=True)  # it held the MCP file with the knowledge token


def worker_skills(spec: WorkerSpec, spool: Path) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """(client arguments, skill names, warning) for the skills selected for this worker (issue 20).

    Only a worker with a role gets skills; an empty registry attaches nothing. A registry that
    cannot be read, or a stored skill that fails verification, attaches nothing (fail closed) and
    is reported as a warning; the worker still runs.
    """
    if spec.role is None:
        return (), (), None
    from ivoai.client.skills.attach import worker_attachment
    from ivoai.client.skills.select import select_for_worker

    capabilities = ["read", "search", *(["mcp", "memory", "context"] if spec.knowledge is not None else [])]
    try:
        resolution = select_for_worker(spec.role, spec.tier.name, spec.vendor, capabilities)
        if not resolution.selected:
            return (), (), None
        attachment = worker_attachment(spec.vendor, resolution, str(spool / "skills"))
    except (IvoaiError, OSError) as exc:
        return (), (), f"skills not attached ({getattr(exc, 'message', None) or exc})"
    return attachment.args, attachment.skills, None


def _launch(
    spec: WorkerSpec, io: WorkerIO, spool: Path
) -> tuple[list[str], dict[str, str], Path, tuple[str, ...], str | None]:
    found = discover(spec.vendor, io.env)
    if found is None:
        raise IvoaiError(f"{spec.vendor} is not installed", code="executor_not_found")
    last = spool / "last_message.txt"
    skill_args, skills, warning = worker_skills(spec, spool)
    if spec.vendor == "codex":
        schema = spool / "schema.json"
        _write_private(schema, json.dumps(RESULT_SCHEMA).encode())
        argv = codex_argv(spec, found[0], str(last), str(schema), skill_args)
    else:
        mcp = spool / "mcp.json"
        _write_private(mcp, json.dumps(claude_mcp_config(spec)).encode())
        argv = claude_argv(spec, found[0], str(mcp), skill_args)
    return argv, worker_env(io.env, spec), last, skills, warning


def _run(spec: WorkerSpec, io: WorkerIO, control: WorkerControl, spool: Path, started: float) -> WorkerReport:
    state = EventState(spec.vendor)
    before = git_tree_state(spec.workdir)
    try:
        argv, env, last, skills, skill_warning = _launch(spec, io, spool)
        if skill_warning is not None:
            state.warnings.append(skill_warning)
        state.skills = list(skills)
        proc = subprocess.Popen(
            argv,
            cwd=spec.workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            process_group=0,
            close_fds=True,
        )
    except (OSError, IvoaiError) as exc:
        message = getattr(exc, "message", None) or getattr(exc, "strerror", None) or str(exc)
        return _report(
            spec, io, state, started, None, "spawn_failed", before, before, b"", f"could not start: {message}"
        )
    control.pid = proc.pid
    from ivoai.client.sessions.procinfo import start_marker

    control.pid_start = start_marker(proc.pid)
    if control.on_spawn is not None:
        control.on_spawn(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stderr = bytearray()
    err_thread = threading.Thread(
        target=_drain, args=(proc.stderr, stderr, AUTO_WORKER_STDERR_MAX_BYTES), daemon=True
    )
    err_thread.start()
    threading.Thread(target=_feed_stdin, args=(proc.stdin, spec.prompt.encode("utf-8")), daemon=True).start()
    reason = _watch(spec, proc, state, control, spool / "events.jsonl")
    _stop_group(proc)
    err_thread.join(AUTO_WORKER_TERM_GRACE_SECONDS)
    proc.stdout.close()
    if not err_thread.is_alive():
        proc.stderr.close()
    after = git_tree_state(spec.workdir)
    if spec.vendor == "codex" and last.exists():
        with open(last, "rb") as fh:
            text = fh.read(spec.max_result_bytes + 1).decode("utf-8", "replace")
        state.final_text = text if text.strip() else state.final_text
    code = proc.returncode
    if reason == "exited" and code is not None and code < 0:
        reason = "signalled"
    return _report(spec, io, state, started, code, reason, before, after, bytes(stderr), None)


def _feed_stdin(stdin: Any, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        stdin.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        stdin.close()


def _watch(
    spec: WorkerSpec, proc: subprocess.Popen[bytes], state: EventState, control: WorkerControl, events: Path
) -> str:
    """Copy and parse the event stream until EOF or a limit; return why it ended."""
    assert proc.stdout is not None
    deadline = time.monotonic() + spec.timeout_seconds
    fd = proc.stdout.fileno()
    total = 0
    pending = b""
    out = os.open(
        events, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE
    )
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if control.cancel.is_set():
                    return "cancelled"
                if time.monotonic() >= deadline:
                    return "timeout"
                if not sel.select(timeout=POLL_SECONDS):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return "exited"
                total += len(chunk)
                if total > spec.max_event_bytes:
                    return "output_limit"
                os.write(out, chunk)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        state.feed(line)
                if len(pending) > AUTO_WORKER_LINE_MAX_BYTES:
                    state.malformed += 1
                    pending = b""
                if state.turns > spec.max_turns:
                    return "turn_limit"
    finally:
        os.close(out)


_END_STATUS = {
    "cancelled": WorkerStatus.CANCELLED,
    "timeout": WorkerStatus.TIMED_OUT,
}
_END_MESSAGES = {
    "cancelled": "cancelled: the worker's process group was ended (TERM, then KILL)",
    "timeout": "timed out: the wall-clock limit was reached; the process group was ended",
    "output_limit": "the event stream exceeded its byte limit; the worker was ended",
    "turn_limit": "the worker exceeded its turn limit and was ended",
    "signalled": "the worker was killed by a signal",
}


def _report(
    spec: WorkerSpec,
    io: WorkerIO,
    state: EventState,
    started: float,
    code: int | None,
    reason: str,
    before: frozenset[bytes] | None,
    after: frozenset[bytes] | None,
    stderr: bytes,
    spawn_error: str | None,
) -> WorkerReport:
    errors: list[str] = []
    warnings = list(state.warnings)
    if spawn_error is not None:
        errors.append(spawn_error)
    if reason in _END_MESSAGES:
        errors.append(_END_MESSAGES[reason])
    if reason == "exited" and code not in (0, None):
        errors.append(f"the client exited with status {code}")
    errors += [redact(e) for e in state.errors if e]
    violations, tree_check = _tree_violations(before, after, spawn_error is not None)
    if state.file_changes:
        violations.append(f"the worker reported file changes: {', '.join(state.file_changes[:8])}")
    if violations:
        errors.insert(0, "read-only violation: " + violations[0])
    answer = state.final_text or ""
    if len(answer.encode("utf-8")) > spec.max_result_bytes:
        errors.append(f"the answer exceeds {spec.max_result_bytes} bytes and was not projected")
    refs, projection = _store_evidence(
        spec, io, answer, stderr, failed=bool(errors) or state.is_error is True
    )
    summary, findings, delta, answer_warnings = parse_answer(answer) if answer else ("", [], None, [])
    warnings += answer_warnings if answer and not errors else []
    status = _END_STATUS.get(reason, WorkerStatus.SUCCEEDED)
    if status is WorkerStatus.SUCCEEDED and (errors or state.is_error or not state.finished):
        status = WorkerStatus.FAILED
        if not errors:
            errors.append("the worker ended without a final result event")
    limit = _limit_verdict(state, io, failed=status is not WorkerStatus.SUCCEEDED)
    if limit is not None and limit.kind is LimitKind.MODEL_SCOPED and limit.model is None:
        limit = replace(limit, model=spec.model)  # Codex does not name the model: it is the one we ran
    if limit is not None and limit.kind is not LimitKind.NONE and io.on_limit is not None:
        io.on_limit(spec.vendor, limit, state.rate_limit_infos)
    elif state.rate_limit_infos and io.on_limit is not None:
        io.on_limit(spec.vendor, LimitVerdict(LimitKind.NONE, "none", "quota data"), state.rate_limit_infos)
    result = WorkerResult(
        status=status,
        summary=summary or (errors[0] if errors else "(no answer)")[:WORKER_SUMMARY_MAX_CHARS],
        findings=findings,
        refs=refs,
        errors=[e[:WORKER_ERROR_MAX_CHARS] for e in errors[:16]],
        state_delta=delta or StateDelta(),
    )
    return WorkerReport(
        worker_id=spec.worker_id,
        task_id=spec.task_id,
        vendor=spec.vendor,
        model=spec.model,
        effort=spec.effort,
        tier=spec.tier,
        result=result,
        models_ran=state.models or ([spec.model] if state.turns else []),
        usage=state.usage,
        cost_usd=state.cost_usd,
        duration_seconds=time.monotonic() - started,
        exit_code=code,
        end_reason=reason,
        tree_check=tree_check,
        violations=violations,
        limit=limit,
        projection=projection,
        warnings=[w[:WORKER_ERROR_MAX_CHARS] for w in warnings[:16]],
        conversation_id=_conversation(spec, state),
        skills=list(state.skills),
    )


def _conversation(spec: WorkerSpec, state: EventState) -> str | None:
    """The worker's kept conversation: Codex's thread, Claude's chosen session (persisted runs only)."""
    if spec.resume_conversation is not None:
        return spec.resume_conversation
    if not spec.persist:
        return None
    return state.thread_id if spec.vendor == "codex" else spec.conversation_id


def _tree_violations(
    before: frozenset[bytes] | None, after: frozenset[bytes] | None, not_started: bool
) -> tuple[list[str], str]:
    if not_started:
        return [], "unchanged"
    if before is None or after is None:
        return [], "not_a_git_work_tree" if before is None else "unavailable"
    if before == after:
        return [], "unchanged"
    changed = sorted({e[3:].decode("utf-8", "replace") for e in before ^ after})
    shown = ", ".join(changed[:8]) + (f" (+{len(changed) - 8} more)" if len(changed) > 8 else "")
    return [f"the work tree changed while the worker ran: {shown}"], "changed"


def _limit_verdict(state: EventState, io: WorkerIO, *, failed: bool) -> LimitVerdict | None:
    """The most serious limit the run signalled; text-only hard limits are re-checked with a fresh read."""
    verdicts = [classify(s) for s in state.limit_signals if failed or s.source == "rate_limit_event"]
    order = [LimitKind.HARD_LIMIT, LimitKind.UNCONFIRMED, LimitKind.MODEL_SCOPED, LimitKind.TRANSIENT]
    for kind in order:
        found = next((v for v in verdicts if v.kind is kind), None)
        if found is None:
            continue
        if kind is LimitKind.UNCONFIRMED:
            signal_ = next(s for s, v in zip(state.limit_signals, verdicts, strict=False) if v.kind is kind)
            fresh = io.reprobe(signal_.vendor) if io.reprobe is not None else None
            return classify(signal_, fresh) if fresh is not None else found
        return found
    return None


def _store_evidence(
    spec: WorkerSpec, io: WorkerIO, answer: str, stderr: bytes, *, failed: bool
) -> tuple[list[ResultRef], dict[str, Any] | None]:
    """Store the event log, the answer and (on failure) stderr; return refs and the answer's projection."""
    refs: list[ResultRef] = []
    projection = None
    spool = io.spool_root / spec.worker_id
    if (spool / "events.jsonl").exists():
        try:
            preview = import_tool_output(
                io.store,
                spool,
                "events.jsonl",
                session_id=spec.session_id,
                payload_type="jsonl",
                failed=failed,
                metrics=io.metrics,
            )
            if preview.capture.result_ref is not None:
                refs.append(preview.capture.result_ref.model_copy(update={"role": EvidenceRole.LOG}))
        except (IvoaiError, OSError):
            pass  # the store refused or failed: the report says degraded through the missing ref
    stored = functools.partial(
        capture, io.store, session_id=spec.session_id, task_id=spec.task_id, worker_id=spec.worker_id
    )

    def kept(cap: Capture) -> Capture:
        io.metrics.record(cap)
        if cap.result_ref is not None:
            refs.append(cap.result_ref)
        return cap

    if answer:
        kind = "json" if answer.lstrip().startswith(("{", "```")) else "text"
        cap = kept(
            stored(
                answer.encode("utf-8"),
                payload_type=kind,
                role=EvidenceRole.OUTPUT,
                failed=failed,
                budget=TIER_BUDGETS[spec.tier],
                media_type="application/json" if kind == "json" else "text/plain",
            )
        )
        projection = cap.projection.to_dict()
    if stderr and failed:
        kept(
            stored(stderr, payload_type="stderr", role=EvidenceRole.STDERR, failed=True, budget=Budget.LIGHT)
        )
    return refs, projection
