"""`ivoai server enrollment create|list|revoke` and `ivoai server clients list|revoke`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ivoai.cli._output import info, print_json, print_table
from ivoai.cli.server import data_dir_from
from ivoai.cli.server._codes import code_row, iso, render_code_rows, show_created

if TYPE_CHECKING:
    from ivoai.server.auth.enrollment import EnrollmentStore

app = typer.Typer(no_args_is_help=True, add_completion=False, help="One-time enrollment codes for clients.")
clients_app = typer.Typer(no_args_is_help=True, add_completion=False, help="Enrolled clients: list, revoke.")


def _store(ctx: typer.Context) -> EnrollmentStore:
    from ivoai.server.auth.enrollment import EnrollmentStore
    from ivoai.server.datadir import ServerDataDir

    data = ServerDataDir(data_dir_from(ctx)).ensure()
    return EnrollmentStore(data.root, data.enrollment)


@app.command("create")
def create(
    ctx: typer.Context,
    ttl: str = typer.Option("10m", "--ttl", help="Lifetime: 90s, 10m, 2h, 1d (at most 1d)."),
    scopes: str | None = typer.Option(
        None, "--scopes", help="Space/comma-separated scopes (default: client scopes)."
    ),
    json_out: bool = typer.Option(False, "--json", help='Print {"id", "code", "expires_at"}.'),
) -> None:
    """Create a one-time enrollment code and print it once."""
    from ivoai.common.limits import ENROLLMENT_TTL_MAX_SECONDS, ENROLLMENT_TTL_SECONDS
    from ivoai.common.protocol import DEFAULT_CLIENT_SCOPES
    from ivoai.server.auth.enrollment import parse_ttl
    from ivoai.server.auth.scopes import parse_scopes

    seconds = parse_ttl(ttl, default=ENROLLMENT_TTL_SECONDS, maximum=ENROLLMENT_TTL_MAX_SECONDS)
    wanted = parse_scopes(scopes, default=DEFAULT_CLIENT_SCOPES, field="--scopes")
    created = _store(ctx).create_code(ttl_seconds=seconds, scopes=wanted)
    show_created(
        created,
        {"id": created.id, "code": created.code, "expires_at": iso(created.expires_at)},
        label="enrollment",
        hint="give the code to the client over a private channel; it works once: "
        "ivoai connect server add ALIAS --url URL --code-stdin",
        json_out=json_out,
    )


@app.command("list")
def list_codes(
    ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")
) -> None:
    """List enrollment codes (metadata only; codes are never stored)."""
    store = _store(ctx)
    rows = [code_row(r, store.code_status(r)) for r in store.list_codes()]
    render_code_rows("Enrollment codes", rows, json_out=json_out)


@app.command("revoke")
def revoke_code(ctx: typer.Context, code_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Revoke an enrollment code before it is used."""
    record = _store(ctx).revoke_code(code_id)
    info(f"revoked enrollment code {record.id}")


@clients_app.command("list")
def list_clients(
    ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")
) -> None:
    """List enrolled clients."""
    rows = [
        {
            "client_id": c.client_id,
            "status": "revoked" if c.revoked_at is not None else "active",
            "created_at": iso(c.created_at),
            "revoked_at": iso(c.revoked_at),
            "enrollment_id": c.enrollment_id,
            "scopes": c.scopes,
        }
        for c in _store(ctx).list_clients()
    ]
    if json_out:
        print_json(rows)
        return
    print_table(
        "Clients",
        ["CLIENT", "STATUS", "CREATED", "SCOPES"],
        [[r["client_id"], r["status"], r["created_at"], " ".join(r["scopes"])] for r in rows],  # type: ignore[arg-type]
    )


@clients_app.command("revoke")
def revoke_client(ctx: typer.Context, client_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Revoke a client's credential immediately."""
    record = _store(ctx).revoke_client(client_id)
    info(f"revoked client {record.client_id}")
