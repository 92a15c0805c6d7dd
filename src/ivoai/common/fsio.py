"""Safe local I/O: private modes, no-follow walks, atomic writes, containment, locks, bounded reads.

Every file ivoai owns lives below one of its roots (see `paths.XdgPaths`, or a server data
directory). Paths are walked from that root one component at a time with `O_NOFOLLOW` from a
directory descriptor, so a symlink planted anywhere from the root down is refused, while a
user's symlinked home *above* the root is fine.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from ivoai.common import lightio
from ivoai.common.errors import LockTimeoutError, TooLargeError, UnsafePathError
from ivoai.common.limits import LOCK_TIMEOUT_SECONDS

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _relparts(root: Path, path: Path) -> list[str]:
    """Split `path` into components below `root`, refusing anything that escapes it."""
    root_abs = Path(os.path.abspath(root))
    path_abs = Path(os.path.abspath(path))
    try:
        rel = path_abs.relative_to(root_abs)
    except ValueError:
        raise UnsafePathError(f"{path} is outside {root}") from None
    parts = [p for p in rel.parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafePathError(f"{path} escapes {root}")
    return parts


def validate_relative(rel: str) -> list[str]:
    """Return the components of a relative path, refusing absolute paths, `..`, NUL and empties."""
    if not rel or "\x00" in rel:
        raise UnsafePathError(f"invalid relative path {rel!r}")
    if rel.startswith("/"):
        raise UnsafePathError(f"absolute path not allowed: {rel!r}")
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise UnsafePathError(f"path component {part!r} not allowed in {rel!r}")
    return parts


def check_stat(st: os.stat_result, path: Path | str, *, private: bool, expect_dir: bool | None) -> None:
    """Refuse symlinks, a foreign owner, group/world-writable modes and (if private) any group/other bits."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(f"{path} is a symlink; remove it (ivoai never follows links in its own tree)")
    if expect_dir is True and not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{path} is not a directory")
    if expect_dir is False and not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{path} is not a regular file")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{path} is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        raise UnsafePathError(f"{path} has mode {mode:04o} (group/world-writable); fix: chmod go-w {path}")
    if private and mode & 0o077:
        want = "0700" if stat.S_ISDIR(st.st_mode) else "0600"
        raise UnsafePathError(f"{path} has mode {mode:04o}, expected {want}; fix: chmod {want} {path}")


def makedirs_private(path: Path) -> None:
    """Create `path` and every missing ancestor with mode 0700; existing directories are left alone.

    `os.makedirs` gives intermediate directories the umask's default (usually 0755), which made a
    fresh `~/.local/share/ivoai` world-readable when only its `server/` child was asked for. The XDG
    base directory spec asks for 0700 on any directory created this way, too.
    """
    lightio.makedirs_private(os.fspath(path))


def private_umask() -> int:
    """Add 077 to the process umask (so libraries writing below a private root create private files
    and directories too); returns the previous umask for the caller to restore."""
    previous = os.umask(0o077)
    os.umask(previous | 0o077)
    return previous


def _open_dir(path: str | Path, dir_fd: int | None, unsafe: str) -> int:
    """Open a directory without following a link; a link or a non-directory is `UnsafePathError(unsafe)`."""
    try:
        return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePathError(unsafe) from None
        raise


