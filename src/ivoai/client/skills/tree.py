"""Isolated, non-executing staging of a source's files, and the tree digest of a stored skill.

Every source kind (local directory, git commit, archive) ends up as calls to `TreeWriter.add_file`
into a private staging directory: regular files only, each at mode 0600 in 0700 directories,
written with O_EXCL|O_NOFOLLOW. A path that is not plain UTF-8, absolute, contains `..`, is too
deep or too long; a symlink, hard link, device, FIFO or socket; a file with an execute bit; a file
over `SKILL_FILE_MAX_BYTES`; more than `SKILL_TREE_MAX_FILES` files or `SKILL_TREE_MAX_BYTES` in
all: each refuses the *whole* source (`StagingRefused`), so nothing partial is ever stored.

The tree digest (`sha256:<hex>`) covers every file's relative path, size and SHA-256, in sorted
order; it names the stored object and proves a rollback restored the exact previous tree.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field

from ivoai.client.skills.index import open_directory
from ivoai.client.skills.model import StagingRefused
from ivoai.common.errors import TooLargeError
from ivoai.common.fsio import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, read_fd_bounded, special_kind
from ivoai.common.lightio import write_all
from ivoai.common.limits import (
    SKILL_FILE_MAX_BYTES,
    SKILL_PATH_MAX_BYTES,
    SKILL_TREE_MAX_BYTES,
    SKILL_TREE_MAX_DEPTH,
    SKILL_TREE_MAX_FILES,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SCRIPT_SUFFIXES = (
    ".sh", ".bash", ".zsh", ".fish", ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".ps1",
    ".bat", ".cmd", ".exe", ".jar", ".so", ".dll", ".dylib",
)  # fmt: skip
SKIPPED_DIRS = frozenset({".git"})  # repository metadata of a local checkout: never part of a skill


def check_rel(rel: str) -> list[str]:
    """The components of a source-relative path, or StagingRefused naming the problem."""
    shown = rel[:120].encode("unicode_escape").decode("ascii")
    if not rel or rel.startswith("/") or "\x00" in rel or "\\" in rel:
        raise StagingRefused(f"path {shown!r} is empty, absolute or has a NUL or backslash")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise StagingRefused(f"path {shown!r} contains an empty, `.` or `..` component (traversal)")
    if len(rel.encode("utf-8")) > SKILL_PATH_MAX_BYTES:
        raise StagingRefused(f"path {shown!r} exceeds {SKILL_PATH_MAX_BYTES} bytes")
    if len(parts) > SKILL_TREE_MAX_DEPTH:
        raise StagingRefused(f"path {shown!r} is deeper than {SKILL_TREE_MAX_DEPTH} levels")
    if not all(p.isprintable() for p in parts):
        raise StagingRefused(f"path {shown!r} has control characters")
    return parts


def decode_rel(raw: bytes) -> str:
    """A path from a tar, zip or git listing: UTF-8 only."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise StagingRefused(f"path {raw[:80]!r} is not UTF-8") from None


def looks_like_script(rel: str, head: bytes) -> bool:
    """A file a model could be asked to run: a shebang or a program's suffix (never executed here)."""
    return head.startswith(b"#!") or rel.lower().endswith(_SCRIPT_SUFFIXES)


@dataclass
class TreeWriter:
    """Writes one source's files below `root` (an existing private directory), enforcing the limits."""

    root: str
    files: int = 0
    total_bytes: int = 0
    scripts: list[str] = field(default_factory=list)
    _dirs: dict[str, int] = field(default_factory=dict)

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def _dir_fd(self, parts: list[str]) -> int:
        key = "/".join(parts)
        if key in self._dirs:
            return self._dirs[key]
        if not parts:
            fd = os.open(self.root, _DIR_FLAGS)
        else:
            parent = self._dir_fd(parts[:-1])
            with contextlib.suppress(FileExistsError):
                os.mkdir(parts[-1], PRIVATE_DIR_MODE, dir_fd=parent)
            try:
                fd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise StagingRefused(
                        f"path {key!r} is both a file and a directory in the source"
                    ) from None
                raise
        self._dirs[key] = fd
        return fd

    def reserve(self, rel: str, size: int, mode: int) -> list[str]:
        """Check one file before its bytes are read: path, execute bit, size, counts."""
        parts = check_rel(rel)
        if mode & 0o111:
            raise StagingRefused(
                f"{rel} is executable (mode {stat.S_IMODE(mode):04o}); skills are never executed, "
                "remove the execute bit"
            )
        if size > SKILL_FILE_MAX_BYTES:
            raise StagingRefused(f"{rel} is {size} bytes; the limit is {SKILL_FILE_MAX_BYTES} bytes per file")
        self.files += 1
        self.total_bytes += size
        if self.files > SKILL_TREE_MAX_FILES:
            raise StagingRefused(f"the source has more than {SKILL_TREE_MAX_FILES} files")
        if self.total_bytes > SKILL_TREE_MAX_BYTES:
            raise StagingRefused(f"the source is larger than {SKILL_TREE_MAX_BYTES} bytes")
        return parts

    def add_file(self, rel: str, data: bytes, mode: int = PRIVATE_FILE_MODE) -> None:
        """Store one regular file's bytes (call `reserve` first when the size is known before reading)."""
        parts = check_rel(rel)
        if len(data) > SKILL_FILE_MAX_BYTES:
            raise StagingRefused(f"{rel} exceeds {SKILL_FILE_MAX_BYTES} bytes")
        parent = self._dir_fd(parts[:-1])
        try:
            fd = os.open(
                parts[-1],
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                PRIVATE_FILE_MODE,
                dir_fd=parent,
            )
        except FileExistsError:
            raise StagingRefused(f"{rel} appears twice in the source") from None
        except IsADirectoryError:
            raise StagingRefused(f"{rel} is both a file and a directory in the source") from None
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        if looks_like_script(rel, data[:2]):
            self.scripts.append(rel)


