"""`ivoai server connector add|list|remove` and `ivoai server ingest`: thin wrappers over ContextService."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ivoai.cli._output import info, print_json, print_result, print_table
from ivoai.cli.server import data_dir_from, server_command

if TYPE_CHECKING:
    from ivoai.server.context.ingest import IngestProgress
    from ivoai.server.context.service import ContextService

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Context connectors: add, list, remove.")
_JSON = typer.Option(False, "--json", help="Machine-readable output (stable schema).")


@contextmanager
def open_service(ctx: typer.Context) -> Iterator[ContextService]:
    """The context service on `--data-dir` (created 0700 if missing), closed on exit."""
    from ivoai.server.config import load_config
    from ivoai.server.context.service import ContextService
    from ivoai.server.datadir import ServerDataDir

    data = ServerDataDir(data_dir_from(ctx))
    svc = ContextService.open(data, load_config(data).context)
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
    embed_generated: bool = typer.Option(
        False,
        "--embed-generated",
        help="Also embed lockfiles, generated, minified and vendored files (default: by words only).",
    ),
    json_out: bool = _JSON,
) -> None:
    """Register a connector (no credentials are stored); run `ivoai server ingest` next."""
    with open_service(ctx) as svc:
        row = svc.add_connector(name, type_, str(path), embed_generated=embed_generated)
    print_result(
        row.model_dump(mode="json"),
        json_out,
        f"connector {row.name} ({row.type}) added for {row.path}",
        f"next: {server_command(data_dir_from(ctx), 'ingest --connector ' + row.name)}",
    )


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


@app.command("set")
def set_command(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Connector name."),
    embed_generated: bool = typer.Option(
        ...,
        "--embed-generated/--no-embed-generated",
        help="Embed lockfiles, generated, minified and vendored files too, or index them by words only.",
    ),
    json_out: bool = _JSON,
) -> None:
    """Change a connector's options (the next ingest, or a running server, embeds what became pending)."""
    with open_service(ctx) as svc:
        changed = svc.set_embed_generated(name, embed_generated)
    print_result(
        {"connector": name, "embed_generated": embed_generated, "chunks_changed": changed},
        json_out,
        f"connector {name}: embed_generated={str(embed_generated).lower()} ({changed} chunks changed)",
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
    print_result(
        {"removed": name}, json_out, f"connector {name} removed (its documents and vectors were purged)"
    )


def progress_bar(enabled: bool) -> AbstractContextManager[Callable[[IngestProgress], None] | None]:
    """Ingest progress on stderr: rich bars on a terminal, plain lines otherwise (`_progress`)."""
    from ivoai.cli.server._progress import ingest_progress

    return ingest_progress(enabled)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so that the run records what it kept before exiting."""


class _GracefulStop:
    """Ctrl-C or SIGTERM during phase 2 stops after the batch being embedded (its vectors are kept,
    so no text is embedded twice); during phase 1, or a second time, they stop at once (phase 1
    loses nothing either: committed batches stay, the next run repairs and continues)."""

    def __init__(self) -> None:
        self.phase = ""
        self.signum: int | None = None

    def progress(self, inner: Callable[[IngestProgress], None] | None) -> Callable[[IngestProgress], None]:
        def update(p: IngestProgress) -> None:
            self.phase = p.phase
            if inner is not None:
                inner(p)

        return update

    def requested(self) -> bool:
        return self.signum is not None

    def _handler(self, signum: int, frame: object) -> None:
        if self.signum is not None or self.phase != "embed":
            raise _Terminated if signum == signal.SIGTERM else KeyboardInterrupt
        self.signum = signum
        info("stopping after the batch being embedded (press Ctrl-C again to stop at once)")

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self._handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def ingest_command(
    ctx: typer.Context,
    connector: str | None = typer.Option(None, "--connector", help="Only this connector (default: all)."),
    lexical_only: bool = typer.Option(
        False,
        "--lexical-only",
        help="Stop after phase 1 (searchable by words at once); a server or the next ingest embeds.",
    ),
    json_out: bool = _JSON,
) -> None:
    """Ingest connectors: phase 1 makes every document searchable, phase 2 embeds (resumable).

    With a running server the work is done by the server (its admin socket); the output is the same.
    """
    from ivoai.server.runtime.local_ops import interrupted_message, open_context_ops

    stop = _GracefulStop()
    with open_context_ops(data_dir_from(ctx)) as ops:
        try:
            with stop.installed(), progress_bar(not json_out) as progress:
                report = ops.ingest(
                    connector, stop.progress(progress), embed=not lexical_only, should_stop=stop.requested
                )
        except KeyboardInterrupt as exc:
            info(interrupted_message(ops))
            raise typer.Exit(143 if isinstance(exc, _Terminated) else 130) from None
        if stop.signum is not None:
            info(interrupted_message(ops))
            raise typer.Exit(143 if stop.signum == signal.SIGTERM else 130)
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
                "lexical-only",
                "embedded",
                "cached",
                "pending",
                "index s",
                "embed s",
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
                    c.lexical_only_documents,
                    c.chunks_embedded,
                    c.chunks_cached,
                    c.chunks_pending,
                    f"{c.lexical_seconds:.1f}",
                    f"{c.embed_seconds:.1f}",
                ]
                for c in report.connectors
            ],
        )
        for c in report.connectors:
            if c.message:
                info(f"{c.connector}: {c.message}")
            if c.lexical_only_reasons:
                reasons = ", ".join(f"{n} {why}" for why, n in sorted(c.lexical_only_reasons.items()))
                info(
                    f"{c.connector}: indexed by words only, not embedded: {reasons}"
                    " (`connector set --embed-generated` to change)"
                )
        cov = report.coverage
        if cov is not None and cov.pending_chunks:
            where = (
                "the running server embeds them in the background"
                if report.embedding == "busy"
                else "run `ivoai server ingest` (or start the server) to embed them"
            )
            info(f"{cov.pending_chunks} chunks are searchable by their words only so far; {where}")
    if report.status != "ok":
        raise typer.Exit(1)
