"""Stand-in for an official client (codex/claude/opencode) where the behaviour under test is ivoai's.

The real clients are used wherever their own behaviour matters (versions, `login status`, the `-c`
parser). This script replaces them only to observe what ivoai does around a client: which argv
and environment it received, how often it was started, and how signals reach it. It is driven by
environment variables:

- STANDIN_REPORT: file to append one JSON line per start: {"pid", "argv", "env": {selected}, "name"}.
- STANDIN_MODE: "exit:N" (exit N at once), "wait" (print `ready`, wait for a signal with default
  handling), "trap" (print `ready`; on SIGINT/SIGTERM/SIGHUP append {"signal": N} to the report,
  then re-raise it with the default action so the process dies by that signal),
  "count" (wait for SIGINT/SIGTERM with sigwaitinfo, recording each with its si_code; die by
  SIGTERM),
  "suicide:N" (kill itself with signal N).
- STANDIN_IGNORE_TERM=1: ignore SIGTERM (to prove ivoai's bounded TERM -> KILL).
- STANDIN_ENV_KEYS: comma-separated variable names whose presence/values are reported.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from types import FrameType


def report(doc: dict[str, object]) -> None:
    path = os.environ.get("STANDIN_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(doc) + "\n")


def main() -> int:
    keys = [k for k in os.environ.get("STANDIN_ENV_KEYS", "").split(",") if k]
    report(
        {
            "name": os.path.basename(sys.argv[0]),
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "argv": sys.argv[1:],
            "env": {k: os.environ.get(k) for k in keys},
        }
    )
    mode = os.environ.get("STANDIN_MODE", "exit:0")
    if mode.startswith("exit:"):
        return int(mode.split(":", 1)[1])
    if mode.startswith("suicide:"):
        os.kill(os.getpid(), int(mode.split(":", 1)[1]))
        time.sleep(30)
        return 99
    if mode == "count":  # wait synchronously so no two deliveries merge; record sender kind per signal
        waited = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, waited)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while True:
            info = signal.sigwaitinfo(waited)
            report({"signal": info.si_signo, "si_code": info.si_code})
            if info.si_signo == signal.SIGTERM:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, waited)
                os.kill(os.getpid(), signal.SIGTERM)
    if mode == "trap":

        def handler(signo: int, frame: FrameType | None) -> None:
            report({"signal": signo})
            signal.signal(signo, signal.SIG_DFL)
            os.kill(os.getpid(), signo)

        for signo in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signo, handler)
    if os.environ.get("STANDIN_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        signal.pause()
    return 98


if __name__ == "__main__":
    sys.exit(main())
