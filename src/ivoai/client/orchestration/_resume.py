"""`ivoai session resume | handoff | recover`: continue an AUTO session that ended or was interrupted.

- **resume ID**: reopen the *native* conversation of the same vendor (`codex resume THREAD`,
  `claude --resume SESSION`) under a new supervised AUTO primary. Nothing is sent in it: the last
  turn is never replayed. Refused while the session still runs, when its conversation is not known
  (ivoai learns it from the primary: an assigned Claude `--session-id`, Claude's hooks, the rollout
  a Codex primary holds open), or when that vendor is at a confirmed hard limit (the message says
  until when and how to hand off instead).
- **handoff ID --to codex|claude --confirm**: start a *new* conversation of the chosen client with
  the handoff brief (<= 8 KiB, from the chain's last checkpoint and the bounded work-tree summary).
  Without `--confirm` the brief is shown and nothing starts.
- **recover ID**: reconcile an interrupted, approved plan from its metadata: tasks that succeeded
  stay done, the others are re-run by a new primary of the planner's client with a recovery brief.
  Refused when HEAD moved since the plan was approved, when a worker the session owns still runs
  (PID *and* start marker), or when a write's outcome is uncertain: the last checkpoint lists
  uncertain effects, or the work tree has changes the last checkpoint does not account for (or
  there is no checkpoint to account for them). It needs fresh approval: the user confirms, or
  `--yes`; a non-interactive run without `--yes` is refused (the safe default).

All three run from the session's work tree, take the chain's kernel lease (`_lease`: two resumes
of one session cannot run at once), gate the client on quota like `ivoai auto`, and run it through
the same supervised launcher (`_auto.run_supervised`): the new session joins the same chain, so
checkpoints and failovers continue where they were.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ivoai.client.orchestration._auto import AutoArgs, AutoExtension, GateReport, quota_gate, run_supervised
from ivoai.client.orchestration._checkpoint import Checkpoint, read_checkpoint
from ivoai.client.orchestration._errors import OrchestrationError, QuotaBlockedError
from ivoai.client.orchestration._failover import Chain
from ivoai.client.orchestration._handoff import HandoffContext, build_brief
from ivoai.client.orchestration._lease import Lease, acquire_lease
from ivoai.client.orchestration._runtime import Runtime
from ivoai.client.orchestration._signals import Conversation
from ivoai.client.orchestration._state import read_json_doc, read_state
from ivoai.client.orchestration._worktree import WorktreeSummary, head_of, summarize_worktree
from ivoai.client.sessions.procinfo import is_same_process
from ivoai.client.sessions.records import SessionRecord, SessionStore, check_session_id
from ivoai.common.errors import IvoaiError, UsageError
from ivoai.common.paths import XdgPaths, xdg_paths

VENDORS = ("codex", "claude")
OPEN_TASK_STATES = ("pending", "waiting_dependencies", "queued", "running", "partial")


class SessionRefusedError(OrchestrationError):
    """A resume, handoff or recovery was refused; the message says why and what to do instead."""

    code = "session_refused"


@dataclass
class Target:
    """A session about to be continued: its record, AUTO block, chain and work tree."""

    record: SessionRecord
    auto: dict[str, Any]
    chain: list[str]
    workdir: str
    paths: XdgPaths

    @property
    def root(self) -> str:
        """The chain's first session (its checkpoint's key)."""
        return self.chain[0]


def _target(session_id: str, paths: XdgPaths) -> Target:
    record = SessionStore(paths).load(check_session_id(session_id))
    if record.status() == "live":
        raise SessionRefusedError(
            f"session {session_id} is still running (ivoai pid {record.pid}); it can be continued once it "
            f"ended (`ivoai session stop {session_id}`)"
        )
    auto = record.auto if isinstance(record.auto, dict) else None
    if auto is None:
        raise SessionRefusedError(
            f"session {session_id} is not an AUTO session: ivoai kept no conversation, checkpoint or plan "
            f"for it; continue it with `{record.executor} resume` yourself"
        )
    chain = [s for s in ((auto.get("chain") or {}).get("sessions") or []) if isinstance(s, str)] or [
        record.id
    ]
    if record.id not in chain:
        chain.append(record.id)
    workdir = str(auto.get("workdir") or "")
    if workdir and os.path.realpath(workdir) != os.path.realpath(os.getcwd()):
        raise SessionRefusedError(f"session {session_id} worked in {workdir}; run this command from there")
    return Target(record, auto, [check_session_id(s) for s in chain], workdir or os.getcwd(), paths)


def conversation_of(target: Target) -> Conversation | None:
    """The native conversation of the session's primary, from its record or the supervisor's file."""
    doc = target.auto.get("conversation")
    if not isinstance(doc, dict):
        where = target.paths.state / "auto" / f"{target.record.id}.conversation.json"
        doc = read_json_doc(target.paths.state, where, 64 * 1024)
    if not isinstance(doc, dict) or doc.get("vendor") not in VENDORS or not isinstance(doc.get("id"), str):
        return None
    transcript = doc.get("transcript") if isinstance(doc.get("transcript"), str) else None
    return Conversation(str(doc["vendor"]), str(doc["id"])[:128], transcript, "resumed")


def _gate(vendor: str, env: Mapping[str, str], paths: XdgPaths) -> GateReport:
    """Refuse a vendor that is missing, logged out or at a confirmed hard limit (as `ivoai auto`)."""
    from ivoai.client.orchestration._settings import load_settings

    alternate = "claude" if vendor == "codex" else "codex"
    try:
        facts = Runtime(load_settings(paths), paths=paths, env=env).current(
            refresh=True, vendors=(vendor, alternate)
        )
    except (IvoaiError, OSError) as exc:
        raise QuotaBlockedError(f"the quota gate could not run ({getattr(exc, 'message', exc)})") from None
    return quota_gate(vendor, facts)


def _lease(target: Target) -> Lease:
    return acquire_lease(target.root, target.paths)


def _launch(
    target: Target,
    vendor: str,
    client_args: tuple[str, ...],
    incoming: dict[str, Any],
    gate: GateReport,
    lease: Lease,
    env: Mapping[str, str],
    *,
    yes: bool = False,
    conversation: Conversation | None = None,
) -> int:
    from ivoai.client.orchestration._settings import load_settings

    for note in gate.notes:
        sys.stderr.write(f"ivoai: {note}\n")
    chain = Chain(sessions=list(target.chain), lease=lease)
    args = AutoArgs(vendor, yes=yes, client_args=client_args)
    try:
        settings = load_settings(target.paths)
        ext = AutoExtension(
            args, gate, settings, env, chain=chain, incoming=incoming, conversation=conversation
        )
        return run_supervised(ext)
    finally:
        lease.release()


def resume_session(
    session_id: str, env: Mapping[str, str] | None = None, paths: XdgPaths | None = None
) -> int:
    """Reopen the session's native conversation (same vendor, nothing replayed); the client's status.

    Raises:
        SessionRefusedError, LeaseHeldError, QuotaBlockedError, SessionNotFoundError.
    """
    env = dict(os.environ if env is None else env)
    paths = paths or xdg_paths()
    target = _target(session_id, paths)
    conversation = conversation_of(target)
    if conversation is None:
        raise SessionRefusedError(
            f"the native conversation of session {session_id} is not known (its client never opened one, or "
            f"ivoai could not see it); start a new one from its checkpoint with "
            f"`ivoai session handoff {session_id} --to {target.record.executor} --confirm`"
        )
    lease = _lease(target)
    try:
        gate = _gate(conversation.vendor, env, paths)
    except QuotaBlockedError as exc:
        lease.release()
        other = "claude" if conversation.vendor == "codex" else "codex"
        raise SessionRefusedError(
            f"{exc.message}; or hand the work to {other}: "
            f"`ivoai session handoff {session_id} --to {other} --confirm`"
        ) from None
    except BaseException:
        lease.release()
        raise
    args = ("resume", conversation.id) if conversation.vendor == "codex" else ("--resume", conversation.id)
    incoming = {"kind": "resume", "from_session": session_id, "conversation": conversation.id}
    return _launch(target, conversation.vendor, args, incoming, gate, lease, env, conversation=conversation)


def handoff_brief(target: Target, to: str, reason: str) -> tuple[str, WorktreeSummary]:
    """The handoff brief for `target` (and the summary it was built from)."""
    summary = summarize_worktree(target.workdir)
    state = read_state(target.record.id, target.paths) or {}
    tasks = (state.get("plan") or target.auto.get("plan") or {}).get("tasks") or []
    ctx = HandoffContext(
        target.root,
        target.record.executor,
        to,
        reason,
        read_checkpoint(target.root, target.paths),
        summary,
        tasks,
    )
    return build_brief(ctx), summary


def handoff_session(
    session_id: str,
    to: str,
    *,
    confirm: bool,
    env: Mapping[str, str] | None = None,
    paths: XdgPaths | None = None,
    show: Callable[[str], None] | None = None,
) -> int:
    """Start a new conversation of `to` with the session's handoff brief (only with `confirm`).

    Raises:
        UsageError: no `--confirm` (the brief is shown first), or `to` is not codex/claude.
        SessionRefusedError, LeaseHeldError, QuotaBlockedError, SessionNotFoundError.
    """
    if to not in VENDORS:
        raise UsageError(f"--to must be codex or claude, not {to[:40]!r}")
    env = dict(os.environ if env is None else env)
    paths = paths or xdg_paths()
    target = _target(session_id, paths)
    brief, _ = handoff_brief(target, to, f"explicit handoff of session {session_id}")
    if not confirm:
        (show or sys.stdout.write)(brief)
        raise UsageError(
            f"this would start a new {to} conversation with the brief above ({len(brief.encode())} bytes); "
            "nothing was started; add --confirm to start it"
        )
    lease = _lease(target)
    try:
        gate = _gate(to, env, paths)
    except BaseException:
        lease.release()
        raise
    incoming = {"kind": "handoff", "from_session": session_id, "from_vendor": target.record.executor,
                "brief_bytes": len(brief.encode())}  # fmt: skip
    return _launch(target, to, (brief,), incoming, gate, lease, env)


@dataclass(frozen=True)
class Reconciliation:
    """What `recover` found: done and re-run tasks, the approved plan's HEAD and the current one."""

    done: tuple[str, ...]
    rerun: tuple[str, ...]
    head_then: str | None
    head_now: str | None
    checkpoint: Checkpoint | None
    summary: WorktreeSummary


