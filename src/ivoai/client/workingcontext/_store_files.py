"""The ArtifactStore on disk: its layout, and the checked ways in which write, read and GC open it.

Layout (directories 0700, files 0600, all owned by the user)::

    working-context/
      .lock                    flock: quota accounting, commit and GC are serialised on it
      objects/art_<32 hex>/    one committed artifact
        payload                the exact bytes (at most ARTIFACT_MAX_BYTES)
        meta.json              its ArtifactRef (metadata lives next to its payload)
      staging/art_<hex>.<rnd>/ a write in progress; its writer holds an flock on the directory

Every open goes from the root one component at a time without following links and revalidates
containment, owner and modes; `StoreFiles` is the one place that knows how.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pydantic

from ivoai.client.workingcontext._contracts import ArtifactRef, validate_artifact_id
from ivoai.client.workingcontext._errors import (
    ArtifactCorruptError,
    ArtifactNotFoundError,
    ArtifactUnsafeError,
    StoreUnavailableError,
)
from ivoai.client.workingcontext._store_types import Problem, StoreLimits
from ivoai.common.errors import UnsafePathError, ValidationError
from ivoai.common.fsio import check_stat, file_lock, open_private_dir
from ivoai.common.limits import ARTIFACT_IO_CHUNK_BYTES, ARTIFACT_META_MAX_BYTES

OBJECTS = "objects"
STAGING = "staging"
LOCK = ".lock"
PAYLOAD = "payload"
META = "meta.json"
KNOWN_ROOT_ENTRIES = frozenset({OBJECTS, STAGING, LOCK})
OBJECT_FILES = frozenset({PAYLOAD, META})
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_VerifiedKey = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Entry:
    """A committed object as the quota scan sees it."""

    session_id: str | None
    size: int


def utc(ts: float) -> datetime:
    """A POSIX timestamp as an aware UTC datetime, whole seconds."""
    return datetime.fromtimestamp(int(ts), tz=UTC)


def unsafe(what: str) -> ArtifactUnsafeError:
    """The error for a link (or other non-regular entry) where the store expects its own entry."""
    return ArtifactUnsafeError(f"{what} is a symlink or not a regular entry; the store never follows links")


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of `data` to `fd` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def remove_known(dfd: int) -> list[str]:
    """Unlink payload/meta.json inside `dfd`; return the names of anything else (left in place)."""
    unknown: list[str] = []
    for name in sorted(os.listdir(dfd)):
        if name in OBJECT_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dfd)
        else:
            unknown.append(name)
    return unknown


def check_digest(digest: str, ref: ArtifactRef) -> None:
    """Raise unless `digest` is the SHA-256 `ref` records.

    Raises:
        ArtifactCorruptError: the payload changed after it was written.
    """
    if digest != ref.sha256:
        raise ArtifactCorruptError(
            f"artifact {ref.id} failed its SHA-256 check (content changed after it was written); "
            "kept for inspection"
        )


def blocks(fd: int, size: int) -> Iterator[bytes]:
    """The first `size` bytes of `fd` in I/O-sized blocks (fewer at a premature end of file)."""
    pos = 0
    while pos < size:
        block = os.pread(fd, min(ARTIFACT_IO_CHUNK_BYTES, size - pos), pos)
        if not block:
            return
        yield block
        pos += len(block)


def _open_member(obj_fd: int, name: str, what: str, missing: str) -> tuple[int, os.stat_result]:
    """Open `payload` or `meta.json` of an object read-only: never a link, ours, 0600.

    Raises:
        ArtifactCorruptError: it is missing. ArtifactUnsafeError: a link, foreign-owned or loose mode.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=obj_fd)
    except FileNotFoundError:
        raise ArtifactCorruptError(f"{missing}; kept for inspection") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise unsafe(what) from None
        raise
    try:
        st = os.fstat(fd)
        try:
            check_stat(st, what, private=True, expect_dir=False)
        except UnsafePathError as exc:
            raise ArtifactUnsafeError(exc.message) from None
    except BaseException:
        os.close(fd)
        raise
    return fd, st


