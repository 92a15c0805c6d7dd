"""Reading a backup archive without trusting it: members, manifest, schema versions, hashes, listing."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from pydantic import ValidationError as PydanticValidationError

from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import (
    check_stat,
    open_private_dir,
)
from ivoai.common.limits import (
    BACKUP_ENTRY_MAX_BYTES,
    BACKUP_FORMAT_VERSION,
    BACKUP_IO_CHUNK_BYTES,
    BACKUP_MANIFEST_MAX_BYTES,
    BACKUP_MAX_ENTRIES,
    BACKUP_TOTAL_MAX_BYTES,
)
from ivoai.common.validate import is_int
from ivoai.server.backup._format import (
    ARCHIVE_PREFIX,
    ARCHIVE_SUFFIX,
    ARCHIVED_ROOTS,
    CONFIG_MEMBER,
    FORMAT_NAME,
    MANIFEST_NAME,
    ArchiveError,
    Manifest,
    ManifestFile,
    ProgressCounter,
    ProgressFn,
)


# ---------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class Member:
    name: str
    size: int
    info: tarfile.TarInfo


@dataclass
class OpenArchive:
    """A validated view of an archive: members checked, manifest parsed and matched (data not yet hashed)."""

    path: Path
    tar: tarfile.TarFile
    file: BinaryIO
    manifest: Manifest
    members: list[Member]

    def close(self) -> None:
        self.tar.close()
        self.file.close()

    def iter_data(
        self, progress: ProgressFn | None = None, phase: str = "verify"
    ) -> Iterator[tuple[ManifestFile, BinaryIO]]:
        """Each manifest file with a stream of exactly its bytes (read it fully before the next)."""
        expected = {f.path: f for f in self.manifest.files}
        for m in self.members:
            if m.name == MANIFEST_NAME:
                continue
            stream = self.tar.extractfile(m.info)
            if stream is None:
                raise ArchiveError(f"{m.name}: not a regular file")
            yield expected[m.name], cast(BinaryIO, stream)


def open_archive(path: Path) -> OpenArchive:
    """Open and check an archive without trusting anything in it; nothing is extracted.

    Checks, in order: a local absolute path to a regular file; a tar archive; at most
    `BACKUP_MAX_ENTRIES` members, each a regular file (no links, devices, FIFOs, directories or sparse
    files) with a safe relative name under an archived root (no absolute path, no `..`, no
    duplicates), within `BACKUP_ENTRY_MAX_BYTES` and, together, `BACKUP_TOTAL_MAX_BYTES`, and whose
    data lies inside the file (a truncated archive is refused); a manifest of a known format and a
    format version this ivoai reads; and members that are exactly the manifest's files with the
    manifest's sizes. Hashes are checked by `verify_archive` / while staging.

    Raises:
        ArchiveError: the rule broken, with the entry named.
    """
    text = str(path)
    if "://" in text or not os.path.isabs(text):
        raise ArchiveError(f"ARCHIVE must be an absolute local path, got {text!r}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ArchiveError(f"{path}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ArchiveError(f"{path} is a symlink; give the archive's real path") from None
        raise ArchiveError(f"{path}: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ArchiveError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    f: BinaryIO = os.fdopen(fd, "rb")
    try:
        try:
            tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 - owned by OpenArchive
        except tarfile.TarError as exc:
            raise ArchiveError(
                f"{path} is not an ivoai backup archive (not an uncompressed tar: {exc})"
            ) from None
        try:
            members = _check_members(tar, st.st_size)
            manifest = _read_manifest(tar, members)
            _match_manifest(manifest, members)
            check_schemas(manifest)
        except BaseException:
            tar.close()
            raise
    except BaseException:
        f.close()
        raise
    return OpenArchive(path=path, tar=tar, file=f, manifest=manifest, members=members)


def _check_members(tar: tarfile.TarFile, file_size: int) -> list[Member]:
    from ivoai.common.fsio import validate_relative

    members: list[Member] = []
    seen: set[str] = set()
    total = 0
    try:
        for info in tar:
            if len(members) >= BACKUP_MAX_ENTRIES:
                raise ArchiveError(
                    f"more than {BACKUP_MAX_ENTRIES} entries; refused (limit BACKUP_MAX_ENTRIES)"
                )
            name = info.name
            if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or info.issparse():
                raise ArchiveError(f"entry {name!r} is {_kind(info)}; only regular files are accepted")
            try:
                validate_relative(name)
            except IvoaiError:
                raise ArchiveError(
                    f"entry {name!r} has an unsafe path (absolute, '..' or empty part)"
                ) from None
            if (
                name != MANIFEST_NAME
                and name != CONFIG_MEMBER
                and name.split("/", 1)[0] not in ARCHIVED_ROOTS
            ):
                raise ArchiveError(
                    f"entry {name!r} is outside the archived roots (config.toml, context/, memory/)"
                )
            if name in seen:
                raise ArchiveError(f"entry {name!r} appears twice")
            seen.add(name)
            if info.size < 0 or info.size > BACKUP_ENTRY_MAX_BYTES:
                raise ArchiveError(
                    f"entry {name!r} is {info.size} bytes; the limit is {BACKUP_ENTRY_MAX_BYTES}"
                )
            total += info.size
            if total > BACKUP_TOTAL_MAX_BYTES:
                raise ArchiveError(
                    f"entries add up to more than {BACKUP_TOTAL_MAX_BYTES} bytes (BACKUP_TOTAL_MAX_BYTES)"
                )
            if info.offset_data + info.size > file_size:
                raise ArchiveError(f"entry {name!r} runs past the end of the file: the archive is truncated")
            members.append(Member(name, info.size, info))
    except tarfile.TarError as exc:
        raise ArchiveError(f"corrupt tar structure: {exc}") from None
    if not members:
        raise ArchiveError("the archive is empty")
    return members


def _kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return "a symlink"
    if info.islnk():
        return "a hard link"
    if info.ischr() or info.isblk():
        return "a device node"
    if info.isfifo():
        return "a FIFO"
    if info.isdir():
        return "a directory"
    if info.issparse():
        return "a sparse file"
    return f"of tar type {info.type!r}"


def _read_manifest(tar: tarfile.TarFile, members: list[Member]) -> Manifest:
    found = [m for m in members if m.name == MANIFEST_NAME]
    if not found:
        raise ArchiveError("no manifest.json: not an ivoai backup, or a truncated one")
    m = found[0]
    if m.size > BACKUP_MANIFEST_MAX_BYTES:
        raise ArchiveError(f"manifest.json is {m.size} bytes; the limit is {BACKUP_MANIFEST_MAX_BYTES}")
    stream = tar.extractfile(m.info)
    if stream is None:
        raise ArchiveError("manifest.json is not a regular file")
    try:
        raw = stream.read(m.size)
        doc = json.loads(raw)
    except (tarfile.TarError, ValueError, OSError) as exc:
        raise ArchiveError(f"manifest.json is unreadable: {type(exc).__name__}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ArchiveError("manifest.json does not describe an ivoai server backup")
    version = doc.get("format_version")
    if not is_int(version):
        raise ArchiveError("manifest.json: format_version must be an integer")
    if version > BACKUP_FORMAT_VERSION:
        raise ArchiveError(
            f"archive format version {version} is newer than this ivoai reads ({BACKUP_FORMAT_VERSION}); "
            "upgrade ivoai to restore it"
        )
    try:
        return Manifest.model_validate(doc)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ArchiveError(f"manifest.json: {field}: {first['msg']}") from None


def _match_manifest(manifest: Manifest, members: list[Member]) -> None:
    listed = {f.path: f for f in manifest.files}
    if len(listed) != len(manifest.files):
        raise ArchiveError("manifest.json lists a file twice")
    present = {m.name: m for m in members if m.name != MANIFEST_NAME}
    for name, m in present.items():
        entry = listed.get(name)
        if entry is None:
            raise ArchiveError(f"entry {name!r} is not in the manifest")
        if m.size != entry.size:
            raise ArchiveError(f"entry {name!r} is {m.size} bytes but the manifest says {entry.size}")
    missing = sorted(set(listed) - set(present))
    if missing:
        raise ArchiveError(f"manifest lists {missing[0]!r} but the archive does not contain it")
    for entry in manifest.files:
        if len(entry.sha256) != 64 or any(c not in "0123456789abcdef" for c in entry.sha256):
            raise ArchiveError(f"manifest entry {entry.path!r}: sha256 is not a hex SHA-256")


def check_schemas(manifest: Manifest) -> None:
    """Refuse databases newer than this ivoai can open (memory and catalog schema versions)."""
    from ivoai.server.context.catalog import MIGRATIONS as CATALOG_MIGRATIONS
    from ivoai.server.memory._schema import LATEST

    limits = {"memory": LATEST.version, "context_catalog": CATALOG_MIGRATIONS.latest.version}
    for key, latest in limits.items():
        value = manifest.schema_versions.get(key)
        if isinstance(value, int) and value > latest:
            raise ArchiveError(
                f"the archive's {key} schema version {value} is newer than this ivoai supports ({latest}); "
                "upgrade ivoai to restore it"
            )


def copy_member(
    stream: BinaryIO, entry: ManifestFile, sink: BinaryIO | None, on_bytes: Callable[[int], None] | None
) -> None:
    """Stream one member (into `sink`, or nowhere) and check its length and SHA-256 against the manifest.

    Raises:
        ArchiveError: truncated data or a hash mismatch.
    """
    digest = hashlib.sha256()
    left = entry.size
    try:
        while left > 0:
            block = stream.read(min(BACKUP_IO_CHUNK_BYTES, left))
            if not block:
                raise ArchiveError(f"entry {entry.path!r} ends early: the archive is truncated")
            left -= len(block)
            digest.update(block)
            if sink is not None:
                sink.write(block)
            if on_bytes is not None:
                on_bytes(len(block))
    except tarfile.TarError as exc:
        raise ArchiveError(f"entry {entry.path!r}: {exc} (truncated or corrupt archive)") from None
    if digest.hexdigest() != entry.sha256:
        raise ArchiveError(f"entry {entry.path!r}: SHA-256 does not match the manifest (corrupt or altered)")


def verify_archive(path: Path, *, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Check an archive completely (structure, manifest, every hash) without writing anything.

    Raises:
        ArchiveError: the first problem found.
    """
    arch = open_archive(path)
    try:
        counter = ProgressCounter("verify", sum(f.size for f in arch.manifest.files), progress)
        for entry, stream in arch.iter_data():
            copy_member(stream, entry, None, counter.on_bytes(str(path)))
        return summary(arch, ok=True)
    finally:
        arch.close()