def reconcile(target: Target) -> Reconciliation:
    """Check that the interrupted plan can be taken up again safely.

    Raises:
        SessionRefusedError: no approved plan; HEAD moved; a worker it owns still runs; a write's
            outcome is uncertain.
    """
    sid = target.record.id
    state = read_state(sid, target.paths) or {}
    plan = state.get("plan") or target.auto.get("plan") or {}
    tasks = [t for t in plan.get("tasks") or [] if isinstance(t, dict)]
    if plan.get("state") != "approved" or not tasks:
        raise SessionRefusedError(f"session {sid} has no approved plan to recover")
    head_then, head_now = plan.get("head"), head_of(target.workdir)
    if head_then and head_now != head_then:
        raise SessionRefusedError(
            f"HEAD moved since the plan of session {sid} was approved ({head_then[:12]} -> "
            f"{(head_now or 'none')[:12]}); the plan no longer describes this tree: hand it off instead "
            f"(`ivoai session handoff {sid} --to {target.record.executor} --confirm`)"
        )
    for worker in state.get("workers") or target.auto.get("workers") or []:
        pid, marker = worker.get("pid"), worker.get("pid_start")
        if isinstance(pid, int) and isinstance(marker, str) and is_same_process(pid, marker):
            raise SessionRefusedError(
                f"worker {worker.get('worker_id')} of session {sid} still runs (pid {pid}); "
                "wait for it to end "
                f"or stop it (kill {pid}) before recovering"
            )
    checkpoint = read_checkpoint(target.root, target.paths)
    if checkpoint is not None and checkpoint.body.uncertain_effects:
        shown = "; ".join(checkpoint.body.uncertain_effects[:3])
        raise SessionRefusedError(
            f"the outcome of a write is uncertain ({shown}); check the work tree, then hand the session off "
            f"(`ivoai session handoff {sid} --to {target.record.executor} --confirm`)"
        )
    summary = summarize_worktree(target.workdir)
    accounted: set[str] = set()
    if checkpoint is not None:
        accounted |= set(checkpoint.body.changed_files)
        accounted |= set((checkpoint.worktree or {}).get("changed") or [])
    unaccounted = sorted(set(summary.changed_names) - accounted)
    if unaccounted:
        shown = ", ".join(unaccounted[:5]) + (
            f" (+{len(unaccounted) - 5} more)" if len(unaccounted) > 5 else ""
        )
        why = "the last checkpoint does not list" if checkpoint is not None else "no checkpoint accounts for"
        raise SessionRefusedError(
            f"a write's outcome is uncertain: the work tree has changes {why} ({shown}); "
            "review them, then hand "
            f"the session off (`ivoai session handoff {sid} --to {target.record.executor} --confirm`)"
        )
    done = tuple(str(t["id"]) for t in tasks if t.get("state") in ("succeeded", "kept_by_primary"))
    rerun = tuple(str(t["id"]) for t in tasks if str(t["id"]) not in done)
    return Reconciliation(done, rerun, head_then, head_now, checkpoint, summary)


