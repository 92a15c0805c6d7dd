"""Archive sources: a bounded fetch verified by SHA-256, then a member-by-member staging (no extractall).

The archive is a local file (opened without following links) or an `https://` URL (plain `http://`
only to a loopback host). The bytes are hashed while they are copied into the private staging
directory, and nothing is parsed unless the SHA-256 equals the one the user pinned. Redirects are
followed only to https (a release asset moves to a CDN; the digest, not the host, is the trust
anchor); credentials in a URL are refused. tar (plain, gz, bz2, xz) and zip are read one member at
a time: links, devices, FIFOs, sparse or encrypted members, executables, traversal and oversize
members refuse the whole archive.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tarfile
import time
import zipfile
from collections.abc import Iterator
from urllib.parse import urljoin, urlsplit

from ivoai.client.skills.model import StagingRefused
from ivoai.client.skills.tree import TreeWriter, check_rel
from ivoai.common.fsio import PRIVATE_FILE_MODE
from ivoai.common.lightio import write_all
from ivoai.common.limits import (
    SKILL_ARCHIVE_MAX_BYTES,
    SKILL_ARCHIVE_MAX_MEMBERS,
    SKILL_FETCH_MAX_REDIRECTS,
    SKILL_FETCH_TIMEOUT_SECONDS,
)
from ivoai.common.net import is_loopback_host

_SHA256 = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")


def normalize_sha256(value: str) -> str:
    """`HEX` or `sha256:HEX` -> lower-case hex.

    Raises:
        StagingRefused: not 64 hex digits.
    """
    match = _SHA256.fullmatch(value.strip())
    if not match:
        raise StagingRefused("--sha256 must be 64 hex digits (optionally prefixed with `sha256:`)")
    return match.group(1).lower()


def is_url(location: str) -> bool:
    return "://" in location


def check_url(url: str, *, loopback_http: bool = True) -> str:
    """Refuse anything but https (or http to a loopback host) and credentials in the URL.

    Raises:
        StagingRefused: another scheme, userinfo, or no host.
    """
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise StagingRefused("credentials in a URL are refused (they would be stored and shown)")
    if not parts.hostname:
        raise StagingRefused(f"{parts.scheme}:// URL has no host")
    if parts.scheme == "https":
        return url
    if parts.scheme == "http" and loopback_http and is_loopback_host(parts.hostname):
        return url
    raise StagingRefused("archives are fetched over https only (plain http only from a loopback host)")


def fetch_archive(
    location: str, expected_sha256: str, dest: str, *, max_bytes: int = SKILL_ARCHIVE_MAX_BYTES
) -> int:
    """Copy or download the archive into `dest` (created 0600), verify its SHA-256; return its size.

    Raises:
        StagingRefused: unreachable, too large, too slow, or a digest mismatch (dest is removed).
    """
    want = normalize_sha256(expected_sha256)
    digest = hashlib.sha256()
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    total = 0
    try:
        chunks = _download(location, max_bytes) if is_url(location) else _local(location, max_bytes)
        for chunk in chunks:
            total += len(chunk)
            if total > max_bytes:
                raise StagingRefused(f"the archive is larger than {max_bytes} bytes")
            digest.update(chunk)
            write_all(fd, chunk)
        got = digest.hexdigest()
        if got != want:
            raise StagingRefused(f"SHA-256 mismatch: expected {want}, got {got}; nothing was staged")
    except BaseException:
        os.close(fd)
        os.unlink(dest)
        raise
    os.close(fd)
    return total


def _local(path: str, max_bytes: int) -> list[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise StagingRefused(f"{path} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StagingRefused(f"{path} is a symlink (links are never followed)") from None
        raise StagingRefused(f"{path} cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StagingRefused(f"{path} is not a regular file")
        if st.st_size > max_bytes:
            raise StagingRefused(f"the archive is {st.st_size} bytes; the limit is {max_bytes} bytes")
        chunks: list[bytes] = []
        total = 0
        while block := os.read(fd, 1 << 20):
            total += len(block)
            if total > max_bytes:
                raise StagingRefused(f"the archive is larger than {max_bytes} bytes")
            chunks.append(block)
        return chunks
    finally:
        os.close(fd)


def _download(url: str, max_bytes: int) -> Iterator[bytes]:
    import httpx2

    check_url(url)
    loopback = urlsplit(url).scheme == "http"
    deadline = time.monotonic() + SKILL_FETCH_TIMEOUT_SECONDS
    timeout = httpx2.Timeout(SKILL_FETCH_TIMEOUT_SECONDS)
    with httpx2.Client(follow_redirects=False, timeout=timeout, trust_env=not loopback) as client:
        for _ in range(SKILL_FETCH_MAX_REDIRECTS + 1):
            try:
                with client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as response:
                    if response.is_redirect:
                        target = urljoin(url, response.headers.get("location", ""))
                        url = check_url(target, loopback_http=loopback)
                        continue
                    if response.status_code != 200:
                        raise StagingRefused(f"the archive download answered HTTP {response.status_code}")
                    declared = response.headers.get("content-length")
                    if declared and declared.isdigit() and int(declared) > max_bytes:
                        raise StagingRefused(
                            f"the archive is {declared} bytes; the limit is {max_bytes} bytes"
                        )
                    total = 0
                    for chunk in response.iter_raw(1 << 20):
                        total += len(chunk)
                        if total > max_bytes:
                            raise StagingRefused(f"the archive is larger than {max_bytes} bytes")
                        if time.monotonic() > deadline:
                            raise StagingRefused(
                                f"the download took longer than {SKILL_FETCH_TIMEOUT_SECONDS:g}s"
                            )
                        yield chunk
                    return
            except httpx2.HTTPError as exc:
                raise StagingRefused(f"the archive could not be downloaded ({type(exc).__name__})") from None
        raise StagingRefused(f"more than {SKILL_FETCH_MAX_REDIRECTS} redirects")


def _member_rel(name: str, subdir: str | None) -> str | None:
    """The staged path of an archive member, or None when it is outside `subdir` (still validated)."""
    rel = name
    while rel.startswith("./"):
        rel = rel[2:]
    rel = rel.rstrip("/")
    if not rel or rel == ".":
        return None
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise StagingRefused(f"archive member {name[:80]!r} is not UTF-8") from None
    check_rel(rel)
    if subdir is None:
        return rel
    prefix = subdir.rstrip("/") + "/"
    return rel[len(prefix) :] if rel.startswith(prefix) else None


def stage_archive(path: str, writer: TreeWriter, subdir: str | None = None) -> None:
    """Stage the members of a verified archive (tar or zip) through `writer`.

    Raises:
        StagingRefused: not an archive, or any member that is not a plain file or directory.
    """
    if subdir is not None:
        check_rel(subdir)
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic.startswith(b"PK\x03\x04") or magic == b"PK\x05\x06":
        _stage_zip(path, writer, subdir)
    else:
        _stage_tar(path, writer, subdir)


def _stage_tar(path: str, writer: TreeWriter, subdir: str | None) -> None:
    try:
        archive = tarfile.open(path, mode="r:*")  # noqa: SIM115 - closed below; no extractall
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise StagingRefused(f"not a tar or zip archive ({type(exc).__name__})") from None
    try:
        count = 0
        while True:
            try:
                member = archive.next()
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise StagingRefused(f"the tar archive is corrupt ({type(exc).__name__})") from None
            if member is None:
                break
            count += 1
            if count > SKILL_ARCHIVE_MAX_MEMBERS:
                raise StagingRefused(f"the archive has more than {SKILL_ARCHIVE_MAX_MEMBERS} members")
            rel = _member_rel(member.name, subdir)
            if member.isdir():
                continue
            if member.issym() or member.islnk():
                raise StagingRefused(f"{member.name} is a {'symlink' if member.issym() else 'hard link'}")
            if not member.isreg() or member.issparse():
                raise StagingRefused(f"{member.name} is not a regular file (device, FIFO or sparse member)")
            if rel is None:
                continue
            writer.reserve(rel, member.size, member.mode)
            extracted = archive.extractfile(member)
            if extracted is None:
                raise StagingRefused(f"{member.name} cannot be read")
            data = extracted.read(member.size + 1)
            if len(data) != member.size:
                raise StagingRefused(f"{member.name} is truncated")
            writer.add_file(rel, data)
    finally:
        archive.close()


def _stage_zip(path: str, writer: TreeWriter, subdir: str | None) -> None:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise StagingRefused(f"not a zip archive ({type(exc).__name__})") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > SKILL_ARCHIVE_MAX_MEMBERS:
            raise StagingRefused(f"the archive has more than {SKILL_ARCHIVE_MAX_MEMBERS} members")
        for info in infos:
            rel = _member_rel(info.filename, subdir)
            mode = info.external_attr >> 16 if info.create_system == 3 else 0
            kind = stat.S_IFMT(mode)
            if kind == stat.S_IFLNK:
                raise StagingRefused(f"{info.filename} is a symlink")
            if info.is_dir() or kind == stat.S_IFDIR:
                continue
            if kind not in (0, stat.S_IFREG):
                raise StagingRefused(f"{info.filename} is not a regular file")
            if info.flag_bits & 0x1:
                raise StagingRefused(f"{info.filename} is encrypted")
            if rel is None:
                continue
            writer.reserve(rel, info.file_size, mode)
            try:
                data = archive.read(info)
            except (zipfile.BadZipFile, OSError, NotImplementedError, RuntimeError) as exc:
                raise StagingRefused(f"{info.filename} cannot be read ({type(exc).__name__})") from None
            writer.add_file(rel, data)
