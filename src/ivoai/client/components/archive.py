"""Bounded, safe extraction of a verified archive into a fresh private staging directory.

Only regular files and directories are accepted. Refused, with the member named: absolute paths,
`..`, empty or NUL-bearing names, symlinks, hardlinks, device files, FIFOs, duplicates, more than
`max_entries` members, and more than `max_bytes` of uncompressed content. The byte limit counts what
the decompressor actually produces, so a decompression bomb stops at the limit, not at its end.
tar.gz is read as a stream (one pass, nothing seeks); each member is checked before it is written.
Callers extract into a staging directory that is discarded on any error, so a refused archive
leaves nothing behind. File modes are normalized to 0755 (any execute bit) or 0644.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import IO, BinaryIO

from ivoai.client.components.errors import ArchiveError
from ivoai.common.limits import COMPONENT_EXTRACT_MAX_BYTES, COMPONENT_EXTRACT_MAX_ENTRIES

CHUNK = 1 << 16


class _Budget:
    """Counts decompressed bytes and entries across one archive."""

    def __init__(self, max_bytes: int, max_entries: int) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.bytes = 0
        self.entries = 0

    def entry(self, name: str) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise ArchiveError(f"archive has more than {self.max_entries} members (at {name!r})")

    def spend(self, n: int) -> None:
        self.bytes += n
        if self.bytes > self.max_bytes:
            raise ArchiveError(f"archive expands beyond the limit of {self.max_bytes} bytes; refused")


class _BoundedStream(io.RawIOBase):
    """A reader over a decompressing stream that refuses to produce more than the budget allows."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.produced = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        self.produced += len(data)
        if self.produced > self.limit:
            raise ArchiveError(f"archive expands beyond the limit of {self.limit} bytes; refused")
        buffer[: len(data)] = data
        return len(data)


def check_member_name(name: str) -> list[str]:
    """The components of a member name, refusing absolute paths, `..`, empties and NUL."""
    if not name or "\x00" in name:
        raise ArchiveError(f"archive member with an empty or NUL-bearing name ({name[:80]!r})")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"archive member {name[:120]!r} has an absolute path; refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        raise ArchiveError(f"archive member {name[:120]!r} names no path")
    if any(p == ".." for p in parts):
        raise ArchiveError(f"archive member {name[:120]!r} escapes the archive with `..`; refused")
    if any("\\" in p for p in parts):
        raise ArchiveError(f"archive member {name[:120]!r} contains a backslash; refused")
    return parts


class _Writer:
    """Creates directories and files below a fresh staging root; refuses duplicates."""

    def __init__(self, root: Path, budget: _Budget) -> None:
        self.root = root
        self.budget = budget
        self.seen: set[str] = set()

    @staticmethod
    def _mkdir(path: Path, what: str) -> None:
        """Create `path` (0755) unless it is a directory already; a file there is refused."""
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise ArchiveError(f"{what} is both a file and a directory") from None

    def _parent(self, parts: list[str]) -> Path:
        parent = self.root
        for part in parts[:-1]:
            parent = parent / part
            self._mkdir(parent, f"archive member path {part!r}")
        return parent

    def directory(self, parts: list[str]) -> None:
        self._mkdir(self._parent(parts) / parts[-1], f"archive member {'/'.join(parts)!r}")

    def file(self, parts: list[str], source: IO[bytes], executable: bool) -> None:
        key = "/".join(parts)
        if key in self.seen:
            raise ArchiveError(f"archive member {key!r} appears twice; refused")
        self.seen.add(key)
        path = self._parent(parts) / parts[-1]
        mode = 0o755 if executable else 0o644
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        except FileExistsError:
            raise ArchiveError(f"archive member {key!r} appears twice; refused") from None
        try:
            while block := source.read(CHUNK):
                self.budget.spend(len(block))
                view = memoryview(block)
                while view:
                    view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def _extract_tar(archive: Path, writer: _Writer, budget: _Budget) -> None:
    with open(archive, "rb") as raw:
        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        # The tar reader sees at most max_bytes plus header overhead of decompressed data.
        limit = budget.max_bytes + 1024 * (budget.max_entries + 2)
        bounded = io.BufferedReader(_BoundedStream(gz, limit), CHUNK)  # type: ignore[arg-type]
        try:
            with tarfile.open(fileobj=bounded, mode="r|") as tar:
                for member in tar:
                    budget.entry(member.name)
                    parts = check_member_name(member.name)
                    if member.issym() or member.islnk():
                        raise ArchiveError(f"archive member {member.name[:120]!r} is a link; refused")
                    if member.isdir():
                        writer.directory(parts)
                        continue
                    if not member.isreg():
                        raise ArchiveError(
                            f"archive member {member.name[:120]!r} is a device, FIFO or special file; refused"
                        )
                    if budget.bytes + member.size > budget.max_bytes:
                        raise ArchiveError(
                            f"archive expands beyond the limit of {budget.max_bytes} bytes; refused"
                        )
                    source = tar.extractfile(member)
                    assert source is not None
                    writer.file(parts, source, bool(member.mode & 0o111))
        except (tarfile.TarError, EOFError, gzip.BadGzipFile, OSError, zlib.error) as exc:
            raise ArchiveError(f"archive is corrupt ({type(exc).__name__})") from None


def _extract_zip(archive: Path, writer: _Writer, budget: _Budget) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                budget.entry(info.filename)
                parts = check_member_name(info.filename)
                kind = stat.S_IFMT(info.external_attr >> 16)
                if kind == stat.S_IFLNK:
                    raise ArchiveError(f"archive member {info.filename[:120]!r} is a link; refused")
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise ArchiveError(
                        f"archive member {info.filename[:120]!r} is a device, FIFO or special file; refused"
                    )
                if info.is_dir():
                    writer.directory(parts)
                    continue
                if budget.bytes + info.file_size > budget.max_bytes:
                    raise ArchiveError(
                        f"archive expands beyond the limit of {budget.max_bytes} bytes; refused"
                    )
                with zf.open(info) as source:
                    writer.file(parts, source, bool((info.external_attr >> 16) & 0o111))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"archive is corrupt ({type(exc).__name__})") from None


def extract(
    archive: Path,
    fmt: str,
    dest: Path,
    *,
    max_bytes: int = COMPONENT_EXTRACT_MAX_BYTES,
    max_entries: int = COMPONENT_EXTRACT_MAX_ENTRIES,
) -> None:
    """Extract a verified `tar.gz` or `zip` into the existing, empty directory `dest`.

    Raises:
        ArchiveError: an unsafe or oversized member, or a corrupt archive (dest must then be discarded).
    """
    budget = _Budget(max_bytes, max_entries)
    writer = _Writer(dest, budget)
    if fmt == "tar.gz":
        _extract_tar(archive, writer, budget)
    elif fmt == "zip":
        _extract_zip(archive, writer, budget)
    else:
        raise ArchiveError(f"unsupported archive format {fmt!r}")
