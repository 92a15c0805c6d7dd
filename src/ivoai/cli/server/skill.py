"""`ivoai server skill export DIR`: write the ivoai-memory-context release ZIP."""

from __future__ import annotations

from pathlib import Path

import typer

from ivoai.cli._output import info, print_json

app = typer.Typer(no_args_is_help=True, add_completion=False, help="The ivoai-memory-context skill.")


@app.callback()
def _skill() -> None:
    """The ivoai-memory-context skill (MCP skill delivery and the release ZIP)."""


@app.command("export")
def export(
    directory: Path = typer.Argument(
        ..., metavar="DIR", help="Directory to write ivoai-memory-context.zip into."
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Write ivoai-memory-context.zip (for Claude custom Skill import) into DIR."""
    from ivoai.server.skills.registry import export_zip, load_skill

    path = export_zip(directory)
    skill = load_skill("ivoai-memory-context")
    if json_out:
        print_json({"path": str(path), "digest": skill.digest, "uri": skill.uri})
        return
    info(f"wrote {path} ({skill.digest})")
