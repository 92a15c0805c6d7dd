"""`ivoai server backup [--output DIR] [--json]`, `backup list|verify ARCHIVE`, `server restore ARCHIVE`."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ivoai.cli._output import info, print_json, print_table
from ivoai.cli.server import data_dir_from

if TYPE_CHECKING:
    from ivoai.server.backup.archive import Progress

app = typer.Typer(
    add_completion=False,
    invoke_without_command=True,
    help="Back up the server data directory (no secrets, no credentials, no vector index).",
)
_JSON = typer.Option(False, "--json", help="Machine-readable output.")


def _progress(enabled: bool) -> Callable[[Progress], None] | None:
    """Progress lines on stderr: one per phase change and at most one per second within a phase."""
    if not enabled:
        return None
    last_phase = [""]
    last_at = [0.0]

    def report(p: Progress) -> None:
        now = time.monotonic()
        if p.phase == last_phase[0] and now - last_at[0] < 1.0:
            return
        last_phase[0], last_at[0] = p.phase, now
        if p.total_bytes and p.phase not in ("snapshot", "write"):
            pct = 100.0 * p.done_bytes / p.total_bytes
            info(f"{p.phase}: {p.done_bytes / 2**20:.1f} / {p.total_bytes / 2**20:.1f} MiB ({pct:.0f}%)")
        else:
            info(f"{p.phase}: {p.path}")

    return report


@app.callback()
def backup_command(
    ctx: typer.Context,
    output: Path | None = typer.Option(
        None, "--output", help="Backup directory (created 0700; default DATA/backups)."
    ),
    json_out: bool = _JSON,
) -> None:
    """Write a versioned archive (config, context catalog and corpus, memory) while the gateway serves."""
    if ctx.invoked_subcommand is not None:
        return
    from ivoai.server.backup.archive import create_backup
    from ivoai.server.datadir import ServerDataDir

    result = create_backup(ServerDataDir(data_dir_from(ctx)), output, progress=_progress(not json_out))
    if json_out:
        print_json(result.to_json())
        return
    info(f"backup written: {result.archive} ({result.bytes / 2**20:.1f} MiB, {result.seconds:.1f}s)")
    info(f"check it with: ivoai server backup verify {result.archive}")


@app.command("list")
def list_command(
    ctx: typer.Context,
    directory: Path | None = typer.Option(None, "--dir", help="Backup directory (default DATA/backups)."),
    json_out: bool = _JSON,
) -> None:
    """List archives in the backup directory, newest first."""
    from ivoai.server.backup.archive import default_backup_dir, list_backups
    from ivoai.server.datadir import ServerDataDir

    where = directory if directory is not None else default_backup_dir(ServerDataDir(data_dir_from(ctx)))
    rows = list_backups(where)
    if json_out:
        print_json(rows)
        return
    print_table(
        "backups",
        ["archive", "created", "MiB", "valid", "pages", "documents"],
        [
            [
                r["archive"],
                r.get("created_at", "-"),
                f"{r['size'] / 2**20:.1f}",
                "yes" if r["valid"] else f"no: {r['error']}",
                r.get("index", {}).get("memory_pages", "-"),
                r.get("index", {}).get("documents", "-"),
            ]
            for r in rows
        ],
    )


@app.command("verify")
def verify_command(
    archive: Path = typer.Argument(..., help="Absolute path of the archive."),
    json_out: bool = _JSON,
) -> None:
    """Check an archive completely (structure, manifest, every SHA-256); writes nothing."""
    from ivoai.server.backup.archive import verify_archive

    result = verify_archive(archive, progress=_progress(not json_out))
    if json_out:
        print_json(result)
        return
    info(f"ok: {result['archive']}: {len(result['files'])} files, {result['bytes']} bytes, all hashes match")


def restore_command(
    ctx: typer.Context,
    archive: Path = typer.Argument(..., help="Absolute local path of the archive (never a URL)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and stage, then report; write nothing."),
    stop_gateway: bool = typer.Option(
        False, "--stop-gateway", help="Stop a gateway serving this data dir, restore, start it again."
    ),
    no_rebuild: bool = typer.Option(
        False,
        "--no-rebuild",
        help="Skip the vector index rebuild (run `ivoai server context rebuild` later).",
    ),
    json_out: bool = _JSON,
) -> None:
    """Restore an archive: validate everything first, then write file by file; secrets are never restored."""
    from ivoai.server.backup.restore import restore_archive
    from ivoai.server.datadir import ServerDataDir

    result = restore_archive(
        ServerDataDir(data_dir_from(ctx)),
        archive,
        dry_run=dry_run,
        stop_gateway=stop_gateway,
        rebuild_index=not no_rebuild,
        progress=_progress(not json_out),
    )
    if json_out:
        print_json(result.to_json())
        return
    verb = "would write" if dry_run else "restored"
    for f in result.files:
        info(f"{verb}: {f['target']} ({f['action']}, {f['size']} bytes)")
    if not dry_run:
        idx = result.index
        if idx.get("rebuilt"):
            info(f"index rebuilt: {idx.get('chunks', 0)} chunks")
        else:
            info(f"index not rebuilt: {idx.get('error', 'skipped')}; {idx.get('hint', '')}")
        if result.gateway.get("restarted"):
            info("gateway started again")
