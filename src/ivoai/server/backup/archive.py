"""Backup archives of a server data directory: format, writing, reading and verification.

An archive is an uncompressed POSIX tar file (no decompression step, so no decompression bomb, and
the reference `tar` reads it) whose members are regular files only:

    config.toml                  server configuration (non-secret by design; run through the redactor)
    context/catalog.sqlite3      connectors, documents with their normalized text, chunk spans, runs
    context/<other files>        anything else the context service keeps there (ingestion state)
    memory/memory.sqlite3        the memory database
    manifest.json                last: format and ivoai versions, schema versions, index rebuild
                                 metadata, and every other member with its size and SHA-256

SQLite files are copied with SQLite's online backup API (one step inside one read transaction, so
the copy is a consistent snapshot while WAL writers keep committing), concurrently, into memory (up
to `BACKUP_MEMORY_SNAPSHOT_MAX_BYTES`) or a private staging file, marked as self-contained
rollback-journal databases, then streamed into the tar while their hash is computed (so the manifest
comes last). Excluded on purpose: `secrets/`, `enrollment/`
(codes and client credentials), `oauth/` (grants and tokens), `index/` (the vector index is a cache
rebuilt from the catalog) and `run/` (locks, pids, logs).

The archive is written as `.NAME.tmp-RANDOM` in a 0700 backup directory, fsynced, linked to its final
name (no-clobber) and fsynced again: a reader (or `backup list`) sees a complete archive or nothing.
A symlink or special file inside an archived root stops the backup with the path named.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
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
from typing import Any, BinaryIO, Literal, cast

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from ivoai import __version__
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    check_stat,
    ensure_private_dir,
    file_lock,
    open_private_dir,
)
from ivoai.common.limits import (
    BACKUP_ENTRY_MAX_BYTES,
    BACKUP_FORMAT_VERSION,
    BACKUP_IO_CHUNK_BYTES,
    BACKUP_MANIFEST_MAX_BYTES,
    BACKUP_MAX_ENTRIES,
    BACKUP_MEMORY_SNAPSHOT_MAX_BYTES,
    BACKUP_TOTAL_MAX_BYTES,
    CONTEXT_WALK_MAX_DEPTH,
)
from ivoai.common.redact import redact
from ivoai.common.validate import is_int
from ivoai.server.datadir import ServerDataDir

FORMAT_NAME: Literal["ivoai-server-backup"] = "ivoai-server-backup"
MANIFEST_NAME = "manifest.json"
CONFIG_MEMBER = "config.toml"
ARCHIVED_ROOTS = ("context", "memory")  # directories of the data dir that are archived whole
EXCLUDED = ("secrets/", "enrollment/", "oauth/", "index/", "run/", "backups/")
ARCHIVE_PREFIX = "ivoai-backup-"
ARCHIVE_SUFFIX = ".tar"
BACKUP_LOCK = "backup.lock"  # in DATA/run: one backup or restore at a time per data dir
STAGING_PREFIX = ".ivoai-backup-staging-"
SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0

Kind = Literal["config", "sqlite", "file"]


class BackupError(IvoaiError):
    """A backup could not be written (the message names the path and the reason)."""

    code = "backup_failed"


class ArchiveError(IvoaiError):
    """An archive is not a valid, intact ivoai backup (the message names the entry and the rule)."""

    code = "invalid_archive"


class ManifestFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    size: int
    sha256: str
    kind: Kind


class Manifest(BaseModel):
    """`manifest.json`. Unknown fields are kept out (`extra="ignore"`): a newer minor writer may add some."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["ivoai-server-backup"]
    format_version: int
    ivoai_version: str
    created_at: str
    schema_versions: dict[str, int | str]
    index: dict[str, Any]
    files: list[ManifestFile]
    excluded: list[str]
    config_redacted: bool = False


@dataclass(frozen=True)
class Progress:
    """One progress report: `phase` is snapshot | archive | verify | stage | write | rebuild."""

    phase: str
    path: str
    done_bytes: int
    total_bytes: int


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class BackupResult:
    archive: str
    bytes: int
    files: list[ManifestFile]
    seconds: float
    manifest: Manifest

    def to_json(self) -> dict[str, Any]:
        return {
            "archive": self.archive,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "format_version": self.manifest.format_version,
            "schema_versions": self.manifest.schema_versions,
            "files": [f.model_dump() for f in self.files],
            "excluded": self.manifest.excluded,
            "config_redacted": self.manifest.config_redacted,
        }


