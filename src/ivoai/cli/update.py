"""`ivoai update [--dry-run] [--json]` and `ivoai update --rollback [--force]`."""

from __future__ import annotations

from pathlib import Path

import typer

from ivoai.cli._output import info, print_json, print_table
from ivoai.cli.setup import NPM_CACHE_OPT, OFFLINE_OPT, WHEELHOUSE_OPT
from ivoai.common.errors import UsageError


def update_command(
    dry_run: bool = typer.Option(False, "--dry-run", help="Stage and probe, change nothing."),
    rollback: bool = typer.Option(False, "--rollback", help="Undo the last committed update."),
    force: bool = typer.Option(
        False, "--force", help="With --rollback: overwrite files changed since the update."
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable report."),
    offline: bool = OFFLINE_OPT,
    npm_cache: Path | None = NPM_CACHE_OPT,
    wheelhouse: Path | None = WHEELHOUSE_OPT,
) -> None:
    """Move installed components and ivoai's state to this version's pins and schemas, transactionally."""
    from ivoai.cli._context import client_context
    from ivoai.client.components import api

    if rollback and dry_run:
        raise UsageError("--rollback cannot be combined with --dry-run (a rollback is not staged)")
    if force and not rollback:
        raise UsageError("--force only applies to --rollback")
    if rollback:
        report = api.rollback(info, force=force, paths=client_context().paths)
    else:
        report = api.update(
            info,
            dry_run=dry_run,
            offline=offline,
            npm_cache=npm_cache,
            wheelhouse=wheelhouse,
            paths=client_context().paths,
        )
    doc = report.to_dict()
    if json_out:
        print_json(doc)
        return
    if doc["recovered"]:
        r = doc["recovered"]
        info(f"an interrupted {r['kind']} (phase {r['phase']}) was {r['action'].replace('_', ' ')}")
    if not doc["components"] and not doc["migrations"]:
        info("everything is up to date" if doc["action"] != "rolled_back" else "rolled back")
        return
    if doc["components"]:
        print_table(
            "components",
            ["component", "from", "to", "probe"],
            [[c["name"], c["from_version"], c["to_version"], c["probe"] or "-"] for c in doc["components"]],
        )
    if doc["migrations"]:
        print_table(
            "migrations",
            ["store", "file", "from", "to"],
            [[m["store"], m["file"], m["from"], m["to"]] for m in doc["migrations"]],
        )
    done = {"dry_run": "dry run: nothing was changed", "updated": "updated", "rolled_back": "rolled back"}
    info(done.get(doc["action"], doc["action"]) + (f" (transaction {doc['txid']})" if doc["txid"] else ""))
