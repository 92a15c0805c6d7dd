"""The private, bounded spool of captured hook events (import-light: `os`, `fcntl`, `time`).

Layout (`$XDG_STATE_HOME/ivoai/memoryhooks/spool/`, 0700; every file 0600, never followed):

- `active.ndjson`: the segment hook processes append to, one JSON record per line;
- `seg-<ns>-<pid>.ndjson`: sealed segments, named so that sorting by name is oldest first;
- `seg-….ndjson.off`: how many bytes of a sealed segment were already acknowledged by the server;
- `evicted.json`: events dropped by eviction (counts only), reported by `ivoai memory hooks status`;
- `.lock`: the flock every append, seal and eviction holds.

Appends hold an exclusive flock, so lines of concurrent hook processes never interleave. A process
killed mid-append (SIGKILL, the budget alarm) leaves at most one torn line at the end of
`active.ndjson`; the next append first terminates it with a newline, and readers skip any line that
is not a complete JSON record. flock locks die with their process, so a kill never wedges the spool.

Bounds: when `active.ndjson` would grow beyond one segment (`MEMORY_HOOK_SPOOL_SEGMENT_BYTES`) it is
sealed; when the sealed segments exceed the spool bound (`MEMORY_HOOK_SPOOL_MAX_BYTES`) the oldest
are deleted and their unsent events counted in `evicted.json` (oldest-first eviction, reported).
"""

from __future__ import annotations

import os
import time

from ivoai.client.memoryhooks.locations import HOOKS_DIR, SPOOL_DIR
from ivoai.common.lightio import open_private_dirs, write_all, write_atomic
from ivoai.common.limits import MEMORY_HOOK_SPOOL_MAX_BYTES, MEMORY_HOOK_SPOOL_SEGMENT_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ACTIVE = "active.ndjson"
LOCK = ".lock"
EVICTED = "evicted.json"
SEG_PREFIX = "seg-"
SEG_SUFFIX = ".ndjson"
OFF_SUFFIX = ".off"

_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def open_spool(state_root: str) -> int:
    """The spool directory's fd (created 0700 on the way; unsafe directories refused).

    Raises:
        UnsafePathError: a directory on the way is a symlink, foreign-owned or not 0700.
    """
    return open_private_dirs(state_root, HOOKS_DIR, SPOOL_DIR)


class _Locked:
    """The spool's exclusive flock for the `with` block (released on close, and by the kernel on death)."""

    __slots__ = ("dir_fd", "fd")

    def __init__(self, dir_fd: int) -> None:
        self.dir_fd = dir_fd
        self.fd = -1

    def __enter__(self) -> _Locked:
        import fcntl

        self.fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | _FILE_FLAGS, 0o600, dir_fd=self.dir_fd)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def segments(dir_fd: int) -> list[str]:
    """Sealed segment names, oldest first."""
    return sorted(n for n in os.listdir(dir_fd) if n.startswith(SEG_PREFIX) and n.endswith(SEG_SUFFIX))


def _size(dir_fd: int, name: str) -> int:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


