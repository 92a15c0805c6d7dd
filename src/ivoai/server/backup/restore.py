"""Restore an archive into a server data directory: validate and stage everything, then write file by file.

Order (nothing is written to the data directory before step 5):

1. the archive path must be local and absolute (restore is never offered over the network API);
2. a gateway serving this data directory makes restore refuse, unless `stop_gateway` is given;
3. `archive.open_archive` checks structure, names, types, sizes, counts and the manifest;
4. every member is streamed into a private staging directory below `DATA/run/` (same filesystem as
   the targets) with its SHA-256 checked; staged SQLite files must pass `PRAGMA quick_check` and carry
   a schema version this ivoai can open; free space is checked first;
5. (`dry_run` stops before this) with the gateway stopped if asked, under the backup lock and the
   context ingestion lock, each staged file is renamed over its target (one atomic rename each, the
   directory fsynced). Before a SQLite file is replaced the old database is checkpointed
   (`wal_checkpoint(TRUNCATE)`) and its `-wal`/`-shm` files removed, so a stale WAL can never be
   replayed into the restored file; a database someone else still writes to is refused instead;
6. the vector index is rebuilt from the restored catalog (unless `rebuild_index=False`), and a
   stopped gateway is started again.

Files the archive does not name are left alone (merge). Secrets, enrollment and OAuth state are never
in an archive and any entry outside `config.toml`, `context/` and `memory/` is refused. A SIGKILL at any
point leaves each data file either old or new, never torn; leftover staging is removed by the next
backup or restore.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    ensure_private_dir,
    file_lock,
    open_private_dir,
)
from ivoai.common.limits import BACKUP_FREE_SPACE_MARGIN_BYTES, INGEST_LOCK_WAIT_SECONDS
from ivoai.server.backup.archive import (
    BACKUP_LOCK,
    CONFIG_MEMBER,
    ArchiveError,
    Manifest,
    OpenArchive,
    Progress,
    ProgressCounter,
    ProgressFn,
    copy_member,
    open_archive,
)
from ivoai.server.datadir import ServerDataDir

if TYPE_CHECKING:
    from ivoai.server.context.embeddings import Embedder

RESTORE_STAGING_PREFIX = "restore-staging-"


class RestoreError(IvoaiError):
    """Restore refused or could not finish (the message says why and what was written)."""

    code = "restore_failed"


class GatewayRunningError(IvoaiError):
    """A gateway serves the data directory; restore needs it stopped."""

    code = "gateway_running"


@dataclass
class RestoreResult:
    archive: str
    dry_run: bool
    files: list[dict[str, Any]]
    schema_versions: dict[str, int | str]
    index: dict[str, Any] = field(default_factory=dict)
    gateway: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "archive": self.archive,
            "dry_run": self.dry_run,
            "files": self.files,
            "schema_versions": self.schema_versions,
            "index": self.index,
            "gateway": self.gateway,
            "seconds": round(self.seconds, 3),
        }


def target_path(data: ServerDataDir, member: str) -> Path:
    """Where an archive member lives in the data directory (`config.toml`, `context/…`, `memory/…`)."""
    if member == CONFIG_MEMBER:
        return data.config_file
    return data.root / member


def restore_archive(
    data: ServerDataDir,
    archive: Path,
    *,
    dry_run: bool = False,
    stop_gateway: bool = False,
    rebuild_index: bool = True,
    embedder: Embedder | None = None,
    progress: ProgressFn | None = None,
    gateway_control: Any = None,
) -> RestoreResult:
    """Restore `archive` into `data` (see module doc).

    `embedder` overrides the configured one for the index rebuild (tests, benchmarks);
    `gateway_control` overrides how a running gateway is found, stopped and started (tests).

    Raises:
        ArchiveError: the archive is refused (nothing was written).
        GatewayRunningError: a gateway serves `data` and `stop_gateway` is false (nothing was written).
        RestoreError: writing failed part-way (the message says which files were already restored).
    """
    from ivoai.server.backup import gateway as gw

    t0 = time.monotonic()
    control = gateway_control if gateway_control is not None else gw.GatewayControl(data)
    running = control.find()
    if running is not None and not stop_gateway and not dry_run:
        raise GatewayRunningError(
            f"a gateway (pid {running.pid}) serves {data.root}; stop it first or pass --stop-gateway "
            "(it is stopped, the archive restored, and the gateway started again)"
        )
    arch = open_archive(archive)
    try:
        manifest = arch.manifest
        data.ensure()
        _check_free_space(data, manifest)
        with file_lock(data.root, data.run / BACKUP_LOCK):
            _clean_stale(data)
            staging = data.run / f"{RESTORE_STAGING_PREFIX}{secrets.token_hex(6)}"
            os.mkdir(staging, PRIVATE_DIR_MODE)
            try:
                staged = _stage(arch, staging, progress)
                arch.close()
                plan = [
                    {
                        "path": name,
                        "target": str(target_path(data, name)),
                        "size": entry_size,
                        "action": "replace" if os.path.lexists(target_path(data, name)) else "create",
                    }
                    for name, (_, entry_size) in staged.items()
                ]
                result = RestoreResult(
                    archive=str(archive),
                    dry_run=dry_run,
                    files=plan,
                    schema_versions=dict(manifest.schema_versions),
                )
                if dry_run:
                    result.gateway = {"running": running is not None}
                    result.seconds = time.monotonic() - t0
                    return result
                stopped = None
                if running is not None:
                    stopped = control.stop(running)
                    result.gateway = {"stopped": True, "pid": running.pid}
                try:
                    _apply(data, staged, progress)
                    if rebuild_index:
                        result.index = _rebuild(data, embedder, progress)
                    else:
                        result.index = {"rebuilt": False, "hint": "run: ivoai server context rebuild"}
                finally:
                    if stopped is not None:
                        started = control.start(stopped)
                        result.gateway.update({"restarted": True, "new_pid": started})
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    finally:
        arch.close()
    result.seconds = time.monotonic() - t0
    return result


def _check_free_space(data: ServerDataDir, manifest: Manifest) -> None:
    need = sum(f.size for f in manifest.files) + BACKUP_FREE_SPACE_MARGIN_BYTES
    st = os.statvfs(data.root)
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise RestoreError(
            f"not enough free space on the data directory's filesystem: {free} bytes free, "
            f"{need} needed to stage the archive"
        )


def _clean_stale(data: ServerDataDir) -> None:
    dfd = open_private_dir(data.root, data.run)
    try:
        for name in os.listdir(dfd):
            if name.startswith(RESTORE_STAGING_PREFIX):
                with contextlib.suppress(OSError):
                    shutil.rmtree(name, dir_fd=dfd)
    finally:
        os.close(dfd)


def _stage(arch: OpenArchive, staging: Path, progress: ProgressFn | None) -> dict[str, tuple[Path, int]]:
    """Copy every member into `staging` (hash-checked, fsynced); check staged SQLite files."""
    counter = ProgressCounter("stage", sum(f.size for f in arch.manifest.files), progress)
    advance = counter.on_bytes(str(arch.path))

    staged: dict[str, tuple[Path, int]] = {}
    for n, (entry, stream) in enumerate(arch.iter_data()):
        path = staging / f"{n}.part"
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE
        )
        with os.fdopen(fd, "wb") as sink:
            copy_member(stream, entry, sink, advance)
            sink.flush()
            os.fsync(sink.fileno())
        if entry.kind == "sqlite":
            _check_sqlite(path, entry.path, arch.manifest)
        staged[entry.path] = (path, entry.size)
    return staged


def _check_sqlite(path: Path, name: str, manifest: Manifest) -> None:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ArchiveError(f"entry {name!r} is not a usable SQLite database: {exc}") from None
    if result != "ok":
        raise ArchiveError(f"entry {name!r} fails SQLite's integrity check: {str(result)[:200]}")
    key = {"memory": "memory", "context": "context_catalog"}.get(name.split("/", 1)[0])
    expected = manifest.schema_versions.get(key) if key else None
    if name in _KNOWN_DATABASES and isinstance(expected, int) and expected != version:
        raise ArchiveError(f"entry {name!r} has schema version {version} but the manifest says {expected}")


_KNOWN_DATABASES = ("memory/memory.sqlite3", "context/catalog.sqlite3")


def _apply(data: ServerDataDir, staged: dict[str, tuple[Path, int]], progress: ProgressFn | None) -> None:
    """Rename each staged file over its target; SQLite targets are checkpointed and detached first."""
    from ivoai.server.context.service import INGEST_LOCK

    written: list[str] = []
    with file_lock(data.root, data.run / INGEST_LOCK, timeout=INGEST_LOCK_WAIT_SECONDS):
        for name, (path, _size) in staged.items():
            target = target_path(data, name)
            try:
                ensure_private_dir(data.root, target.parent)
                if target.suffix == ".sqlite3" or name in _KNOWN_DATABASES:
                    _detach_sqlite(target)
                os.replace(path, target)
                dfd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
            except (OSError, IvoaiError) as exc:
                msg = exc.message if isinstance(exc, IvoaiError) else str(exc)
                raise RestoreError(
                    f"restoring {name} failed ({msg}); already restored: {', '.join(written) or 'nothing'}"
                ) from None
            written.append(name)
            if progress is not None:
                progress(Progress("write", name, len(written), len(staged)))


def _detach_sqlite(target: Path) -> None:
    """Checkpoint the database at `target` into its main file and remove its WAL and shared-memory files."""
    if not os.path.lexists(target):
        for suffix in ("-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{target}{suffix}")
        return
    conn = sqlite3.connect(target, timeout=10)
    try:
        busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        conn.close()
        raise RestoreError(f"{target} could not be checkpointed: {exc}") from None
    conn.close()
    if busy:
        raise RestoreError(f"{target} is in use by another process; stop it and retry")
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{target}{suffix}")


def _rebuild(data: ServerDataDir, embedder: Embedder | None, progress: ProgressFn | None) -> dict[str, Any]:
    """Recreate the vector index from the restored catalog; a failure is reported, not raised."""
    from ivoai.server.config import load_config
    from ivoai.server.context.service import ContextService

    callback: Callable[[Any], None] | None = None
    if progress is not None:
        report = progress

        def callback(p: Any) -> None:
            report(Progress("rebuild", "index", int(p.chunks_done), int(p.chunks_total or 0)))

    try:
        with ContextService.open(data, load_config(data).context, embedder=embedder) as svc:
            rep = svc.rebuild(callback)
    except IvoaiError as exc:
        return {
            "rebuilt": False,
            "error": f"{exc.code}: {exc.message}",
            "hint": "the data is restored; run: ivoai server context rebuild",
        }
    return {"rebuilt": True, **rep.model_dump(mode="json")}