def default_backup_dir(data: ServerDataDir) -> Path:
    """`DATA/backups` (the seed's /var/lib/ivoai/backups)."""
    return data.root / "backups"


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
        if name.startswith(".") or name.endswith(".lock") or name.endswith(_SQLITE_SIDECARS):
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
    """Copy a live SQLite database with the online backup API, as one consistent snapshot.

    One backup step (`pages=-1`) copies every page inside one read transaction: WAL writers keep
    committing meanwhile and none of their later commits is in the copy. A database of at most
    `BACKUP_MEMORY_SNAPSHOT_MAX_BYTES` is copied into memory and returned as its serialized bytes
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
            mem = sqlite3.connect(":memory:")
            try:
                src.backup(mem, pages=-1)
                return mem.serialize(), _facts(mem)
            finally:
                mem.close()
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
    sources = _collect(data)
    prepared: list[tuple[_Source, Path | bytes]] = []  # (source, file or in-memory image to stream)
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
    done = 0
    files: list[ManifestFile] = []
    try:
        with (
            os.fdopen(fd, "wb", buffering=BACKUP_IO_CHUNK_BYTES, closefd=False) as raw_out,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="ivoai-hash") as hasher,
        ):
            tar = tarfile.TarFile(
                fileobj=raw_out, mode="w", format=tarfile.PAX_FORMAT, copybufsize=BACKUP_IO_CHUNK_BYTES
            )
            mtime = int(clock())
            for src, item in prepared:
                with _open_item(item) as (f, size):

                    def advance(k: int, member: str = src.member) -> None:
                        nonlocal done
                        done += k
                        if progress is not None:
                            progress(Progress("archive", member, done, total))

                    reader = _HashingReader(f, size, advance, hasher)
                    info = _tarinfo(src.member, size, mtime)
                    try:
                        tar.addfile(info, reader)
                    except OSError as exc:
                        raise BackupError(
                            f"{src.path} changed while it was archived ({exc}); retry"
                        ) from None
                files.append(
                    ManifestFile(path=src.member, size=size, sha256=reader.hexdigest(), kind=src.kind)
                )
            manifest = _manifest(data, files, facts, config_redacted, clock)
            body = manifest.model_dump_json(indent=1).encode("utf-8") + b"\n"
            tar.addfile(_tarinfo(MANIFEST_NAME, len(body), mtime), io.BytesIO(body))
            tar.close()
        os.fsync(fd)
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
    from ivoai.server.context.catalog import CATALOG_FILE
    from ivoai.server.context.index import COLLECTION
    from ivoai.server.context.settings import load_settings
    from ivoai.server.memory._db import DB_NAME

    catalog = facts.get(f"context/{CATALOG_FILE}", {})
    memory = facts.get(f"memory/{DB_NAME}", {})
    schema: dict[str, int | str] = {"index_collection": COLLECTION}
    if "user_version" in catalog:
        schema["context_catalog"] = catalog["user_version"]
    if "user_version" in memory:
        schema["memory"] = memory["user_version"]
    try:
        settings = load_settings(data)
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


# ---------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class Member:
    name: str
    size: int
    info: tarfile.TarInfo


@dataclass
class OpenArchive:
    """A validated view of an archive: members checked, manifest parsed and matched (data not yet hashed)."""

    path: Path
    tar: tarfile.TarFile
    file: BinaryIO
    manifest: Manifest
    members: list[Member]

    def close(self) -> None:
        self.tar.close()
        self.file.close()

    def iter_data(
        self, progress: ProgressFn | None = None, phase: str = "verify"
    ) -> Iterator[tuple[ManifestFile, BinaryIO]]:
        """Each manifest file with a stream of exactly its bytes (read it fully before the next)."""
        expected = {f.path: f for f in self.manifest.files}
        for m in self.members:
            if m.name == MANIFEST_NAME:
                continue
            stream = self.tar.extractfile(m.info)
            if stream is None:
                raise ArchiveError(f"{m.name}: not a regular file")
            yield expected[m.name], cast(BinaryIO, stream)


def open_archive(path: Path) -> OpenArchive:
    """Open and check an archive without trusting anything in it; nothing is extracted.

    Checks, in order: a local absolute path to a regular file; a tar archive; at most
    `BACKUP_MAX_ENTRIES` members, each a regular file (no links, devices, FIFOs, directories or sparse
    files) with a safe relative name under an archived root (no absolute path, no `..`, no
    duplicates), within `BACKUP_ENTRY_MAX_BYTES` and, together, `BACKUP_TOTAL_MAX_BYTES`, and whose
    data lies inside the file (a truncated archive is refused); a manifest of a known format and a
    format version this ivoai reads; and members that are exactly the manifest's files with the
    manifest's sizes. Hashes are checked by `verify_archive` / while staging.

    Raises:
        ArchiveError: the rule broken, with the entry named.
    """
    text = str(path)
    if "://" in text or not os.path.isabs(text):
        raise ArchiveError(f"ARCHIVE must be an absolute local path, got {text!r}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ArchiveError(f"{path}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ArchiveError(f"{path} is a symlink; give the archive's real path") from None
        raise ArchiveError(f"{path}: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ArchiveError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    f: BinaryIO = os.fdopen(fd, "rb")
    try:
        try:
            tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 - owned by OpenArchive
        except tarfile.TarError as exc:
            raise ArchiveError(
                f"{path} is not an ivoai backup archive (not an uncompressed tar: {exc})"
            ) from None
        try:
            members = _check_members(tar, st.st_size)
            manifest = _read_manifest(tar, members)
            _match_manifest(manifest, members)
            check_schemas(manifest)
        except BaseException:
            tar.close()
            raise
    except BaseException:
        f.close()
        raise
    return OpenArchive(path=path, tar=tar, file=f, manifest=manifest, members=members)


def _check_members(tar: tarfile.TarFile, file_size: int) -> list[Member]:
    from ivoai.common.fsio import validate_relative

    members: list[Member] = []
    seen: set[str] = set()
    total = 0
    try:
        for info in tar:
            if len(members) >= BACKUP_MAX_ENTRIES:
                raise ArchiveError(
                    f"more than {BACKUP_MAX_ENTRIES} entries; refused (limit BACKUP_MAX_ENTRIES)"
                )
            name = info.name
            if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or info.issparse():
                raise ArchiveError(f"entry {name!r} is {_kind(info)}; only regular files are accepted")
            try:
                validate_relative(name)
            except IvoaiError:
                raise ArchiveError(
                    f"entry {name!r} has an unsafe path (absolute, '..' or empty part)"
                ) from None
            if (
                name != MANIFEST_NAME
                and name != CONFIG_MEMBER
                and name.split("/", 1)[0] not in ARCHIVED_ROOTS
            ):
                raise ArchiveError(
                    f"entry {name!r} is outside the archived roots (config.toml, context/, memory/)"
                )
            if name in seen:
                raise ArchiveError(f"entry {name!r} appears twice")
            seen.add(name)
            if info.size < 0 or info.size > BACKUP_ENTRY_MAX_BYTES:
                raise ArchiveError(
                    f"entry {name!r} is {info.size} bytes; the limit is {BACKUP_ENTRY_MAX_BYTES}"
                )
            total += info.size
            if total > BACKUP_TOTAL_MAX_BYTES:
                raise ArchiveError(
                    f"entries add up to more than {BACKUP_TOTAL_MAX_BYTES} bytes (BACKUP_TOTAL_MAX_BYTES)"
                )
            if info.offset_data + info.size > file_size:
                raise ArchiveError(f"entry {name!r} runs past the end of the file: the archive is truncated")
            members.append(Member(name, info.size, info))
    except tarfile.TarError as exc:
        raise ArchiveError(f"corrupt tar structure: {exc}") from None
    if not members:
        raise ArchiveError("the archive is empty")
    return members


def _kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return "a symlink"
    if info.islnk():
        return "a hard link"
    if info.ischr() or info.isblk():
        return "a device node"
    if info.isfifo():
        return "a FIFO"
    if info.isdir():
        return "a directory"
    if info.issparse():
        return "a sparse file"
    return f"of tar type {info.type!r}"


def _read_manifest(tar: tarfile.TarFile, members: list[Member]) -> Manifest:
    found = [m for m in members if m.name == MANIFEST_NAME]
    if not found:
        raise ArchiveError("no manifest.json: not an ivoai backup, or a truncated one")
    m = found[0]
    if m.size > BACKUP_MANIFEST_MAX_BYTES:
        raise ArchiveError(f"manifest.json is {m.size} bytes; the limit is {BACKUP_MANIFEST_MAX_BYTES}")
    stream = tar.extractfile(m.info)
    if stream is None:
        raise ArchiveError("manifest.json is not a regular file")
    try:
        raw = stream.read(m.size)
        doc = json.loads(raw)
    except (tarfile.TarError, ValueError, OSError) as exc:
        raise ArchiveError(f"manifest.json is unreadable: {type(exc).__name__}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ArchiveError("manifest.json does not describe an ivoai server backup")
    version = doc.get("format_version")
    if not is_int(version):
        raise ArchiveError("manifest.json: format_version must be an integer")
    if version > BACKUP_FORMAT_VERSION:
        raise ArchiveError(
            f"archive format version {version} is newer than this ivoai reads ({BACKUP_FORMAT_VERSION}); "
            "upgrade ivoai to restore it"
        )
    try:
        return Manifest.model_validate(doc)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ArchiveError(f"manifest.json: {field}: {first['msg']}") from None


def _match_manifest(manifest: Manifest, members: list[Member]) -> None:
    listed = {f.path: f for f in manifest.files}
    if len(listed) != len(manifest.files):
        raise ArchiveError("manifest.json lists a file twice")
    present = {m.name: m for m in members if m.name != MANIFEST_NAME}
    for name, m in present.items():
        entry = listed.get(name)
        if entry is None:
            raise ArchiveError(f"entry {name!r} is not in the manifest")
        if m.size != entry.size:
            raise ArchiveError(f"entry {name!r} is {m.size} bytes but the manifest says {entry.size}")
    missing = sorted(set(listed) - set(present))
    if missing:
        raise ArchiveError(f"manifest lists {missing[0]!r} but the archive does not contain it")
    for entry in manifest.files:
        if len(entry.sha256) != 64 or any(c not in "0123456789abcdef" for c in entry.sha256):
            raise ArchiveError(f"manifest entry {entry.path!r}: sha256 is not a hex SHA-256")


def check_schemas(manifest: Manifest) -> None:
    """Refuse databases newer than this ivoai can open (memory and catalog schema versions)."""
    from ivoai.server.context.catalog import MIGRATIONS as CATALOG_MIGRATIONS
    from ivoai.server.memory._schema import LATEST

    limits = {"memory": LATEST.version, "context_catalog": CATALOG_MIGRATIONS.latest.version}
    for key, latest in limits.items():
        value = manifest.schema_versions.get(key)
        if isinstance(value, int) and value > latest:
            raise ArchiveError(
                f"the archive's {key} schema version {value} is newer than this ivoai supports ({latest}); "
                "upgrade ivoai to restore it"
            )


def copy_member(
    stream: BinaryIO, entry: ManifestFile, sink: BinaryIO | None, on_bytes: Callable[[int], None] | None
) -> None:
    """Stream one member (into `sink`, or nowhere) and check its length and SHA-256 against the manifest.

    Raises:
        ArchiveError: truncated data or a hash mismatch.
    """
    digest = hashlib.sha256()
    left = entry.size
    try:
        while left > 0:
            block = stream.read(min(BACKUP_IO_CHUNK_BYTES, left))
            if not block:
                raise ArchiveError(f"entry {entry.path!r} ends early: the archive is truncated")
            left -= len(block)
            digest.update(block)
            if sink is not None:
                sink.write(block)
            if on_bytes is not None:
                on_bytes(len(block))
    except tarfile.TarError as exc:
        raise ArchiveError(f"entry {entry.path!r}: {exc} (truncated or corrupt archive)") from None
    if digest.hexdigest() != entry.sha256:
        raise ArchiveError(f"entry {entry.path!r}: SHA-256 does not match the manifest (corrupt or altered)")


def verify_archive(path: Path, *, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Check an archive completely (structure, manifest, every hash) without writing anything.

    Raises:
        ArchiveError: the first problem found.
    """
    arch = open_archive(path)
    try:
        total = sum(f.size for f in arch.manifest.files)
        done = 0

        def advance(k: int) -> None:
            nonlocal done
            done += k
            if progress is not None:
                progress(Progress("verify", str(path), done, total))

        for entry, stream in arch.iter_data():
            copy_member(stream, entry, None, advance)
        return summary(arch, ok=True)
    finally:
        arch.close()


