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
"""

from __future__ import annotations

import json
import os
import sys
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
        for event in script.get("events") or []:
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
        with open(os.path.join(_dir(), "ivoai-standin-runs.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"primary_argv": argv, "settings": docs}) + "\n")
        return 0
    sys.stderr.write(f"claude stand-in: unsupported arguments {argv}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
