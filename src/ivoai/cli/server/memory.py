"""`ivoai server memory …`: query, read, write, delete, export and status of the memory store."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ivoai.cli._output import info, print_json, print_kv, print_table
from ivoai.cli.server import data_dir_from
from ivoai.common.errors import TooLargeError, UsageError
from ivoai.common.limits import KIB, MEMORY_BODY_MAX_BYTES, MEMORY_CLI_BACKFILL_PAGES

if TYPE_CHECKING:
    from ivoai.server.memory.service import MemoryService

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Durable memory pages: query, read, write, export."
)

DOC_MAX_BYTES = MEMORY_BODY_MAX_BYTES + 64 * KIB  # a page body plus its frontmatter block
WS_HELP = "Workspace (default: default)."
PJ_HELP = "Project (default: default; `_global` is shared by every project of the workspace)."
_WORKSPACE = typer.Option("default", "--workspace", "-w", help=WS_HELP)
_PROJECT = typer.Option("default", "--project", "-p", help=PJ_HELP)
_JSON = typer.Option(False, "--json", help="Print JSON.")
_PATH = typer.Argument(..., help="Page path.")


def _print(doc: object, json_out: bool, text: str) -> None:
    """A command's result: `doc` as JSON with `--json`, else `text` on stdout."""
    if json_out:
        print_json(doc)
    else:
        sys.stdout.write(text)


@contextmanager
def _service(ctx: typer.Context, *, embed: bool = False) -> Iterator[MemoryService]:
    """The memory service; with `embed`, and no running server to do it, with the context embedder
    so that pages written here get their vectors (issue 13 item 2)."""
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.memory.service import MemoryService
    from ivoai.server.runtime.local_ops import cli_memory_embedder

    data = ServerDataDir(data_dir_from(ctx)).ensure()
    service = MemoryService.open(data, embedder=cli_memory_embedder(data) if embed else None)
    try:
        yield service
    finally:
        service.close()


def _read_input(file: str | None, prompt: str) -> str:
    """The document from `--file`, or standard input (on a terminal, `prompt` says what to type)."""
    if file is None or file == "-":
        if sys.stdin.isatty():
            info(f"{prompt}; end with Ctrl-D on an empty line (Ctrl-C cancels)")
        data = sys.stdin.buffer.read(DOC_MAX_BYTES + 1)
        source = "standard input"
    else:
        try:
            with open(file, "rb") as fh:
                data = fh.read(DOC_MAX_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read --file {file}: {exc.strerror}") from None
        source = file
    if len(data) > DOC_MAX_BYTES:
        raise TooLargeError(f"{source} exceeds {DOC_MAX_BYTES} bytes (a 1 MiB body plus frontmatter)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{source} is not UTF-8 text") from None


@app.command("status")
def status_command(ctx: typer.Context, json_out: bool = _JSON) -> None:
    """Counts, database size, schema version and the last write."""
    with _service(ctx) as service:
        status = service.memory_status()
        path = service.database_path
    if json_out:
        print_json({**status.model_dump(mode="json"), "database": path})
        return
    print_kv([("database", path), *status.model_dump(mode="json").items()])


@app.command("query")
def query_command(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="What to look for (plain words; search syntax is not interpreted)."),
    workspace: str = _WORKSPACE,
    project: str = _PROJECT,
    limit: int = typer.Option(10, "--limit", "-n", help="Results, 1 to 100."),
    no_global: bool = typer.Option(False, "--no-global", help="Leave out the workspace's `_global` pages."),
    json_out: bool = _JSON,
) -> None:
    """Rank pages of one project (and `_global`) for TEXT."""
    with _service(ctx) as service:
        result = service.memory_query(text, workspace, project, limit, include_global=not no_global)
    if json_out:
        print_json(result.model_dump(mode="json"))
        return
    info(result.notice)
    rows = [(f"{h.score:.4f}", h.project, h.path, h.title, h.snippet[:80]) for h in result.hits]
    print_table("memory query", ("score", "project", "path", "title", "snippet"), rows)


