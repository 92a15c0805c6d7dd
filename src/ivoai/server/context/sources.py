"""Connectors' discovery and safe reading: the `filesystem` walker and the `git` enumerator.

The root is opened with O_NOFOLLOW|O_DIRECTORY; every component below it is opened relative to its
parent's descriptor with O_NOFOLLOW, so no symlink (to a file, a directory, outside the root, or in a
loop) is ever followed. Files are opened O_NONBLOCK (a FIFO swapped in cannot hang the reader), checked
with fstat on the opened descriptor (regular file, size) and read through that same descriptor.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from ivoai.common.errors import TooLargeError, UnsafePathError
from ivoai.common.fsio import open_beneath, read_fd_bounded, special_kind
from ivoai.common.limits import (
    CONTEXT_WALK_MAX_DEPTH,
    DOCUMENT_MAX_BYTES,
    GIT_LS_FILES_MAX_BYTES,
    GIT_TIMEOUT_SECONDS,
)
from ivoai.server.context.errors import InvalidConnectorError
from ivoai.server.context.filters import SKIP_DIRS, SKIP_FILES, name_skip_reason, path_skip_reason

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


@dataclass(frozen=True)
class Candidate:
    """A regular file that passed the path rules; its content is read later through `read_candidate`."""

    path: str
    size: int
    mtime: float


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


Discovered = Candidate | Skipped


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink (never followed)"
    special = special_kind(mode)
    return f"{special} (not a regular file)" if special else "not a regular file"


def open_root(path: str) -> int:
    """Open a connector root as a directory without following a symlink at its last component.

    Raises:
        InvalidConnectorError: missing, not a directory, or a symlink.
    """
    try:
        return os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        raise InvalidConnectorError(f"connector path {path} does not exist") from None
    except NotADirectoryError:
        if os.path.islink(path):
            raise InvalidConnectorError(
                f"connector path {path} is a symlink; configure its target instead"
            ) from None
        raise InvalidConnectorError(f"connector path {path} is not a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidConnectorError(
                f"connector path {path} is a symlink; configure its target instead"
            ) from None
        raise InvalidConnectorError(f"cannot open connector path {path}: {exc.strerror}") from None


def _display(name: str) -> str:
    return name.encode("utf-8", "backslashreplace").decode("utf-8").encode("unicode_escape").decode("ascii")


def walk_filesystem(root_fd: int) -> Iterator[Discovered]:
    """Every file below the root, in sorted order, as a Candidate or a Skipped with its reason."""
    yield from _walk(root_fd, "", 0)


def _walk(dir_fd: int, prefix: str, depth: int) -> Iterator[Discovered]:
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError as exc:
        yield Skipped(prefix.rstrip("/") or ".", f"unreadable directory ({exc.strerror})")
        return
    for name in names:
        bad = name_skip_reason(name)
        if bad is not None:
            yield Skipped(prefix + _display(name), bad)
            continue
        rel = prefix + name
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue  # vanished between listing and stat
        if stat.S_ISDIR(st.st_mode):
            if name in SKIP_DIRS:
                continue
            if depth + 1 > CONTEXT_WALK_MAX_DEPTH:
                yield Skipped(rel, f"deeper than {CONTEXT_WALK_MAX_DEPTH} directory levels")
                continue
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                yield Skipped(rel, "directory replaced or unreadable during the walk")
                continue
            try:
                if (os.fstat(sub).st_ino, os.fstat(sub).st_dev) != (st.st_ino, st.st_dev):
                    yield Skipped(rel, "directory replaced during the walk")
                    continue
                yield from _walk(sub, rel + "/", depth + 1)
            finally:
                os.close(sub)
            continue
        if name in SKIP_FILES:
            continue
        if not stat.S_ISREG(st.st_mode):
            yield Skipped(rel, _kind(st.st_mode))
            continue
        reason = path_skip_reason(rel)
        if reason is not None:
            yield Skipped(rel, reason)
        elif st.st_size > DOCUMENT_MAX_BYTES:
            yield Skipped(rel, f"larger than {DOCUMENT_MAX_BYTES} bytes ({st.st_size} bytes)")
        else:
            yield Candidate(rel, st.st_size, st.st_mtime)


def read_candidate(root_fd: int, rel: str, max_bytes: int = DOCUMENT_MAX_BYTES) -> bytes | Skipped:
    """Read one file through a descriptor opened component by component without following links."""
    try:
        fd = open_beneath(root_fd, rel, _FILE_FLAGS)
    except UnsafePathError:
        return Skipped(rel, "symlink (never followed)")
    except FileNotFoundError:
        return Skipped(rel, "vanished before it could be read")
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EWOULDBLOCK):
            return Skipped(rel, "FIFO or socket (not a regular file)")
        return Skipped(rel, f"unreadable ({exc.strerror})")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Skipped(rel, _kind(st.st_mode))
        if st.st_size > max_bytes:
            return Skipped(rel, f"larger than {max_bytes} bytes ({st.st_size} bytes)")
        try:
            return read_fd_bounded(fd, max_bytes, what=rel)
        except TooLargeError:
            return Skipped(rel, f"larger than {max_bytes} bytes (grew while read)")
    finally:
        os.close(fd)


def file_stat(root_fd: int, rel: str) -> os.stat_result | None:
    """lstat of a relative path through descriptors (None when missing or unsafe)."""
    try:
        fd = open_beneath(root_fd, rel, _FILE_FLAGS)
    except (UnsafePathError, OSError):
        return None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------------- git
def git_env() -> dict[str, str]:
    """A minimal environment: no user or system git config, no prompts, no optional locks."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": "/nonexistent",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
    }