def _open_file(name: str, flags: int, dir_fd: int, unsafe: str, mode: int = 0o777) -> int:
    """Open `name` in `dir_fd` without following a final link; a link is `UnsafePathError(unsafe)`."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(unsafe) from None
        raise


def _verified(fd: int, path: Path, *, expect_dir: bool) -> int:
    """`fd` once `check_stat` accepts it as private (owner, mode, kind); closed when it does not."""
    try:
        check_stat(os.fstat(fd), path, private=True, expect_dir=expect_dir)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_root(root: Path, *, create: bool) -> int:
    if create:
        makedirs_private(root)
    fd = _open_dir(root, None, f"{root} is a symlink or not a directory; replace it with a real directory")
    return _verified(fd, root, expect_dir=True)


def open_private_dir(root: Path, path: Path | None = None, *, create: bool = False) -> int:
    """Open `path` (default: `root`) as a verified private directory; return its descriptor.

    Each component from `root` down is opened with `O_NOFOLLOW` relative to its parent's
    descriptor and checked: a regular directory, owned by us, mode 0700. With `create`, missing
    components are created with mode 0700.

    Raises:
        UnsafePathError: a component is a symlink, foreign-owned, or has a loose mode.
        FileNotFoundError: a component is missing and `create` is false.
    """
    target = root if path is None else path
    parts = _relparts(root, target)
    fd = _open_root(root, create=create)
    current = Path(os.path.abspath(root))
    try:
        for part in parts:
            current = current / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, PRIVATE_DIR_MODE, dir_fd=fd)
            nfd = _open_dir(part, fd, f"{current} is a symlink or not a directory")
            os.close(fd)
            fd = nfd
            check_stat(os.fstat(fd), current, private=True, expect_dir=True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def ensure_private_dir(root: Path, path: Path | None = None) -> Path:
    """Create (0700) and verify `path` below `root`; return it."""
    os.close(open_private_dir(root, path, create=True))
    return root if path is None else path


def open_private_file(
    root: Path, path: Path, flags: int = os.O_RDONLY, *, mode: int = PRIVATE_FILE_MODE
) -> int:
    """Open a private file below `root` without following links; verify owner and 0600 mode.

    Raises:
        UnsafePathError: the file or a parent component is unsafe.
        FileNotFoundError: it does not exist.
    """
    dfd = open_private_dir(root, path.parent)
    try:
        fd = _open_file(path.name, flags, dfd, f"{path} is a symlink; remove it", mode)
    finally:
        os.close(dfd)
    return _verified(fd, path, expect_dir=False)


def special_kind(mode: int) -> str | None:
    """The name of a special file's type ("FIFO", "socket", "device node") for messages, else None."""
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device node"
    return None


def read_fd_bounded(fd: int, max_bytes: int, *, what: str = "file") -> bytes:
    """Read all of `fd` but refuse more than `max_bytes`.

    Raises:
        TooLargeError: the content exceeds the limit.
    """
    chunks: list[bytes] = []
    total = 0
    while True:
        block = os.read(fd, min(1 << 20, max_bytes + 1 - total))
        if not block:
            break
        total += len(block)
        if total > max_bytes:
            raise TooLargeError(f"{what} exceeds the limit of {max_bytes} bytes")
        chunks.append(block)
    return b"".join(chunks)


def read_private_file(root: Path, path: Path, max_bytes: int) -> bytes:
    """Read a verified private file below `root`, bounded to `max_bytes`."""
    fd = open_private_file(root, path)
    try:
        return read_fd_bounded(fd, max_bytes, what=str(path))
    finally:
        os.close(fd)


def file_sha256(path: str | Path, max_bytes: int | None = None) -> str:
    """SHA-256 (hex) of a file read without following a final symlink, at most `max_bytes` bytes.

    Raises:
        TooLargeError: the file is larger than `max_bytes`.
        OSError: it cannot be opened (a final symlink: ELOOP) or read.
    """
    import hashlib  # not at module level: the launch path imports this module

    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        total = 0
        while block := os.read(fd, 1 << 20):
            total += len(block)
            if max_bytes is not None and total > max_bytes:
                raise TooLargeError(f"{path} is larger than {max_bytes} bytes")
            digest.update(block)
    finally:
        os.close(fd)
    return digest.hexdigest()


def read_private_file_or_none(root: Path, path: Path, max_bytes: int) -> bytes | None:
    """Like `read_private_file`, but None when the file (or its directory) does not exist."""
    try:
        return read_private_file(root, path, max_bytes)
    except FileNotFoundError:
        return None


def _copy_into(fd: int, source: Path) -> None:
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        while block := os.read(src, 1 << 20):
            lightio.write_all(fd, block)
    finally:
        os.close(src)