@app.command("recent")
def recent_command(
    ctx: typer.Context,
    workspace: str = _WORKSPACE,
    project: str = _PROJECT,
    limit: int = typer.Option(20, "--limit", "-n", help="Pages, 1 to 100."),
    json_out: bool = _JSON,
) -> None:
    """The most recently updated pages of one project, without bodies."""
    with _service(ctx) as service:
        result = service.memory_recent(workspace, project, limit)
    if json_out:
        print_json(result.model_dump(mode="json"))
        return
    rows = [(p.updated_at.isoformat(timespec="seconds"), p.version, p.path, p.title) for p in result.pages]
    print_table("recent memory", ("updated", "version", "path", "title"), rows)


@app.command("read")
def read_command(
    ctx: typer.Context,
    path: str = typer.Argument(..., help="Page path, e.g. decisions/2026-11-auth.md."),
    workspace: str = _WORKSPACE,
    project: str = _PROJECT,
    version: int | None = typer.Option(None, "--version", help="An older version (default: current)."),
    json_out: bool = _JSON,
) -> None:
    """Print a page as Markdown with its frontmatter."""
    from ivoai.server.memory._frontmatter import render_page

    with _service(ctx) as service:
        page = service.memory_read_page(workspace, project, path, version=version)
    if json_out:
        print_json(page.model_dump(mode="json"))
        return
    sys.stdout.write(render_page(page))


@app.command("write")
def write_command(
    ctx: typer.Context,
    path: str = typer.Argument(..., help="Page path; `.md` is appended when missing."),
    file: str | None = typer.Option(
        None, "--file", "-f", help="Markdown file (frontmatter allowed); `-` or absent: stdin."
    ),
    workspace: str = _WORKSPACE,
    project: str = _PROJECT,
    title: str | None = typer.Option(None, "--title", help="Title (default: the first `# ` heading)."),
    tags: list[str] | None = typer.Option(None, "--tag", help="A tag (repeatable; replaces the tags)."),
    entities: list[str] | None = typer.Option(None, "--entity", help="An entity (repeatable, at most 10)."),
    kind: str | None = typer.Option(None, "--kind", help="Page kind, e.g. decision, note."),
    pinned: bool | None = typer.Option(None, "--pinned/--not-pinned", help="Pin the page in rankings."),
    expires_at: datetime | None = typer.Option(
        None, "--expires-at", help="Stop showing it in queries after this time."
    ),
    expected_version: int | None = typer.Option(
        None, "--expected-version", help="Refuse unless the page is at this version (0: must not exist)."
    ),
    json_out: bool = _JSON,
) -> None:
    """Write a new version of a page from a file or standard input."""
    from ivoai.server.memory._frontmatter import split_frontmatter
    from ivoai.server.memory.documents import write_document

    text = _read_input(file, "type the page in Markdown (a frontmatter block is allowed)")
    if not split_frontmatter(text)[1].strip():
        where = "standard input" if file in (None, "-") else f"--file {file}"
        raise UsageError(
            f"refusing to write an empty page: {where} gave no body; nothing was written "
            "(pipe the Markdown in, give --file PATH, or run it in a terminal to type it)"
        )
    overrides: dict[str, Any] = {
        k: v
        for k, v in {
            "title": title,
            "tags": tags,
            "entities": entities,
            "kind": kind,
            "pinned": pinned,
            "expires_at": expires_at,
        }.items()
        if v is not None
    }
    with _service(ctx, embed=True) as service:
        result = write_document(
            service, workspace, project, path, text, overrides=overrides, expected_version=expected_version
        )
        backfilled = service.embed_missing(max_pages=MEMORY_CLI_BACKFILL_PAGES)
    if not result.embedded:
        from ivoai.server.datadir import ServerDataDir
        from ivoai.server.runtime.local_ops import wake_gateway

        wake_gateway(ServerDataDir(data_dir_from(ctx)))  # a running server embeds it now
    if json_out:
        print_json(result.model_dump(mode="json"))
        return
    if result.redacted:
        info(f"redacted before storing: {', '.join(result.redacted)}")
    if backfilled:
        info(f"embedded {backfilled} other pages that had no vector yet")
    sys.stdout.write(f"wrote {result.workspace}/{result.project}/{result.path} version {result.version}\n")


