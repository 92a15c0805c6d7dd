"""The handoff brief: what the alternate primary (or a new conversation) is told, at most 8 KiB.

Built from the chain's last checkpoint, the bounded work-tree summary, the plan metadata (task
IDs and states only) and why the previous primary stopped. It carries names and refs, never
content: the artifacts stay in the ArtifactStore and the new primary reads them itself with
`orchestration_artifact_read`. The text is plain (checkpoints refuse control bytes; work-tree
names have theirs replaced) and fits AUTO_HANDOFF_BRIEF_MAX_BYTES: lists are cut from their end,
least important section first, each cut said in the text ("+N more").
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._checkpoint import Checkpoint
from ivoai.client.orchestration._worktree import WorktreeSummary
from ivoai.common.limits import AUTO_HANDOFF_BRIEF_MAX_BYTES


@dataclass(frozen=True)
class HandoffContext:
    """Everything the brief is built from."""

    chain: str
    from_vendor: str | None
    to_vendor: str
    reason: str  # why the previous primary stopped (or "explicit handoff")
    checkpoint: Checkpoint | None
    worktree: WorktreeSummary
    tasks: Sequence[Mapping[str, Any]] = ()  # plan metadata: id, state, tier, delegated
    resets: Mapping[str, float | None] = field(default_factory=dict)  # vendor -> its limit's reset
    imported: str | None = None  # Claude -> Codex: the imported conversation, when there is one


def _when(ts: float | None) -> str:
    return "unknown" if ts is None else time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(ts))


def _section(title: str, items: Sequence[str], keep: int) -> list[str]:
    if not items or keep <= 0:
        return [f"{title}: (+{len(items)} more, not shown)"] if items else []
    shown = list(items[:keep])
    lines = [f"{title}:"] + [f"- {item}" for item in shown]
    if len(items) > keep:
        lines.append(f"- (+{len(items) - keep} more)")
    return lines


def _render(ctx: HandoffContext, keep: Mapping[str, int]) -> str:
    cp = ctx.checkpoint.body if ctx.checkpoint is not None else None
    head = [
        f"ivoai AUTO handoff to {ctx.to_vendor} (chain {ctx.chain}).",
        (
            f"The previous primary ({ctx.from_vendor}) stopped: {ctx.reason}."
            if ctx.from_vendor
            else f"Reason: {ctx.reason}."
        ),
        "You are now the primary: the planner and the only writer. This brief is the state of the "
        "work as ivoai recorded it; verify the work tree before you change anything, and write a "
        "new checkpoint with orchestration_checkpoint once you have your bearings.",
    ]
    if ctx.imported:
        head.append(f"The previous conversation was imported into this one ({ctx.imported}).")
    for vendor, ts in sorted(ctx.resets.items()):
        head.append(f"{vendor} quota resets at {_when(ts)}.")
    lines = list(head)
    if cp is None:
        lines.append("No checkpoint was written before the stop: rebuild the plan from the work tree.")
    else:
        assert ctx.checkpoint is not None
        lines.append(
            f"Checkpoint {ctx.checkpoint.seq} ({ctx.checkpoint.source}, {_when(ctx.checkpoint.written_at)}):"
        )
        lines.append(f"Objective: {cp.objective}")
        lines += _section("Decisions", cp.decisions, keep["decisions"])
        lines += _section("Completed", cp.completed, keep["completed"])
        lines += _section("Checks", cp.checks, keep["checks"])
        lines += _section("Outstanding", cp.outstanding, keep["outstanding"])
        lines += _section("Blockers", cp.blockers, keep["blockers"])
        lines += _section("Writes whose outcome is uncertain", cp.uncertain_effects, keep["uncertain"])
        if cp.next_step:
            lines.append(f"Next step: {cp.next_step}")
        lines += _section("Changed files (checkpoint)", cp.changed_files, keep["cp_files"])
        lines += _section("Evidence refs (orchestration_artifact_read)", cp.refs, keep["refs"])
    wt = ctx.worktree
    if wt.git:
        lines.append(
            f"Work tree now (read by ivoai, unchanged): branch {wt.branch or '(detached)'} at "
            f"{(wt.head or '(no commit)')[:12]}, {wt.changed_total} changed file(s)."
        )
        lines += _section("Changed files (work tree)", [c.strip() for c in wt.changed], keep["wt_files"])
        lines += _section("Diff stat", [x.strip() for x in wt.stat], keep["stat"])
    else:
        lines.append(f"Work tree: {wt.error or 'not a git work tree'}.")
    if ctx.tasks:
        states = [f"{t.get('id')}: {t.get('state')} (tier {t.get('tier')})" for t in ctx.tasks]
        lines += _section(
            "Plan tasks (re-submit what remains with orchestration_plan)", states, keep["tasks"]
        )
    return "\n".join(lines) + "\n"


_ORDER = ("stat", "wt_files", "refs", "cp_files", "tasks", "checks", "completed", "decisions",
          "blockers", "outstanding", "uncertain")  # fmt: skip


def build_brief(ctx: HandoffContext, limit: int = AUTO_HANDOFF_BRIEF_MAX_BYTES) -> str:
    """The brief, at most `limit` bytes of UTF-8 (sections shrink in `_ORDER`, never silently)."""
    keep = dict.fromkeys(_ORDER, 10_000)
    text = _render(ctx, keep)
    for name in _ORDER:
        while len(text.encode("utf-8")) > limit and keep[name] > 0:
            keep[name] = min(keep[name], 64) // 2 if keep[name] > 1 else 0
            text = _render(ctx, keep)
        if len(text.encode("utf-8")) <= limit:
            return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    marker = "\n[brief cut at the 8 KiB limit]\n"
    return data[: limit - len(marker)].decode("utf-8", "ignore") + marker
