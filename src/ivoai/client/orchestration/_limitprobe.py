"""Re-reading a vendor's quota *now*, to confirm (or not) a limit the primary reported in words.

Message text alone never stops a vendor (AUTO.md): the supervisor asks again before it acts.

- **Codex**: the real `codex app-server` (`account/rateLimits/read`) through `Runtime.current(
  refresh=True)`: a read that shows `rateLimitReachedType`, `ordinaryUsageAllowed: false` or an
  account window at 100 % confirms the limit; anything else does not.
- **Claude** has no quota query. The only fresh read is a request: a minimal `claude -p` turn
  (`--output-format stream-json --verbose`, no tools, no MCP, no session persistence, one turn)
  whose `rate_limit_event` says `rejected` (account-level: a confirmed limit; `seven_day_opus`/
  `_sonnet`: one model only) or `allowed` (not limited: the signal was transient). At a real limit
  the request is rejected and costs nothing; otherwise it costs one tiny turn, once per limit
  signal (the supervisor caches the answer). Without any `rate_limit_event` (an API-key login
  never has one) the quota stays unknown and nothing is confirmed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ivoai.client.agents.executors import discover
from ivoai.client.orchestration._pipes import json_lines, kill_group, spawn_piped
from ivoai.client.orchestration._quota import VendorQuota, claude_event_hard_limit, claude_event_window
from ivoai.common.limits import QUOTA_PROBE_TIMEOUT_SECONDS

CLAUDE_PROBE_PROMPT = "Reply with the single word ok."
CLAUDE_PROBE_TIMEOUT_SECONDS = 4 * QUOTA_PROBE_TIMEOUT_SECONDS  # claude retries a few times on its own
_OUTPUT_MAX_BYTES = 4 * 1024 * 1024


def claude_rate_limit_infos(
    env: Mapping[str, str], timeout: float = CLAUDE_PROBE_TIMEOUT_SECONDS
) -> list[dict[str, Any]]:
    """The `rate_limit_info` objects of one minimal `claude -p` turn (empty when none came)."""
    found = discover("claude", env)
    if found is None:
        return []
    argv = [
        found[0], "-p", "--output-format", "stream-json", "--verbose", "--no-session-persistence",
        "--strict-mcp-config", "--tools", "", "--max-turns", "1",
    ]  # fmt: skip
    try:
        proc = spawn_piped(argv, env)
    except OSError:
        return []
    infos: list[dict[str, Any]] = []
    assert proc.stdin is not None and proc.stdout is not None
    try:
        with contextlib.suppress(OSError):
            proc.stdin.write(CLAUDE_PROBE_PROMPT.encode())
            proc.stdin.close()
        for doc in json_lines(proc.stdout, time.monotonic() + timeout, max_read=_OUTPUT_MAX_BYTES):
            if isinstance(doc, dict) and doc.get("type") == "rate_limit_event":
                info = doc.get("rate_limit_info")
                if isinstance(info, dict):
                    infos.append(info)
    finally:
        kill_group(proc)
    return infos


def claude_quota_now(env: Mapping[str, str], now: float | None = None) -> VendorQuota | None:
    """A fresh Claude quota view from one minimal turn, or None when it said nothing about quota."""
    now = time.time() if now is None else now
    infos = claude_rate_limit_infos(env)
    if not infos:
        return None
    windows = tuple(w for w in (claude_event_window(i, now) for i in infos) if w is not None)
    hard = next((h for h in (claude_event_hard_limit(i, now) for i in infos) if h is not None), None)
    return VendorQuota(
        "claude", auth="authenticated", state="known", windows=windows, hard_limit=hard, observed_at=now
    )
