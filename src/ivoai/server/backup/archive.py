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

from ivoai.server.backup._format import (
    ARCHIVE_PREFIX,
    ARCHIVE_SUFFIX,
    ARCHIVED_ROOTS,
    BACKUP_LOCK,
    CONFIG_MEMBER,
    FORMAT_NAME,
    MANIFEST_NAME,
    ArchiveError,
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
from ivoai.server.backup._read import (
    Member,
    OpenArchive,
    check_schemas,
    copy_member,
    list_backups,
    open_archive,
    summary,
    verify_archive,
)
from ivoai.server.backup._write import (
    EXCLUDED,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SQLITE_MAGIC,
    STAGING_PREFIX,
    create_backup,
    snapshot_sqlite,
)

__all__ = [
    "ARCHIVED_ROOTS",
    "ARCHIVE_PREFIX",
    "ARCHIVE_SUFFIX",
    "BACKUP_LOCK",
    "CONFIG_MEMBER",
    "EXCLUDED",
    "FORMAT_NAME",
    "MANIFEST_NAME",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "SQLITE_MAGIC",
    "STAGING_PREFIX",
    "ArchiveError",
    "BackupError",
    "BackupResult",
    "Kind",
    "Manifest",
    "ManifestFile",
    "Member",
    "OpenArchive",
    "Progress",
    "ProgressCounter",
    "ProgressFn",
    "check_schemas",
    "copy_member",
    "create_backup",
    "default_backup_dir",
    "list_backups",
    "open_archive",
    "snapshot_sqlite",
    "summary",
    "verify_archive",
]
