"""ArtifactStore writes: validate, stage (payload + meta.json, each fsynced), then commit under the lock.

A write streams into a private staging directory, then takes the store lock, recounts usage from
disk, and publishes the whole directory with one atomic rename into `objects/`. A reader therefore
sees a complete artifact or none; a writer killed at any point leaves only a staging directory,
which no read or list ever looks at and which `gc` removes once no process holds its lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import BinaryIO

from ivoai.client.workingcontext._contracts import (
    REFUSED_SENSITIVITIES,
    ArtifactRef,
    ArtifactState,
    Sensitivity,
    normalize_media_type,
    validate_owner_id,
    validate_payload_type,
)
from ivoai.client.workingcontext._errors import (
    ArtifactCorruptError,
    ArtifactQuotaError,
    ArtifactRefusedError,
    ArtifactUnsafeError,
)
from ivoai.client.workingcontext._secrets import scan_bytes
from ivoai.client.workingcontext._store_files import (
    DIR_FLAGS,
    META,
    OBJECTS,
    PAYLOAD,
    STAGING,
    Entry,
    StoreFiles,
    remove_known,
    utc,
    write_all,
)
from ivoai.client.workingcontext._store_types import SessionUsage, Source, StoreLimits
from ivoai.common.errors import ValidationError
from ivoai.common.fsio import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from ivoai.common.limits import ARTIFACT_IO_CHUNK_BYTES, MIB
from ivoai.common.validate import is_int

# In-memory input at least this large is scanned while another thread writes it (see
# `_scan_while_writing`); below it, starting a thread costs more than the overlap saves.
OVERLAP_MIN_BYTES = 1 * MIB
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class PutRequest:
    """The checked owners, types, sensitivity and TTL of one `put`."""

    session_id: str
    task_id: str | None
    worker_id: str | None
    media_type: str
    payload_type: str
    sensitivity: Sensitivity
    ttl_seconds: int

    @classmethod
    def checked(
        cls,
        limits: StoreLimits,
        *,
        session_id: str,
        task_id: str | None,
        worker_id: str | None,
        media_type: str,
        payload_type: str,
        sensitivity: Sensitivity | str,
        ttl_seconds: int | None,
    ) -> PutRequest:
        """Validate every argument of `put` (in this order: the first bad one is reported).

        Raises:
            ValidationError: an owner ID, media type, payload type, sensitivity or TTL is invalid.
            ArtifactRefusedError: a sensitivity the store never accepts.
        """
        validate_owner_id("session_id", session_id)
        if task_id is not None:
            validate_owner_id("task_id", task_id)
        if worker_id is not None:
            validate_owner_id("worker_id", worker_id)
        media = normalize_media_type(media_type)
        validate_payload_type(payload_type)
        try:
            level = Sensitivity(sensitivity)
        except ValueError:
            allowed = ", ".join(s.value for s in Sensitivity)
            raise ValidationError(
                f"sensitivity {str(sensitivity)[:32]!r} is invalid: one of {allowed}"
            ) from None
        if level in REFUSED_SENSITIVITIES:
            raise ArtifactRefusedError(
                f"sensitivity {level.value} is never accepted by the artifact store "
                "(secret, credential, raw_auth)"
            )
        ttl = limits.ttl_default_seconds if ttl_seconds is None else ttl_seconds
        if not is_int(ttl, 1, limits.ttl_max_seconds):
            raise ValidationError(
                f"ttl_seconds must be an integer from 1 to {limits.ttl_max_seconds} (7 days)"
            )
        return cls(session_id, task_id, worker_id, media, payload_type, level, ttl)

    def ref(self, art_id: str, kept: bytes, original_size: int, digest: str, now: float) -> ArtifactRef:
        """The ref of a scanned, hashed payload stored at `now`."""
        return ArtifactRef(
            id=art_id,
            payload_type=self.payload_type,
            media_type=self.media_type,
            size=len(kept),
            original_size=original_size,
            sha256=digest,
            created_at=utc(now),
            expires_at=utc(now) + timedelta(seconds=self.ttl_seconds),
            session_id=self.session_id,
            task_id=self.task_id,
            worker_id=self.worker_id,
            sensitivity=self.sensitivity,
            state=ArtifactState.TRUNCATED if original_size > len(kept) else ArtifactState.COMPLETE,
        )


def put_kept(files: StoreFiles, source: Source, request: PutRequest) -> tuple[ArtifactRef, bytes]:
    """Store `source` for `request`; return its ref and the stored bytes, durable on return.

    Raises:
        ArtifactRefusedError: detected secret/credential; nothing is kept.
        ArtifactQuotaError: a session or global quota would be exceeded; nothing is kept.
        StoreUnavailableError: the store root is unusable.
    """
    frozen = b""
    original_size = 0
    if isinstance(source, bytes | bytearray | memoryview):
        frozen, original_size = _freeze(source, files.limits.artifact_max_bytes)
        if len(frozen) < OVERLAP_MIN_BYTES:
            # Small in-memory input is checked before anything touches the disk.
            _refuse_credentials(frozen)

    from ivoai.common.ids import random_id

    art_id = random_id("art", 16)
    with _staging(files, art_id) as stage:

        def commit_meta(kept: bytes, original_size: int, digest: str) -> ArtifactRef:
            """Build the ref of the scanned, hashed payload and write + fsync its meta.json."""
            ref = request.ref(art_id, kept, original_size, digest, files.clock())
            _write_meta(stage.fd, ref)
            return ref

        if isinstance(source, bytes | bytearray | memoryview):
            kept = frozen
            if len(kept) < OVERLAP_MIN_BYTES:
                ref = commit_meta(kept, original_size, _write_payload(stage.fd, kept))
            else:
                ref = _scan_while_writing(
                    stage.fd, kept, lambda digest: commit_meta(kept, original_size, digest)
                )
        else:
            kept, original_size, digest = _stream_payload(stage.fd, source, files.limits.artifact_max_bytes)
            _refuse_credentials(kept)
            ref = commit_meta(kept, original_size, digest)
        _publish(files, stage, ref)
        return ref, kept


def _freeze(source: bytes | bytearray | memoryview, limit: int) -> tuple[bytes, int]:
    """(the bytes kept, the original size): a bytes input is used as is, anything else is copied."""
    original_size = memoryview(source).nbytes
    frozen = source[:limit] if isinstance(source, bytes) else bytes(source)[:limit]
    return frozen, original_size


class _Stage:
    """One staging directory while its writer holds it: the parents' fds, its name and its fd."""

    def __init__(self, staging_fd: int, objects_fd: int, name: str) -> None:
        self.staging_fd = staging_fd
        self.objects_fd = objects_fd
        self.name = name  # "" once published (renamed into objects/)
        self.fd = -1


