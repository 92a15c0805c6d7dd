"""The primary's own limit signals, read incrementally by the supervisor (bounded, never blocking).

- **Claude**: the lines `primary_hook` appends to `<runtime>/primary-events.jsonl` (its
  `SessionStart` and `StopFailure` hooks). A `StopFailure` whose error type is `rate_limit` or
  `billing_error` becomes a limit signal with Claude's message; other types (server errors,
  authentication, max output tokens) are not limits and are only recorded.
- **Codex**: the interactive Codex keeps its conversation's rollout file open
  (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, checked with codex 0.171),
  so the supervisor finds it among the open files of the primary's process tree (exact: no guess
  by time or directory) and tails it. Codex records a turn that ended on a usage limit as
  `{"type": "event_msg", "payload": {"type": "task_complete", "error": {"message": "You've hit your
  usage limit...", "codex_error_info": "usage_limit_exceeded"}}}` and the rate limits it saw as
  `token_count` events (`rate_limits.limit_id`, `rate_limit_reached_type`); both were captured from
  the real `codex exec` against a scripted model service answering HTTP 429 `usage_limit_reached`.
  The thread ID in the file name is the conversation `ivoai session resume` reopens.

Every source returns `LimitSignal`s for the classifier (`_classify`); nothing here decides.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._classify import LimitSignal
from ivoai.common.limits import AUTO_SIGNAL_LINE_MAX_BYTES, AUTO_SIGNAL_READ_MAX_BYTES

HOOK_EVENTS_FILE = "primary-events.jsonl"
_ROLLOUT = re.compile(
    r"/sessions/(?:[^/]+/)*rollout-[^/]*-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$"
)
CLAUDE_LIMIT_ERRORS = ("rate_limit", "billing_error")
CODEX_LIMIT_INFO = ("usage_limit_exceeded",)


class JsonlTail:
    """Reads whole new lines of a growing file from where it stopped (bounded per call)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def lines(self) -> Iterator[dict[str, Any]]:
        """Every complete new JSON object line (malformed or oversized lines are skipped)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            size = os.fstat(fd).st_size
            if size < self.offset:  # replaced or truncated: start over
                self.offset, self._partial = 0, b""
            chunk = os.pread(fd, min(AUTO_SIGNAL_READ_MAX_BYTES, size - self.offset), self.offset)
        finally:
            os.close(fd)
        self.offset += len(chunk)
        data = self._partial + chunk
        *whole, self._partial = data.split(b"\n")
        if len(self._partial) > AUTO_SIGNAL_LINE_MAX_BYTES:
            self._partial = b""  # an oversized line is dropped, never parsed
        for raw in whole:
            if not raw.strip() or len(raw) > AUTO_SIGNAL_LINE_MAX_BYTES:
                continue
            try:
                doc = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(doc, dict):
                yield doc


@dataclass
class Conversation:
    """The primary's native conversation, once known (what `ivoai session resume` reopens)."""

    vendor: str
    id: str
    transcript: str | None = None  # Claude's transcript file (the Claude -> Codex import reads it)
    source: str = ""  # how ivoai learned it: assigned, hook, rollout_fd


@dataclass
class ClaudeHookSource:
    """The hook lines of a Claude primary."""

    runtime_dir: str
    tail: JsonlTail = field(init=False)
    conversation: Conversation | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tail = JsonlTail(os.path.join(self.runtime_dir, HOOK_EVENTS_FILE))

    def poll(self) -> list[LimitSignal]:
        """New limit signals (and the conversation, from any hook line)."""
        out = []
        for line in self.tail.lines():
            self.events = [*self.events[-31:], line]
            sid, transcript = line.get("session_id"), line.get("transcript_path")
            if isinstance(sid, str) and sid:
                self.conversation = Conversation(
                    "claude", sid, transcript if isinstance(transcript, str) else None, "hook"
                )
            if line.get("hook_event_name") != "StopFailure":
                continue
            kind = str(line.get("error_type") or line.get("error") or "unknown")
            if kind not in CLAUDE_LIMIT_ERRORS:
                continue
            message = str(line.get("message") or "")
            out.append(LimitSignal("claude", "message", f"{kind}: {message}"))
        return out


def open_rollouts(pids: list[int]) -> list[tuple[str, str]]:
    """(path, thread id) of every Codex rollout file the given processes hold open."""
    found: dict[str, str] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            match = _ROLLOUT.search(target)
            if match:
                found[target] = match.group(1)
    return sorted(found.items())


@dataclass
class CodexRolloutSource:
    """The rollout of a Codex primary (found among its open files)."""

    tail: JsonlTail | None = None
    conversation: Conversation | None = None
    limit_id: str | None = None  # from the last token_count's rate_limits

    def locate(self, pids: list[int]) -> None:
        """Find the rollout the primary's tree holds open (the first one found is kept)."""
        if self.tail is not None:
            return
        rollouts = open_rollouts(pids)
        if rollouts:
            path, thread = rollouts[0]
            self.tail = JsonlTail(path)
            self.conversation = Conversation("codex", thread, path, "rollout_fd")

    def poll(self) -> list[LimitSignal]:
        """New limit signals from the rollout."""
        if self.tail is None:
            return []
        out = []
        for line in self.tail.lines():
            payload = line.get("payload")
            if line.get("type") != "event_msg" or not isinstance(payload, dict):
                continue
            if payload.get("type") == "token_count" and isinstance(payload.get("rate_limits"), dict):
                limit_id = payload["rate_limits"].get("limit_id") or payload["rate_limits"].get("limit_name")
                self.limit_id = str(limit_id)[:64] if limit_id else self.limit_id
                continue
            error = payload.get("error") if payload.get("type") == "task_complete" else None
            if payload.get("type") == "error":
                error = payload
            if not isinstance(error, dict):
                continue
            info = error.get("codex_error_info")
            message = str(error.get("message") or "")[:512]
            if info in CODEX_LIMIT_INFO or (isinstance(info, str) and "limit" in info):
                out.append(LimitSignal("codex", "message", message, limit_name=self.limit_id))
            elif message:
                out.append(LimitSignal("codex", "message", message))
        return out
