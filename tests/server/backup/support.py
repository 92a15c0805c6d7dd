"""Helpers for backup tests: a small corpus, a data-dir fingerprint and hand-built hostile archives."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DOCS = {
    "auth/oauth_client.py": "def refresh_token(client):\n    # Rotate the OAuth refresh token.\n",
    "storage/sqlite_wal.md": "SQLite write-ahead logging lets readers continue while one writer commits.\n",
    "deploy/systemd.md": "Units run with NoNewPrivileges and ProtectSystem strict, restarted on failure.\n",
    "notes/backup.md": "Backups are tar archives with a manifest listing sizes and SHA-256 hashes.\n",
}
QUERIES = ("oauth refresh token", "sqlite write-ahead logging readers", "backup manifest hashes")


def tree_digest(
    root: Path, *, only: Iterable[str] | None = None, exclude: Iterable[str] = ()
) -> dict[str, tuple[int, str]]:
    """{relative path: (mode, sha256 or link target)} for everything below `root` (links not followed)."""
    only_set = set(only) if only is not None else None
    out: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        top = rel_dir.parts[0] if rel_dir.parts else None
        if top is not None and (top in exclude or (only_set is not None and top not in only_set)):
            dirnames[:] = []
            continue
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            rel = rel_dir / name
            if not rel_dir.parts and only_set is not None:
                continue
            if not rel_dir.parts and name in exclude:
                continue
            p = Path(dirpath) / name
            st = os.lstat(p)
            if os.path.islink(p):
                out[str(rel)] = (st.st_mode, "link:" + os.readlink(p))
            else:
                out[str(rel)] = (st.st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def read_members(archive: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest, {member: bytes}) of a real archive, to build variants from."""
    with tarfile.open(archive) as tar:
        blobs = {}
        for m in tar.getmembers():
            f = tar.extractfile(m)
            assert f is not None
            blobs[m.name] = f.read()
    manifest = json.loads(blobs.pop("manifest.json"))
    return manifest, blobs


def write_archive(
    path: Path,
    manifest: dict[str, Any] | None,
    blobs: dict[str, bytes],
    *,
    extra: Iterable[tarfile.TarInfo] = (),
    manifest_first: bool = False,
) -> Path:
    """A tar with `blobs` as regular files, the `extra` headers (links, devices…) and the manifest."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:

        def add_manifest() -> None:
            if manifest is not None:
                body = json.dumps(manifest).encode()
                info = tarfile.TarInfo("manifest.json")
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))

        if manifest_first:
            add_manifest()
        for name, data in blobs.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
        if not manifest_first:
            add_manifest()
    return path


def manifest_entry(name: str, data: bytes, kind: str = "file") -> dict[str, Any]:
    return {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "kind": kind}