@contextlib.contextmanager
def _staging(files: StoreFiles, art_id: str) -> Iterator[_Stage]:
    """A new private staging directory for `art_id`, flocked; removed on exit unless published."""
    os.close(files.open_root(create=True))
    staging_fd = files.open_sub(STAGING, create=True)
    try:
        objects_fd = files.open_sub(OBJECTS, create=True)
    except BaseException:
        os.close(staging_fd)
        raise
    stage = _Stage(staging_fd, objects_fd, f"{art_id}.{os.urandom(4).hex()}")
    try:
        os.mkdir(stage.name, PRIVATE_DIR_MODE, dir_fd=staging_fd)
        try:
            stage.fd = os.open(stage.name, DIR_FLAGS, dir_fd=staging_fd)
        except BaseException:
            os.rmdir(stage.name, dir_fd=staging_fd)
            raise
        # Held until the write returns: `gc` only removes stages nobody holds (their writer died).
        fcntl.flock(stage.fd, fcntl.LOCK_EX)
        yield stage
    finally:
        if stage.name and stage.fd != -1:
            remove_known(stage.fd)
            with contextlib.suppress(OSError):
                os.rmdir(stage.name, dir_fd=staging_fd)
        if stage.fd != -1:
            os.close(stage.fd)
        os.close(staging_fd)
        os.close(objects_fd)