def copy_local(source: str, writer: TreeWriter, subdir: str | None = None) -> None:
    """Copy a local directory into `writer` without following any link (the source root included).

    Raises:
        StagingRefused: a link, special file, executable, oversize file or tree anywhere in it.
    """
    root = open_directory(source, StagingRefused)
    try:
        if subdir:
            for part in check_rel(subdir):
                root = _enter(root, part, subdir)
        _copy_dir(root, "", 0, writer)
    finally:
        os.close(root)


def _enter(fd: int, name: str, shown: str) -> int:
    """Open `name` below `fd` and close `fd`; on failure `fd` stays open (the caller closes it)."""
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        raise StagingRefused(f"{shown} does not exist in the source") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise StagingRefused(f"{shown} is a symlink or not a directory") from None
        raise
    os.close(fd)
    return child


def _copy_dir(fd: int, rel: str, depth: int, writer: TreeWriter) -> None:
    if depth >= SKILL_TREE_MAX_DEPTH:
        raise StagingRefused(f"{rel} is deeper than {SKILL_TREE_MAX_DEPTH} levels")
    with os.scandir(fd) as it:
        entries = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
    if writer.files + sum(1 for _, is_dir in entries if not is_dir) > SKILL_TREE_MAX_FILES:
        # refused before any of them is read
        raise StagingRefused(f"the source has more than {SKILL_TREE_MAX_FILES} files")
    for name, _ in entries:
        child = f"{rel}/{name}" if rel else name
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise StagingRefused(f"{child} is a symlink (links are never followed or stored)")
        if stat.S_ISDIR(st.st_mode):
            if name in SKIPPED_DIRS:
                continue
            check_rel(child)
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            try:
                _copy_dir(sub, child, depth + 1, writer)
            finally:
                os.close(sub)
            continue
        if not stat.S_ISREG(st.st_mode):
            kind = special_kind(st.st_mode) or "not a regular file"
            raise StagingRefused(f"{child} is a special file ({kind}); only regular files are staged")
        if st.st_nlink > 1:
            raise StagingRefused(f"{child} is a hard link ({st.st_nlink} links); only plain files are staged")
        writer.reserve(child, st.st_size, st.st_mode)
        writer.add_file(child, _read_regular(fd, name, child, st))


def _read_regular(dir_fd: int, name: str, rel: str, before: os.stat_result) -> bytes:
    """Read a file checked with lstat, refusing it if it changed into something else meanwhile."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(st.st_mode):
            raise StagingRefused(f"{rel} changed while it was staged")
        try:
            return read_fd_bounded(fd, SKILL_FILE_MAX_BYTES)
        except TooLargeError:
            raise StagingRefused(
                f"{rel} grew beyond {SKILL_FILE_MAX_BYTES} bytes while it was staged"
            ) from None
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class TreeFacts:
    """Digest and size of a stored tree, and the files that look like programs."""

    digest: str
    files: int
    bytes: int
    scripts: tuple[str, ...]


def tree_facts(path: str) -> TreeFacts:
    """Walk a stored (or staged) tree without following links and compute its digest.

    Raises:
        StagingRefused: the tree holds something other than regular files and directories.
    """
    entries: list[tuple[str, int, str]] = []
    scripts: list[str] = []
    root = os.open(path, _DIR_FLAGS)
    try:
        _hash_dir(root, "", entries, scripts, 0)
    finally:
        os.close(root)
    entries.sort()
    outer = hashlib.sha256()
    for rel, size, digest in entries:
        outer.update(rel.encode("utf-8") + b"\0" + str(size).encode() + b"\0" + digest.encode() + b"\n")
    return TreeFacts(
        "sha256:" + outer.hexdigest(),
        len(entries),
        sum(size for _, size, _ in entries),
        tuple(sorted(scripts)),
    )


def _hash_dir(fd: int, rel: str, entries: list[tuple[str, int, str]], scripts: list[str], depth: int) -> None:
    if depth > SKILL_TREE_MAX_DEPTH:
        raise StagingRefused(f"{rel} is deeper than {SKILL_TREE_MAX_DEPTH} levels")
    with os.scandir(fd) as it:
        names = sorted(e.name for e in it)
    for name in names:
        child = f"{rel}/{name}" if rel else name
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            try:
                _hash_dir(sub, child, entries, scripts, depth + 1)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            try:
                head = b""
                size = 0
                while block := os.read(file_fd, 1 << 20):
                    if not size:
                        head = block[:2]
                    size += len(block)
                    h.update(block)
            finally:
                os.close(file_fd)
            entries.append((child, size, h.hexdigest()))
            if looks_like_script(child, head):
                scripts.append(child)
        else:
            raise StagingRefused(f"{child} is not a regular file or directory")