@app.command("embed")
def embed_command(ctx: typer.Context, json_out: bool = _JSON) -> None:
    """Embed every page without a vector (hook pages, pages written while no embedder ran).

    A running server does this in the background; this runs it now, here.
    """
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.runtime.local_ops import cli_memory_embedder

    data = ServerDataDir(data_dir_from(ctx)).ensure()
    if cli_memory_embedder(data) is None:
        info("the running server embeds memory pages in the background; `memory status` shows its progress")
    with _service(ctx, embed=True) as service:
        embedded = service.embed_missing()
        status = service.memory_status()
    _print(
        {"embedded": embedded, "embedded_pages": status.embedded_pages, "pages": status.pages},
        json_out,
        f"embedded {embedded} pages; {status.embedded_pages} of {status.pages} pages have vectors\n",
    )


@app.command("delete")
def delete_command(
    ctx: typer.Context,
    path: str = _PATH,
    confirm: str = typer.Option(..., "--confirm", help="The normalized page path again, to confirm."),
    workspace: str = _WORKSPACE,
    project: str = _PROJECT,
    json_out: bool = _JSON,
) -> None:
    """Delete a page (a tombstone; its history is kept)."""
    with _service(ctx) as service:
        result = service.memory_delete_page(workspace, project, path, confirm)
    _print(
        result.model_dump(mode="json"),
        json_out,
        f"deleted {result.workspace}/{result.project}/{result.path} (tombstone version {result.version})\n",
    )


@app.command("feedback")
def feedback_command(
    ctx: typer.Context,
    path: str = _PATH,
    useful: bool = typer.Option(..., "--useful/--not-useful", help="Was the page useful?"),
    note: str | None = typer.Option(None, "--note", help="A short note (at most 1000 characters)."),
    workspace: str = _WORKSPACE,
    project: str = _PROJECT,
    json_out: bool = _JSON,
) -> None:
    """Vote a page useful or not; votes adjust its ranking."""
    with _service(ctx) as service:
        result = service.memory_feedback(workspace, project, path, useful, note)
    _print(
        result.model_dump(mode="json"),
        json_out,
        f"{result.path}: useful {result.useful}, not useful {result.not_useful}\n",
    )


@app.command("export")
def export_command(
    ctx: typer.Context,
    directory: Path = typer.Argument(..., help="Target directory (created 0700; pages land in W/P/PATH)."),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Only this workspace."),
    project: str | None = typer.Option(None, "--project", "-p", help="Only this project."),
    json_out: bool = _JSON,
) -> None:
    """Export live pages as Markdown files with frontmatter."""
    from ivoai.server.memory.documents import export_markdown

    count = 0

    def progress(_name: str) -> None:
        nonlocal count
        count += 1
        if count % 500 == 0:
            info(f"exported {count} pages…")

    with _service(ctx) as service:
        result = export_markdown(service, directory, workspace=workspace, project=project, on_page=progress)
    _print(
        result.model_dump(mode="json"),
        json_out,
        f"exported {result.pages} pages ({result.bytes} bytes) to {result.directory}\n",
    )


@app.command("hook")
def hook_command(
    ctx: typer.Context,
    file: str | None = typer.Option(
        None, "--file", "-f", help='JSON event or {"events": [...]}; `-`: stdin.'
    ),
    json_out: bool = _JSON,
) -> None:
    """Apply hook events from a JSON file (what agent hooks post to the server), once per key."""
    import json

    from ivoai.common.errors import ValidationError

    text = _read_input(file, 'paste one JSON event or {"events": [...]}')
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"hook input is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ValidationError('hook input must be a JSON object (one event, or {"events": [...]})')
    with _service(ctx) as service:
        result = service.hook_batch(payload if "events" in payload else [payload])
    if json_out:
        print_json(result.model_dump(mode="json"))
    else:
        for r in result.results:
            where = f" -> {r.project}/{r.path}" if r.path else ""
            sys.stdout.write(
                f"{r.idempotency_key or '-'}: {r.status}{where}{': ' + r.error if r.error else ''}\n"
            )
    if result.rejected:
        raise typer.Exit(1)
