"""Writing a backup archive: collect the files, snapshot the databases, stream the tar, publish it.

See `ivoai.server.backup.archive` for the format and the guarantees (a reader sees a complete archive
or nothing).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import secrets
import shutil
import sqlite3
import stat
import tarfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, cast

from ivoai import __version__
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    ensure_private_dir,
    file_lock,
    open_private_dir,
)
from ivoai.common.limits import (
    BACKUP_FORMAT_VERSION,
    BACKUP_IO_CHUNK_BYTES,
    BACKUP_MANIFEST_MAX_BYTES,
    BACKUP_MAX_ENTRIES,
    BACKUP_MEMORY_SNAPSHOT_MAX_BYTES,
    CONTEXT_WALK_MAX_DEPTH,
)
from ivoai.common.redact import redact
from ivoai.server.backup._format import (
    ARCHIVE_PREFIX,
    ARCHIVE_SUFFIX,
    ARCHIVED_ROOTS,
    BACKUP_LOCK,
    CONFIG_MEMBER,
    FORMAT_NAME,
    MANIFEST_NAME,
    BackupError,
    BackupResult,
    Kind,
    Manifest,
    ManifestFile,
    Progress,
    ProgressCounter,
    ProgressFn,
    default_backup_dir,
)
from ivoai.server.datadir import ServerDataDir

EXCLUDED = ("secrets/", "enrollment/", "oauth/", "index/", "run/", "backups/")  # never archived
STAGING_PREFIX = ".ivoai-backup-staging-"
SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0


# ------------------------------------------------------------------------------------------ sources
@dataclass(frozen=True)
class _Source:
    member: str
    path: Path
    kind: Kind


def _collect(data: ServerDataDir) -> list[_Source]:
    """The files to archive, in a stable order; refuses links and special files inside the roots."""
    found: list[_Source] = []
    if os.path.lexists(data.config_file):
        st = os.lstat(data.config_file)
        if not stat.S_ISREG(st.st_mode):
            raise BackupError(
                f"{data.config_file} is not a regular file (links and special files are refused)"
            )
        found.append(_Source(CONFIG_MEMBER, data.config_file, "config"))
    for root_name in ARCHIVED_ROOTS:
        root = data.root / root_name
        if not os.path.lexists(root):
            continue
        _walk(root, root_name, 0, found)
    return found


def _walk(directory: Path, member_prefix: str, depth: int, out: list[_Source]) -> None:
    if depth > CONTEXT_WALK_MAX_DEPTH:
        raise BackupError(f"{directory}: deeper than {CONTEXT_WALK_MAX_DEPTH} levels")
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise BackupError(f"{directory} is not a directory (links and special files are refused)")
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        name = entry.name
        path = directory / name
        member = f"{member_prefix}/{name}"
        if name.startswith(".") or name.endswith(".lock") or name.endswith(SQLITE_SIDECARS):
            continue  # staging files of atomic writes, lock files, SQLite's WAL/shm/journal
        est = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(est.st_mode):
            _walk(path, member, depth + 1, out)
        elif stat.S_ISREG(est.st_mode):
            out.append(_Source(member, path, "sqlite" if _is_sqlite(path) else "file"))
        else:
            kind = "a symlink" if stat.S_ISLNK(est.st_mode) else "a special file"
            raise BackupError(f"{path} is {kind}; ivoai backs up regular files only (remove it and retry)")


def _is_sqlite(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        return os.read(fd, len(SQLITE_MAGIC)) == SQLITE_MAGIC
    finally:
        os.close(fd)


def snapshot_sqlite(source: Path, dest: Path) -> tuple[bytes | None, dict[str, Any]]:
    """Copy a live SQLite database as one consistent snapshot.

    Every page is copied inside one read transaction: WAL writers keep committing meanwhile and none
    of their later commits is in the copy. A database of at most `BACKUP_MEMORY_SNAPSHOT_MAX_BYTES`
    is serialized from the source connection and returned as bytes
    (no staging file to write, fsync and read again: the archive is written once); a larger one is
    copied into `dest` (None). Either way the copy uses a rollback journal, so it is one
    self-contained file. Also returns the snapshot's facts (schema version, counts) for the manifest.
    """
    size = sum(os.stat(f"{source}{sfx}").st_size for sfx in ("", "-wal") if os.path.exists(f"{source}{sfx}"))
    # Opened read-write on purpose: a read-only connection cannot open a WAL database whose -shm file
    # is missing (no process has it open); the backup API only reads the source.
    src = sqlite3.connect(source, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)
    try:
        src.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_SECONDS * 1000)}")
        if size <= BACKUP_MEMORY_SNAPSHOT_MAX_BYTES:
            # One read transaction holds the snapshot: the facts and the page image (sqlite3_serialize
            # copies the pages straight from the pager, about twice as fast as a backup into a
            # :memory: database followed by its serialization) come from the same committed state.
            src.isolation_level = None
            src.execute("BEGIN")
            try:
                facts = _facts(src)
                return src.serialize(), facts
            finally:
                src.execute("ROLLBACK")
        fd = os.open(
            dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE
        )
        os.close(fd)
        dst = sqlite3.connect(dest)
        try:
            dst.execute("PRAGMA synchronous = OFF")  # fsynced once below
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode = DELETE")
            dst.commit()
            facts = _facts(dst)
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise BackupError(f"cannot snapshot {source}: {exc}") from None
    finally:
        src.close()
    fd = os.open(dest, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return None, facts


def _facts(conn: sqlite3.Connection) -> dict[str, Any]:
    """user_version and, for a catalog, the counts and index schema the rebuild needs."""
    try:
        facts: dict[str, Any] = {"user_version": int(conn.execute("PRAGMA user_version").fetchone()[0])}
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if {"documents", "chunks", "meta", "connectors"} <= tables:
            facts["documents"] = int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
            facts["chunks"] = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
            facts["connectors"] = int(conn.execute("SELECT count(*) FROM connectors").fetchone()[0])
            row = conn.execute("SELECT value FROM meta WHERE key = 'index_schema'").fetchone()
            facts["index_schema"] = row[0] if row else None
        if "pages" in tables:
            facts["pages"] = int(conn.execute("SELECT count(*) FROM pages WHERE deleted = 0").fetchone()[0])
        return facts
    except sqlite3.Error as exc:
        raise BackupError(f"cannot read the snapshot: {exc}") from None


class _HashingReader:
    """A read-only file wrapper that hashes what is read and refuses to give more than `size` bytes.

    With a `pool`, each block is hashed in that (one) thread while the caller writes it: hashlib
    releases the GIL on large buffers, so hashing and writing overlap on two cores.
    """

    def __init__(
        self,
        f: BinaryIO,
        size: int,
        on_bytes: Callable[[int], None] | None = None,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self._f = f
        self._left = size
        self._sha256 = hashlib.sha256()
        self._on_bytes = on_bytes
        self._pool = pool
        self._pending: Future[None] | None = None

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > self._left:
            n = self._left
        block = self._f.read(n)
        self._left -= len(block)
        if self._pending is not None:
            self._pending.result()
            self._pending = None
        if self._pool is not None and block:
            self._pending = self._pool.submit(self._sha256.update, block)
        else:
            self._sha256.update(block)
        if self._on_bytes is not None and block:
            self._on_bytes(len(block))
        return block

    def hexdigest(self) -> str:
        if self._pending is not None:
            self._pending.result()
            self._pending = None
        return self._sha256.hexdigest()


# ---------------------------------------------------------------------------------------- writing
def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _clean_stale(dfd: int) -> None:
    """Remove staging files and directories a killed backup left (called under the backup lock)."""
    for name in os.listdir(dfd):
        if name.startswith(STAGING_PREFIX):
            with contextlib.suppress(OSError):
                shutil.rmtree(name, dir_fd=dfd)
        elif name.startswith("." + ARCHIVE_PREFIX) and ".tmp-" in name:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dfd)


def create_backup(
    data: ServerDataDir,
    output: Path | None = None,
    *,
    progress: ProgressFn | None = None,
    clock: Callable[[], float] = time.time,
) -> BackupResult:
    """Write one archive of `data` into `output` (default `DATA/backups`, created 0700).

    Raises:
        BackupError: a link or special file in an archived root, or SQLite refused the snapshot.
        UnsafePathError: `output` is a symlink, foreign-owned or not 0700.
    """
    t0 = time.monotonic()
    if not data.root.is_dir():
        raise BackupError(
            f"{data.root} is not a server data directory (nothing to back up; see ivoai server init)"
        )
    out_dir = Path(os.path.abspath(output)) if output is not None else default_backup_dir(data)
    if output is None:
        ensure_private_dir(data.root, out_dir)
    else:
        ensure_private_dir(out_dir)
    ensure_private_dir(data.root, data.run)
    with file_lock(data.root, data.run / BACKUP_LOCK):
        dfd = open_private_dir(out_dir)
        try:
            _clean_stale(dfd)
            staging = STAGING_PREFIX + secrets.token_hex(6)
            os.mkdir(staging, PRIVATE_DIR_MODE, dir_fd=dfd)
            try:
                return _write_archive(data, out_dir, dfd, out_dir / staging, progress, clock, t0)
            finally:
                with contextlib.suppress(OSError):
                    shutil.rmtree(staging, dir_fd=dfd)
        finally:
            os.close(dfd)


def _write_archive(
    data: ServerDataDir,
    out_dir: Path,
    dfd: int,
    staging: Path,
    progress: ProgressFn | None,
    clock: Callable[[], float],
    t0: float,
) -> BackupResult:
    prepared, facts, config_redacted = _prepare(data, staging, progress)
    total = sum(
        len(p) if isinstance(p, bytes) else os.stat(p, follow_symlinks=False).st_size for _, p in prepared
    )
    if len(prepared) + 1 > BACKUP_MAX_ENTRIES:
        raise BackupError(f"{len(prepared)} files to archive; the limit is {BACKUP_MAX_ENTRIES}")

    stamp = _timestamp()
    tmp_name = f".{ARCHIVE_PREFIX}{stamp}{ARCHIVE_SUFFIX}.tmp-{secrets.token_hex(6)}"
    fd = os.open(
        tmp_name,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        PRIVATE_FILE_MODE,
        dir_fd=dfd,
    )
    try:
        files, manifest = _write_tar(
            fd,
            prepared,
            int(clock()),
            ProgressCounter("archive", total, progress),
            lambda files: _manifest(data, files, facts, config_redacted, clock),
        )
        size_total = os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name, dir_fd=dfd)
        raise
    os.close(fd)
    final = _publish(dfd, tmp_name, stamp)
    return BackupResult(
        archive=str(out_dir / final),
        bytes=size_total,
        files=files,
        seconds=time.monotonic() - t0,
        manifest=manifest,
    )


Prepared = list[tuple[_Source, Path | bytes]]  # (source, file or in-memory image to stream)


def _prepare(
    data: ServerDataDir, staging: Path, progress: ProgressFn | None
) -> tuple[Prepared, dict[str, dict[str, Any]], bool]:
    """Snapshot the databases and redact the config: (what to stream, snapshot facts, config redacted)."""
    sources = _collect(data)
    prepared: Prepared = []
    facts: dict[str, dict[str, Any]] = {}
    config_redacted = False
    # The databases are snapshotted at the same time (the backup API releases the GIL while it copies).
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ivoai-snapshot") as snapper:
        snapshots = {
            n: snapper.submit(snapshot_sqlite, src.path, staging / f"{n}.sqlite3")
            for n, src in enumerate(sources)
            if src.kind == "sqlite"
        }
        if progress is not None and snapshots:
            progress(Progress("snapshot", f"{len(snapshots)} databases", 0, len(snapshots)))
        images = {n: future.result() for n, future in snapshots.items()}
    for n, src in enumerate(sources):
        if src.kind == "sqlite":
            image, facts[src.member] = images.pop(n)
            prepared.append((src, image if image is not None else staging / f"{n}.sqlite3"))
        elif src.kind == "config":
            raw = _read_regular(src.path, BACKUP_MANIFEST_MAX_BYTES)
            text = raw.decode("utf-8", errors="replace")
            clean = redact(text)
            config_redacted = clean != text
            copy = staging / f"{n}.toml"
            _write_new(copy, clean.encode("utf-8"))
            prepared.append((src, copy))
        else:
            prepared.append((src, src.path))
    return prepared, facts, config_redacted


def _write_tar(
    fd: int,
    prepared: Prepared,
    mtime: int,
    counter: ProgressCounter,
    make_manifest: Callable[[list[ManifestFile]], Manifest],
) -> tuple[list[ManifestFile], Manifest]:
    """Write the tar to `fd`: every prepared member (hashed as it streams), then the manifest; fsync."""
    files: list[ManifestFile] = []
    with (
        os.fdopen(fd, "wb", buffering=BACKUP_IO_CHUNK_BYTES, closefd=False) as raw_out,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="ivoai-hash") as hasher,
    ):
        tar = tarfile.TarFile(
            fileobj=raw_out, mode="w", format=tarfile.PAX_FORMAT, copybufsize=BACKUP_IO_CHUNK_BYTES
        )
        for src, item in prepared:
            files.append(_add_member(tar, src, item, mtime, counter, hasher))
        manifest = make_manifest(files)
        body = manifest.model_dump_json(indent=1).encode("utf-8") + b"\n"
        tar.addfile(_tarinfo(MANIFEST_NAME, len(body), mtime), io.BytesIO(body))
        tar.close()
    os.fsync(fd)
    return files, manifest


def _add_member(
    tar: tarfile.TarFile,
    src: _Source,
    item: Path | bytes,
    mtime: int,
    counter: ProgressCounter,
    hasher: ThreadPoolExecutor,
) -> ManifestFile:
    """Stream one member into `tar`, hashing it on `hasher`; returns its manifest entry.

    Raises:
        BackupError: the file changed size while it was archived.
    """
    with _open_item(item) as (f, size):
        reader = _HashingReader(f, size, counter.on_bytes(src.member), hasher)
        try:
            tar.addfile(_tarinfo(src.member, size, mtime), reader)
        except OSError as exc:
            raise BackupError(f"{src.path} changed while it was archived ({exc}); retry") from None
    return ManifestFile(path=src.member, size=size, sha256=reader.hexdigest(), kind=src.kind)


class _ImageReader:
    """Reads a serialized in-memory snapshot without copying it, as a rollback-journal database file.

    The serialized image keeps the source's WAL marker (header bytes 18-19 = 2); the archived file says
    1 (rollback journal), what a file copy switched with `journal_mode = DELETE` says: the database is
    one self-contained file and opening it needs no -wal.
    """

    def __init__(self, image: bytes) -> None:
        self._view = memoryview(image)
        self._head = bytearray(image[:100])
        if len(self._head) == 100:
            self._head[18] = self._head[19] = 1
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n < 0 else min(len(self._view), self._pos + n)
        start, self._pos = self._pos, end
        if start >= len(self._head):
            return bytes(self._view[start:end])
        return bytes(self._head[start : min(end, len(self._head))]) + bytes(self._view[len(self._head) : end])


@contextlib.contextmanager
def _open_item(item: Path | bytes) -> Iterator[tuple[BinaryIO, int]]:
    """A stream over a staged file (regular files only) or an in-memory snapshot, with its size."""
    if isinstance(item, bytes):
        yield cast(BinaryIO, _ImageReader(item)), len(item)
        return
    with open(item, "rb", buffering=0) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BackupError(f"{item} is not a regular file")
        yield cast(BinaryIO, f), st.st_size


def _publish(dfd: int, tmp_name: str, stamp: str) -> str:
    """Give the finished temporary archive its final name without replacing an existing archive."""
    for attempt in range(100):
        final = f"{ARCHIVE_PREFIX}{stamp}{'' if attempt == 0 else f'-{attempt}'}{ARCHIVE_SUFFIX}"
        try:
            os.link(tmp_name, final, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            continue
        os.unlink(tmp_name, dir_fd=dfd)
        os.fsync(dfd)
        return final
    raise BackupError("could not find a free archive name")


def _tarinfo(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime
    info.mode = PRIVATE_FILE_MODE
    info.type = tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _manifest(
    data: ServerDataDir,
    files: list[ManifestFile],
    facts: dict[str, dict[str, Any]],
    config_redacted: bool,
    clock: Callable[[], float],
) -> Manifest:
    from ivoai.server.config import load_config
    from ivoai.server.context.catalog import CATALOG_FILE
    from ivoai.server.context.index import COLLECTION
    from ivoai.server.memory._db import DB_NAME

    catalog = facts.get(f"context/{CATALOG_FILE}", {})
    memory = facts.get(f"memory/{DB_NAME}", {})
    schema: dict[str, int | str] = {"index_collection": COLLECTION}
    if "user_version" in catalog:
        schema["context_catalog"] = catalog["user_version"]
    if "user_version" in memory:
        schema["memory"] = memory["user_version"]
    try:
        settings = load_config(data).context
        backends = {"embedder": settings.embedder, "index_backend": settings.index}
    except IvoaiError:
        backends = {}
    index = {
        "collection": COLLECTION,
        "built_as": catalog.get("index_schema"),
        "documents": catalog.get("documents", 0),
        "chunks": catalog.get("chunks", 0),
        "connectors": catalog.get("connectors", 0),
        "memory_pages": memory.get("pages", 0),
        **backends,
        "rebuild": "ivoai server context rebuild (restore runs it)",
    }
    created = datetime.fromtimestamp(clock(), UTC).isoformat(timespec="seconds")
    return Manifest(
        format=FORMAT_NAME,
        format_version=BACKUP_FORMAT_VERSION,
        ivoai_version=__version__,
        created_at=created,
        schema_versions=schema,
        index=index,
        files=files,
        excluded=list(EXCLUDED),
        config_redacted=config_redacted,
    )


def _read_regular(path: Path, limit: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BackupError(f"{path} is not a regular file")
        data = os.read(fd, limit + 1)
        if len(data) > limit:
            raise BackupError(f"{path} is larger than {limit} bytes")
        return data
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