def recover_session(
    session_id: str,
    *,
    yes: bool,
    env: Mapping[str, str] | None = None,
    paths: XdgPaths | None = None,
    ask: Callable[[str], bool] | None = None,
) -> int:
    """Reconcile the interrupted plan and, after fresh approval, run its open tasks again.

    Raises:
        SessionRefusedError (including a missing approval), LeaseHeldError, QuotaBlockedError.
    """
    env = dict(os.environ if env is None else env)
    paths = paths or xdg_paths()
    target = _target(session_id, paths)
    lease = _lease(target)
    try:
        rec = reconcile(target)
        planner = str(target.auto.get("planner") or target.record.executor)
        question = (
            f"recover session {session_id}: {len(rec.done)} task(s) done ({', '.join(rec.done) or 'none'}), "
            f"{len(rec.rerun)} to run again ({', '.join(rec.rerun) or 'none'}) by a new {planner} primary. "
            "Approve?"
        )
        if not yes:
            if ask is None:
                raise SessionRefusedError(
                    f"{question} This needs fresh approval: run it in a terminal to answer, or add --yes"
                )
            if not ask(question):
                raise SessionRefusedError("recovery declined; nothing was started")
        gate = _gate(planner, env, paths)
        state = read_state(target.record.id, paths) or {}
        tasks = (state.get("plan") or target.auto.get("plan") or {}).get("tasks") or []
        reason = (
            f"recovering the interrupted plan of session {session_id}: "
            f"tasks done {', '.join(rec.done) or 'none'}; "
            f"run again {', '.join(rec.rerun) or 'none'} (re-submit them with orchestration_plan)"
        )
        ctx = HandoffContext(
            target.root, target.record.executor, planner, reason, rec.checkpoint, rec.summary, tasks
        )
        brief = build_brief(ctx)
    except BaseException:
        lease.release()
        raise
    incoming = {"kind": "recover", "from_session": session_id, "done": list(rec.done),
                "rerun": list(rec.rerun), "approved": "yes_flag" if yes else "user"}  # fmt: skip
    return _launch(target, planner, (brief,), incoming, gate, lease, env, yes=yes)
