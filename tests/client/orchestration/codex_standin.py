"""Stand-in for a *logged-in* `codex` (a subscription account cannot be had on these machines).

The real `codex app-server` is used wherever its own behaviour can be observed without an account
(handshake, `model/list`, the unauthenticated answers: see test_appserver.py). This script replays
what a logged-in account answers, in the documented schema (the fixtures it serves are validated
against the schema the installed codex generates), so ivoai's handling of real numbers can be
tested. It reads its script from `$CODEX_HOME/ivoai-standin.json` (CODEX_HOME is one of the few
variables ivoai passes to the clients it probes):

    {"version": "0.171.0", "account": {...GetAccountResponse...},
     "rate_limits": {...GetAccountRateLimitsResponse...} | {"error": {"code": -32600, "message": "..."}},
     "updates": [{...AccountRateLimitsUpdatedNotification...}], "model_list": {...ModelListResponse...},
     "exec": {"events": [...JSONL events...], "last_message": "...", "exit": 0, "hold": false,
              "write": "relative/path", "spawn_child": false, "by_model": {MODEL: {overrides}}}}

`exec.resume` overrides the script for `codex exec resume` runs, `exec.limited` marks the account
limited (as `primary.rollout.limited` does).
The rate-limit fixtures are written as of FIXTURE_EPOCH; every `resetsAt` is moved by the time
elapsed since then, as a live account would report it. Every request it receives is appended to
`$CODEX_HOME/ivoai-standin-requests.jsonl`.
Started as the interactive primary (any other arguments), it logs its argv and environment names
and, when the script has `"primary": {"calls": [[tool, args], ...]}`, starts the MCP servers its
`-c mcp_servers.ivoai-orchestrator.command/args` name (as Codex would), makes those tool calls with
the MCP SDK client and appends each answer to `$CODEX_HOME/ivoai-standin-primary.jsonl`.
`codex exec` replays `exec.events` as JSONL on stdout (the documented `codex exec --json` event
types), writes `exec.last_message` to the `-o` file, and exits `exec.exit`; `hold` keeps it alive
(printing a line every 10 ms) until it is signalled; `write` creates a file in the work tree (to
test the read-only violation check); `spawn_child` leaves a grandchild in its process group.

Issue 16 (the supervised primary): with `"primary": {"rollout": {...}}` the interactive primary
does what the real interactive Codex does with its conversation: it creates
`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, keeps it open, and appends
the `event_msg` lines the real `codex exec` wrote when a scripted model service answered HTTP 429
`usage_limit_reached` (`token_count` with `rate_limits.limit_id`, then `task_complete` with
`error.codex_error_info`): `{"limit_id", "message", "codex_error_info", "limited": bool}`.
`limited` also creates `$CODEX_HOME/ivoai-standin-limited`, after which the app-server answers
`rate_limits_limited` (the account's state once the limit is real). It then waits for the
supervisor's verdict (`<runtime>/supervisor.json`) and holds until signalled, or exits
`primary.exit` once a verdict is there when `"exit_after_verdict": true`. The argv, the time of
its start and its CODEX_HOME are logged as for any primary. `"real_codex": PATH` makes `app-server
generate-json-schema` and the `externalAgentConfig/*` requests go to that real codex binary (the
import of a Claude transcript is served by the real Codex, not replayed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

FIXTURE_EPOCH = 1796140000  # the "now" the rate-limit fixtures were written for


def _shift(doc: Any) -> Any:
    """Move every `resetsAt` by the time elapsed since FIXTURE_EPOCH."""
    delta = int(time.time()) - FIXTURE_EPOCH
    if isinstance(doc, dict):
        return {k: v + delta if k == "resetsAt" and isinstance(v, int) else _shift(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_shift(v) for v in doc]
    return doc


def _home() -> str:
    return os.environ.get("CODEX_HOME") or os.path.join(os.environ.get("HOME", "/nonexistent"), ".codex")


def _script() -> dict[str, Any]:
    try:
        with open(os.path.join(_home(), "ivoai-standin.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
            return doc if isinstance(doc, dict) else {}
    except FileNotFoundError:
        return {}


def _log(doc: Any) -> None:
    with open(os.path.join(_home(), "ivoai-standin-requests.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(doc) + "\n")


def _send(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


class _RealServer:
    """A real `codex app-server` the stand-in forwards `externalAgentConfig/*` requests to."""

    def __init__(self, codex: str) -> None:
        self.proc = subprocess.Popen(
            [codex, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.next_id = 1
        self.call("initialize", {"clientInfo": {"name": "standin", "version": "0"}, "capabilities": {}})
        self.send({"jsonrpc": "2.0", "method": "initialized"})

    def send(self, doc: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(doc) + "\n").encode())
        self.proc.stdin.flush()

    def call(self, method: str, params: Any, relay: bool = False) -> dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            msg: dict[str, Any] = json.loads(self.proc.stdout.readline())
            if msg.get("id") == rid and "method" not in msg:
                return msg
            external = str(msg.get("method", "")).startswith("externalAgent")
            if relay and "method" in msg and "id" not in msg and external:
                _send(msg)

    def drain_until(self, method: str) -> None:
        assert self.proc.stdout is not None
        while True:
            msg = json.loads(self.proc.stdout.readline())
            if "method" in msg and "id" not in msg and str(msg["method"]).startswith("externalAgent"):
                _send(msg)
                if msg["method"] == method:
                    return


def app_server(script: dict[str, Any]) -> int:
    version = script.get("version", "0.171.0")
    real: _RealServer | None = None
    for line in sys.stdin:
        msg = json.loads(line)
        _log(msg)
        if "id" not in msg:
            continue
        method, rid = msg.get("method"), msg["id"]
        if str(method).startswith("externalAgentConfig/") and script.get("real_codex"):
            real = real or _RealServer(script["real_codex"])
            forwarded = real.call(str(method), msg.get("params"), relay=True)
            _send({**forwarded, "id": rid})
            if method == "externalAgentConfig/import" and "result" in forwarded:
                real.drain_until("externalAgentConfig/import/completed")
            continue
        if method == "initialize":
            name = msg["params"]["clientInfo"]["name"]
            _send(
                {
                    "id": rid,
                    "result": {
                        "userAgent": f"{name}/{version} (standin)",
                        "codexHome": _home(),
                        "platformFamily": "unix",
                        "platformOs": "linux",
                    },
                }
            )
            _send({"method": "configWarning", "params": {"summary": "stand-in notice", "details": None}})
        elif method == "account/read":
            _send(
                {"id": rid, "result": script.get("account") or {"account": None, "requiresOpenaiAuth": True}}
            )
        elif method == "account/rateLimits/read":
            for update in script.get("updates") or []:
                _send({"method": "account/rateLimits/updated", "params": _shift(update)})
            answer = script.get("rate_limits")
            limited = os.path.exists(os.path.join(_home(), "ivoai-standin-limited"))
            if limited and "rate_limits_limited" in script:
                answer = script["rate_limits_limited"]
            if answer is None:
                answer = {
                    "error": {
                        "code": -32600,
                        "message": "codex account authentication required to read rate limits",
                    }
                }
            if "error" in answer:
                _send({"id": rid, "error": answer["error"]})
            else:
                _send({"id": rid, "result": _shift(answer)})
        elif method == "model/list":
            _send({"id": rid, "result": script.get("model_list") or {"data": [], "nextCursor": None}})
        else:
            _send({"id": rid, "error": {"code": -32601, "message": f"unknown method {method}"}})
    return 0


def exec_(argv: list[str], script: dict[str, Any]) -> int:
    spec = script.get("exec") or {}
    model = argv[argv.index("-m") + 1] if "-m" in argv else None
    spec = {**spec, **(spec.get("by_model") or {}).get(model, {})}
    if argv[1:2] == ["resume"]:  # `codex exec resume THREAD ...` (issue 16): its own script
        spec = {**spec, **(spec.get("resume") or {})}
    if spec.get("limited"):  # the account is at its limit from now on (see app-server)
        open(os.path.join(_home(), "ivoai-standin-limited"), "w").close()
    prompt = sys.stdin.read()
    _log(
        {
            "exec_argv": argv,
            "prompt_bytes": len(prompt.encode()),
            "cwd": os.getcwd(),
            "env_keys": sorted(os.environ),
        }
    )
    if spec.get("write"):
        with open(spec["write"], "w", encoding="utf-8") as fh:
            fh.write("written by a worker that should not write\n")
    if spec.get("spawn_child"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        _log({"grandchild": child.pid})
    for event in spec.get("events") or []:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()
    if "-o" in argv and spec.get("last_message") is not None:
        with open(argv[argv.index("-o") + 1], "w", encoding="utf-8") as fh:
            fh.write(spec["last_message"])
    if spec.get("hold"):
        n = 0
        while True:
            sys.stdout.write(
                json.dumps(
                    {"type": "item.updated", "item": {"id": f"i{n}", "type": "reasoning", "text": "x" * 200}}
                )
                + "\n"
            )
            sys.stdout.flush()
            n += 1
            time.sleep(0.01)
    return int(spec.get("exit", 0))


def _orchestrator_command(argv: list[str]) -> tuple[str, list[str]] | None:
    command, args = None, None
    for i, arg in enumerate(argv[:-1]):
        if arg != "-c":
            continue
        value = argv[i + 1]
        if value.startswith("mcp_servers.ivoai-orchestrator.command="):
            command = json.loads(value.partition("=")[2])
        elif value.startswith("mcp_servers.ivoai-orchestrator.args="):
            args = json.loads(value.partition("=")[2])
    return (command, args) if command and args is not None else None


def _runtime_dir(argv: list[str]) -> str | None:
    server = _orchestrator_command(argv)
    if server is None or "--runtime" not in server[1]:
        return None
    return os.path.dirname(server[1][server[1].index("--runtime") + 1])


def _wait_verdict(argv: list[str], count: int = 1, timeout: float = 60.0) -> None:
    """Wait until the supervisor published `count` verdicts (bounded)."""
    runtime = _runtime_dir(argv)
    deadline = time.monotonic() + timeout
    while runtime is not None and time.monotonic() < deadline:
        try:
            with open(os.path.join(runtime, "supervisor.json"), encoding="utf-8") as fh:
                if len(json.load(fh).get("verdicts") or []) >= count:
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.02)


def _rollout(argv: list[str], spec: dict[str, Any]) -> int:
    """Behave like the interactive Codex with its rollout file open (see the module docstring)."""
    import uuid

    thread = str(uuid.uuid4())
    day = os.path.join(_home(), "sessions", "2026", "12", "01")
    os.makedirs(day, exist_ok=True)
    path = os.path.join(day, f"rollout-2026-12-01T00-00-00-{thread}.jsonl")
    fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held open like the real Codex
    meta = {"id": thread, "session_id": thread, "cwd": os.getcwd(), "originator": "codex_cli_rs",
            "source": "cli"}  # fmt: skip
    events: list[dict[str, Any]] = [{"type": "session_meta", "payload": meta}]
    limit = {"limit_id": spec.get("limit_id", "codex"), "limit_name": None, "primary": None,
             "secondary": None, "rate_limit_reached_type": None}  # fmt: skip
    count = {"type": "token_count", "info": None, "rate_limits": limit}
    events.append({"type": "event_msg", "payload": count})
    error = {"message": spec.get("message", ""), "codex_error_info": spec.get("codex_error_info")}
    events.append({"type": "event_msg", "payload": {"type": "task_complete", "error": error}})
    _log({"primary_rollout": path, "thread": thread, "at": time.time()})
    if spec.get("limited"):
        open(os.path.join(_home(), "ivoai-standin-limited"), "w").close()
    for event in events:
        fh.write(json.dumps({"timestamp": "2026-12-01T00:00:00.000Z", **event}) + "\n")
        fh.flush()
    _wait_verdict(argv)
    if spec.get("exit_after_verdict"):
        fh.close()
        return int(spec.get("exit", 0))
    deadline = time.monotonic() + 90  # held until the supervisor ends it; bounded if it never does
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return 75


def primary(argv: list[str], script: dict[str, Any]) -> int:
    _log({"primary_argv": argv, "env_keys": sorted(os.environ), "at": time.time(), "codex_home": _home()})
    spec = script.get("primary") or {}
    limited = os.path.exists(os.path.join(_home(), "ivoai-standin-limited"))
    if spec.get("raw_tty") and os.isatty(0) and not limited:
        import tty

        tty.setraw(0)  # like a TUI; the supervisor must give the terminal back
        sys.stdout.write("\x1b[?1049h\x1b[?25l")  # alternate screen, hidden cursor
        sys.stdout.flush()
    calls = spec.get("calls") or []
    server = _orchestrator_command(argv)
    if calls and server is not None and not limited:
        _drive(server, calls)
    if spec.get("rollout") and not limited:
        return _rollout(argv, spec["rollout"])
    return int(spec.get("exit", 0))


def _drive(server: tuple[str, list[str]], calls: list[Any]) -> None:
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def drive() -> None:
        params = StdioServerParameters(command=server[0], args=server[1])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for name, args in calls:
                result = await session.call_tool(name, args)
                with open(os.path.join(_home(), "ivoai-standin-primary.jsonl"), "a", encoding="utf-8") as fh:
                    fh.write(
                        json.dumps(
                            {"tool": name, "result": result.structured_content, "is_error": result.is_error}
                        )
                        + "\n"
                    )

    anyio.run(drive)


def main() -> int:
    argv = sys.argv[1:]
    script = _script()
    if argv[:1] == ["--version"]:
        sys.stdout.write(f"codex-cli {script.get('version', '0.171.0')}\n")
        return 0
    if argv[:2] == ["app-server", "generate-json-schema"] and script.get("real_codex"):
        os.execv(script["real_codex"], [script["real_codex"], *argv])
    if argv[:1] == ["app-server"]:
        return app_server(script)
    if argv[:1] == ["exec"]:
        return exec_(argv, script)
    if argv[:2] == ["login", "status"]:
        logged_in = bool((script.get("account") or {}).get("account"))
        sys.stdout.write("Logged in using ChatGPT\n" if logged_in else "Not logged in\n")
        return 0 if logged_in else 1
    return primary(argv, script)


if __name__ == "__main__":
    sys.exit(main())