@dataclass
class StoreFiles:
    """One store root with its limits and clock, plus what this process has learnt about it."""

    root: Path
    limits: StoreLimits
    clock: Callable[[], float]
    # (name, inode) -> session and size of a committed object, so a quota recount reads each once
    scan_cache: dict[tuple[str, int], Entry] = field(default_factory=dict)
    # (device, inode, size, mtime, ctime) -> the SHA-256 that payload was verified to have
    verified: dict[_VerifiedKey, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ directories

    def open_root(self, *, create: bool) -> int:
        """Open the store root (0700, ours, not a link).

        Raises:
            FileNotFoundError: it does not exist and `create` is false.
            StoreUnavailableError: it is unusable.
        """
        try:
            fd = open_private_dir(self.root, create=create)
        except FileNotFoundError:
            raise
        except UnsafePathError as exc:
            raise StoreUnavailableError(f"artifact store unusable: {exc.message}") from None
        except OSError as exc:
            raise StoreUnavailableError(f"artifact store unusable: {os.strerror(exc.errno or 0)}") from None
        return fd

    def open_sub(self, name: str, *, create: bool) -> int:
        """Open `objects/` or `staging/` below the root (0700, ours, not a link)."""
        try:
            return open_private_dir(self.root, self.root / name, create=create)
        except UnsafePathError as exc:
            raise StoreUnavailableError(f"artifact store unusable: {exc.message}") from None

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """The store lock (quota recount + commit, and GC), across processes."""
        os.close(self.open_root(create=True))
        with file_lock(self.root, self.root / LOCK, timeout=self.limits.lock_timeout_seconds):
            yield

    # ------------------------------------------------------------------ one object

    def load_meta(self, obj_fd: int, name: str) -> ArtifactRef:
        """Parse and check `meta.json` of the object open at `obj_fd` (no session or TTL check)."""
        check_stat(os.fstat(obj_fd), f"artifact {name}", private=True, expect_dir=True)
        what = f"metadata of artifact {name}"
        fd, _st = _open_member(obj_fd, META, what, f"artifact {name} has no metadata")
        try:
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
    def open_object(self, artifact_id: str) -> Iterator[tuple[int, ArtifactRef]]:
        """Open one committed object by ID, never following links; yield (object dir fd, ref)."""
        validate_artifact_id(artifact_id)
        try:
            objects_fd = self.open_sub(OBJECTS, create=False)
        except FileNotFoundError:
            raise ArtifactNotFoundError(f"artifact {artifact_id} not found") from None
        try:
            try:
                obj_fd = os.open(artifact_id, DIR_FLAGS, dir_fd=objects_fd)
            except FileNotFoundError:
                raise ArtifactNotFoundError(f"artifact {artifact_id} not found") from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise unsafe(f"artifact {artifact_id}") from None
                raise
        finally:
            os.close(objects_fd)
        try:
            try:
                ref = self.load_meta(obj_fd, artifact_id)
            except UnsafePathError as exc:
                if isinstance(exc, ArtifactUnsafeError):
                    raise
                raise ArtifactUnsafeError(exc.message) from None
            yield obj_fd, ref
        finally:
            os.close(obj_fd)

    def open_payload(self, obj_fd: int, ref: ArtifactRef) -> tuple[int, os.stat_result]:
        """Open the object's payload read-only after checking its modes and recorded size."""
        what = f"payload of artifact {ref.id}"
        fd, st = _open_member(obj_fd, PAYLOAD, what, f"artifact {ref.id} has no payload")
        if st.st_size != ref.size or st.st_size > self.limits.artifact_max_bytes:
            os.close(fd)
            raise ArtifactCorruptError(
                f"artifact {ref.id} has {st.st_size} bytes on disk but {ref.size} recorded; "
                "kept for inspection"
            )
        return fd, st

    def verify(self, fd: int, st: os.stat_result, ref: ArtifactRef) -> None:
        """Check the whole payload's SHA-256 (cached per inode, size, mtime and ctime for this process)."""
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if self.verified.get(key) == ref.sha256:
            return
        hasher = hashlib.sha256()
        for block in blocks(fd, ref.size):
            hasher.update(block)
        check_digest(hasher.hexdigest(), ref)
        self.verified[key] = ref.sha256

    # ------------------------------------------------------------------ every entry

    def _entries(self, sub: str) -> Iterator[tuple[int, str]]:
        """(directory fd, name) of each entry of `sub` in name order; none while `sub` does not exist."""
        try:
            dir_fd = self.open_sub(sub, create=False)
        except FileNotFoundError:
            return
        try:
            for name in sorted(os.listdir(dir_fd)):
                yield dir_fd, name
        finally:
            os.close(dir_fd)

    def walk(self) -> Iterator[tuple[str, ArtifactRef | Problem]]:
        """Each entry of `objects/` in name order: its ref, or the Problem that makes it untrusted."""
        for objects_fd, name in self._entries(OBJECTS):
            try:
                validate_artifact_id(name)
            except ValidationError:
                yield name, Problem(name, "unknown entry in objects/ (not an artifact ID)", "unknown_entry")
                continue
            try:
                obj_fd = os.open(name, DIR_FLAGS, dir_fd=objects_fd)
            except FileNotFoundError:
                continue  # removed by a concurrent gc
            except OSError:
                yield name, Problem(name, "symlink or not a directory", ArtifactUnsafeError.code)
                continue
            try:
                yield name, self._checked_entry(obj_fd, name)
            finally:
                os.close(obj_fd)

    def _checked_entry(self, obj_fd: int, name: str) -> ArtifactRef | Problem:
        """The ref of the object open at `obj_fd` after checking metadata, modes, size and file names."""
        try:
            ref = self.load_meta(obj_fd, name)
            fd, _st = self.open_payload(obj_fd, ref)
            os.close(fd)
            extra = sorted(set(os.listdir(obj_fd)) - OBJECT_FILES)
            if extra:
                return Problem(name, f"unexpected files {extra[:4]}", "unknown_entry")
            return ref
        except (ArtifactCorruptError, UnsafePathError) as exc:
            return Problem(name, exc.message, exc.code)

    def staging_entries(self) -> Iterator[tuple[int, str, int]]:
        """(staging dir fd, name, bytes) of each staging entry; the fd stays valid during the step."""
        for staging_fd, name in self._entries(STAGING):
            size = 0
            with contextlib.suppress(OSError):
                size = os.stat(f"{name}/{PAYLOAD}", dir_fd=staging_fd, follow_symlinks=False).st_size
            yield staging_fd, name, size

    def root_problems(self) -> list[Problem]:
        """Entries of the root the store does not know (kept and reported, never removed)."""
        try:
            root_fd = self.open_root(create=False)
        except FileNotFoundError:
            return []
        try:
            return [
                Problem(n, "unknown entry in the store root", "unknown_entry")
                for n in sorted(os.listdir(root_fd))
                if n not in KNOWN_ROOT_ENTRIES
            ]
        finally:
            os.close(root_fd)