def summary(arch: OpenArchive, *, ok: bool | None = None) -> dict[str, Any]:
    m = arch.manifest
    out: dict[str, Any] = {
        "archive": str(arch.path),
        "format_version": m.format_version,
        "ivoai_version": m.ivoai_version,
        "created_at": m.created_at,
        "schema_versions": m.schema_versions,
        "index": m.index,
        "files": [f.model_dump() for f in m.files],
        "bytes": sum(f.size for f in m.files),
    }
    if ok is not None:
        out["ok"] = ok
    return out


def list_backups(directory: Path) -> list[dict[str, Any]]:
    """Archives in `directory` (newest first) with their manifest summary, or the reason one is unreadable."""
    if not directory.exists():
        return []
    dfd = open_private_dir(directory)
    try:
        names = sorted(
            (n for n in os.listdir(dfd) if n.startswith(ARCHIVE_PREFIX) and n.endswith(ARCHIVE_SUFFIX)),
            reverse=True,
        )
        check_stat(os.fstat(dfd), directory, private=True, expect_dir=True)
    finally:
        os.close(dfd)
    out: list[dict[str, Any]] = []
    for name in names:
        path = directory / name
        size = os.stat(path, follow_symlinks=False).st_size
        try:
            arch = open_archive(path)
        except ArchiveError as exc:
            out.append({"archive": str(path), "size": size, "valid": False, "error": exc.message})
            continue
        try:
            s = summary(arch)
        finally:
            arch.close()
        out.append({**s, "size": size, "valid": True})
    return out
