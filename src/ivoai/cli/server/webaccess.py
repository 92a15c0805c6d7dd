"""`ivoai server web-access create|list|revoke`: activation codes for the Web MCP consent page."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ivoai.cli._output import info
from ivoai.cli.server import data_dir_from
from ivoai.cli.server._codes import code_row, iso, render_code_rows, show_created

if TYPE_CHECKING:
    from ivoai.server.auth.oauth_store import OAuthStore

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Activation codes for the Web MCP consent page."
)


def _store(ctx: typer.Context) -> OAuthStore:
    from ivoai.server.auth.oauth_store import OAuthStore
    from ivoai.server.datadir import ServerDataDir

    data = ServerDataDir(data_dir_from(ctx)).ensure()
    return OAuthStore(data.root, data.oauth)


@app.command("create")
def create(
    ctx: typer.Context,
    ttl: str = typer.Option("10m", "--ttl", help="Lifetime: 90s, 10m, 2h, 1d (at most 1d)."),
    scopes: str | None = typer.Option(
        None,
        "--scopes",
        help="Scopes the connector may get (default: context:read memory:read memory:write).",
    ),
    json_out: bool = typer.Option(False, "--json", help='Print {"id", "code", "expires_at", "scopes"}.'),
) -> None:
    """Create a one-time activation code to type on the consent page."""
    created = _store(ctx).create_activation(ttl=ttl, scopes=scopes)
    doc = {
        "id": created.id,
        "code": created.code,
        "expires_at": iso(created.expires_at),
        "scopes": created.scopes,
    }
    hint = (
        "add the server's /mcp URL as a connector in ChatGPT or Claude; paste this code on its consent page"
    )
    show_created(created, doc, label="web-access", hint=hint, json_out=json_out)


@app.command("list")
def list_codes(
    ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")
) -> None:
    """List activation codes (metadata only)."""
    store = _store(ctx)
    rows = [code_row(r, store.activation_status(r)) for r in store.list_activations()]
    render_code_rows("Web access codes", rows, json_out=json_out)


@app.command("revoke")
def revoke(ctx: typer.Context, activation_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Revoke an activation code and every Web grant approved with it."""
    record = _store(ctx).revoke_activation(activation_id)
    info(f"revoked web-access {record.id} and its grants")