def _publish(files: StoreFiles, stage: _Stage, ref: ArtifactRef) -> None:
    """Make the staged object durable, then, under the store lock, check quotas and rename it in."""
    os.fsync(stage.fd)
    with files.lock():
        _check_quota(files, stage.objects_fd, ref)
        os.rename(stage.name, ref.id, src_dir_fd=stage.staging_fd, dst_dir_fd=stage.objects_fd)
        stage.name = ""
        # The rename is one metadata operation; fsync of objects/ makes it durable. A staging
        # name that survived a crash would be removed by gc once unlocked.
        os.fsync(stage.objects_fd)


def _refuse_credentials(data: bytes) -> None:
    found = scan_bytes(data)
    if found:
        raise ArtifactRefusedError(
            "content looks like a credential (" + ", ".join(found) + "); it was refused and nothing was kept"
        )


def _write_new_file(stage_fd: int, name: str, data: bytes) -> None:
    """Create `name` (0600, never an existing file or a link) in the staging directory, write, fsync."""
    fd = os.open(name, _NEW_FILE_FLAGS, PRIVATE_FILE_MODE, dir_fd=stage_fd)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_payload(stage_fd: int, kept: bytes) -> str:
    """Write `kept` as `payload` in the staging directory and fsync; return its SHA-256."""
    _write_new_file(stage_fd, PAYLOAD, kept)
    return hashlib.sha256(kept).hexdigest()


def _write_meta(stage_fd: int, ref: ArtifactRef) -> None:
    _write_new_file(stage_fd, META, ref.model_dump_json(indent=2).encode("utf-8") + b"\n")


def _scan_while_writing(stage_fd: int, kept: bytes, commit_meta: Callable[[str], ArtifactRef]) -> ArtifactRef:
    """Scan `kept` for credentials, then hash it, while another thread writes and fsyncs it.

    The copy goes into an *unnamed* file (`O_TMPFILE`) in the staging directory, and is linked
    as `payload` only after the scan found nothing: a refused payload never gets a name and
    vanishes with the descriptor, even if the process dies. The scan (Hyperscan, RE2), hashlib,
    `write` and `fsync` all release the GIL, so on two cores the two chains run at once and the
    fsync's wait for the disk overlaps the hashing. Two threads, not three: a separate hashing
    thread starved the write (the longest chain: write, then the disk's fsync), measured slower.
    Once the scan passed and the digest is known, `commit_meta(digest)` writes and fsyncs the
    meta while the payload's fsync may still be running (one journal commit can serve both);
    the payload is linked only after its own fsync returned. Returns what `commit_meta` built.
    Where the filesystem has no `O_TMPFILE` (or `/proc` is missing) the scan simply runs first.
    """
    try:
        fd = os.open(".", os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC, PRIVATE_FILE_MODE, dir_fd=stage_fd)
    except OSError:
        _refuse_credentials(kept)
        return commit_meta(_write_payload(stage_fd, kept))
    try:
        failures: list[OSError] = []

        def write_and_sync() -> None:
            try:
                os.fchmod(fd, PRIVATE_FILE_MODE)
                write_all(fd, kept)
                os.fsync(fd)
            except OSError as exc:
                failures.append(exc)

        writer = threading.Thread(target=write_and_sync, name="ivoai-artifact-write", daemon=True)
        writer.start()
        try:
            _refuse_credentials(kept)
            ref = commit_meta(hashlib.sha256(kept).hexdigest())
        finally:
            writer.join()
        if failures:
            raise failures[0]
        try:
            os.link(f"/proc/self/fd/{fd}", PAYLOAD, dst_dir_fd=stage_fd, follow_symlinks=True)
        except OSError:  # no /proc (or a linking policy): write the named copy the ordinary way
            _write_payload(stage_fd, kept)
        return ref
    finally:
        os.close(fd)  # an unlinked (refused) copy is freed here


