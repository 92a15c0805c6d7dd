"""The ArtifactStore's value types: its limits, and what list, stats, range reads and GC return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

from ivoai.client.workingcontext._contracts import ArtifactRef
from ivoai.common.limits import (
    ARTIFACT_MAX_BYTES,
    ARTIFACT_RANGE_MAX_BYTES,
    ARTIFACT_TTL_DEFAULT_SECONDS,
    ARTIFACT_TTL_MAX_SECONDS,
    GLOBAL_STORE_MAX_BYTES,
    GLOBAL_STORE_MAX_OBJECTS,
    LOCK_TIMEOUT_SECONDS,
    SESSION_STORE_MAX_BYTES,
    SESSION_STORE_MAX_OBJECTS,
)

# What `put` accepts: bytes in memory, or a binary stream read up to the artifact limit.
Source = bytes | bytearray | memoryview | BinaryIO


@dataclass(frozen=True)
class StoreLimits:
    """The quotas a store enforces; the defaults are the documented ones (seed 000)."""

    artifact_max_bytes: int = ARTIFACT_MAX_BYTES
    session_max_bytes: int = SESSION_STORE_MAX_BYTES
    session_max_objects: int = SESSION_STORE_MAX_OBJECTS
    global_max_bytes: int = GLOBAL_STORE_MAX_BYTES
    global_max_objects: int = GLOBAL_STORE_MAX_OBJECTS
    ttl_default_seconds: int = ARTIFACT_TTL_DEFAULT_SECONDS
    ttl_max_seconds: int = ARTIFACT_TTL_MAX_SECONDS
    range_max_bytes: int = ARTIFACT_RANGE_MAX_BYTES
    lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS


DEFAULT_LIMITS = StoreLimits()


@dataclass(frozen=True)
class Problem:
    """An entry the store does not trust: kept on disk, reported, never deleted by assumption."""

    name: str
    reason: str
    code: str

    def to_dict(self) -> dict[str, str]:
        """JSON form."""
        return {"name": self.name, "reason": self.reason, "code": self.code}


@dataclass(frozen=True)
class RangeRead:
    """Bytes `[offset, offset + len(data))` of one artifact, with its total size."""

    ref: ArtifactRef
    offset: int
    data: bytes
    eof: bool


@dataclass(frozen=True)
class ListResult:
    """Valid artifacts (oldest first) plus the entries that failed validation."""

    refs: tuple[ArtifactRef, ...]
    problems: tuple[Problem, ...]


@dataclass
class SessionUsage:
    """Bytes and objects one session holds."""

    objects: int = 0
    bytes: int = 0
    expired: int = 0


@dataclass
class StoreStats:
    """Usage against the limits, expired counts, staging leftovers and problems."""

    objects: int
    bytes: int
    expired: int
    sessions: dict[str, SessionUsage]
    staging_entries: int
    staging_bytes: int
    problems: tuple[Problem, ...]
    limits: StoreLimits

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        lim = self.limits
        return {
            "objects": self.objects,
            "bytes": self.bytes,
            "expired": self.expired,
            "staging": {"entries": self.staging_entries, "bytes": self.staging_bytes},
            "sessions": {
                k: {"objects": v.objects, "bytes": v.bytes, "expired": v.expired}
                for k, v in sorted(self.sessions.items())
            },
            "problems": [p.to_dict() for p in self.problems],
            "limits": {
                "artifact_max_bytes": lim.artifact_max_bytes,
                "session_max_bytes": lim.session_max_bytes,
                "session_max_objects": lim.session_max_objects,
                "global_max_bytes": lim.global_max_bytes,
                "global_max_objects": lim.global_max_objects,
                "ttl_default_seconds": lim.ttl_default_seconds,
                "ttl_max_seconds": lim.ttl_max_seconds,
                "range_max_bytes": lim.range_max_bytes,
            },
        }


@dataclass
class GcReport:
    """What one GC pass removed (or would remove, with `dry_run`) and what it kept and why."""

    dry_run: bool
    removed: list[str] = field(default_factory=list)
    removed_bytes: int = 0
    staging_removed: list[str] = field(default_factory=list)
    staging_in_use: int = 0
    kept: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {
            "dry_run": self.dry_run,
            "removed": self.removed,
            "removed_bytes": self.removed_bytes,
            "staging_removed": self.staging_removed,
            "staging_in_use": self.staging_in_use,
            "kept": [p.to_dict() for p in self.kept],
        }
