"""`ivoai artifacts put|list|show|read|gc|stats`: the WorkingContext ArtifactStore from a shell.

Thin: every command parses, makes one call on `ArtifactStore`, and renders. Content is printed
only by `read` (exact bytes to stdout); every other command prints metadata.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING, BinaryIO

import typer

from ivoai.cli._output import info, print_json, print_kv, print_table
from ivoai.common.errors import UsageError

if TYPE_CHECKING:
    from ivoai.client.workingcontext import ArtifactRef, ArtifactStore

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="The private WorkingContext artifact store."
)

_JSON = typer.Option(False, "--json", help="Machine-readable output.")


def _store() -> ArtifactStore:
    from ivoai.cli._context import client_context
    from ivoai.client.workingcontext import ArtifactStore

    return ArtifactStore(client_context().paths.working_context_dir)


def _ref_dict(ref: ArtifactRef) -> dict[str, object]:
    return ref.model_dump(mode="json")


def _open_source(path: str) -> BinaryIO:
    if path == "-":
        if sys.stdin.isatty():
            info("ivoai: reading the artifact from standard input; end it with Ctrl-D")
        return sys.stdin.buffer
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"FILE {path!r} does not exist") from None
    except PermissionError:
        raise UsageError(f"FILE {path!r} is not readable") from None
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise UsageError(f"FILE {path!r} is a directory")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


@app.command("put")
def put_command(
    source: str = typer.Argument(..., metavar="FILE|-", help="File to store, or - for standard input."),
    session: str = typer.Option(..., "--session", help="Owning session ID."),
    task: str | None = typer.Option(None, "--task", help="Owning task ID."),
    worker: str | None = typer.Option(None, "--worker", help="Owning worker ID."),
    media_type: str = typer.Option("application/octet-stream", "--type", help="Media type, e.g. text/plain."),
    kind: str = typer.Option(
        "output", "--kind", help="Payload type for fidelity (log, diff, test_failure, ...)."
    ),
    sensitivity: str = typer.Option("internal", "--sensitivity", help="public, internal or restricted."),
    ttl: int | None = typer.Option(None, "--ttl", help="Seconds until expiry (default 86400, max 604800)."),
) -> None:
    """Store FILE (or stdin) exactly and print its ref as JSON."""
    stream = _open_source(source)
    try:
        ref = _store().put(
            stream,
            session_id=session,
            task_id=task,
            worker_id=worker,
            media_type=media_type,
            payload_type=kind,
            sensitivity=sensitivity,
            ttl_seconds=ttl,
        )
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if ref.state.value == "truncated":
        info(f"ivoai: input was {ref.original_size} bytes; kept the first {ref.size} (marked truncated)")
    print_json(_ref_dict(ref))


@app.command("list")
def list_command(
    session: str | None = typer.Option(None, "--session", help="Only this session's artifacts."),
    json_out: bool = _JSON,
) -> None:
    """List artifacts (metadata only) and any entries that failed validation."""
    result = _store().list(session_id=session)
    if json_out:
        print_json(
            {
                "artifacts": [_ref_dict(r) for r in result.refs],
                "problems": [p.to_dict() for p in result.problems],
            }
        )
        return
    print_table(
        "artifacts",
        ("id", "session", "type", "media", "bytes", "state", "expires"),
        [
            (
                r.id,
                r.session_id,
                r.payload_type,
                r.media_type,
                r.size,
                r.state.value,
                r.expires_at.isoformat(),
            )
            for r in result.refs
        ],
    )
    for p in result.problems:
        info(f"ivoai: kept untrusted entry {p.name}: {p.reason}")


@app.command("show")
def show_command(ref: str = typer.Argument(..., metavar="REF"), json_out: bool = _JSON) -> None:
    """Show one artifact's metadata (never its content)."""
    art = _store().describe(ref)
    if json_out:
        print_json(_ref_dict(art))
    else:
        print_kv(_ref_dict(art).items())


@app.command("read")
def read_command(
    ref: str = typer.Argument(..., metavar="REF"),
    session: str = typer.Option(..., "--session", help="The session that owns the artifact."),
    offset: int | None = typer.Option(None, "--offset", help="Start of a range read (bytes)."),
    length: int | None = typer.Option(None, "--length", help="Length of a range read (at most 1048576)."),
) -> None:
    """Write the artifact's exact bytes (or a range of them) to stdout."""
    store = _store()
    if offset is None and length is None:
        _ref, data = store.read(ref, session_id=session)
    else:
        if length is None:
            raise UsageError("--length is required with --offset (at most 1048576 bytes)")
        data = store.read_range(ref, session_id=session, offset=offset or 0, length=length).data
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


@app.command("gc")
def gc_command(
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would be removed; remove nothing."),
    json_out: bool = _JSON,
) -> None:
    """Remove expired artifacts and abandoned staging; keep and report anything untrusted."""
    report = _store().gc(dry_run=dry_run)
    if json_out:
        print_json(report.to_dict())
        return
    verb = "would remove" if dry_run else "removed"
    print_kv(
        [
            (f"{verb} artifacts", len(report.removed)),
            (f"{verb} bytes", report.removed_bytes),
            (f"{verb} abandoned staging", len(report.staging_removed)),
            ("staging in use", report.staging_in_use),
            ("kept (untrusted)", len(report.kept)),
        ]
    )
    for p in report.kept:
        info(f"ivoai: kept {p.name}: {p.reason}")


@app.command("stats")
def stats_command(json_out: bool = _JSON) -> None:
    """Usage against the session and global limits."""
    stats = _store().stats()
    if json_out:
        print_json(stats.to_dict())
        return
    lim = stats.limits
    print_kv(
        [
            ("objects", f"{stats.objects} / {lim.global_max_objects}"),
            ("bytes", f"{stats.bytes} / {lim.global_max_bytes}"),
            ("expired", stats.expired),
            ("staging", f"{stats.staging_entries} entries, {stats.staging_bytes} bytes"),
            ("problems", len(stats.problems)),
        ]
    )
    print_table(
        "sessions",
        ("session", "objects", "bytes", "expired"),
        [
            (k, f"{v.objects} / {lim.session_max_objects}", f"{v.bytes} / {lim.session_max_bytes}", v.expired)
            for k, v in sorted(stats.sessions.items())
        ],
    )
