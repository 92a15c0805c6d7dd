"""ArtifactStore reads: whole artifacts and ranges (verified against their SHA-256), list and stats.

Every read reopens the object from the root without following links and revalidates containment,
owner and modes, metadata, the caller's session, TTL, size and SHA-256 (see `StoreFiles`).
"""

from __future__ import annotations

import hashlib
import os

from ivoai.client.workingcontext._contracts import ArtifactRef, validate_owner_id
from ivoai.client.workingcontext._errors import (
    ArtifactCorruptError,
    ArtifactExpiredError,
    ArtifactNotFoundError,
    ArtifactRangeError,
)
from ivoai.client.workingcontext._store_files import StoreFiles, blocks, check_digest
from ivoai.client.workingcontext._store_types import ListResult, Problem, RangeRead, SessionUsage, StoreStats
from ivoai.common.validate import is_int


def _changed_size(ref: ArtifactRef) -> ArtifactCorruptError:
    return ArtifactCorruptError(f"artifact {ref.id} changed size while being read; kept for inspection")


def authorize(files: StoreFiles, ref: ArtifactRef, session_id: str) -> None:
    """Raise unless `session_id` owns `ref` and its TTL has not passed."""
    validate_owner_id("session_id", session_id)
    from ivoai.common.ids import constant_time_equal

    if not constant_time_equal(ref.session_id, session_id):
        # Same answer as a missing ID: another session's artifacts are not even confirmed to exist.
        raise ArtifactNotFoundError(f"artifact {ref.id} not found")
    if files.clock() >= ref.expires_at.timestamp():
        raise ArtifactExpiredError(
            f"artifact {ref.id} expired at {ref.expires_at.isoformat()}; `ivoai artifacts gc` removes it"
        )


def describe(files: StoreFiles, artifact_id: str) -> ArtifactRef:
    """The ref of one artifact after checking metadata, modes and payload size (no session check)."""
    with files.open_object(artifact_id) as (obj_fd, ref):
        fd, _st = files.open_payload(obj_fd, ref)
        os.close(fd)
        return ref


def read(files: StoreFiles, artifact_id: str, session_id: str) -> tuple[ArtifactRef, bytes]:
    """The exact bytes of one artifact owned by `session_id`, fully revalidated."""
    with files.open_object(artifact_id) as (obj_fd, ref):
        authorize(files, ref, session_id)
        fd, _st = files.open_payload(obj_fd, ref)
        try:
            data = b"".join(blocks(fd, ref.size))
        finally:
            os.close(fd)
        if len(data) != ref.size:
            raise _changed_size(ref)
        check_digest(hashlib.sha256(data).hexdigest(), ref)
        return ref, data


def read_range(files: StoreFiles, artifact_id: str, session_id: str, offset: int, length: int) -> RangeRead:
    """Up to `length` bytes from `offset` after the whole payload's integrity is checked (cached)."""
    lim = files.limits.range_max_bytes
    if not is_int(offset, 0):
        raise ArtifactRangeError("offset must be an integer ≥ 0")
    if not is_int(length, 1, lim):
        raise ArtifactRangeError(f"length must be an integer from 1 to {lim} bytes (the range read limit)")
    with files.open_object(artifact_id) as (obj_fd, ref):
        authorize(files, ref, session_id)
        if offset > ref.size or (offset == ref.size and ref.size > 0):
            raise ArtifactRangeError(
                f"offset {offset} is beyond the end of artifact {ref.id} ({ref.size} bytes)"
            )
        fd, st = files.open_payload(obj_fd, ref)
        try:
            files.verify(fd, st, ref)
            want = min(length, ref.size - offset)
            data = os.pread(fd, want, offset) if want else b""
        finally:
            os.close(fd)
        if len(data) != want:
            raise _changed_size(ref)
        return RangeRead(ref=ref, offset=offset, data=data, eof=offset + len(data) >= ref.size)


def list_refs(files: StoreFiles, session_id: str | None) -> ListResult:
    """Artifacts (optionally of one session), oldest first, and the entries that failed validation."""
    if session_id is not None:
        validate_owner_id("session_id", session_id)
    refs: list[ArtifactRef] = []
    problems: list[Problem] = []
    for _name, item in files.walk():
        if isinstance(item, Problem):
            problems.append(item)
        elif session_id is None or item.session_id == session_id:
            refs.append(item)
    refs.sort(key=lambda r: (r.created_at, r.id))
    return ListResult(tuple(refs), tuple(problems))


def stats(files: StoreFiles) -> StoreStats:
    """Usage per session and in total, expired counts, staging leftovers and problems."""
    now = files.clock()
    sessions: dict[str, SessionUsage] = {}
    objects = used = expired = 0
    problems: list[Problem] = []
    for _name, item in files.walk():
        if isinstance(item, Problem):
            problems.append(item)
            continue
        usage = sessions.setdefault(item.session_id, SessionUsage())
        usage.objects += 1
        usage.bytes += item.size
        objects += 1
        used += item.size
        if now >= item.expires_at.timestamp():
            usage.expired += 1
            expired += 1
    staging_entries = staging_bytes = 0
    for _fd, _name, size in files.staging_entries():
        staging_entries += 1
        staging_bytes += size
    problems.extend(files.root_problems())
    return StoreStats(
        objects, used, expired, sessions, staging_entries, staging_bytes, tuple(problems), files.limits
    )
