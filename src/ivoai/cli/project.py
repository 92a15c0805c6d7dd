"""`ivoai project init|status`: the explicit project identity marker (.ivoai.toml at the git root)."""

from __future__ import annotations

import typer

from ivoai.cli._output import info, print_json, print_kv

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Project identity (.ivoai.toml).")

_JSON = typer.Option(False, "--json", help="Machine-readable output.")


@app.command("init")
def init_command(json_out: bool = _JSON) -> None:
    """Write .ivoai.toml at the current git root (fails outside a git work tree)."""
    from ivoai.client.identity import project_init

    result = project_init()
    data = {"created": result.created, **result.identity.as_dict()}
    if json_out:
        print_json(data)
        return
    if result.created:
        info(f"wrote {result.identity.marker}")
    else:
        info(f"already initialized: {result.identity.marker}")
    print_kv([("identity", result.identity.value), ("git_root", result.identity.git_root)])


@app.command("status")
def status_command(json_out: bool = _JSON) -> None:
    """Show the identity ivoai uses here and why."""
    from ivoai.client.identity import resolve_identity

    data = resolve_identity().as_dict()
    if json_out:
        print_json(data)
        return
    print_kv((k, "-" if v is None else v) for k, v in data.items())
