"""The local ArtifactStore: exact bytes under `$XDG_CACHE_HOME/ivoai/working-context` (seed 000).

`ArtifactStore` is the one API for the CLI, the orchestrator and MCP; it is a thin facade over
the operations, one module each:

- `_store_files`: the layout on disk and the checked ways to open it (shared by the three below);
- `_store_write`: validate, stage (payload + meta.json, each fsynced), commit under the store lock;
- `_store_read`: whole artifacts and ranges, verified against their SHA-256; list and stats;
- `_store_gc`: expired artifacts and abandoned staging directories.

A reader sees a complete artifact or none; a writer killed at any point leaves only a staging
directory, which no read or list ever looks at and which `gc` removes once no process holds its
lock. See docs/working-context.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ivoai.client.workingcontext import _store_gc, _store_read, _store_write
from ivoai.client.workingcontext._contracts import (
    DEFAULT_MEDIA_TYPE,
    DEFAULT_PAYLOAD_TYPE,
    ArtifactRef,
    Sensitivity,
)
from ivoai.client.workingcontext._store_files import StoreFiles
from ivoai.client.workingcontext._store_types import (
    DEFAULT_LIMITS,
    GcReport,
    ListResult,
    Problem,
    RangeRead,
    SessionUsage,
    Source,
    StoreLimits,
    StoreStats,
)
from ivoai.client.workingcontext._store_write import OVERLAP_MIN_BYTES, PutRequest
from ivoai.common.paths import xdg_paths

__all__ = [
    "DEFAULT_LIMITS",
    "OVERLAP_MIN_BYTES",
    "ArtifactStore",
    "GcReport",
    "ListResult",
    "Problem",
    "RangeRead",
    "SessionUsage",
    "Source",
    "StoreLimits",
    "StoreStats",
]


class ArtifactStore:
    """Private, bounded, multi-process-safe storage of exact worker output; the one API for CLI and MCP."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        limits: StoreLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._files = StoreFiles(root if root is not None else xdg_paths().working_context_dir, limits, clock)

    @property
    def root(self) -> Path:
        """The store's directory."""
        return self._files.root

    @property
    def limits(self) -> StoreLimits:
        """The quotas this store enforces."""
        return self._files.limits

    def put(
        self,
        source: Source,
        *,
        session_id: str,
        task_id: str | None = None,
        worker_id: str | None = None,
        media_type: str = DEFAULT_MEDIA_TYPE,
        payload_type: str = DEFAULT_PAYLOAD_TYPE,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        ttl_seconds: int | None = None,
    ) -> ArtifactRef:
        """Store `source` (bytes or a binary stream) and return its ref; see `put_kept`."""
        ref, _kept = self.put_kept(
            source,
            session_id=session_id,
            task_id=task_id,
            worker_id=worker_id,
            media_type=media_type,
            payload_type=payload_type,
            sensitivity=sensitivity,
            ttl_seconds=ttl_seconds,
        )
        return ref

    def put_kept(
        self,
        source: Source,
        *,
        session_id: str,
        task_id: str | None = None,
        worker_id: str | None = None,
        media_type: str = DEFAULT_MEDIA_TYPE,
        payload_type: str = DEFAULT_PAYLOAD_TYPE,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        ttl_seconds: int | None = None,
    ) -> tuple[ArtifactRef, bytes]:
        """Store `source` (bytes or a binary stream); return its ref and the stored bytes, durable on return.

        Input beyond `artifact_max_bytes` is counted but not kept: the ref is `truncated` and
        records the original size.

        Raises:
            ValidationError: an owner ID, media type, payload type, sensitivity or TTL is invalid.
            ArtifactRefusedError: declared or detected secret/credential/raw_auth; nothing is kept.
            ArtifactQuotaError: a session or global quota would be exceeded; nothing is kept.
            StoreUnavailableError: the store root is unusable.
        """
        request = PutRequest.checked(
            self._files.limits,
            session_id=session_id,
            task_id=task_id,
            worker_id=worker_id,
            media_type=media_type,
            payload_type=payload_type,
            sensitivity=sensitivity,
            ttl_seconds=ttl_seconds,
        )
        return _store_write.put_kept(self._files, source, request)

    def describe(self, artifact_id: str) -> ArtifactRef:
        """The ref of one artifact after checking metadata, modes and payload size (no session check).

        Raises:
            InvalidArtifactIdError, ArtifactNotFoundError, ArtifactCorruptError, ArtifactUnsafeError.
        """
        return _store_read.describe(self._files, artifact_id)

    def read(self, artifact_id: str, *, session_id: str) -> tuple[ArtifactRef, bytes]:
        """The exact bytes of one artifact owned by `session_id`, fully revalidated.

        Raises:
            InvalidArtifactIdError: malformed ID. ArtifactNotFoundError: missing or another session's.
            ArtifactExpiredError: TTL passed. ArtifactCorruptError: size or SHA-256 mismatch (files kept).
            ArtifactUnsafeError: a symlink or loose mode in the object.
        """
        return _store_read.read(self._files, artifact_id, session_id)

    def read_range(self, artifact_id: str, *, session_id: str, offset: int, length: int) -> RangeRead:
        """Up to `length` (≤ 1 MiB) bytes from `offset`; the whole payload's integrity is checked first.

        A range that starts inside the artifact but runs past its end is shortened (`eof` is true).

        Raises:
            ArtifactRangeError: negative values, `length` over the limit, or `offset` past the end;
            plus everything `read` raises.
        """
        return _store_read.read_range(self._files, artifact_id, session_id, offset, length)

    def list(self, *, session_id: str | None = None) -> ListResult:
        """Artifacts (optionally of one session), oldest first, and the entries that failed validation."""
        return _store_read.list_refs(self._files, session_id)

    def stats(self) -> StoreStats:
        """Usage per session and in total, expired counts, staging leftovers and problems."""
        return _store_read.stats(self._files)

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Remove expired artifacts and abandoned staging entries; keep and report everything else.

        Deterministic (name order) and explicit: nothing runs in the background.
        """
        return _store_gc.gc(self._files, dry_run=dry_run)
