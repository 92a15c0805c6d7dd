"""Hook intake, pure part: event models, redaction, repo-root project resolution, session pages.

Agent hooks post lifecycle events (the ai-memory hook vocabulary mapped to snake_case:
SessionStart -> `session_start`, UserPromptSubmit -> `user_prompt`, PostToolUse -> `tool_use`,
Stop -> `stop`, SubagentStop -> `subagent_stop`, PreCompact -> `pre_compact`, Notification ->
`notification`, SessionEnd -> `session_end`). Each carries an idempotency key; the service stores
it once and re-renders the session page from every stored event, so the page is a deterministic
function of the events, whatever order or how often they arrived.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ivoai.common.limits import (
    MEMORY_HOOK_BATCH_MAX_EVENTS,
    MEMORY_HOOK_FILES_MAX,
    MEMORY_HOOK_TEXT_MAX_CHARS,
    MEMORY_NAME_MAX_CHARS,
)
from ivoai.common.redact import find_secrets, redact
from ivoai.server.memory._names import DEFAULT_PROJECT, DEFAULT_WORKSPACE, validate_project

TRUNCATED = " …[truncated]"
HookKind = Literal[
    "session_start",
    "user_prompt",
    "tool_use",
    "stop",
    "subagent_stop",
    "pre_compact",
    "notification",
    "session_end",
]
SESSION_PROMPTS_SHOWN = 50
SESSION_FILES_SHOWN = 200
SESSION_NOTES_SHOWN = 20
PROMPT_LINE_MAX_CHARS = 300
_CHECKOUT_WALK_MAX_DEPTH = 64
_GIT_FILE_MAX_BYTES = 4096


def _truncate(value: object) -> object:
    if isinstance(value, str) and len(value) > MEMORY_HOOK_TEXT_MAX_CHARS:
        return value[: MEMORY_HOOK_TEXT_MAX_CHARS - len(TRUNCATED)] + TRUNCATED
    return value


Text = Annotated[str, BeforeValidator(_truncate)]
FilePath = Annotated[str, Field(min_length=1, max_length=1024)]
HostPath = Annotated[str, Field(min_length=1, max_length=4096)]


class HookEvent(BaseModel):
    """One lifecycle event posted by an agent hook."""

    model_config = ConfigDict(extra="forbid")

    idempotency_key: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
    event: HookKind
    session_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    agent: str = Field(default="unknown", pattern=r"^[a-z][a-z0-9._-]{0,31}$")
    workspace: str = DEFAULT_WORKSPACE
    project: str | None = None
    repo_root: HostPath | None = None
    git_common_dir: HostPath | None = None
    cwd: HostPath | None = None
    at: datetime | None = None
    prompt: Text | None = None
    message: Text | None = None
    tool_name: str | None = Field(default=None, min_length=1, max_length=128)
    files: list[FilePath] = Field(default_factory=list, max_length=MEMORY_HOOK_FILES_MAX)


class HookBatch(BaseModel):
    """Several events in one post (each applied independently)."""

    model_config = ConfigDict(extra="forbid")

    events: list[HookEvent] = Field(min_length=1, max_length=MEMORY_HOOK_BATCH_MAX_EVENTS)


class HookResult(BaseModel):
    """What happened to one event: applied, a duplicate of an earlier post, or rejected."""

    idempotency_key: str
    status: Literal["applied", "duplicate", "rejected"]
    workspace: str | None = None
    project: str | None = None
    path: str | None = None
    version: int | None = None
    redacted: list[str] = Field(default_factory=list)
    error_code: str | None = None
    error: str | None = None


class HookBatchResult(BaseModel):
    """Per-event results, in the order posted."""

    applied: int
    duplicates: int
    rejected: int
    results: list[HookResult]


def redact_event(event: HookEvent) -> tuple[HookEvent, list[str]]:
    """Return the event with every credential in its text replaced, and the kinds found."""
    found: set[str] = set()

    def clean(value: str | None) -> str | None:
        if value is None:
            return None
        kinds = find_secrets(value)
        found.update(kinds)
        return redact(value) if kinds else value

    update = {
        "prompt": clean(event.prompt),
        "message": clean(event.message),
        "tool_name": clean(event.tool_name),
        "cwd": clean(event.cwd),
        "repo_root": clean(event.repo_root),
        "git_common_dir": clean(event.git_common_dir),
        "files": [clean(f) or "" for f in event.files],
    }
    return event.model_copy(update=update), sorted(found)


# ---- project resolution (ai-memory's repo-root strategy) ----


def slug(name: str) -> str:
    """A valid project name from a directory name (lowercase, `[a-z0-9._-]`, bounded)."""
    text = re.sub(r"[^a-z0-9._-]+", "-", name.lower())
    text = re.sub(r"^[^a-z0-9]+", "", text)[:MEMORY_NAME_MAX_CHARS].rstrip("-.")
    return text or DEFAULT_PROJECT


def _components(path: str) -> list[str]:
    # Linux, WSL (/mnt/c/...) and Windows (C:\...) spellings of one checkout share their last names.
    return [p for p in re.split(r"[\\/]+", path) if p and p != "."]


def project_from_git_common_dir(git_common_dir: str) -> str:
    """The main repository's name from `git rev-parse --git-common-dir` (worktrees share it)."""
    parts = _components(git_common_dir)
    if "worktrees" in parts and ".git" in parts:  # a worktree's own git dir: <main>/.git/worktrees/<n>
        parts = parts[: parts.index(".git") + 1]
    if not parts:
        return DEFAULT_PROJECT
    last = parts[-1]
    if last == ".git":
        return slug(parts[-2]) if len(parts) >= 2 else DEFAULT_PROJECT
    if last.endswith(".git"):  # a bare repository
        return slug(last[: -len(".git")])
    return slug(last)