def _seal(dir_fd: int) -> str | None:
    """Rename a non-empty active segment to a sealed one (caller holds the lock); its new name or None."""
    if _size(dir_fd, ACTIVE) == 0:
        return None
    name = f"{SEG_PREFIX}{time.time_ns():020d}-{os.getpid()}{SEG_SUFFIX}"
    os.rename(ACTIVE, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    return name


def read_offset(dir_fd: int, name: str) -> int:
    try:
        fd = os.open(name + OFF_SUFFIX, os.O_RDONLY | _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return 0
    try:
        parts = os.read(fd, 64).decode("ascii", "replace").split()
    finally:
        os.close(fd)
    if len(parts) == 2 and parts[0] == parts[1] and parts[0].isdigit():
        return int(parts[0])
    return 0


def _pending_lines(dir_fd: int, name: str) -> int:
    """Complete lines after the acknowledged offset of a segment (0 when it vanished)."""
    try:
        fd = os.open(name, os.O_RDONLY | _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return 0
    try:
        data = b""
        while chunk := os.read(fd, 1 << 20):
            data += chunk
    finally:
        os.close(fd)
    offset = read_offset(dir_fd, name) if name != ACTIVE else 0
    tail = data[offset:]
    return tail.count(b"\n") + (1 if tail and not tail.endswith(b"\n") else 0)


def _evict(dir_fd: int, budget: int) -> tuple[int, int, int]:
    """Delete the oldest sealed segments until they fit `budget` bytes; (events, bytes, segments) dropped."""
    names = segments(dir_fd)
    sizes = {n: _size(dir_fd, n) for n in names}
    total = sum(sizes.values())
    events = dropped_bytes = count = 0
    while names and total > budget:
        oldest = names.pop(0)
        events += _pending_lines(dir_fd, oldest)
        for victim in (oldest, oldest + OFF_SUFFIX):
            try:  # noqa: SIM105 - contextlib is not loaded on the hook path
                os.unlink(victim, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
        total -= sizes[oldest]
        dropped_bytes += sizes[oldest]
        count += 1
    return events, dropped_bytes, count


def _record_eviction(dir_fd: int, events: int, dropped_bytes: int, count: int) -> None:
    import json  # only when something was evicted

    current = read_evictions(dir_fd)
    current["events"] = int(current.get("events", 0)) + events
    current["bytes"] = int(current.get("bytes", 0)) + dropped_bytes
    current["segments"] = int(current.get("segments", 0)) + count
    current["last_at"] = time.time()
    write_atomic(dir_fd, EVICTED, json.dumps(current, sort_keys=True).encode())


def read_json_object(fd: int, max_bytes: int) -> dict[str, Any]:
    """The JSON object in the open file `fd` (closed here); {} when it is not one (never blocks a hook)."""
    import json

    try:
        raw = os.read(fd, max_bytes)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def read_evictions(dir_fd: int) -> dict[str, float]:
    """`evicted.json` as a dict (empty when nothing was ever evicted or the file is unreadable)."""
    try:
        fd = os.open(EVICTED, os.O_RDONLY | _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return {}
    return {k: v for k, v in read_json_object(fd, 4096).items() if isinstance(v, int | float)}


def append(
    state_root: str,
    line: bytes,
    *,
    max_bytes: int = MEMORY_HOOK_SPOOL_MAX_BYTES,
    segment_bytes: int = MEMORY_HOOK_SPOOL_SEGMENT_BYTES,
) -> int:
    """Append one record line (ending in a newline) under the lock; return the events evicted for room.

    Raises:
        UnsafePathError: an unsafe spool directory. OSError: the disk is full or unwritable.
    """
    dir_fd = open_spool(state_root)
    try:
        with _Locked(dir_fd):
            evicted = 0
            fd = os.open(ACTIVE, os.O_RDWR | os.O_APPEND | os.O_CREAT | _FILE_FLAGS, 0o600, dir_fd=dir_fd)
            try:
                size = os.fstat(fd).st_size
                prefix = b""
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    prefix = b"\n"  # a writer was killed mid-line: end its torn line first
                if size and size + len(prefix) + len(line) > segment_bytes:
                    os.close(fd)
                    fd = -1
                    _seal(dir_fd)
                    events, dropped, count = _evict(dir_fd, max(0, max_bytes - segment_bytes))
                    if count:
                        _record_eviction(dir_fd, events, dropped, count)
                        evicted = events
                    fd = os.open(
                        ACTIVE, os.O_RDWR | os.O_APPEND | os.O_CREAT | _FILE_FLAGS, 0o600, dir_fd=dir_fd
                    )
                    prefix = b""
                write_all(fd, prefix + line)
            finally:
                if fd >= 0:
                    os.close(fd)
            return evicted
    finally:
        os.close(dir_fd)


# ---- the flusher's side (it holds the flush lock, so it is the only reader) ----


def seal_active(dir_fd: int) -> list[str]:
    """Seal whatever was appended so far and return every sealed segment, oldest first."""
    with _Locked(dir_fd):
        _seal(dir_fd)
        return segments(dir_fd)


def read_segment(dir_fd: int, name: str) -> bytes | None:
    """A sealed segment's bytes (None when eviction removed it meanwhile)."""
    try:
        fd = os.open(name, os.O_RDONLY | _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def set_offset(dir_fd: int, name: str, offset: int) -> None:
    """Record that the first `offset` bytes of segment `name` were acknowledged.

    Overwritten in place (fixed width, the value twice; no rename, no fsync): a torn write leaves two
    different values, which `read_offset` takes as 0, and resending acknowledged events is harmless
    (idempotency keys); a value that is not a line boundary of the segment is ignored the same way.
    """
    fd = os.open(name + OFF_SUFFIX, os.O_WRONLY | os.O_CREAT | _FILE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        os.pwrite(fd, f"{offset:020d} {offset:020d}\n".encode(), 0)
    finally:
        os.close(fd)


def drop_segment(dir_fd: int, name: str) -> None:
    """Remove a fully acknowledged segment and its offset file."""
    for victim in (name, name + OFF_SUFFIX):
        try:  # noqa: SIM105
            os.unlink(victim, dir_fd=dir_fd)
        except FileNotFoundError:
            pass


def stats(state_root: str) -> dict[str, object]:
    """Spool size for `status`: bytes, segments, pending events, evictions (no lock; a snapshot)."""
    try:
        dir_fd = open_spool(state_root)
    except OSError:
        return {"bytes": 0, "segments": 0, "pending_events": 0, "evicted_events": 0, "evicted_at": None}
    try:
        names = segments(dir_fd)
        total = sum(_size(dir_fd, n) for n in names) + _size(dir_fd, ACTIVE)
        pending = sum(_pending_lines(dir_fd, n) for n in [*names, ACTIVE])
        evicted = read_evictions(dir_fd)
    finally:
        os.close(dir_fd)
    return {
        "bytes": total,
        "segments": len(names) + (1 if total and _active_nonempty(state_root) else 0),
        "pending_events": pending,
        "evicted_events": int(evicted.get("events", 0)),
        "evicted_at": evicted.get("last_at"),
    }


def _active_nonempty(state_root: str) -> bool:
    dir_fd = open_spool(state_root)
    try:
        return _size(dir_fd, ACTIVE) > 0
    finally:
        os.close(dir_fd)


def is_empty(state_root: str) -> bool:
    """True when nothing is waiting (cheap: a directory listing and a stat)."""
    try:
        dir_fd = open_spool(state_root)
    except OSError:
        return True
    try:
        return not segments(dir_fd) and _size(dir_fd, ACTIVE) == 0
    finally:
        os.close(dir_fd)
