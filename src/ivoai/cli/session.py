"""`ivoai session list|show|stop` and `ivoai monitor [--watch] [--json]` (thin: parse, call, render)."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from typing import Any

import typer

from ivoai.cli._output import print_json, print_kv, print_ndjson, print_table
from ivoai.common.limits import MONITOR_INTERVAL_SECONDS

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Launched sessions: list, show, stop.")

_JSON = typer.Option(False, "--json", help="Machine-readable output (stable schema).")


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@app.command("list")
def list_command(
    json_out: bool = _JSON,
    all_: bool = typer.Option(False, "--all", help="Include ended sessions."),
) -> None:
    """List launched sessions (live and lost; --all adds ended ones)."""
    from ivoai.cli._context import client_context
    from ivoai.client.sessions.records import SessionStore

    records, problems = SessionStore(client_context().paths).list()
    rows = [r.view() for r in records if all_ or r.status() != "ended"]
    if json_out:
        print_json({"sessions": rows, "problems": problems})
    else:
        print_table(
            "sessions",
            ["id", "executor", "status", "pid", "started", "requested", "effective", "reason"],
            [
                [
                    r["id"],
                    r["executor"],
                    r["status"],
                    r["pid"],
                    _when(r["started_at"]),
                    r["requested_provider"],
                    r["effective_provider"],
                    r["bypass_reason"] or "-",
                ]
                for r in rows
            ],
        )
    for problem in problems:
        sys.stderr.write(f"ivoai: problem: {problem}\n")


@app.command("show")
def show_command(
    session_id: str = typer.Argument(..., help="Session ID (ses_…)."), json_out: bool = _JSON
) -> None:
    """Show one session record and its live status."""
    from ivoai.cli._context import client_context
    from ivoai.client.sessions.records import SessionStore

    view = SessionStore(client_context().paths).load(session_id).view()
    if json_out:
        print_json(view)
        return
    pairs: list[tuple[str, Any]] = [(k, view[k]) for k in sorted(view) if k not in ("last_compression",)]
    for key in ("started_at", "ended_at"):
        pairs = [(k, _when(v) if k == key else v) for k, v in pairs]
    print_kv(pairs)
    last = view.get("last_compression") or {}
    print_kv((f"last_compression.{k}", v) for k, v in sorted(last.items()))


@app.command("stop")
def stop_command(
    session_id: str = typer.Argument(..., help="Session ID (ses_…)."), json_out: bool = _JSON
) -> None:
    """End a live session: SIGTERM to its ivoai process, only if PID and start marker both match."""
    from ivoai.cli._context import client_context
    from ivoai.client.sessions.control import stop_session
    from ivoai.client.sessions.records import SessionStore

    result = stop_session(SessionStore(client_context().paths), session_id)
    doc = {"id": result.id, "signalled": result.signalled, "stopped": result.stopped}
    if json_out:
        print_json(doc)
    else:
        sys.stdout.write(f"{result.id}: {'stopped' if result.stopped else 'signalled, still ending'}\n")


def monitor_command(
    watch: bool = typer.Option(
        False, "--watch", help="Keep refreshing until interrupted (NDJSON with --json)."
    ),
    json_out: bool = _JSON,
    interval: float = typer.Option(
        MONITOR_INTERVAL_SECONDS,
        "--interval",
        min=0.1,
        max=3600.0,
        help="Seconds between refreshes with --watch.",
    ),
    count: int = typer.Option(
        0, "--count", min=0, help="With --watch: stop after this many refreshes (0: never)."
    ),
    all_: bool = typer.Option(False, "--all", help="Include ended sessions."),
) -> None:
    """Live sessions: effective provider, bypass reason and the last compression result."""
    from ivoai.cli._context import client_context
    from ivoai.client.sessions.monitor import snapshot
    from ivoai.client.sessions.records import SessionStore

    store = SessionStore(client_context().paths)
    shown = 0
    while True:
        doc = snapshot(store, include_ended=all_)
        if json_out and watch:
            print_ndjson(doc)
        elif json_out:
            print_json(doc)
        else:
            _render(doc)
        shown += 1
        if not watch or (count and shown >= count):
            return
        time.sleep(interval)


def _render(doc: dict[str, Any]) -> None:
    rows = []
    for s in doc["sessions"]:
        last = s["last_compression"] or {}
        rows.append(
            [
                s["id"],
                s["executor"],
                s["status"],
                s["effective_provider"],
                s["bypass_reason"] or "-",
                s["knowledge_sources"],
                f"{last.get('result', '-')}/{last.get('fidelity', '-')}",
            ]
        )
    print_table(
        f"sessions at {_when(doc['ts'])}",
        ["id", "executor", "status", "effective", "bypass reason", "sources", "last result"],
        rows,
    )
    _render_auto(doc)
    sys.stdout.flush()


def _render_auto(doc: dict[str, Any]) -> None:
    """AUTO plan/worker rows and quota gauges (issue 15)."""
    tasks = []
    for s in doc["sessions"]:
        a = s.get("auto")
        for t in a["tasks"] if a else []:
            took = "-" if t["duration_seconds"] is None else f"{t['duration_seconds']:.1f}s"
            tasks.append([s["id"], a["plan_state"], t["id"], t["state"], t["tier"], t["delegated"], took])
    if tasks:
        print_table("AUTO plan", ["session", "plan", "task", "state", "tier", "delegated", "duration"], tasks)
    workers = [
        [w["worker_id"], w["task_id"], w["state"], f"{w['vendor']}:{w['model']}"]
        for s in doc["sessions"]
        for w in (s.get("auto") or {}).get("workers", [])
    ]
    if workers:
        print_table("AUTO workers", ["worker", "task", "state", "model"], workers)
    resumes = [
        [
            r["worker_id"],
            r["task_id"],
            r["vendor"],
            r["state"],
            _when(r["resets_at"]),
            r["continued_by"] or "-",
        ]  # fmt: skip
        for s in doc["sessions"]
        for r in (s.get("auto") or {}).get("resume", [])
    ]
    if resumes:
        columns = ["worker", "task", "vendor", "state", "resets", "continued by"]
        print_table("AUTO auto-resume", columns, resumes)
    gauges = []
    for v in (doc.get("quota") or {}).get("vendors", []):
        for w in v["windows"]:
            used = "-" if w["used_percent"] is None else f"{w['used_percent']:g}%"
            pace = "-" if w["pace_delta"] is None else f"{w['pace_delta']:+g}"
            gauges.append([v["vendor"], w["kind"] + (f" ({w['model']})" if w["model"] else ""), used, pace])
        if v.get("hard_limit"):
            until = "until " + _when(v["hard_limit"].get("resets_at"))
            gauges.append([v["vendor"], "hard limit", "100%", until])
    if gauges:
        print_table("quota", ["vendor", "window", "used", "pace"], gauges)


# -- issue 16: continue an AUTO session -----------------------------------------------------------


@app.command("resume")
def resume_command(session_id: str = typer.Argument(..., help="Session ID (ses_…).")) -> None:
    """Reopen the session's native conversation (same client, nothing replayed) under a supervised
    AUTO primary. Refused while it runs, when its conversation is unknown or its client is limited."""
    from ivoai.cli._context import client_context
    from ivoai.client.orchestration._resume import resume_session

    raise typer.Exit(resume_session(session_id, paths=client_context().paths))


@app.command("handoff")
def handoff_command(
    session_id: str = typer.Argument(..., help="Session ID (ses_…)."),
    to: str = typer.Option(..., "--to", help="The client that takes over: codex or claude."),
    confirm: bool = typer.Option(False, "--confirm", help="Start it (without: show the brief only)."),
) -> None:
    """Start a new conversation of --to with the session's handoff brief (<= 8 KiB: last checkpoint
    and a read-only summary of the work tree). Without --confirm the brief is shown and nothing starts."""
    from ivoai.cli._context import client_context
    from ivoai.client.orchestration._resume import handoff_session

    raise typer.Exit(handoff_session(session_id, to, confirm=confirm, paths=client_context().paths))


@app.command("recover")
def recover_command(
    session_id: str = typer.Argument(..., help="Session ID (ses_…)."),
    yes: bool = typer.Option(False, "--yes", help="Approve the recovery without asking (for scripts)."),
) -> None:
    """Reconcile an interrupted, approved AUTO plan and run its open tasks again, after fresh approval.
    Refused when HEAD moved, a worker it owns still runs, or a write's outcome is uncertain."""
    from ivoai.cli._context import client_context
    from ivoai.client.orchestration._resume import recover_session

    ask = None
    if sys.stdin.isatty():

        def ask(question: str) -> bool:
            return typer.confirm(question, default=False)

    raise typer.Exit(recover_session(session_id, yes=yes, ask=ask, paths=client_context().paths))
