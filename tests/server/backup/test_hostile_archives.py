"""Hostile archives: each is refused before anything is written to the data directory."""

from __future__ import annotations

import copy
import gzip
import io
import os
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ivoai.common.limits import BACKUP_ENTRY_MAX_BYTES, BACKUP_MAX_ENTRIES
from ivoai.server.backup.archive import ArchiveError, create_backup, verify_archive
from ivoai.server.backup.restore import restore_archive
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory.service import MemoryService
from ivoai.server.runtime.lifecycle import init_server
from tests.server.backup.support import manifest_entry, read_members, tree_digest, write_archive


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and members of a real archive to derive hostile variants from."""
    base = tmp_path_factory.mktemp("good")
    data = ServerDataDir(base / "d")
    init_server(data.root)
    with MemoryService.open(data) as svc:
        svc.memory_write_page("w", "p", "a.md", "original page")
    return read_members(Path(create_backup(data).archive))


def _with(manifest: dict[str, Any], blobs: dict[str, bytes], name: str, data: bytes) -> dict[str, Any]:
    m = copy.deepcopy(manifest)
    m["files"].append(manifest_entry(name, data))
    blobs[name] = data
    return m


def _link(name: str, kind: bytes, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


Builder = Callable[[Path, dict[str, Any], dict[str, bytes]], Path]


def traversal(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    return write_archive(p, _with(m, b, "context/../../escaped.txt", b"x"), b)


def dotdot_top(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    return write_archive(p, _with(m, b, "../escaped.txt", b"x"), b)


def absolute(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    return write_archive(p, _with(m, b, str(p.parent / "absolute-escape.txt"), b"x"), b)


def symlink(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    return write_archive(p, m, b, extra=[_link("context/link", tarfile.SYMTYPE, "/etc/passwd")])


def hardlink(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    return write_archive(p, m, b, extra=[_link("context/hard", tarfile.LNKTYPE, "config.toml")])


def device(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    dev = _link("context/null", tarfile.CHRTYPE)
    dev.devmajor, dev.devminor = 1, 3
    return write_archive(p, m, b, extra=[dev])


def fifo(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    return write_archive(p, m, b, extra=[_link("memory/pipe", tarfile.FIFOTYPE)])


def secrets_entry(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    return write_archive(p, _with(m, b, "secrets/tei.key", b"planted"), b)


def larger_than_manifest(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    b["memory/memory.sqlite3"] += b"\0" * 4096
    return write_archive(p, m, b)


def hash_mismatch(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    db = bytearray(b["memory/memory.sqlite3"])
    db[-1] ^= 0xFF  # same size, one byte changed
    b["memory/memory.sqlite3"] = bytes(db)
    return write_archive(p, m, b)


def truncated(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    full = write_archive(p.with_suffix(".full"), m, b, manifest_first=True)
    raw = full.read_bytes()
    p.write_bytes(raw[: len(raw) // 2])
    return p


def truncated_at_member_boundary(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    full = write_archive(p.with_suffix(".full"), m, b)
    with tarfile.open(full) as tar:
        last = tar.getmembers()[-1]  # the manifest
    p.write_bytes(full.read_bytes()[: last.offset])
    return p


def newer_format(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    m = {**m, "format_version": m["format_version"] + 1}
    return write_archive(p, m, b)


def newer_schema(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    m = {**m, "schema_versions": {**m["schema_versions"], "memory": 999}}
    return write_archive(p, m, b)


def size_bomb(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    """A header claiming more than the per-entry limit (the data is never there)."""
    huge = tarfile.TarInfo("context/huge.bin")
    huge.size = BACKUP_ENTRY_MAX_BYTES + 1
    return write_archive(p, m, b, extra=[huge])  # the header alone; its data is never there


def entry_count_bomb(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    with tarfile.open(p, "w") as tar:
        for i in range(BACKUP_MAX_ENTRIES + 1):
            tar.addfile(tarfile.TarInfo(f"context/f{i}"), io.BytesIO(b""))
    return p


def gzip_bomb(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    """64 MiB of zeros in a few KiB: ivoai never decompresses, so it is not even opened as a tar."""
    with gzip.open(p, "wb") as f:
        chunk = b"\0" * (1 << 20)
        for _ in range(64):
            f.write(chunk)
    return p


def zip_file(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("memory/memory.sqlite3", b"\0" * (8 << 20))
    return p


def unlisted_member(p: Path, m: dict[str, Any], b: dict[str, bytes]) -> Path:
    b["context/extra.txt"] = b"not in the manifest"
    return write_archive(p, m, b)


CASES: dict[str, tuple[Builder, str]] = {
    "traversal": (traversal, "unsafe path"),
    "dotdot_top": (dotdot_top, "unsafe path"),
    "absolute": (absolute, "unsafe path"),
    "symlink": (symlink, "symlink"),
    "hardlink": (hardlink, "hard link"),
    "device": (device, "device"),
    "fifo": (fifo, "FIFO"),
    "secrets_entry": (secrets_entry, "outside the archived roots"),
    "larger_than_manifest": (larger_than_manifest, "manifest says"),
    "hash_mismatch": (hash_mismatch, "SHA-256 does not match"),
    "truncated": (truncated, "truncated"),
    "truncated_at_member_boundary": (truncated_at_member_boundary, "no manifest.json"),
    "newer_format": (newer_format, "newer than this ivoai reads"),
    "newer_schema": (newer_schema, "schema version 999 is newer"),
    "size_bomb": (size_bomb, "the limit is"),
    "entry_count_bomb": (entry_count_bomb, "more than"),
    "gzip_bomb": (gzip_bomb, "not an uncompressed tar"),
    "zip_file": (zip_file, "not an uncompressed tar"),
    "unlisted_member": (unlisted_member, "not in the manifest"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_archive_is_refused_before_anything_is_written(
    case: str, good: tuple[dict[str, Any], dict[str, bytes]], tmp_path: Path
) -> None:
    build, message = CASES[case]
    manifest, blobs = copy.deepcopy(good[0]), dict(good[1])
    archive = build(tmp_path / f"{case}.tar", manifest, blobs)

    target = ServerDataDir(tmp_path / "target")
    init_server(target.root)
    with MemoryService.open(target) as svc:
        svc.memory_write_page("w", "p", "a.md", "the target's own page")
    before = tree_digest(target.root, exclude=("run",))

    with pytest.raises(ArchiveError, match=message):
        restore_archive(target, archive)
    with pytest.raises(ArchiveError, match=message):
        verify_archive(archive)

    assert tree_digest(target.root, exclude=("run",)) == before
    assert not [n for n in os.listdir(target.run) if n.startswith("restore-staging-")]
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "absolute-escape.txt").exists()
    with MemoryService.open(target) as svc:
        assert svc.memory_read_page("w", "p", "a.md").body == "the target's own page"


def test_restore_refuses_a_relative_path_or_a_url(tmp_path: Path) -> None:
    target = ServerDataDir(tmp_path / "t")
    for bad in ("backups/x.tar", "https://example.com/x.tar", "file:///tmp/x.tar"):
        with pytest.raises(ArchiveError, match="absolute local path"):
            restore_archive(target, Path(bad))
    assert not target.root.exists()