GIT_SAFE_ARGS = (
    "-c",
    "core.hooksPath=/dev/null",  # repository hooks never run
    "-c",
    "core.fsmonitor=false",  # a repository-configured fsmonitor program never runs
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.splitIndex=false",
    "-c",
    "protocol.allow=never",
)


def git_ls_files(path: str) -> list[bytes]:
    """Tracked paths of the checkout at `path` (raw bytes, NUL-separated), bounded in size and time.

    Raises:
        InvalidConnectorError: not a git checkout, git missing, too large or too slow.
    """
    argv = ["git", *GIT_SAFE_ARGS, "ls-files", "-z", "--cached"]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=path,
            env=git_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise InvalidConnectorError("git is not installed (needed by git connectors)") from None
    timer = threading.Timer(GIT_TIMEOUT_SECONDS, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        out = bytearray()
        while True:
            block = proc.stdout.read(1 << 16)
            if not block:
                break
            out += block
            if len(out) > GIT_LS_FILES_MAX_BYTES:
                proc.kill()
                raise InvalidConnectorError(f"`git ls-files` output exceeds {GIT_LS_FILES_MAX_BYTES} bytes")
        err = proc.stderr.read(4096)
        rc = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if rc != 0:
        if rc < 0:
            raise InvalidConnectorError(f"`git ls-files` in {path} took longer than {GIT_TIMEOUT_SECONDS:g}s")
        msg = err.decode("utf-8", "replace").strip().splitlines()
        raise InvalidConnectorError(f"{path} is not a usable git checkout: {msg[0] if msg else 'git failed'}")
    return [p for p in bytes(out).split(b"\0") if p]


def walk_git(root_fd: int, path: str) -> Iterator[Discovered]:
    """Tracked files of a checkout, through the same path rules and descriptor checks as the walker."""
    for raw in sorted(git_ls_files(path)):
        try:
            rel = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield Skipped(raw.decode("utf-8", "backslashreplace"), "file name is not valid UTF-8")
            continue
        bad = name_skip_reason(rel)
        if bad is not None:
            yield Skipped(_display(rel), bad)
            continue
        reason = path_skip_reason(rel)
        if reason is not None:
            yield Skipped(rel, reason)
            continue
        st = _lstat_beneath(root_fd, rel)
        if st is None:
            yield Skipped(rel, "missing from the working tree or behind a symlinked directory")
        elif not stat.S_ISREG(st.st_mode):
            yield Skipped(rel, _kind(st.st_mode))
        elif st.st_size > DOCUMENT_MAX_BYTES:
            yield Skipped(rel, f"larger than {DOCUMENT_MAX_BYTES} bytes ({st.st_size} bytes)")
        else:
            yield Candidate(rel, st.st_size, st.st_mtime)


def _lstat_beneath(root_fd: int, rel: str) -> os.stat_result | None:
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    if len(parts) == 1:
        try:
            return os.stat(parts[0], dir_fd=root_fd, follow_symlinks=False)
        except OSError:
            return None
    try:
        parent = open_beneath(root_fd, "/".join(parts[:-1]), os.O_RDONLY | os.O_DIRECTORY)
    except (UnsafePathError, OSError):
        return None
    try:
        return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(parent)
