"""`ivoai uninstall [--dry-run] [--yes]`."""

from __future__ import annotations

import sys

import typer

from ivoai.cli._output import info, print_json, print_table
from ivoai.common.errors import UsageError


def uninstall_command(
    dry_run: bool = typer.Option(False, "--dry-run", help="List exactly what would be removed and kept."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable report."),
) -> None:
    """Remove ivoai's files, managed components and the entries it wrote; keep your tools and logins."""
    from ivoai.cli._context import client_context
    from ivoai.client.components import api

    paths = client_context().paths
    if not dry_run and not yes:
        if not sys.stdin.isatty():
            raise UsageError("uninstall removes ivoai's data; pass --yes (or --dry-run to see what would go)")
        preview = api.uninstall(dry_run=True, paths=paths)
        _render(preview.to_dict())
        if not typer.confirm("remove everything marked `remove`?", default=False):
            raise typer.Exit(1)
    report = api.uninstall(dry_run=dry_run, paths=paths)
    doc = report.to_dict()
    if json_out:
        print_json(doc)
    else:
        _render(doc)
        for line in doc["blocked"] + doc["errors"]:
            info(f"ivoai: {line}")
        if not dry_run and report.ok:
            info(f"ivoai's files are removed; {doc['hint']}")
    if not report.ok:
        raise typer.Exit(1)


def _render(doc: dict[str, object]) -> None:
    items = doc["items"]
    assert isinstance(items, list)
    print_table(
        "uninstall" + (" (dry run)" if doc["dry_run"] else ""),
        ["action", "kind", "path", "reason"],
        [
            [
                i["action"],
                i["kind"],
                i["path"] + (" " + "/".join(i["pointer"]) if i["pointer"] else ""),
                i["reason"],
            ]
            for i in items
        ],
    )