def resolve_project(event: HookEvent) -> str:
    """The project of an event: explicit, else from the git common dir, the repo root, or default.

    The working directory alone is not used: a subdirectory's name is not the repository's.

    Raises:
        MemoryNameError: an explicit project is not a valid name.
    """
    if event.project is not None:
        return validate_project(event.project)
    if event.git_common_dir:
        return project_from_git_common_dir(event.git_common_dir)
    if event.repo_root:
        parts = _components(event.repo_root)
        return slug(parts[-1]) if parts else DEFAULT_PROJECT
    return DEFAULT_PROJECT


def project_from_checkout(path: Path) -> str | None:
    """The main repository's project name for a local directory inside a checkout or worktree.

    Walks up from `path` to the first `.git`; a `.git` file (linked worktree) is followed to its
    `commondir`. None when `path` is not inside a Git checkout.
    """
    current = Path(os.path.abspath(path))
    for _ in range(_CHECKOUT_WALK_MAX_DEPTH):
        marker = current / ".git"
        if marker.is_dir():
            return project_from_git_common_dir(str(marker))
        if marker.is_file():
            gitdir = _read_small(marker).strip()
            if not gitdir.startswith("gitdir:"):
                return None
            worktree_git = Path(gitdir[len("gitdir:") :].strip())
            if not worktree_git.is_absolute():
                worktree_git = current / worktree_git
            commondir_file = worktree_git / "commondir"
            if commondir_file.is_file():
                common = Path(os.path.normpath(worktree_git / _read_small(commondir_file).strip()))
                return project_from_git_common_dir(str(common))
            return project_from_git_common_dir(str(worktree_git))
        if current.parent == current:
            return None
        current = current.parent
    return None


def _read_small(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.read(_GIT_FILE_MAX_BYTES).decode("utf-8", "replace")


# ---- session pages ----


@dataclass(frozen=True)
class StoredEvent:
    """A redacted event as stored, with its effective time."""

    at: float
    idempotency_key: str
    event: HookEvent


@dataclass(frozen=True)
class SessionInfo:
    workspace: str
    project: str
    session_id: str
    agent: str
    first_at: float
    dropped_events: int


def session_page_path(session_id: str, first_at: float) -> str:
    """`sessions/<YYYY-MM-DD>/<session-id>.md`, dated by the session's first event (UTC)."""
    day = datetime.fromtimestamp(first_at, UTC).strftime("%Y-%m-%d")
    return f"sessions/{day}/{session_id}.md"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def render_session(info: SessionInfo, events: Sequence[StoredEvent]) -> tuple[str, str, list[str]]:
    """(title, Markdown body, tags) of a session page: a pure function of the stored events."""
    ordered = sorted(events, key=lambda e: (e.at, e.idempotency_key))
    prompts = [e.event.prompt for e in ordered if e.event.event == "user_prompt" and e.event.prompt]
    tools = Counter(e.event.tool_name for e in ordered if e.event.event == "tool_use" and e.event.tool_name)
    files = sorted({f for e in ordered for f in e.event.files})
    notes = [
        f"{e.event.event}: {_one_line(e.event.message, PROMPT_LINE_MAX_CHARS)}"
        for e in ordered
        if e.event.message
    ]
    first_at = min(info.first_at, ordered[0].at) if ordered else info.first_at
    last_at = ordered[-1].at if ordered else info.first_at
    total = len(ordered) + info.dropped_events
    lines = [
        f"# Session {info.session_id}",
        "",
        f"- agent: {info.agent}",
        f"- workspace: {info.workspace}",
        f"- project: {info.project}",
        f"- started: {_iso(first_at)}",
        f"- last event: {_iso(last_at)}",
        f"- events: {total}"
        + (f" ({info.dropped_events} beyond the per-session limit not kept)" if info.dropped_events else ""),
        f"- ended: {'yes' if any(e.event.event == 'session_end' for e in ordered) else 'no'}",
        "",
        "## Prompts",
        "",
    ]
    lines += [
        f"{i}. {_one_line(p, PROMPT_LINE_MAX_CHARS)}"
        for i, p in enumerate(prompts[:SESSION_PROMPTS_SHOWN], 1)
    ]
    if len(prompts) > SESSION_PROMPTS_SHOWN:
        lines.append(f"- … and {len(prompts) - SESSION_PROMPTS_SHOWN} more")
    if not prompts:
        lines.append("(none)")
    lines += ["", "## Tools used", ""]
    lines += [
        f"- {_code(name)} × {count}" for name, count in sorted(tools.items(), key=lambda t: (-t[1], t[0]))
    ]
    if not tools:
        lines.append("(none)")
    lines += ["", "## Files touched", ""]
    lines += [f"- {_code(f)}" for f in files[:SESSION_FILES_SHOWN]]
    if len(files) > SESSION_FILES_SHOWN:
        lines.append(f"- … and {len(files) - SESSION_FILES_SHOWN} more")
    if not files:
        lines.append("(none)")
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {n}" for n in notes[:SESSION_NOTES_SHOWN]]
    title = f"Session {info.session_id} ({info.agent}, {info.project})"
    tags = ["session", info.agent]
    return title, "\n".join(lines) + "\n", tags