def _lstat_in(dfd: int, name: str) -> os.stat_result | None:
    """`name` in the directory `dfd` as it is (a link is not followed), or None when it is absent."""
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _write_staged(dfd: int, path: Path, data: bytes | Path, mode: int) -> None:
    """Stage `data` next to `path.name` in directory `dfd`, fsync, rename over it, fsync the directory."""
    tmp = f".{path.name}.tmp-{secrets.token_hex(8)}"
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd
        )
        try:
            os.fchmod(fd, mode)
            if isinstance(data, bytes):
                lightio.write_all(fd, data)
            else:
                _copy_into(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        existing = _lstat_in(dfd, path.name)
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise UnsafePathError(f"{path} is a directory")
        os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = ""
        os.fsync(dfd)
    finally:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)


def atomic_write(root: Path, path: Path, data: bytes | Path, *, mode: int = PRIVATE_FILE_MODE) -> None:
    """Replace `path` with `data` atomically: private staging file, fsync, rename, fsync directory.

    `data` is the new content, or a file whose content is copied (opened without following a link).

    The staging file lives in the target directory (same filesystem) under a random name and is
    created with O_EXCL|O_NOFOLLOW at `mode`, so a reader sees the old or the new content, never
    a partial one, even if this process is killed mid-write.
    """
    dfd = open_private_dir(root, path.parent, create=True)
    try:
        _write_staged(dfd, path, data, mode)
    finally:
        os.close(dfd)


def atomic_write_in_dir(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Atomically replace `path` in a directory ivoai does not own (e.g. `.ivoai.toml` at a git root).

    The directory is the user's, so its mode is not checked, but a symlink or directory at `path`
    itself is refused and the same stage/fsync/rename/fsync sequence as `atomic_write` is used.

    Raises:
        UnsafePathError: `path` is a symlink or a directory.
    """
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = _lstat_in(dfd, path.name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(f"{path} is a symlink; remove it (ivoai never writes through links)")
        _write_staged(dfd, path, data, mode)
    finally:
        os.close(dfd)


def remove_stale_staging(root: Path, path: Path) -> int:
    """Delete staging files `.NAME.tmp-*` left next to `path` by a killed writer; return how many.

    Call it only while holding the lock that serializes writers of `path`.
    """
    dfd = open_private_dir(root, path.parent)
    removed = 0
    try:
        prefix = f".{path.name}.tmp-"
        for name in os.listdir(dfd):
            if name.startswith(prefix):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dfd)
                    removed += 1
    finally:
        os.close(dfd)
    return removed


def is_within(root: Path, path: Path) -> bool:
    """True when the resolved `path` is `root` or lies below it (both resolved)."""
    r = os.path.realpath(root)
    p = os.path.realpath(path)
    return os.path.commonpath([r, p]) == r


def open_beneath(root_fd: int, rel: str, flags: int = os.O_RDONLY) -> int:
    """Open `rel` below the directory `root_fd`, one component at a time, never following links.

    Raises:
        UnsafePathError: `rel` is absolute, contains `..`, or a component is a symlink.
    """
    parts = validate_relative(rel)
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            nfd = _open_dir(part, fd, f"{rel}: component {part!r} is a symlink or not a directory")
            os.close(fd)
            fd = nfd
        return _open_file(parts[-1], flags, fd, f"{rel} is a symlink")
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(
    root: Path, lock_path: Path, *, timeout: float = LOCK_TIMEOUT_SECONDS, shared: bool = False
) -> Iterator[None]:
    """Hold an advisory `flock` on `lock_path` (created 0600 below `root`) for the block.

    Raises:
        LockTimeoutError: another process held the lock for longer than `timeout` seconds.
    """
    dfd = open_private_dir(root, lock_path.parent, create=True)
    try:
        fd = os.open(
            lock_path.name,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            PRIVATE_FILE_MODE,
            dir_fd=dfd,
        )
    finally:
        os.close(dfd)
    try:
        check_stat(os.fstat(fd), lock_path, private=True, expect_dir=False)
        op = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, op)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"timed out after {timeout:g}s waiting for lock {lock_path}; "
                        "another ivoai process holds it"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def describe_mode(path: Path) -> dict[str, object]:
    """Facts about one path for doctor: exists, kind, mode, owner check, symlink."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"path": str(path), "exists": False}
    kind = "symlink" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
    return {
        "path": str(path),
        "exists": True,
        "kind": kind,
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
        "owned_by_you": st.st_uid == os.geteuid(),
    }
