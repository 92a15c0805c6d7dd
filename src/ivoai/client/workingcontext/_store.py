"""The local ArtifactStore: exact bytes under `$XDG_CACHE_HOME/ivoai/working-context` (seed 000).

Layout (directories 0700, files 0600, all owned by the user)::

    working-context/
      .lock                    flock: quota accounting, commit and GC are serialised on it
      objects/art_<32 hex>/    one committed artifact
        payload                the exact bytes (at most ARTIFACT_MAX_BYTES)
        meta.json              its ArtifactRef (metadata lives next to its payload)
      staging/art_<hex>.<rnd>/ a write in progress; its writer holds an flock on the directory

A write streams into a private staging directory (payload + meta.json, each fsynced), then takes
the store lock, recounts usage from disk, and publishes the whole directory with one atomic
rename into `objects/`. A reader therefore sees a complete artifact or none; a writer killed at
any point leaves only a staging directory, which no read or list ever looks at and which `gc`
removes once no process holds its lock.

Every read reopens the object from the root without following links and revalidates
containment, owner and modes, metadata, the caller's session, TTL, size and SHA-256.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

import pydantic

from ivoai.client.workingcontext._contracts import (
    DEFAULT_MEDIA_TYPE,
    DEFAULT_PAYLOAD_TYPE,
    REFUSED_SENSITIVITIES,
    ArtifactRef,
    ArtifactState,
    Sensitivity,
    normalize_media_type,
    validate_artifact_id,
    validate_owner_id,
    validate_payload_type,
)
from ivoai.client.workingcontext._errors import (
    ArtifactCorruptError,
    ArtifactExpiredError,
    ArtifactNotFoundError,
    ArtifactQuotaError,
    ArtifactRangeError,
    ArtifactRefusedError,
    ArtifactUnsafeError,
    StoreUnavailableError,
)
from ivoai.client.workingcontext._secrets import scan_bytes
from ivoai.common.errors import UnsafePathError, ValidationError
from ivoai.common.fsio import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, check_stat, file_lock, open_private_dir
from ivoai.common.limits import (
    ARTIFACT_IO_CHUNK_BYTES,
    ARTIFACT_MAX_BYTES,
    ARTIFACT_META_MAX_BYTES,
    ARTIFACT_RANGE_MAX_BYTES,
    ARTIFACT_TTL_DEFAULT_SECONDS,
    ARTIFACT_TTL_MAX_SECONDS,
    GLOBAL_STORE_MAX_BYTES,
    GLOBAL_STORE_MAX_OBJECTS,
    LOCK_TIMEOUT_SECONDS,
    MIB,
    SESSION_STORE_MAX_BYTES,
    SESSION_STORE_MAX_OBJECTS,
)
from ivoai.common.paths import xdg_paths

OBJECTS = "objects"
STAGING = "staging"
LOCK = ".lock"
PAYLOAD = "payload"
META = "meta.json"
_KNOWN_ROOT_ENTRIES = frozenset({OBJECTS, STAGING, LOCK})
_OBJECT_FILES = frozenset({PAYLOAD, META})
# In-memory input at least this large is scanned while another thread writes it (see
# `_scan_while_writing`); below it, starting a thread costs more than the overlap saves.
OVERLAP_MIN_BYTES = 1 * MIB
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_META_SCHEMA = 1

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


@dataclass(frozen=True)
class _Entry:
    """A committed object as the quota scan sees it."""

    session_id: str | None
    size: int


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(int(ts), tz=UTC)


def _unsafe(exc: OSError, what: str) -> ArtifactUnsafeError:
    return ArtifactUnsafeError(f"{what} is a symlink or not a regular entry; the store never follows links")


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _remove_known(dfd: int) -> builtins.list[str]:
    """Unlink payload/meta.json inside `dfd`; return the names of anything else (left in place)."""
    unknown: builtins.list[str] = []
    for name in sorted(os.listdir(dfd)):
        if name in _OBJECT_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dfd)
        else:
            unknown.append(name)
    return unknown


class ArtifactStore:
    """Private, bounded, multi-process-safe storage of exact worker output; the one API for CLI and MCP."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        limits: StoreLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root if root is not None else xdg_paths().working_context_dir
        self.limits = limits
        self._clock = clock
        self._scan_cache: dict[tuple[str, int], _Entry] = {}
        self._verified: dict[tuple[int, int, int, int, int], str] = {}

    # ------------------------------------------------------------------ directories

    def _open_root(self, *, create: bool) -> int:
        try:
            fd = open_private_dir(self.root, create=create)
        except FileNotFoundError:
            raise
        except UnsafePathError as exc:
            raise StoreUnavailableError(f"artifact store unusable: {exc.message}") from None
        except OSError as exc:
            raise StoreUnavailableError(f"artifact store unusable: {os.strerror(exc.errno or 0)}") from None
        return fd

    def _open_sub(self, name: str, *, create: bool) -> int:
        """Open `objects/` or `staging/` below the root (0700, ours, not a link)."""
        try:
            return open_private_dir(self.root, self.root / name, create=create)
        except UnsafePathError as exc:
            raise StoreUnavailableError(f"artifact store unusable: {exc.message}") from None

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        os.close(self._open_root(create=True))
        with file_lock(self.root, self.root / LOCK, timeout=self.limits.lock_timeout_seconds):
            yield

    # ------------------------------------------------------------------ write

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
        ttl = self.limits.ttl_default_seconds if ttl_seconds is None else ttl_seconds
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= self.limits.ttl_max_seconds:
            raise ValidationError(
                f"ttl_seconds must be an integer from 1 to {self.limits.ttl_max_seconds} (7 days)"
            )

        frozen = b""
        original_size = 0
        if isinstance(source, bytes | bytearray | memoryview):
            # A bytes input within the limit is used as is; anything else is copied (frozen).
            original_size = memoryview(source).nbytes
            limit = self.limits.artifact_max_bytes
            frozen = source[:limit] if isinstance(source, bytes) else bytes(source)[:limit]
            if len(frozen) < OVERLAP_MIN_BYTES:
                # Small in-memory input is checked before anything touches the disk.
                self._refuse_credentials(frozen)

        from ivoai.common.ids import random_id

        art_id = random_id("art", 16)
        root_fd = self._open_root(create=True)
        os.close(root_fd)
        staging_fd = self._open_sub(STAGING, create=True)
        try:
            objects_fd = self._open_sub(OBJECTS, create=True)
        except BaseException:
            os.close(staging_fd)
            raise
        stage_name = f"{art_id}.{os.urandom(4).hex()}"
        stage_fd = -1
        try:
            os.mkdir(stage_name, PRIVATE_DIR_MODE, dir_fd=staging_fd)
            try:
                stage_fd = os.open(stage_name, _DIR_FLAGS, dir_fd=staging_fd)
            except BaseException:
                os.rmdir(stage_name, dir_fd=staging_fd)
                raise
            # Held until this call returns: `gc` only removes stages nobody holds (their writer died).
            fcntl.flock(stage_fd, fcntl.LOCK_EX)

            def commit_meta(kept: bytes, original_size: int, digest: str) -> ArtifactRef:
                """Build the ref of the scanned, hashed payload and write + fsync its meta.json."""
                now = self._clock()
                ref = ArtifactRef(
                    id=art_id,
                    payload_type=payload_type,
                    media_type=media,
                    size=len(kept),
                    original_size=original_size,
                    sha256=digest,
                    created_at=_utc(now),
                    expires_at=_utc(now) + timedelta(seconds=ttl),
                    session_id=session_id,
                    task_id=task_id,
                    worker_id=worker_id,
                    sensitivity=level,
                    state=ArtifactState.TRUNCATED if original_size > len(kept) else ArtifactState.COMPLETE,
                )
                self._write_meta(stage_fd, ref)
                return ref

            if isinstance(source, bytes | bytearray | memoryview):
                kept = frozen
                if len(kept) < OVERLAP_MIN_BYTES:
                    ref = commit_meta(kept, original_size, self._write_payload(stage_fd, kept))
                else:
                    ref = self._scan_while_writing(
                        stage_fd, kept, lambda digest: commit_meta(kept, original_size, digest)
                    )
            else:
                kept, original_size, digest = self._stream_payload(stage_fd, source)
                self._refuse_credentials(kept)
                ref = commit_meta(kept, original_size, digest)
            os.fsync(stage_fd)
            with self._lock():
                self._check_quota(objects_fd, ref)
                os.rename(stage_name, art_id, src_dir_fd=staging_fd, dst_dir_fd=objects_fd)
                stage_name = ""
                # The rename is one metadata operation; fsync of objects/ makes it durable. A staging
                # name that survived a crash would be removed by gc once unlocked.
                os.fsync(objects_fd)
            return ref, kept
        finally:
            if stage_name and stage_fd != -1:
                _remove_known(stage_fd)
                with contextlib.suppress(OSError):
                    os.rmdir(stage_name, dir_fd=staging_fd)
            if stage_fd != -1:
                os.close(stage_fd)
            os.close(staging_fd)
            os.close(objects_fd)

    @staticmethod
    def _refuse_credentials(data: bytes) -> None:
        found = scan_bytes(data)
        if found:
            raise ArtifactRefusedError(
                "content looks like a credential ("
                + ", ".join(found)
                + "); it was refused and nothing was kept"
            )

    @staticmethod
    def _write_new_file(stage_fd: int, name: str, data: bytes) -> None:
        """Create `name` (0600, never an existing file or a link) in the staging directory, write, fsync."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     PRIVATE_FILE_MODE, dir_fd=stage_fd)  # fmt: skip
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write_payload(self, stage_fd: int, kept: bytes) -> str:
        """Write `kept` as `payload` in the staging directory and fsync; return its SHA-256."""
        self._write_new_file(stage_fd, PAYLOAD, kept)
        return hashlib.sha256(kept).hexdigest()

    def _scan_while_writing(
        self, stage_fd: int, kept: bytes, commit_meta: Callable[[str], ArtifactRef]
    ) -> ArtifactRef:
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
            self._refuse_credentials(kept)
            return commit_meta(self._write_payload(stage_fd, kept))
        try:
            digests: builtins.list[str] = []
            failures: builtins.list[OSError] = []

            def write_and_sync() -> None:
                try:
                    os.fchmod(fd, PRIVATE_FILE_MODE)
                    _write_all(fd, kept)
                    os.fsync(fd)
                except OSError as exc:
                    failures.append(exc)

            writer = threading.Thread(target=write_and_sync, name="ivoai-artifact-write", daemon=True)
            writer.start()
            try:
                self._refuse_credentials(kept)
                digests.append(hashlib.sha256(kept).hexdigest())
                ref = commit_meta(digests[0])
            finally:
                writer.join()
            if failures:
                raise failures[0]
            try:
                os.link(f"/proc/self/fd/{fd}", PAYLOAD, dst_dir_fd=stage_fd, follow_symlinks=True)
            except OSError:  # no /proc (or a linking policy): write the named copy the ordinary way
                self._write_payload(stage_fd, kept)
            return ref
        finally:
            os.close(fd)  # an unlinked (refused) copy is freed here

    def _stream_payload(self, stage_fd: int, source: BinaryIO) -> tuple[bytes, int, str]:
        """Write up to the artifact limit into `payload` and fsync; return (kept, original size, sha256)."""
        limit = self.limits.artifact_max_bytes
        fd = os.open(PAYLOAD, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     PRIVATE_FILE_MODE, dir_fd=stage_fd)  # fmt: skip
        hasher = hashlib.sha256()
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
            parts: builtins.list[bytes] = []
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
                    _write_all(fd, piece)
                    parts.append(piece)
                    stored += len(piece)
            kept = b"".join(parts)
            os.fsync(fd)
        finally:
            os.close(fd)
        return kept, original, hasher.hexdigest()

    def _write_meta(self, stage_fd: int, ref: ArtifactRef) -> None:
        self._write_new_file(stage_fd, META, ref.model_dump_json(indent=2).encode("utf-8") + b"\n")

    def _usage_locked(self, objects_fd: int) -> tuple[int, int, dict[str, SessionUsage]]:
        """Recount committed objects from disk (caller holds the store lock)."""
        total_objects = 0
        total_bytes = 0
        sessions: dict[str, SessionUsage] = {}
        live: set[tuple[str, int]] = set()
        with os.scandir(objects_fd) as it:
            for entry in it:
                key = (entry.name, entry.inode())
                live.add(key)
                cached = self._scan_cache.get(key)
                if cached is None:
                    cached = self._scan_entry(objects_fd, entry.name)
                    if cached.session_id is not None:
                        self._scan_cache[key] = cached
                total_objects += 1
                total_bytes += cached.size
                if cached.session_id is not None:
                    usage = sessions.setdefault(cached.session_id, SessionUsage())
                    usage.objects += 1
                    usage.bytes += cached.size
        for key in builtins.list(self._scan_cache):
            if key not in live:
                del self._scan_cache[key]
        return total_objects, total_bytes, sessions

    def _scan_entry(self, objects_fd: int, name: str) -> _Entry:
        """Session and size of one object; a damaged one still counts its payload bytes globally."""
        try:
            obj_fd = os.open(name, _DIR_FLAGS, dir_fd=objects_fd)
        except OSError:
            return _Entry(None, 0)
        try:
            try:
                ref = self._load_meta(obj_fd, name)
                return _Entry(ref.session_id, ref.size)
            except (ArtifactCorruptError, ArtifactUnsafeError, OSError):
                try:
                    st = os.stat(PAYLOAD, dir_fd=obj_fd, follow_symlinks=False)
                except OSError:
                    return _Entry(None, 0)
                return _Entry(None, st.st_size if stat.S_ISREG(st.st_mode) else 0)
        finally:
            os.close(obj_fd)

    def _check_quota(self, objects_fd: int, ref: ArtifactRef) -> None:
        lim = self.limits
        objects, used, sessions = self._usage_locked(objects_fd)
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

    # ------------------------------------------------------------------ read

    def _load_meta(self, obj_fd: int, name: str) -> ArtifactRef:
        """Parse and check `meta.json` of the object open at `obj_fd` (no session or TTL check)."""
        check_stat(os.fstat(obj_fd), f"artifact {name}", private=True, expect_dir=True)
        try:
            fd = os.open(META, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=obj_fd)
        except FileNotFoundError:
            raise ArtifactCorruptError(f"artifact {name} has no metadata; kept for inspection") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _unsafe(exc, f"metadata of artifact {name}") from None
            raise
        try:
            try:
                check_stat(os.fstat(fd), f"metadata of artifact {name}", private=True, expect_dir=False)
            except UnsafePathError as exc:
                raise ArtifactUnsafeError(exc.message) from None
            body = os.read(fd, ARTIFACT_META_MAX_BYTES + 1)
        finally:
            os.close(fd)
        if len(body) > ARTIFACT_META_MAX_BYTES:
            raise ArtifactCorruptError(f"metadata of artifact {name} exceeds {ARTIFACT_META_MAX_BYTES} bytes")
        try:
            ref = ArtifactRef.model_validate_json(body)
        except pydantic.ValidationError:
            raise ArtifactCorruptError(
                f"metadata of artifact {name} is invalid; kept for inspection"
            ) from None
        if ref.id != name:
            raise ArtifactCorruptError(
                f"metadata of artifact {name} names another artifact; kept for inspection"
            )
        return ref

    @contextlib.contextmanager
    def _open_object(self, artifact_id: str) -> Iterator[tuple[int, ArtifactRef]]:
        """Open one committed object by ID, never following links; yield (object dir fd, ref)."""
        validate_artifact_id(artifact_id)
        try:
            objects_fd = self._open_sub(OBJECTS, create=False)
        except FileNotFoundError:
            raise ArtifactNotFoundError(f"artifact {artifact_id} not found") from None
        try:
            try:
                obj_fd = os.open(artifact_id, _DIR_FLAGS, dir_fd=objects_fd)
            except FileNotFoundError:
                raise ArtifactNotFoundError(f"artifact {artifact_id} not found") from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _unsafe(exc, f"artifact {artifact_id}") from None
                raise
        finally:
            os.close(objects_fd)
        try:
            try:
                ref = self._load_meta(obj_fd, artifact_id)
            except UnsafePathError as exc:
                if isinstance(exc, ArtifactUnsafeError):
                    raise
                raise ArtifactUnsafeError(exc.message) from None
            yield obj_fd, ref
        finally:
            os.close(obj_fd)

    def _open_payload(self, obj_fd: int, ref: ArtifactRef) -> tuple[int, os.stat_result]:
        try:
            fd = os.open(PAYLOAD, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=obj_fd)
        except FileNotFoundError:
            raise ArtifactCorruptError(f"artifact {ref.id} has no payload; kept for inspection") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _unsafe(exc, f"payload of artifact {ref.id}") from None
            raise
        try:
            st = os.fstat(fd)
            try:
                check_stat(st, f"payload of artifact {ref.id}", private=True, expect_dir=False)
            except UnsafePathError as exc:
                raise ArtifactUnsafeError(exc.message) from None
            if st.st_size != ref.size or st.st_size > self.limits.artifact_max_bytes:
                raise ArtifactCorruptError(
                    f"artifact {ref.id} has {st.st_size} bytes on disk but {ref.size} recorded; "
                    "kept for inspection"
                )
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def _authorize(self, ref: ArtifactRef, session_id: str) -> None:
        validate_owner_id("session_id", session_id)
        from ivoai.common.ids import constant_time_equal

        if not constant_time_equal(ref.session_id, session_id):
            # Same answer as a missing ID: another session's artifacts are not even confirmed to exist.
            raise ArtifactNotFoundError(f"artifact {ref.id} not found")
        if self._clock() >= ref.expires_at.timestamp():
            raise ArtifactExpiredError(
                f"artifact {ref.id} expired at {ref.expires_at.isoformat()}; `ivoai artifacts gc` removes it"
            )

    def _verify(self, fd: int, st: os.stat_result, ref: ArtifactRef) -> None:
        """Check the whole payload's SHA-256 (cached per inode, size, mtime and ctime for this process)."""
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if self._verified.get(key) == ref.sha256:
            return
        hasher = hashlib.sha256()
        pos = 0
        while pos < ref.size:
            block = os.pread(fd, min(ARTIFACT_IO_CHUNK_BYTES, ref.size - pos), pos)
            if not block:
                break
            hasher.update(block)
            pos += len(block)
        self._check_digest(hasher.hexdigest(), ref)
        self._verified[key] = ref.sha256

    @staticmethod
    def _check_digest(digest: str, ref: ArtifactRef) -> None:
        if digest != ref.sha256:
            raise ArtifactCorruptError(
                f"artifact {ref.id} failed its SHA-256 check (content changed after it was written); "
                "kept for inspection"
            )

    def describe(self, artifact_id: str) -> ArtifactRef:
        """The ref of one artifact after checking metadata, modes and payload size (no session check).

        Raises:
            InvalidArtifactIdError, ArtifactNotFoundError, ArtifactCorruptError, ArtifactUnsafeError.
        """
        with self._open_object(artifact_id) as (obj_fd, ref):
            fd, _st = self._open_payload(obj_fd, ref)
            os.close(fd)
            return ref

    def read(self, artifact_id: str, *, session_id: str) -> tuple[ArtifactRef, bytes]:
        """The exact bytes of one artifact owned by `session_id`, fully revalidated.

        Raises:
            InvalidArtifactIdError: malformed ID. ArtifactNotFoundError: missing or another session's.
            ArtifactExpiredError: TTL passed. ArtifactCorruptError: size or SHA-256 mismatch (files kept).
            ArtifactUnsafeError: a symlink or loose mode in the object.
        """
        with self._open_object(artifact_id) as (obj_fd, ref):
            self._authorize(ref, session_id)
            fd, _st = self._open_payload(obj_fd, ref)
            try:
                chunks: builtins.list[bytes] = []
                pos = 0
                while pos < ref.size:
                    block = os.pread(fd, min(ARTIFACT_IO_CHUNK_BYTES, ref.size - pos), pos)
                    if not block:
                        break
                    chunks.append(block)
                    pos += len(block)
            finally:
                os.close(fd)
            data = b"".join(chunks)
            if len(data) != ref.size:
                raise ArtifactCorruptError(
                    f"artifact {ref.id} changed size while being read; kept for inspection"
                )
            self._check_digest(hashlib.sha256(data).hexdigest(), ref)
            return ref, data

    def read_range(self, artifact_id: str, *, session_id: str, offset: int, length: int) -> RangeRead:
        """Up to `length` (≤ 1 MiB) bytes from `offset`; the whole payload's integrity is checked first.

        A range that starts inside the artifact but runs past its end is shortened (`eof` is true).

        Raises:
            ArtifactRangeError: negative values, `length` over the limit, or `offset` past the end;
            plus everything `read` raises.
        """
        lim = self.limits.range_max_bytes
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ArtifactRangeError("offset must be an integer ≥ 0")
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= lim:
            raise ArtifactRangeError(
                f"length must be an integer from 1 to {lim} bytes (the range read limit)"
            )
        with self._open_object(artifact_id) as (obj_fd, ref):
            self._authorize(ref, session_id)
            if offset > ref.size or (offset == ref.size and ref.size > 0):
                raise ArtifactRangeError(
                    f"offset {offset} is beyond the end of artifact {ref.id} ({ref.size} bytes)"
                )
            fd, st = self._open_payload(obj_fd, ref)
            try:
                self._verify(fd, st, ref)
                want = min(length, ref.size - offset)
                data = os.pread(fd, want, offset) if want else b""
            finally:
                os.close(fd)
            if len(data) != want:
                raise ArtifactCorruptError(
                    f"artifact {ref.id} changed size while being read; kept for inspection"
                )
            return RangeRead(ref=ref, offset=offset, data=data, eof=offset + len(data) >= ref.size)

    # ------------------------------------------------------------------ list, stats, gc

    def _walk(self) -> Iterator[tuple[str, ArtifactRef | Problem]]:
        """Each entry of `objects/` in name order: its ref, or the Problem that makes it untrusted."""
        try:
            objects_fd = self._open_sub(OBJECTS, create=False)
        except FileNotFoundError:
            return
        try:
            for name in sorted(os.listdir(objects_fd)):
                try:
                    validate_artifact_id(name)
                except ValidationError:
                    yield (
                        name,
                        Problem(name, "unknown entry in objects/ (not an artifact ID)", "unknown_entry"),
                    )
                    continue
                try:
                    obj_fd = os.open(name, _DIR_FLAGS, dir_fd=objects_fd)
                except FileNotFoundError:
                    continue  # removed by a concurrent gc
                except OSError:
                    yield name, Problem(name, "symlink or not a directory", ArtifactUnsafeError.code)
                    continue
                try:
                    ref = self._load_meta(obj_fd, name)
                    fd, _st = self._open_payload(obj_fd, ref)
                    os.close(fd)
                    extra = sorted(set(os.listdir(obj_fd)) - _OBJECT_FILES)
                    if extra:
                        yield name, Problem(name, f"unexpected files {extra[:4]}", "unknown_entry")
                        continue
                    yield name, ref
                except (ArtifactCorruptError, UnsafePathError) as exc:
                    yield name, Problem(name, exc.message, exc.code)
                finally:
                    os.close(obj_fd)
        finally:
            os.close(objects_fd)

    def list(self, *, session_id: str | None = None) -> ListResult:
        """Artifacts (optionally of one session), oldest first, and the entries that failed validation."""
        if session_id is not None:
            validate_owner_id("session_id", session_id)
        refs: builtins.list[ArtifactRef] = []
        problems: builtins.list[Problem] = []
        for _name, item in self._walk():
            if isinstance(item, Problem):
                problems.append(item)
            elif session_id is None or item.session_id == session_id:
                refs.append(item)
        refs.sort(key=lambda r: (r.created_at, r.id))
        return ListResult(tuple(refs), tuple(problems))

    def _staging_entries(self) -> Iterator[tuple[int, str, int]]:
        """(staging dir fd, name, bytes) of each staging entry; the fd stays valid during the step."""
        try:
            staging_fd = self._open_sub(STAGING, create=False)
        except FileNotFoundError:
            return
        try:
            for name in sorted(os.listdir(staging_fd)):
                size = 0
                with contextlib.suppress(OSError):
                    size = os.stat(f"{name}/{PAYLOAD}", dir_fd=staging_fd, follow_symlinks=False).st_size
                yield staging_fd, name, size
        finally:
            os.close(staging_fd)

    def stats(self) -> StoreStats:
        """Usage per session and in total, expired counts, staging leftovers and problems."""
        now = self._clock()
        sessions: dict[str, SessionUsage] = {}
        objects = used = expired = 0
        problems: builtins.list[Problem] = []
        for _name, item in self._walk():
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
        for _fd, _name, size in self._staging_entries():
            staging_entries += 1
            staging_bytes += size
        problems.extend(self._root_problems())
        return StoreStats(
            objects, used, expired, sessions, staging_entries, staging_bytes, tuple(problems), self.limits
        )

    def _root_problems(self) -> builtins.list[Problem]:
        try:
            root_fd = self._open_root(create=False)
        except FileNotFoundError:
            return []
        try:
            return [
                Problem(n, "unknown entry in the store root", "unknown_entry")
                for n in sorted(os.listdir(root_fd))
                if n not in _KNOWN_ROOT_ENTRIES
            ]
        finally:
            os.close(root_fd)

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Remove expired artifacts and abandoned staging entries; keep and report everything else.

        Deterministic (name order) and explicit: nothing runs in the background.
        """
        report = GcReport(dry_run=dry_run)
        try:
            os.close(self._open_root(create=False))
        except FileNotFoundError:
            return report
        with self._lock():
            now = self._clock()
            expired: builtins.list[ArtifactRef] = []
            for _name, item in self._walk():
                if isinstance(item, Problem):
                    report.kept.append(item)
                elif now >= item.expires_at.timestamp():
                    expired.append(item)
            if expired:
                objects_fd = self._open_sub(OBJECTS, create=False)
                try:
                    for ref in expired:
                        problem = self._integrity_problem(ref)
                        if problem is not None:
                            report.kept.append(problem)
                        elif dry_run or self._remove_dir(objects_fd, ref.id, report):
                            report.removed.append(ref.id)
                            report.removed_bytes += ref.size
                finally:
                    os.close(objects_fd)
            for staging_fd, name, _size in self._staging_entries():
                self._gc_stage(staging_fd, name, report)
            report.kept.extend(self._root_problems())
        return report

    def _integrity_problem(self, ref: ArtifactRef) -> Problem | None:
        """None when the payload still matches its SHA-256; a corrupt one is never deleted by GC."""
        try:
            with self._open_object(ref.id) as (obj_fd, current):
                fd, st = self._open_payload(obj_fd, current)
                try:
                    self._verify(fd, st, current)
                finally:
                    os.close(fd)
        except (ArtifactCorruptError, UnsafePathError, ArtifactNotFoundError) as exc:
            return Problem(ref.id, exc.message, exc.code)
        return None

    def _remove_dir(self, parent_fd: int, name: str, report: GcReport) -> bool:
        try:
            dfd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except OSError:
            return False
        try:
            unknown = _remove_known(dfd)
        finally:
            os.close(dfd)
        if unknown:
            report.kept.append(Problem(name, f"unexpected files {unknown[:4]} kept", "unknown_entry"))
            return False
        os.rmdir(name, dir_fd=parent_fd)
        return True

    def _gc_stage(self, staging_fd: int, name: str, report: GcReport) -> None:
        try:
            dfd = os.open(name, _DIR_FLAGS, dir_fd=staging_fd)
        except OSError:
            report.kept.append(Problem(f"{STAGING}/{name}", "symlink or not a directory", "unknown_entry"))
            return
        try:
            try:
                fcntl.flock(dfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                report.staging_in_use += 1  # a live writer holds it
                return
            if report.dry_run:
                report.staging_removed.append(name)
                return
            unknown = _remove_known(dfd)
        finally:
            os.close(dfd)
        if unknown:
            report.kept.append(
                Problem(f"{STAGING}/{name}", f"unexpected files {unknown[:4]} kept", "unknown_entry")
            )
            return
        os.rmdir(name, dir_fd=staging_fd)
        report.staging_removed.append(name)
