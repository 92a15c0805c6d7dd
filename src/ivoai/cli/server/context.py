"""`ivoai server context search|status|rebuild`: reads and maintenance of the context index."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from ivoai.cli._output import info, minutes_seconds, print_json, print_kv, print_result, print_table
from ivoai.cli.server import data_dir_from
from ivoai.cli.server.connector import open_service, progress_bar

if TYPE_CHECKING:
    from ivoai.server.context.models import Coverage, HealthResponse

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Search, status and rebuild of the context index."
)
_JSON = typer.Option(False, "--json", help="Machine-readable output (stable schema).")


@app.command("search")
def search_command(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What to look for (natural language or identifiers)."),
    limit: int = typer.Option(10, "--limit", help="Results to return (1-100)."),
    connector: str | None = typer.Option(None, "--connector", help="Only this connector."),
    path_prefix: str | None = typer.Option(None, "--path-prefix", help="Only paths under this directory."),
    json_out: bool = _JSON,
) -> None:
    """Hybrid search (dense + BM25) over ingested documents; text is untrusted document content."""
    from ivoai.server.runtime.local_ops import open_context_ops

    with open_context_ops(data_dir_from(ctx)) as ops:
        res = ops.search(query, limit=limit, connector=connector, path_prefix=path_prefix)
    if json_out:
        print_json(res.model_dump(mode="json"))
        return
    if not res.results:
        info("no results")
        return
    for r in res.results:
        words_only = "" if r.embedded else "  (by words only: not embedded)"
        sys.stdout.write(
            f"{r.score:.4f}  {r.connector}:{r.path}  chunk {r.chunk_index}  {r.document_id}{words_only}\n"
        )
        snippet = " ".join(r.text.split())[:240]
        sys.stdout.write(f"    {snippet}\n")
    cov = res.coverage
    if cov is not None and cov.pending_chunks:
        info(_coverage_line(cov))


@app.command("status")
def status_command(ctx: typer.Context, json_out: bool = _JSON) -> None:
    """Documents, chunks, embedding coverage, last run, index backend and embedder."""
    from ivoai.server.runtime.local_ops import open_context_ops

    with open_context_ops(data_dir_from(ctx)) as ops:
        health, connectors = ops.status()
    if json_out:
        print_json(
            {
                **health.model_dump(mode="json"),
                "connector_list": [c.model_dump(mode="json") for c in connectors],
            }
        )
        return
    last = health.last_run or {}
    print_kv(
        [
            ("status", health.status),
            ("connectors", health.connectors),
            ("documents", health.documents),
            ("chunks", health.chunks),
            ("embedded", _embedded_line(health)),
            ("bytes", health.bytes),
            ("index", f"{health.index_backend} {health.collection} ({health.index_status})"),
            ("index points", "-" if health.index_points is None else health.index_points),
            ("embedder", health.embedder),
            ("last run", f"{last.get('status', '-')} {last.get('run_id', '')}".strip()),
            ("skipped files", health.skipped_files),
            (
                "words only",
                ", ".join(f"{v['documents']} {k}" for k, v in sorted(health.lexical_only.items())) or "-",
            ),
        ]
    )
    if connectors:
        print_table(
            "connectors", ["name", "type", "documents"], [[c.name, c.type, c.documents] for c in connectors]
        )


@app.command("rebuild")
def rebuild_command(
    ctx: typer.Context,
    clear_cache: bool = typer.Option(
        False, "--clear-cache", help="Forget cached vectors too (after the model behind a TEI URL changed)."
    ),
    json_out: bool = _JSON,
) -> None:
    """Drop the vector index and recreate it from the catalog (cached vectors are reused)."""
    with open_service(ctx) as svc, progress_bar(not json_out) as progress:
        if clear_cache:
            svc.cache.clear()
        report = svc.rebuild(progress=progress)
    print_result(
        report.model_dump(mode="json"),
        json_out,
        f"rebuilt the {report.index_backend} index: {report.documents} documents, {report.chunks} chunks "
        f"({report.chunks_cached} vectors from the cache, {report.chunks_embedded} embedded) "
        f"in {report.seconds:.1f}s",
    )


def _eta(seconds: float | None) -> str:
    return "unknown" if seconds is None else minutes_seconds(seconds)


def _embedded_line(h: HealthResponse) -> str:
    line = f"{h.embedded_chunks}/{h.total_chunks} chunks"
    if h.lexical_only_chunks:
        line += f" ({h.lexical_only_chunks} lexical-only by rule)"
    if h.embedding == "running":
        rate = (
            f" at {h.embedding_rate_chunks_per_second} chunks/s" if h.embedding_rate_chunks_per_second else ""
        )
        return f"{line}; embedding {h.pending_chunks} more{rate}, ETA {_eta(h.estimated_seconds_left)}"
    if h.embedding == "stopped":
        return f"{line}; {h.pending_chunks} pending (run `ivoai server ingest` or start the server)"
    return line


def _coverage_line(cov: Coverage) -> str:
    done = f"{cov.embedded_chunks} of {cov.total_chunks - cov.lexical_only_chunks} chunks embedded"
    if cov.embedding == "running":
        eta = _eta(cov.estimated_seconds_left)
        return f"{done}; the rest are matched by their words until embedded (ETA {eta})"
    return f"{done}; the rest are matched by their words only (run `ivoai server ingest` to embed them)"
