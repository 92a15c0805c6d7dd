"""`ivoai status` and `ivoai doctor` (placeholder until the foundation's doctor lands)."""

from __future__ import annotations

import typer

from ivoai.cli._output import print_json, print_kv
from ivoai.common.paths import xdg_paths


def status_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Show ivoai's state."""
    paths = xdg_paths()
    data = {"paths": {k: str(v) for k, v in paths.roots().items()}}
    if json_out:
        print_json(data)
    else:
        print_kv(data["paths"].items())


def doctor_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Check ivoai's environment."""
    status_command(json_out)
