"""Backup while clients write, restore into a fresh data dir, and the same answers afterwards."""

from __future__ import annotations

import os
import stat
import tarfile
import threading
from pathlib import Path

import pytest

from ivoai.common.errors import UnsafePathError
from ivoai.server.backup.archive import (
    BackupError,
    create_backup,
    list_backups,
    verify_archive,
)
from ivoai.server.backup.restore import restore_archive
from ivoai.server.config import load_config
from ivoai.server.context.service import ContextService
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory.documents import export_markdown
from ivoai.server.memory.service import MemoryService
from ivoai.server.runtime.lifecycle import init_server
from tests.server.backup.support import DOCS, QUERIES, tree_digest
from tests.server.gateway.support import HashEmbedder

WRITERS = 8


def _writer(
    root: Path, n: int, stop: threading.Event, started: threading.Event, counts: list[int], until: list[int]
) -> None:
    """One client: writes pages w{n}/p{i} in order, then updates w{n}/latest to i (two transactions).

    After `stop` it goes on until it has written `until[n]` pages (so some land after the snapshot)."""
    with MemoryService.open(ServerDataDir(root)) as svc:
        i = 0
        while not stop.is_set() or i < until[n]:
            svc.memory_write_page("team", f"w{n}", f"pages/p{i:05d}.md", f"writer {n} page {i}\n" * 3)
            svc.memory_write_page("team", f"w{n}", "latest.md", f"{i}")
            i += 1
            counts[n] = i
            if i == 6:
                started.set()


def _pages(export_root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(export_root)): p.read_bytes()
        for p in sorted(export_root.rglob("*.md"))
        if p.is_file()
    }


def test_backup_while_eight_clients_write_restores_a_consistent_snapshot_and_the_same_search_results(
    tmp_path: Path,
) -> None:
    emb = HashEmbedder()
    source = ServerDataDir(tmp_path / "source")
    init_server(source.root)
    corpus = tmp_path / "corpus"
    for rel, text in DOCS.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text, encoding="utf-8")
    with ContextService.open(source, load_config(source).context, embedder=emb) as ctx:
        ctx.add_connector("docs", "filesystem", str(corpus))
        assert ctx.ingest().status == "ok"
        before = {q: [(r.document_id, r.chunk_index) for r in ctx.context_search(q).results] for q in QUERIES}
    assert all(before.values())

    stop = threading.Event()
    counts = [0] * WRITERS
    until = [0] * WRITERS
    started = [threading.Event() for _ in range(WRITERS)]
    threads = [
        threading.Thread(target=_writer, args=(source.root, n, stop, started[n], counts, until))
        for n in range(WRITERS)
    ]
    for t in threads:
        t.start()
    try:
        for ev in started:
            assert ev.wait(60)
        at_start = list(counts)
        result = create_backup(source)
        at_end = list(counts)
        until[:] = [c + 2 for c in at_end]
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert all(c >= e + 2 for c, e in zip(counts, at_end, strict=True))  # writers went on after it

    archive = Path(result.archive)
    assert stat.S_IMODE(os.stat(archive).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(archive.parent).st_mode) == 0o700
    names = {f.path for f in result.files}
    assert names == {"config.toml", "context/catalog.sqlite3", "memory/memory.sqlite3"}
    with tarfile.open(archive) as tar:
        members = tar.getnames()
    assert not any(m.startswith(("secrets", "enrollment", "oauth", "index", "run")) for m in members)
    assert verify_archive(archive)["ok"] is True

    target = ServerDataDir(tmp_path / "target")
    report = restore_archive(target, archive, embedder=emb)
    assert report.index["rebuilt"] is True and report.index["chunks"] > 0

    with MemoryService.open(source) as svc:
        src_export = _pages(Path(export_markdown(svc, tmp_path / "src-export").directory))
    with MemoryService.open(target) as svc:
        dst_export = _pages(Path(export_markdown(svc, tmp_path / "dst-export").directory))
    restored_pages = {k for k in dst_export if "/pages/" in k}
    for n in range(WRITERS):
        mine = sorted(int(k.rsplit("p", 1)[1][:5]) for k in restored_pages if k.startswith(f"team/w{n}/"))
        # a consistent snapshot holds a prefix of each writer's sequence ...
        assert mine == list(range(len(mine)))
        # ... taken between the backup's start and end
        assert at_start[n] <= len(mine) <= at_end[n] + 1  # counts[n] moves after "latest" is written
        latest = dst_export[f"team/w{n}/latest.md"].decode()
        assert latest.rstrip().endswith((str(len(mine) - 1), str(len(mine) - 2)))
    # every restored page equals the source's (pages are written once; a later version would differ)
    for key in restored_pages:
        assert dst_export[key] == src_export[key]
    assert len(restored_pages) < len([k for k in src_export if "/pages/" in k])

    with ContextService.open(target, load_config(target).context, embedder=emb) as ctx:
        after = {q: [(r.document_id, r.chunk_index) for r in ctx.context_search(q).results] for q in QUERIES}
    assert after == before