def _stream_payload(stage_fd: int, source: BinaryIO, limit: int) -> tuple[bytes, int, str]:
    """Write up to `limit` bytes into `payload` and fsync; return (kept, original size, sha256)."""
    fd = os.open(PAYLOAD, _NEW_FILE_FLAGS, PRIVATE_FILE_MODE, dir_fd=stage_fd)
    hasher = hashlib.sha256()
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        parts: list[bytes] = []
        stored = 0
        original = 0
        while True:
            block = source.read(ARTIFACT_IO_CHUNK_BYTES)
            if not block:
                break
            original += len(block)
            room = limit - stored
            if room > 0:
                piece = block[:room]
                hasher.update(piece)
                write_all(fd, piece)
                parts.append(piece)
                stored += len(piece)
        kept = b"".join(parts)
        os.fsync(fd)
    finally:
        os.close(fd)
    return kept, original, hasher.hexdigest()


# ---------------------------------------------------------------------- quota (under the store lock)


def _usage_locked(files: StoreFiles, objects_fd: int) -> tuple[int, int, dict[str, SessionUsage]]:
    """Recount committed objects from disk (caller holds the store lock)."""
    total_objects = 0
    total_bytes = 0
    sessions: dict[str, SessionUsage] = {}
    live: set[tuple[str, int]] = set()
    cache = files.scan_cache
    with os.scandir(objects_fd) as it:
        for entry in it:
            key = (entry.name, entry.inode())
            live.add(key)
            cached = cache.get(key)
            if cached is None:
                cached = _scan_entry(files, objects_fd, entry.name)
                if cached.session_id is not None:
                    cache[key] = cached
            total_objects += 1
            total_bytes += cached.size
            if cached.session_id is not None:
                usage = sessions.setdefault(cached.session_id, SessionUsage())
                usage.objects += 1
                usage.bytes += cached.size
    for key in list(cache):
        if key not in live:
            del cache[key]
    return total_objects, total_bytes, sessions


def _scan_entry(files: StoreFiles, objects_fd: int, name: str) -> Entry:
    """Session and size of one object; a damaged one still counts its payload bytes globally."""
    try:
        obj_fd = os.open(name, DIR_FLAGS, dir_fd=objects_fd)
    except OSError:
        return Entry(None, 0)
    try:
        try:
            ref = files.load_meta(obj_fd, name)
            return Entry(ref.session_id, ref.size)
        except (ArtifactCorruptError, ArtifactUnsafeError, OSError):
            try:
                st = os.stat(PAYLOAD, dir_fd=obj_fd, follow_symlinks=False)
            except OSError:
                return Entry(None, 0)
            return Entry(None, st.st_size if stat.S_ISREG(st.st_mode) else 0)
    finally:
        os.close(obj_fd)


def _check_quota(files: StoreFiles, objects_fd: int, ref: ArtifactRef) -> None:
    lim = files.limits
    objects, used, sessions = _usage_locked(files, objects_fd)
    mine = sessions.get(ref.session_id, SessionUsage())
    hint = "; run `ivoai artifacts gc` to remove expired artifacts"
    if mine.objects + 1 > lim.session_max_objects:
        raise ArtifactQuotaError(
            f"session {ref.session_id} already holds {mine.objects} artifacts; the per-session limit is "
            f"{lim.session_max_objects} objects{hint}"
        )
    if mine.bytes + ref.size > lim.session_max_bytes:
        raise ArtifactQuotaError(
            f"storing {ref.size} bytes would bring session {ref.session_id} to "
            f"{mine.bytes + ref.size} bytes; "
            f"the per-session limit is {lim.session_max_bytes} bytes{hint}"
        )
    if objects + 1 > lim.global_max_objects:
        raise ArtifactQuotaError(
            f"the store already holds {objects} artifacts; the global limit is "
            f"{lim.global_max_objects} objects{hint}"
        )
    if used + ref.size > lim.global_max_bytes:
        raise ArtifactQuotaError(
            f"storing {ref.size} bytes would bring the store to {used + ref.size} bytes; "
            "the global limit is "
            f"{lim.global_max_bytes} bytes{hint}"
        )
