"""Bounded extraction: traversal, absolute paths, links, devices and bombs are refused within the limit."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from ivoai.client.components.archive import extract
from ivoai.client.components.errors import ArchiveError
from tests.client.components.helpers import tar_gz, zip_bytes


def _tar(tmp_path: Path, *infos: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in infos:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path = tmp_path / "a.tar.gz"
    path.write_bytes(buf.getvalue())
    return path


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = linkname
    info.mode = 0o644
    return info


def _dest(tmp_path: Path) -> Path:
    dest = tmp_path / "out"
    dest.mkdir(parents=True)
    return dest


def test_a_plain_archive_extracts_with_normalized_modes(tmp_path: Path) -> None:
    archive = tmp_path / "ok.tar.gz"
    archive.write_bytes(tar_gz({"bin/tool": b"#!/bin/sh\n", "share/readme": b"hi"}, mode=0o777))
    dest = _dest(tmp_path)
    extract(archive, "tar.gz", dest)
    assert (dest / "bin" / "tool").read_bytes() == b"#!/bin/sh\n"
    assert stat.S_IMODE(os.stat(dest / "bin" / "tool").st_mode) == 0o755  # never group/world-writable


@pytest.mark.parametrize(
    ("info", "data", "message"),
    [
        (_info("../escape", size=1), b"x", "escapes the archive"),
        (_info("a/../../escape", size=1), b"x", "escapes the archive"),
        (_info("/etc/passwd", size=1), b"x", "absolute path"),
        (_info("link", tarfile.SYMTYPE, linkname="/etc/passwd"), None, "is a link"),
        (_info("hard", tarfile.LNKTYPE, linkname="other"), None, "is a link"),
        (_info("dev", tarfile.CHRTYPE), None, "device, FIFO or special"),
        (_info("blk", tarfile.BLKTYPE), None, "device, FIFO or special"),
        (_info("fifo", tarfile.FIFOTYPE), None, "device, FIFO or special"),
    ],
)
def test_unsafe_tar_members_are_refused_by_name(
    tmp_path: Path, info: tarfile.TarInfo, data: bytes | None, message: str
) -> None:
    archive = _tar(tmp_path, (_info("fine", size=2), b"ok"), (info, data))
    dest = _dest(tmp_path)
    with pytest.raises(ArchiveError, match=message):
        extract(archive, "tar.gz", dest)
    assert not (tmp_path / "escape").exists()


def test_a_symlink_then_a_file_through_it_never_writes_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = _tar(
        tmp_path,
        (_info("d", tarfile.SYMTYPE, linkname=str(outside)), None),
        (_info("d/owned", size=1), b"x"),
    )
    with pytest.raises(ArchiveError, match="is a link"):
        extract(archive, "tar.gz", _dest(tmp_path))
    assert list(outside.iterdir()) == []


def test_duplicate_members_are_refused(tmp_path: Path) -> None:
    archive = _tar(tmp_path, (_info("x", size=1), b"a"), (_info("x", size=1), b"b"))
    with pytest.raises(ArchiveError, match="appears twice"):
        extract(archive, "tar.gz", _dest(tmp_path))


def test_a_gzip_bomb_stops_at_the_limit_not_at_its_end(tmp_path: Path) -> None:
    # 256 MiB of zeros in one member compresses to ~256 KiB; the limit is 1 MiB.
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as gz,
        tarfile.open(fileobj=gz, mode="w|") as tar,
    ):
        info = _info("zeros", size=256 * 1024 * 1024)
        tar.addfile(info, io.BufferedReader(_Zeros(info.size)))
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(raw.getvalue())
    assert archive.stat().st_size < 2 * 1024 * 1024
    dest = _dest(tmp_path)
    with pytest.raises(ArchiveError, match="beyond the limit of 1048576 bytes"):
        extract(archive, "tar.gz", dest, max_bytes=1024 * 1024)
    written = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    assert written <= 1024 * 1024


def test_a_bomb_of_many_small_members_stops_at_the_entry_limit(tmp_path: Path) -> None:
    archive = tmp_path / "many.tar.gz"
    archive.write_bytes(tar_gz({f"f{i}": b"" for i in range(50)}))
    with pytest.raises(ArchiveError, match="more than 20 members"):
        extract(archive, "tar.gz", _dest(tmp_path), max_entries=20)


def test_zip_members_with_traversal_links_or_bombs_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_bytes({"ok": b"1", "../up": b"2"}))
    with pytest.raises(ArchiveError, match="escapes"):
        extract(archive, "zip", _dest(tmp_path / "1"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    archive.write_bytes(buf.getvalue())
    with pytest.raises(ArchiveError, match="is a link"):
        extract(archive, "zip", _dest(tmp_path / "2"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("zeros", b"\0" * (8 * 1024 * 1024))
    archive.write_bytes(buf.getvalue())
    with pytest.raises(ArchiveError, match="beyond the limit"):
        extract(archive, "zip", _dest(tmp_path / "3"), max_bytes=1024 * 1024)


def test_a_corrupt_archive_is_reported_not_raised_raw(tmp_path: Path) -> None:
    archive = tmp_path / "junk.tar.gz"
    archive.write_bytes(b"\x1f\x8b" + os.urandom(64))
    with pytest.raises(ArchiveError, match="corrupt"):
        extract(archive, "tar.gz", _dest(tmp_path))


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n
