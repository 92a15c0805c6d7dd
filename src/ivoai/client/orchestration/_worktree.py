"""A bounded summary of the work tree that changes no file: branch, HEAD, changed names, diff stat.

Read at failover (for the handoff brief), by `ivoai session recover` (HEAD and uncertain writes)
and at every checkpoint. Two `git` calls, each bounded in time (AUTO_WORKTREE_TIMEOUT_SECONDS) and
output (AUTO_WORKTREE_MAX_BYTES):

    git status --porcelain=v2 --branch -z --untracked-files=all
    git diff HEAD --stat=... --stat-count=N --no-ext-diff --no-textconv --no-color

both with `--no-optional-locks` (a status must not refresh the index), `core.fsmonitor=false` and
`core.hooksPath=/dev/null` (no repository-controlled program runs), `GIT_OPTIONAL_LOCKS=0`,
`GIT_TERMINAL_PROMPT=0` and `LC_ALL=C`. Names keep git's own quoting rules out (`-z`) and any
control character is replaced by `?`, so the summary is plain text wherever it goes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from ivoai.common.limits import (
    AUTO_WORKTREE_FILES_MAX,
    AUTO_WORKTREE_MAX_BYTES,
    AUTO_WORKTREE_STAT_LINES_MAX,
    AUTO_WORKTREE_TIMEOUT_SECONDS,
)

_GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--no-optional-locks")


@dataclass(frozen=True)
class WorktreeSummary:
    """What the work tree looks like; `git` false when it is not a git work tree (or git failed)."""

    workdir: str
    git: bool
    branch: str | None = None
    head: str | None = None
    changed: tuple[str, ...] = ()  # "XY path" (porcelain status letters, then the name)
    changed_total: int = 0
    stat: tuple[str, ...] = ()
    truncated: bool = False
    error: str | None = None
    took_ms: float = 0.0

    @property
    def changed_names(self) -> tuple[str, ...]:
        """The changed paths without their status letters."""
        return tuple(entry[3:] for entry in self.changed)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (metadata: names and counts, no content)."""
        return {
            "git": self.git,
            "branch": self.branch,
            "head": self.head,
            "changed": list(self.changed),
            "changed_total": self.changed_total,
            "stat": list(self.stat),
            "truncated": self.truncated,
            "error": self.error,
        }


def _plain(text: str) -> str:
    return "".join("?" if (ord(c) < 32 and c != "\t") or 0x7F <= ord(c) < 0xA0 else c for c in text)


def _git(workdir: str, args: list[str]) -> tuple[int | None, bytes, bool]:
    """(exit code or None on timeout/spawn failure, output up to the limit, cut?)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/nonexistent"),
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }
    try:
        proc = subprocess.Popen(
            ["git", *_GIT_SAFE, *args],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            process_group=0,
        )
    except OSError:
        return None, b"", False
    assert proc.stdout is not None
    out = b""
    cut = False
    deadline = time.monotonic() + AUTO_WORKTREE_TIMEOUT_SECONDS
    try:
        import selectors

        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None, out, cut
                if not sel.select(timeout=left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                room = AUTO_WORKTREE_MAX_BYTES - len(out)
                if len(chunk) > room:
                    out += chunk[:room]
                    cut = True
                    break
                out += chunk
        code = proc.wait(max(0.0, deadline - time.monotonic())) if not cut else 0
        return code, out, cut
    except subprocess.TimeoutExpired:
        return None, out, cut
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def _parse_status(raw: bytes) -> tuple[str | None, str | None, list[str]]:
    branch = head = None
    entries: list[str] = []
    parts = raw.split(b"\0")
    i = 0
    while i < len(parts):
        rec = parts[i].decode("utf-8", "replace")
        i += 1
        if not rec:
            continue
        if rec.startswith("# branch.oid "):
            oid = rec[len("# branch.oid ") :]
            head = None if oid == "(initial)" else oid
        elif rec.startswith("# branch.head "):
            name = rec[len("# branch.head ") :]
            branch = None if name == "(detached)" else name
        elif rec[:2] == "1 ":
            fields = rec.split(" ", 8)
            entries.append(f"{fields[1].replace('.', ' ')} {fields[8]}" if len(fields) == 9 else rec)
        elif rec[:2] == "2 ":
            fields = rec.split(" ", 9)
            if len(fields) == 10:
                entries.append(f"{fields[1].replace('.', ' ')} {fields[9]}")
            i += 1  # the original path follows as its own record
        elif rec[:2] == "u ":
            fields = rec.split(" ", 10)
            entries.append(f"UU {fields[10]}" if len(fields) == 11 else rec)
        elif rec[:2] == "? ":
            entries.append(f"?? {rec[2:]}")
    return branch, head, entries


def head_of(workdir: str) -> str | None:
    """The work tree's HEAD commit (None: not a git work tree, or no commit yet)."""
    code, raw, _ = _git(workdir, ["rev-parse", "--verify", "-q", "HEAD"])
    text = raw.decode("ascii", "replace").strip()
    return text if code == 0 and len(text) in (40, 64) else None


def summarize_worktree(workdir: str) -> WorktreeSummary:
    """Read the bounded summary (never raises; a failure is reported in `error`)."""
    started = time.perf_counter()
    code, raw, cut = _git(workdir, ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all"])
    if code is None or code != 0:
        took = (time.perf_counter() - started) * 1000
        why = "git status timed out" if code is None and raw else "not a git work tree (or git unavailable)"
        return WorktreeSummary(workdir, False, error=why, took_ms=took)
    branch, head, entries = _parse_status(raw)
    entries = sorted(_plain(e) for e in entries)
    stat: list[str] = []
    if head is not None:
        width = "--stat=120,100"
        scode, sraw, scut = _git(
            workdir,
            [
                "diff",
                "HEAD",
                width,
                f"--stat-count={AUTO_WORKTREE_STAT_LINES_MAX}",
                "--no-ext-diff",
                "--no-textconv",
                "--no-color",
            ],
        )
        if scode == 0:
            stat = [
                _plain(line.rstrip()) for line in sraw.decode("utf-8", "replace").splitlines() if line.strip()
            ]
            cut = cut or scut
    truncated = cut or len(entries) > AUTO_WORKTREE_FILES_MAX
    return WorktreeSummary(
        workdir,
        True,
        branch=_plain(branch) if branch else None,
        head=head,
        changed=tuple(entries[:AUTO_WORKTREE_FILES_MAX]),
        changed_total=len(entries),
        stat=tuple(stat[: AUTO_WORKTREE_STAT_LINES_MAX + 1]),
        truncated=truncated,
        took_ms=(time.perf_counter() - started) * 1000,
    )