def summary(arch: OpenArchive, *, ok: bool | None = None) -> dict[str, Any]:
    m = arch.manifest
    out: dict[str, Any] = {
        "archive": str(arch.path),
        "format_version": m.format_version,
        "ivoai_version": m.ivoai_version,
        "created_at": m.created_at,
        "schema_versions": m.schema_versions,
        "index": m.index,
        "files": [f.model_dump() for f in m.files],
        "bytes": sum(f.size for f in m.files),
    }
    if ok is not None:
        out["ok"] = ok
    return out


def list_backups(directory: Path) -> list[dict[str, Any]]:
    """Archives in `directory` (newest first) with their manifest summary, or the reason one is unreadable."""
    if not directory.exists():
        return []
    dfd = open_private_dir(directory)
    try:
        names = sorted(
            (n for n in os.listdir(dfd) if n.startswith(ARCHIVE_PREFIX) and n.endswith(ARCHIVE_SUFFIX)),
            reverse=True,
        )
        check_stat(os.fstat(dfd), directory, private=True, expect_dir=True)
    finally:
        os.close(dfd)
    out: list[dict[str, Any]] = []
    for name in names:
        path = directory / name
        size = os.stat(path, follow_symlinks=False).st_size
        try:
            arch = open_archive(path)
        except ArchiveError as exc:
            out.append({"archive": str(path), "size": size, "valid": False, "error": exc.message})
            continue
        try:
            s = summary(arch)
        finally:
            arch.close()
        out.append({**s, "size": size, "valid": True})
    return out
