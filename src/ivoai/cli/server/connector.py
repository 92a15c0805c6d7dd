"""`ivoai server connector add|list|remove` and `ivoai server ingest`: thin wrappers over ContextService."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ivoai.cli._output import info, print_json, print_table
from ivoai.cli.server import data_dir_from, server_command

if TYPE_CHECKING:
    from ivoai.server.context.ingest import IngestProgress
    from ivoai.server.context.service import ContextService

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Context connectors: add, list, remove.")
_JSON = typer.Option(False, "--json", help="Machine-readable output (stable schema).")


@contextmanager
def open_service(ctx: typer.Context) -> Iterator[ContextService]:
    """The context service on `--data-dir` (created 0700 if missing), closed on exit."""
    from ivoai.server.context.service import ContextService
    from ivoai.server.datadir import ServerDataDir

    svc = ContextService.open(ServerDataDir(data_dir_from(ctx)))
    try:
        yield svc
    finally:
        svc.close()


@app.command("add")
def add_command(
    ctx: typer.Context,
    name: str = typer.Option(..., "--name", help="Connector name: a-z, 0-9, '-', '_' (max 64)."),
    type_: str = typer.Option(..., "--type", help="filesystem | git"),
    path: Path = typer.Option(..., "--path", help="Root directory (filesystem) or checkout (git)."),
    json_out: bool = _JSON,
) -> None:
    """Register a connector (no credentials are stored); run `ivoai server ingest` next."""
    with open_service(ctx) as svc:
        row = svc.add_connector(name, type_, str(path))
    if json_out:
        print_json(row.model_dump(mode="json"))
    else:
        info(f"connector {row.name} ({row.type}) added for {row.path}")
        info(f"next: {server_command(data_dir_from(ctx), 'ingest --connector ' + row.name)}")


@app.command("list")
def list_command(ctx: typer.Context, json_out: bool = _JSON) -> None:
    """List connectors with their document counts."""
    with open_service(ctx) as svc:
        rows = svc.list_connectors()
    if json_out:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    print_table(
        "connectors",
        ["name", "type", "path", "documents", "bytes", "state"],
        [[r.name, r.type, r.path, r.documents, r.bytes, r.state] for r in rows],
    )


@app.command("remove")
def remove_command(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Connector name."),
    json_out: bool = _JSON,
) -> None:
    """Purge a connector's vectors and catalog rows, then delete its definition."""
    with open_service(ctx) as svc:
        svc.remove_connector(name)
    if json_out:
        print_json({"removed": name})
    else:
        info(f"connector {name} removed (its documents and vectors were purged)")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[IngestProgress], None] | None]:
    """A rich progress bar on stderr (documents, chunks, chunks/s, ETA) when stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn(
            "{task.fields[docs]} docs  {task.completed}/{task.total} chunks  {task.fields[rate]} chunks/s"
        ),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(p: IngestProgress) -> None:
            if p.connector not in tasks:
                tasks[p.connector] = bar.add_task(p.connector, total=None, docs="0/0", rate="0.0")
            bar.update(
                tasks[p.connector],
                total=max(p.chunks_total, 1) if p.phase != "scan" else None,
                completed=p.chunks_done if p.phase != "done" else max(p.chunks_total, 1),
                docs=f"{p.documents_done}/{p.documents_total}",
                rate=f"{p.chunks_per_second:.1f}",
                description=f"{p.connector} ({p.phase})",
            )

        yield update


def ingest_command(
    ctx: typer.Context,
    connector: str | None = typer.Option(None, "--connector", help="Only this connector (default: all)."),
    json_out: bool = _JSON,
) -> None:
    """Ingest connectors into the context index (incremental; one run at a time)."""
    with open_service(ctx) as svc, progress_bar(not json_out) as progress:
        report = svc.ingest(connector, progress=progress)
    if json_out:
        print_json(report.model_dump(mode="json"))
    else:
        print_table(
            "ingest",
            [
                "connector",
                "status",
                "seen",
                "added",
                "updated",
                "unchanged",
                "removed",
                "skipped",
                "embedded",
                "seconds",
            ],
            [
                [
                    c.connector,
                    c.status,
                    c.documents_seen,
                    c.added,
                    c.updated,
                    c.unchanged,
                    c.removed,
                    c.skipped,
                    c.chunks_embedded,
                    c.seconds,
                ]
                for c in report.connectors
            ],
        )
        for c in report.connectors:
            if c.message:
                info(f"{c.connector}: {c.message}")
    if report.status != "ok":
        raise typer.Exit(1)
