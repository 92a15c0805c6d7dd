"""`ivoai setup [--component C]... [--json]`: install or repair the pinned components."""

from __future__ import annotations

from pathlib import Path

import typer

from ivoai.cli._output import info, print_json, print_table

OFFLINE_OPT = typer.Option(
    False, "--offline", help="Use only --npm-cache, --wheelhouse and earlier downloads."
)
NPM_CACHE_OPT = typer.Option(
    None, "--npm-cache", metavar="DIR", help="npm cache to install from (default: ivoai's)."
)
WHEELHOUSE_OPT = typer.Option(
    None, "--wheelhouse", metavar="DIR", help="Directory of the pinned wheels (no index)."
)


def setup_command(
    component: list[str] = typer.Option(
        [], "--component", "-c", metavar="NAME", help="Only these (repeatable; `all` for every component)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable report."),
    offline: bool = OFFLINE_OPT,
    npm_cache: Path | None = NPM_CACHE_OPT,
    wheelhouse: Path | None = WHEELHOUSE_OPT,
    skip_existing: bool = typer.Option(
        False, "--skip-existing", help="Use a tool already on PATH instead of installing its pin."
    ),
) -> None:
    """Install or repair pinned components below ivoai's data directory (idempotent)."""
    from ivoai.cli._context import client_context
    from ivoai.client.components.api import setup

    report = setup(
        component,
        info,
        offline=offline,
        npm_cache=npm_cache,
        wheelhouse=wheelhouse,
        skip_existing=skip_existing,
        paths=client_context().paths,
    )
    doc = report.to_dict()
    if json_out:
        print_json(doc)
    else:
        print_table(
            "components",
            ["component", "version", "action", "node", "detail"],
            [
                [
                    r["name"],
                    r["version"],
                    r["action"].replace("_", " "),
                    r["node_source"] or "-",
                    r["error"]
                    or (
                        f"installed {r['installed_version']}; run `ivoai update`"
                        if r["installed_version"]
                        else ""
                    ),
                ]
                for r in doc["components"]
            ],
        )
        for r in doc["components"]:
            for path in r["pre_existing"]:
                info(f"{r['name']}: kept your own {path} (recorded as pre-existing; never changed)")
            for warning in r["warnings"]:
                info(f"{r['name']}: warning: {warning}")
    if not report.ok:
        raise typer.Exit(1)
