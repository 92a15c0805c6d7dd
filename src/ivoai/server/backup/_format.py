"""The backup archive format: member names, what is left out, the manifest, errors and progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ivoai.common.errors import IvoaiError
from ivoai.server.datadir import ServerDataDir

FORMAT_NAME: Literal["ivoai-server-backup"] = "ivoai-server-backup"
MANIFEST_NAME = "manifest.json"
CONFIG_MEMBER = "config.toml"
ARCHIVED_ROOTS = ("context", "memory")  # directories of the data dir that are archived whole
ARCHIVE_PREFIX = "ivoai-backup-"
ARCHIVE_SUFFIX = ".tar"
BACKUP_LOCK = "backup.lock"  # in DATA/run: one backup or restore at a time per data dir

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


@dataclass
class ProgressCounter:
    """Bytes done so far in one `phase` of `total`, reported to `progress` (if any) after each block."""

    phase: str
    total: int
    progress: ProgressFn | None
    done: int = 0

    def on_bytes(self, path: str) -> Callable[[int], None]:
        """A callback counting the bytes of `path` as they pass."""

        def advance(k: int) -> None:
            self.done += k
            if self.progress is not None:
                self.progress(Progress(self.phase, path, self.done, self.total))

        return advance


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
