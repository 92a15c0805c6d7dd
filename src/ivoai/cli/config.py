"""`ivoai config show [--json]` and `ivoai config set KEY VALUE`."""

from __future__ import annotations

import typer

from ivoai.cli._output import info, print_json, print_table

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Show and change config.toml.")


@app.command("show")
def show_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Show the known keys with their effective values and where each comes from."""
    from ivoai.cli._context import client_context
    from ivoai.client.config.store import describe_config

    doc = describe_config(client_context().paths)
    if json_out:
        print_json(doc)
        return
    info(f"{doc['path']}{'' if doc['exists'] else ' (not created yet; defaults apply)'}")
    print_table(
        "config",
        ["key", "value", "origin", "allowed"],
        [
            [k, "-" if v["value"] is None else v["value"], v["origin"], v["allowed"]]
            for k, v in doc["values"].items()
        ],
    )
    if doc["other_keys"]:
        info(f"other keys kept as written: {', '.join(doc['other_keys'])}")


@app.command("set")
def set_command(
    key: str = typer.Argument(..., metavar="KEY", help="A known key, e.g. compression.provider."),
    value: str = typer.Argument(..., metavar="VALUE", help="The new value."),
) -> None:
    """Validate and store one key (comments and unknown keys are kept byte for byte)."""
    from ivoai.cli._context import client_context
    from ivoai.client.config.store import set_key

    cfg = set_key(key, value, client_context().paths)
    shown, _origin = cfg.effective(key)
    info(f"{key} = {shown}")
