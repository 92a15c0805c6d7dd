"""`ivoai quota [--json] [--refresh]`: subscription quota per vendor and window, with pace (thin)."""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

from ivoai.cli._output import print_json, print_table


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:g}%"


def quota_command(
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output (stable schema)."),
    refresh: bool = typer.Option(
        False, "--refresh", help="Ask the clients again now (ignore the 45 s cache)."
    ),
) -> None:
    """Subscription quota of Codex and Claude: each window's use against its elapsed time (pace)."""
    from ivoai.cli._context import client_context
    from ivoai.client.orchestration import quota_report

    doc = quota_report(refresh=refresh, paths=client_context().paths).to_dict()
    if json_out:
        print_json(doc)
        return
    _render(doc)


def _render(doc: dict[str, Any]) -> None:
    now = doc["ts"]
    rows = []
    for v in doc["vendors"]:
        client = v.get("client") or {}
        hard = v.get("hard_limit")
        status = v["state"] + (" (stale)" if v["stale"] and v["windows"] else "")
        if hard:
            status = f"HARD LIMIT until {_when(hard.get('resets_at'))}"
        rows.append(
            [
                v["vendor"],
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                f"auth {v['auth']}",
                status,
                client.get("version") or "-",
            ]
        )
        for w in v["windows"]:
            pace = "-" if w["pace_delta"] is None else f"{w['pace_delta']:+g} pts"
            resets = "-" if w["resets_at"] is None else "in " + _ago(w["resets_at"] - now)
            scope = w["kind"] + (f" ({w['model']})" if w["model"] else "")
            rows.append(
                [
                    v["vendor"],
                    scope,
                    _pct(w["used_percent"]),
                    _pct(w["remaining_percent"]),
                    _pct(w["elapsed_percent"]),
                    pace,
                    resets,
                    w["source"],
                    ("exhausted" if w["exhausted"] else w["status"] or "ok")
                    + (" (stale)" if w["stale"] else ""),
                    _ago(now - w["observed_at"]) + " ago",
                ]
            )
    print_table(
        "quota",
        [
            "vendor",
            "window",
            "used",
            "left",
            "elapsed",
            "pace",
            "resets",
            "source",
            "status",
            "observed/version",
        ],
        rows,
    )
    sys.stdout.flush()
    for v in doc["vendors"]:
        if v.get("error"):
            sys.stderr.write(f"ivoai: {v['vendor']}: {v['error']}\n")
        if v["state"] in ("pending", "unknown") and not v["windows"]:
            why = (
                "Claude reports quota only to its statusline and workers; it appears once ivoai auto runs"
                if v["vendor"] == "claude"
                else "not observed yet"
            )
            sys.stderr.write(f"ivoai: {v['vendor']}: quota unknown ({why}); unknown never blocks a launch\n")


def _when(ts: float | None) -> str:
    if ts is None:
        return "unknown"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
