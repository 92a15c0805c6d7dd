"""`ivoai auto [...]` and `ivoai auto plan --check PLAN.json [--json]` (thin: parse, call, render).

`ivoai auto` itself is dispatched here by `ivoai.cli.main` before Typer (its arguments after `--`
belong to the client, which Typer would parse); `auto plan` goes through the Typer app below.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from ivoai.cli._output import print_json, print_table

app = typer.Typer(no_args_is_help=True, add_completion=False, help="AUTO: quota-aware orchestrated sessions.")
plan_app = typer.Typer(no_args_is_help=True, add_completion=False, help="Check a plan offline.")
app.add_typer(plan_app, name="plan")


@plan_app.callback(invoke_without_command=True)
def plan_command(
    check: Path = typer.Option(..., "--check", help="The plan JSON file to validate and score ('-': stdin)."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output (stable schema)."),
) -> None:
    """Validate and score a plan offline (no client started): per task its score, tier,
    delegation with benefit/overhead, and the chosen profile or why none. Exit 1 when invalid."""
    from ivoai.cli._context import client_context
    from ivoai.client.orchestration import check_plan_file

    report = check_plan_file(check, paths=client_context().paths).to_dict()
    if json_out:
        print_json(report)
    else:
        _render(report)
    if not report["valid"]:
        raise typer.Exit(1)


def _render(doc: dict[str, Any]) -> None:
    if doc["tasks"]:
        rows = []
        for t in doc["tasks"]:
            p = t["profile"]
            profile = (
                f"{p['vendor']}:{p['model']} ({p['effort'] or 'default effort'})"
                if p
                else t["profile_reason"]
            )
            rows.append(
                [
                    t["id"],
                    t["score"],
                    t["tier"],
                    f"{t['benefit']}/{t['overhead']}",
                    "yes" if t["delegated"] else "no",
                    profile,
                    t["reason"],
                ]
            )
        print_table(
            "plan", ["task", "score", "tier", "benefit/overhead", "delegated", "profile", "reason"], rows
        )
    for err in doc["errors"]:
        sys.stderr.write(f"ivoai: plan error: {err['field']}: {err['message']}\n")
    sys.stdout.write(
        "plan is valid\n" if doc["valid"] else f"plan is invalid ({len(doc['errors'])} error(s))\n"
    )


def auto_main(args: list[str]) -> int:
    """Run `ivoai auto [options] [-- ARGS]`; return the primary's exit status (or 1/2 before it ran)."""
    from ivoai.client.agents.launch_cli import run_parsed
    from ivoai.client.orchestration._auto import USAGE, parse_auto_args, run_auto

    return run_parsed(args, parse_auto_args, USAGE, run_auto)
