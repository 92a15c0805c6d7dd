"""Ingestion: incremental, reconciling, replace-before-delete, locked, resilient to failure and removal."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from ivoai.common.fsio import file_lock
from ivoai.server.context import ingest as ingest_mod
from ivoai.server.context.embeddings import BuiltinEmbedder
from ivoai.server.context.errors import EmbedderError, IngestRunningError
from ivoai.server.context.index import COLLECTION, EdgeIndex, IndexPoint, VectorIndex
from ivoai.server.context.ingest import IngestProgress
from ivoai.server.context.service import EMBED_LOCK, INGEST_LOCK, ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir

from .conftest import CountingEmbedder, write_tree

DOCS = {
    "guide/deploy.md": "Deploying the billing service: build the container, then run the migration job.\n",
    "src/retry.py": 'def retry_with_backoff(fn, attempts):\n    """Call fn again after backoff."""\n',
    "notes/todo.txt": "Remember to rotate the staging database password every quarter.\n",
}


def _open(data_dir: ServerDataDir, emb: object) -> ContextService:
    return ContextService.open(data_dir, ContextSettings(), embedder=emb)  # type: ignore[arg-type]


def _paths(svc: ContextService, query: str) -> list[str]:
    return [r.path for r in svc.context_search(query, limit=10).results]


def test_unchanged_documents_are_not_re_embedded_and_changes_are_reconciled(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        first = svc.ingest().connectors[0]
        assert (first.added, first.chunks_embedded) == (3, 3)
        assert emb.passages == 3

        second = svc.ingest().connectors[0]
        assert (second.unchanged, second.chunks_embedded, emb.passages) == (3, 0, 3)

        (root / "src/retry.py").write_text('def retry_forever(fn):\n    """Call fn until it succeeds."""\n')
        (root / "notes/todo.txt").unlink()
        third = svc.ingest().connectors[0]
        assert (third.updated, third.removed, third.unchanged, third.chunks_embedded) == (1, 1, 1, 1)
        assert "notes/todo.txt" not in _paths(svc, "rotate the staging database password")
        hit = svc.context_search("retry_forever", limit=1).results[0]
        assert hit.path == "src/retry.py" and "retry_forever" in hit.text
        assert svc.index.count() == svc.catalog.counts()["chunks"] == 2


def test_a_file_that_gains_a_secret_is_removed_from_the_index(tmp_path: Path, svc: ContextService) -> None:
    root = write_tree(tmp_path / "docs", {"cfg.md": "Connect with the service account.\n"})
    svc.add_connector("docs", "filesystem", str(root))
    svc.ingest()
    (root / "cfg.md").write_text("Connect with the service account.\nkey: AKIAABCDEFGHIJKLMNOP\n")
    report = svc.ingest().connectors[0]
    assert report.removed == 1
    assert svc.context_recent(10).documents == []
    assert svc.index.count() == 0
    assert svc.skipped("docs")[0][2].startswith("contains a credential")


def test_hostile_tree_ingests_only_safe_text_files(tmp_path: Path, svc: ContextService) -> None:
    root = write_tree(
        tmp_path / "t",
        {
            "ok.md": "The on-call rotation starts on Monday.",
            "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n",
            "notes.txt": "key follows\n-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
            "big.log": "z" * (9 * 1024 * 1024),
        },
    )
    (root / "loop").symlink_to("loop")
    (root / "out").symlink_to("/etc")
    svc.add_connector("t", "filesystem", str(root))
    report = svc.ingest().connectors[0]
    assert (report.status, report.added) == ("ok", 1)
    reasons = {p: r for _, p, r in svc.skipped("t")}
    assert reasons["image.png"] == "binary or not UTF-8 text"
    assert reasons["id_rsa"] == "secret, key or credential file (by name)"
    assert reasons["notes.txt"] == "contains a private key"
    assert reasons["big.log"].startswith("larger than 8388608 bytes")
    assert reasons["loop"] == reasons["out"] == "symlink (never followed)"


def test_a_second_ingest_while_phase_one_runs_fails_fast_with_a_clear_error(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    gate, entered = threading.Event(), threading.Event()

    def hold_phase_one(p: IngestProgress) -> None:
        if p.phase == "lexical" and not entered.is_set():
            entered.set()
            assert gate.wait(30), "test gate never opened"

    with _open(data_dir, embedder) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        results: list[object] = []
        t = threading.Thread(target=lambda: results.append(svc.ingest(progress=hold_phase_one)))
        t.start()
        try:
            assert entered.wait(30)
            with (
                _open(data_dir, embedder) as other,
                pytest.raises(IngestRunningError, match="another ingestion"),
            ):
                other.ingest()
        finally:
            gate.set()
            t.join(60)
        assert results and results[0].status == "ok"  # type: ignore[attr-defined]


def test_an_ingest_while_another_process_embeds_indexes_and_leaves_the_embedding_to_it(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc, file_lock(data_dir.root, data_dir.run / EMBED_LOCK):
        svc.add_connector("docs", "filesystem", str(root))
        report = svc.ingest()
        assert report.embedding == "busy" and emb.passages == 0
        assert report.coverage is not None and report.coverage.pending_chunks == 3
        assert _paths(svc, "migration job container") == ["guide/deploy.md"]  # searchable by its words


def test_ingest_lock_is_shared_across_processes_by_file_lock(
    data_dir: ServerDataDir, svc: ContextService
) -> None:
    with file_lock(data_dir.root, data_dir.run / INGEST_LOCK), pytest.raises(IngestRunningError):
        svc.ingest()


def test_connector_removed_during_phase_one_leaves_no_rows_and_no_vectors(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_mod, "CONTEXT_LEXICAL_BATCH_CHUNKS", 1)
    root = write_tree(tmp_path / "docs", DOCS)
    with _open(data_dir, embedder) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        removed = threading.Event()

        def progress(p: IngestProgress) -> None:
            if p.phase == "lexical" and p.documents_done >= 1 and not removed.is_set():
                removed.set()
                svc.remove_connector("docs")  # the admin removes it while the run is mid-way

        report = svc.ingest(progress=progress)
        assert removed.is_set()
        assert report.connectors[0].status == "removed"
        assert "removed during ingestion" in report.connectors[0].message
        assert svc.list_connectors() == []
        assert svc.catalog.counts() == {"connectors": 0, "documents": 0, "chunks": 0, "bytes": 0}
        assert svc.index.count() == 0


def test_connector_removed_during_phase_two_gets_no_vector_written_after_it(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        svc.ingest(embed=False)

        def progress(p: IngestProgress) -> None:
            if p.phase == "embed" and p.chunks_done == 1 and svc.list_connectors():
                svc.remove_connector("docs")

        stats = svc.embed_pending(progress=progress, batch_chunks=1)
        assert (stats.embedded, emb.passages) == (1, 1)  # after the removal nothing was pending any more
        assert svc.catalog.counts() == {"connectors": 0, "documents": 0, "chunks": 0, "bytes": 0}
        assert svc.index.count() == 0


def test_embedder_failing_in_phase_two_keeps_everything_searchable_and_the_next_run_embeds_the_rest(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    failing = CountingEmbedder(embedder, fail_on_call=2)
    with _open(data_dir, failing) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        assert svc.ingest(embed=False).status == "ok"
        with pytest.raises(EmbedderError, match="injected"):
            svc.embed_pending(batch_chunks=1)
        cov = svc.coverage()
        assert (cov.embedded_chunks, cov.pending_chunks, cov.embedding) == (1, 2, "stopped")
        assert svc.index.count() == svc.catalog.counts()["chunks"] == 3  # every document kept, whole
        assert _paths(svc, "rotate staging database password") == ["notes/todo.txt"]
    again = CountingEmbedder(embedder)
    with _open(data_dir, again) as svc:
        report = svc.ingest().connectors[0]
        assert (report.status, report.unchanged, report.chunks_embedded) == ("ok", 3, 2)
        assert again.passages == 2  # the chunk embedded before the failure was not embedded again
        assert svc.coverage().embedding == "complete"


def test_points_left_by_a_crashed_run_are_repaired_and_never_searchable(
    tmp_path: Path, svc: ContextService, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    svc.add_connector("docs", "filesystem", str(root))
    svc.ingest()
    vec = embedder.embed_passages(["orphaned zebra migration text"])[0]
    orphan = "00000000-0000-4000-8000-000000000001"
    svc.index.upsert(
        [
            IndexPoint(
                orphan,
                vec,
                "orphaned zebra migration text",
                {
                    "document_id": "d_x",
                    "connector": "docs",
                    "path": "ghost.md",
                    "path_prefixes": ["ghost.md"],
                    "chunk_index": 0,
                },
            )
        ]
    )
    svc.catalog.start_run("run_crashed", None)  # as if the process died mid-run
    svc.catalog.set_meta("index_dirty", "1")
    assert "ghost.md" not in _paths(svc, "orphaned zebra migration")
    assert svc.ingest().repaired_points == 1
    assert orphan not in set(svc.index.iter_ids())
    assert svc.catalog.last_run()["status"] == "ok"  # type: ignore[index]


def test_quota_exceeded_stops_the_connector_with_a_message_and_keeps_what_was_ingested(
    tmp_path: Path, svc: ContextService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_mod, "CONNECTOR_MAX_DOCUMENTS", 2)
    root = write_tree(tmp_path / "docs", DOCS)
    svc.add_connector("docs", "filesystem", str(root))
    report = svc.ingest()
    c = report.connectors[0]
    assert report.status == "partial" and c.status == "quota_exceeded"
    assert "more than 2 documents" in c.message
    assert svc.catalog.counts()["documents"] == 2
    assert svc.index.count() == svc.catalog.counts()["chunks"]


class GatedIndex:
    """The real Edge index, pausing after an upsert until the test opens the gate (a point written,
    its catalog commit not yet made)."""

    def __init__(self, inner: EdgeIndex, gate: threading.Event, entered: threading.Event) -> None:
        self.inner, self.gate, self.entered = inner, gate, entered
        self.armed = False

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        self.inner.upsert(points)
        if self.armed:
            self.entered.set()
            assert self.gate.wait(30), "test gate never opened"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_changed_document_stays_searchable_until_its_replacement_commits(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", {"a.md": "The quarterly budget review happens in March.\n"})
    gate, entered = threading.Event(), threading.Event()
    gated = GatedIndex(EdgeIndex(data_dir.index / COLLECTION), gate, entered)
    settings = ContextSettings()
    with ContextService.open(data_dir, settings, embedder=embedder, index=cast(VectorIndex, gated)) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        svc.ingest()
        (root / "a.md").write_text("The quarterly budget review moved to April.\n")
        gated.armed = True
        t = threading.Thread(target=svc.ingest)
        t.start()
        try:
            assert entered.wait(30)  # the new version's point is written, the catalog still has the old one
            mid = svc.context_search("quarterly budget review", limit=3).results
            assert [r.text for r in mid] == ["The quarterly budget review happens in March.\n"]
        finally:
            gate.set()
            t.join(60)
        after = svc.context_search("quarterly budget review", limit=3).results
        assert [r.text for r in after] == ["The quarterly budget review moved to April.\n"]
        assert after[0].embedded
        assert svc.index.count() == 1
