"""`ivoai server context search|status|rebuild`: reads and maintenance of the context index."""

from __future__ import annotations

import sys

import typer

from ivoai.cli._output import info, print_json, print_kv, print_table
from ivoai.cli.server.connector import open_service, progress_bar

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
    with open_service(ctx) as svc:
        res = svc.context_search(query, limit=limit, connector=connector, path_prefix=path_prefix)
    if json_out:
        print_json(res.model_dump(mode="json"))
        return
    if not res.results:
        info("no results")
        return
    for r in res.results:
        sys.stdout.write(f"{r.score:.4f}  {r.connector}:{r.path}  chunk {r.chunk_index}  {r.document_id}\n")
        snippet = " ".join(r.text.split())[:240]
        sys.stdout.write(f"    {snippet}\n")


@app.command("status")
def status_command(ctx: typer.Context, json_out: bool = _JSON) -> None:
    """Documents, chunks, last run, index backend and embedder."""
    with open_service(ctx) as svc:
        health = svc.context_health()
        connectors = svc.list_connectors()
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
            ("bytes", health.bytes),
            ("index", f"{health.index_backend} {health.collection} ({health.index_status})"),
            ("index points", "-" if health.index_points is None else health.index_points),
            ("embedder", health.embedder),
            ("last run", f"{last.get('status', '-')} {last.get('run_id', '')}".strip()),
            ("skipped files", health.skipped_files),
        ]
    )
    if connectors:
        print_table(
            "connectors", ["name", "type", "documents"], [[c.name, c.type, c.documents] for c in connectors]
        )


@app.command("rebuild")
def rebuild_command(ctx: typer.Context, json_out: bool = _JSON) -> None:
    """Drop the vector index and recreate it deterministically from the catalog."""
    with open_service(ctx) as svc, progress_bar(not json_out) as progress:
        report = svc.rebuild(progress=progress)
    if json_out:
        print_json(report.model_dump(mode="json"))
    else:
        info(
            f"rebuilt the {report.index_backend} index: {report.documents} documents, {report.chunks} chunks "
            f"in {report.seconds:.1f}s"
        )