def test_backup_refuses_a_symlink_inside_an_archived_root(tmp_path: Path) -> None:
    data = ServerDataDir(tmp_path / "d").ensure()
    (data.context / "evil").symlink_to("/etc/passwd")
    with pytest.raises(BackupError, match="symlink"):
        create_backup(data)
    assert list_backups(data.root / "backups") == []


def test_backup_of_a_missing_data_dir_is_refused_without_creating_it(tmp_path: Path) -> None:
    data = ServerDataDir(tmp_path / "never-initialized")
    with pytest.raises(BackupError, match="not a server data directory"):
        create_backup(data)
    assert not data.root.exists()


def test_backup_output_directory_must_be_private(tmp_path: Path) -> None:
    data = ServerDataDir(tmp_path / "d").ensure()
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(UnsafePathError, match="0700"):
        create_backup(data, loose)
    fresh = tmp_path / "fresh" / "backups"
    result = create_backup(data, fresh)
    assert Path(result.archive).parent == fresh
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o700


def test_restore_merges_and_never_touches_secrets_enrollment_or_unnamed_files(tmp_path: Path) -> None:
    source = ServerDataDir(tmp_path / "s").ensure()
    (source.secrets / "tei.key").write_text("source-secret")
    with MemoryService.open(source) as svc:
        svc.memory_write_page("w", "p", "a.md", "from the backup")
    archive = Path(create_backup(source).archive)
    with tarfile.open(archive) as tar:
        assert not any("tei.key" in n for n in tar.getnames())

    target = ServerDataDir(tmp_path / "t").ensure()
    (target.secrets / "tei.key").write_text("target-secret")
    (target.enrollment / "state.json").write_text("{}")
    (target.context / "keep-me.txt").write_text("not in the archive")
    secrets_before = tree_digest(target.root, only=("secrets", "enrollment", "oauth"))
    restore_archive(target, archive, embedder=HashEmbedder())
    assert tree_digest(target.root, only=("secrets", "enrollment", "oauth")) == secrets_before
    assert (target.context / "keep-me.txt").read_text() == "not in the archive"
    with MemoryService.open(target) as svc:
        assert svc.memory_read_page("w", "p", "a.md").body == "from the backup"


def test_restore_dry_run_writes_nothing(tmp_path: Path) -> None:
    source = ServerDataDir(tmp_path / "s").ensure()
    with MemoryService.open(source) as svc:
        svc.memory_write_page("w", "p", "a.md", "x")
    archive = Path(create_backup(source).archive)
    target = ServerDataDir(tmp_path / "t").ensure()
    before = tree_digest(target.root, exclude=("run",))
    report = restore_archive(target, archive, dry_run=True)
    assert report.dry_run and {f["path"] for f in report.files} == {"memory/memory.sqlite3"}
    assert tree_digest(target.root, exclude=("run",)) == before
    assert not [n for n in os.listdir(target.run) if n.startswith("restore-staging-")]


@pytest.mark.parametrize("in_memory", [True, False])
def test_snapshots_in_memory_or_through_a_staging_file_restore_the_same_self_contained_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_memory: bool
) -> None:
    from ivoai.server.backup import _write as archive_mod

    if not in_memory:
        monkeypatch.setattr(archive_mod, "BACKUP_MEMORY_SNAPSHOT_MAX_BYTES", 0)
    source = ServerDataDir(tmp_path / "s").ensure()
    with MemoryService.open(source) as svc:
        for i in range(30):
            svc.memory_write_page("w", "p", f"n{i}.md", f"page {i}")
        # the WAL holds uncheckpointed commits while the service is open: the snapshot must include them
        archive = Path(create_backup(source).archive)
    with tarfile.open(archive) as tar:
        member = tar.extractfile("memory/memory.sqlite3")
        assert member is not None
        header = member.read(100)
    assert header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x01\x01"  # rollback journal
    target = ServerDataDir(tmp_path / "t")
    restore_archive(target, archive, rebuild_index=False)
    with MemoryService.open(target) as svc:
        assert svc.memory_status().pages == 30
