"""The session-local Claude statusline command: record quota, then show the user's own statusline.

`ivoai auto` registers, for its Claude primary only (`--settings`), the command
`PYTHON -m ivoai.client.orchestration.statusline CONFIG` as Claude's `statusLine`. Claude runs it
with a JSON payload on stdin whenever the status line refreshes; for subscribers the payload
carries `rate_limits.five_hour|seven_day.{used_percentage, resets_at}` (after the first response;
sometimes absent). This command:

1. reads the payload (at most QUOTA_STATUSLINE_MAX_BYTES are parsed; a larger one is passed on
   but not parsed), and records those windows in the shared quota ledger when they changed;
2. runs the user's own statusline command (found in their Claude settings when the session
   started, kept in CONFIG) with the same stdin, a timeout and capped output, and prints its
   output, so theirs keeps working; without one it prints a short ivoai gauge line.

It never fails Claude's status line: any error prints an empty line and exits 0. Imports are kept
to the ledger and the quota normalizers: Claude may run this several times a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from ivoai.common.limits import (
    QUOTA_STATUSLINE_MAX_BYTES,
    QUOTA_STATUSLINE_OUTPUT_MAX_BYTES,
    QUOTA_STATUSLINE_USER_TIMEOUT_SECONDS,
)

PASS_ON_MAX_BYTES = 1024 * 1024  # what the user's own command may receive; Claude's payload is ~2 KiB


def record(payload: dict[str, Any], now: float) -> list[Any]:
    """Record the payload's windows in the ledger when they differ from what it holds; return them."""
    from ivoai.client.orchestration._ledger import QuotaLedger
    from ivoai.client.orchestration._quota import claude_statusline_windows

    windows = claude_statusline_windows(payload, now)
    if not windows:
        return []
    ledger = QuotaLedger()
    known = {w.key: w for w in ledger.view(now).get("claude").windows}
    changed = any(
        (k := known.get(w.key)) is None
        or (k.used_percent, k.resets_at) != (w.used_percent, w.resets_at)
        or now - k.observed_at > ledger.ttl_seconds / 3
        for w in windows
    )
    if changed:
        ledger.record_windows("claude", windows)
    return windows


def _gauge(windows: list[Any]) -> str:
    parts = [f"{'5h' if w.kind == 'session' else '7d'} {w.used_percent:g}%" for w in windows]
    return "ivoai auto" + (" · " + " · ".join(parts) if parts else "")


def run_user_command(command: str, stdin: bytes) -> bytes:
    """The user's statusline command through the shell (as Claude runs it), bounded."""
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", command],
            input=stdin,
            capture_output=True,
            timeout=QUOTA_STATUSLINE_USER_TIMEOUT_SECONDS,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError):
        return b""
    return proc.stdout[:QUOTA_STATUSLINE_OUTPUT_MAX_BYTES]


def main(argv: list[str] | None = None) -> int:
    """Entry point; always exits 0 (a status line must never break the client)."""
    args = sys.argv[1:] if argv is None else argv
    user_command = None
    try:
        if args:
            with open(args[0], encoding="utf-8") as fh:
                config = json.load(fh)
            user_command = config.get("user_command") if isinstance(config, dict) else None
    except (OSError, ValueError):
        user_command = None
    raw = sys.stdin.buffer.read(PASS_ON_MAX_BYTES)
    windows: list[Any] = []
    if len(raw) <= QUOTA_STATUSLINE_MAX_BYTES:
        try:
            payload = json.loads(raw)
            if isinstance(payload, dict):
                windows = record(payload, time.time())
        except Exception:  # noqa: BLE001 - the status line must render whatever happened to the ledger
            windows = []
    if isinstance(user_command, str) and user_command.strip():
        out = run_user_command(user_command, raw)
        sys.stdout.buffer.write(out)
    else:
        sys.stdout.write(_gauge(windows) + "\n")
    sys.stdout.flush()
    return 0


def claude_settings_fragment(config_path: str, python: str | None = None) -> dict[str, Any]:
    """The `statusLine` setting ivoai passes with `--settings` for one session."""
    import shlex

    exe = python or sys.executable
    command = f"{shlex.quote(exe)} -m ivoai.client.orchestration.statusline {shlex.quote(config_path)}"
    return {"statusLine": {"type": "command", "command": command, "padding": 0}}


def user_statusline_command(cwd: str, env: dict[str, str] | None = None) -> str | None:
    """The statusline command the user configured for Claude (local > project > user settings)."""
    env = dict(os.environ if env is None else env)
    config_dir = env.get("CLAUDE_CONFIG_DIR") or os.path.join(
        env.get("HOME", os.path.expanduser("~")), ".claude"
    )
    candidates = [
        os.path.join(cwd, ".claude", "settings.local.json"),
        os.path.join(cwd, ".claude", "settings.json"),
        os.path.join(config_dir, "settings.json"),
    ]
    for path in candidates:
        try:
            with open(path, "rb") as fh:
                doc = json.loads(fh.read(QUOTA_STATUSLINE_MAX_BYTES * 4))
        except (OSError, ValueError):
            continue
        line = doc.get("statusLine") if isinstance(doc, dict) else None
        if (
            isinstance(line, dict)
            and line.get("type", "command") == "command"
            and isinstance(line.get("command"), str)
        ):
            return str(line["command"])
    return None


if __name__ == "__main__":
    sys.exit(main())
