"""`python -m ivoai.client.orchestration.primary_hook FILE`: Claude's per-session hook for the supervisor.

`ivoai auto --planner claude` registers this command for `SessionStart` and `StopFailure` in the
one per-session `--settings` file (merged with the statusline and the memory hooks). Claude pipes
the hook payload on stdin; checked with claude 2.1.197 against a scripted model service:

    SessionStart: {"session_id", "transcript_path", "cwd", "hook_event_name": "SessionStart", "source"}
    StopFailure:  {"session_id", "transcript_path", "cwd", "hook_event_name": "StopFailure",
                   "error": "rate_limit", "last_assistant_message": "API Error: ... usage limit ..."}

(other versions name the type `error_type` and add `error_message`: both are read). One bounded
line (event, IDs, error type, the first 512 characters of the message, time) is appended to FILE,
the supervisor's signal file in the session's private runtime directory; nothing else is kept.
The hook never blocks Claude: whatever happens it exits 0 and prints nothing (StopFailure output
is ignored anyway). Import-light: `json`, `os`, `sys`, `time`.
"""

from __future__ import annotations

import json
import os
import sys
import time

PAYLOAD_MAX_BYTES = 64 * 1024  # = limits.AUTO_HOOK_PAYLOAD_MAX_BYTES (import-light: not imported)
MESSAGE_MAX_CHARS = 512
_KEEP = ("hook_event_name", "session_id", "transcript_path", "cwd", "error", "error_type", "source")


def record(payload: dict[str, object]) -> dict[str, object]:
    """The bounded line kept for one hook payload."""
    line: dict[str, object] = {k: str(payload[k])[:4096] for k in _KEEP if isinstance(payload.get(k), str)}
    message = payload.get("error_message") or payload.get("last_assistant_message")
    if isinstance(message, str):
        line["message"] = message[:MESSAGE_MAX_CHARS]
    line["at"] = time.time()
    return line


def main(argv: list[str] | None = None) -> int:
    """Append one line for the payload on stdin to the signal file; always 0."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 1:
            return 0
        raw = sys.stdin.buffer.read(PAYLOAD_MAX_BYTES + 1)
        if len(raw) > PAYLOAD_MAX_BYTES:
            return 0
        payload = json.loads(raw)
        if not isinstance(payload, dict):
            return 0
        data = (json.dumps(record(payload), ensure_ascii=True) + "\n").encode("ascii")
        fd = os.open(args[0], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)  # O_APPEND: each line lands whole at the end of the file
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
