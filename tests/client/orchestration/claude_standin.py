"""Stand-in for a *logged-in* `claude` (a subscription login cannot be had on these machines).

The real `claude -p` runs against a scripted model service wherever that can produce what a test
needs (see model_stub.py); but Claude emits `rate_limit_event` only for subscription logins, so
this script replays a worker's `--output-format stream-json --verbose` stream in the documented
schema (`system/init`, `rate_limit_event {rate_limit_info}`, `assistant`, `result`) from
`$HOME/.claude/ivoai-standin.json` (`{"version", "logged_in", "events": [...], "exit": 0,
"initialize": {...}}`), answers `--version` and `auth status` like the real one, and answers the
`initialize` control request of `--input-format stream-json` with `initialize` (the captured answer
of the real claude 2.1.197). Each run's argv and environment variable
names are appended to `$HOME/.claude/ivoai-standin-runs.jsonl`; an interactive primary run records
its argv and the `--settings` documents it was given, then exits 0.

Issue 16 (the supervised primary): with `"primary": {"stop_failure": {...}}` the interactive
primary does what the real Claude does around a turn that ends on a rate limit (both payloads were
captured from the real claude 2.1.197 with a scripted model service answering HTTP 429): it writes
its transcript under `projects/<cwd>/<session id>.jsonl` (the `--session-id` it was given), runs
the `SessionStart` hook commands of its `--settings` with `{"session_id", "transcript_path", "cwd",
"hook_event_name": "SessionStart", "source": "startup"}` on stdin, then the `StopFailure` ones with
`{..., "hook_event_name": "StopFailure", "error": "rate_limit", "last_assistant_message": MSG}`,
waits for the supervisor's verdict (`supervisor.json` next to the settings file) and holds until
signalled (or exits with `"exit_after_verdict": true`). `-p` runs replay `events` (the limit probe
gets the scripted `rate_limit_event`s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any


def _dir() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(
        os.environ.get("HOME", "/nonexistent"), ".claude"
    )


def _script() -> dict[str, Any]:
    try:
        with open(os.path.join(_dir(), "ivoai-standin.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
            return doc if isinstance(doc, dict) else {}
    except FileNotFoundError:
        return {}


def _run_hooks(settings: dict[str, Any], event: str, payload: dict[str, Any]) -> None:
    for group in (settings.get("hooks") or {}).get(event) or []:
        for hook in group.get("hooks") or []:
            if hook.get("type") == "command":
                data = json.dumps(payload).encode()
                subprocess.run(hook["command"], shell=True, input=data, check=False, timeout=30)


def _stop_failure(argv: list[str], settings: dict[str, Any], settings_path: str, spec: dict[str, Any]) -> int:
    sid = "00000000-0000-4000-8000-000000000000"
    if "--session-id" in argv:
        sid = argv[argv.index("--session-id") + 1]
    cwd = os.getcwd()
    project = os.path.join(_dir(), "projects", cwd.replace("/", "-").replace(".", "-"))
    os.makedirs(project, exist_ok=True)
    transcript = os.path.join(project, f"{sid}.jsonl")
    with open(transcript, "w", encoding="utf-8") as fh:
        turns = (("user", spec.get("user_text", "Fix the parser")), ("assistant", "Working on it."))
        for role, text in turns:
            line = {"type": role, "message": {"role": role, "content": text}, "sessionId": sid, "cwd": cwd,
                    "uuid": f"{role}-1", "parentUuid": None, "timestamp": "2026-12-01T10:00:00.000Z",
                    "version": "2.1.197", "isSidechain": False, "userType": "external"}  # fmt: skip
            fh.write(json.dumps(line) + "\n")
    common = {"session_id": sid, "transcript_path": transcript, "cwd": cwd}
    _run_hooks(settings, "SessionStart", {**common, "hook_event_name": "SessionStart", "source": "startup"})
    if spec.get("limited"):
        open(os.path.join(_dir(), "ivoai-standin-limited"), "w").close()
    failure = {**common, "hook_event_name": "StopFailure", "error": spec.get("error", "rate_limit"),
               "last_assistant_message": spec.get("message", "")}  # fmt: skip
    _run_hooks(settings, "StopFailure", failure)
    runtime = os.path.dirname(settings_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with open(os.path.join(runtime, "supervisor.json"), encoding="utf-8") as fh:
                if json.load(fh).get("verdicts"):
                    break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    if spec.get("exit_after_verdict"):
        return int(spec.get("exit", 0))
    deadline = time.monotonic() + 90  # held until the supervisor ends it; bounded if it never does
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return 75


def main() -> int:
    argv = sys.argv[1:]
    script = _script()
    if argv[:1] in (["--version"], ["-v"]):
        sys.stdout.write(f"{script.get('version', '2.1.197')} (Claude Code)\n")
        return 0
    if argv[:2] == ["auth", "status"]:
        logged_in = bool(script.get("logged_in"))
        sys.stdout.write(
            json.dumps(
                {
                    "loggedIn": logged_in,
                    "authMethod": "claude.ai" if logged_in else "none",
                    "apiProvider": "firstParty",
                }
            )
            + "\n"
        )
        return 0 if logged_in else 1
    if "-p" in argv and "--input-format" in argv and argv[argv.index("--input-format") + 1] == "stream-json":
        for line in sys.stdin:
            request = json.loads(line)
            if request.get("type") == "control_request" and request["request"].get("subtype") == "initialize":
                response = {
                    "subtype": "success",
                    "request_id": request["request_id"],
                    "response": script.get("initialize") or {"models": []},
                }
                sys.stdout.write(json.dumps({"type": "control_response", "response": response}) + "\n")
                sys.stdout.flush()
        return 0
    if "-p" in argv:
        prompt = sys.stdin.read()
        with open(os.path.join(_dir(), "ivoai-standin-runs.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps({"argv": argv, "env_keys": sorted(os.environ), "prompt_bytes": len(prompt)}) + "\n"
            )
        events = script.get("events") or []
        if os.path.exists(os.path.join(_dir(), "ivoai-standin-limited")) and "events_limited" in script:
            events = script["events_limited"]
        for event in events:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
        return int(script.get("exit", 0))
    if not any(a in ("-p", "--print") for a in argv) and argv[:1] != ["auth"]:
        # An interactive primary (`ivoai auto --planner claude`): record its argv and the settings
        # documents it was given (they are ivoai's private runtime files), then end.
        settings = [a.partition("=")[2] for a in argv if a.startswith("--settings=")]
        settings += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--settings"]
        docs = []
        for path in settings:
            with open(path, encoding="utf-8") as fh:
                docs.append(json.load(fh))
        tty_state = None
        if os.isatty(0):
            import termios

            lflag = termios.tcgetattr(0)[3]
            tty_state = {"icanon": bool(lflag & termios.ICANON), "echo": bool(lflag & termios.ECHO)}
        with open(os.path.join(_dir(), "ivoai-standin-runs.jsonl"), "a", encoding="utf-8") as fh:
            doc = {"primary_argv": argv, "settings": docs, "at": time.time(), "tty": tty_state}
            fh.write(json.dumps(doc) + "\n")
        failure = (script.get("primary") or {}).get("stop_failure")
        if failure is not None and docs and not os.path.exists(os.path.join(_dir(), "ivoai-standin-limited")):
            return _stop_failure(argv, docs[0], settings[0], failure)
        return 0
    sys.stderr.write(f"claude stand-in: unsupported arguments {argv}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
