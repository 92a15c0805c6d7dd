"""The service API the gateway calls: typed results, limits, filters, merge, budget, threads, rebuild."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ivoai.server.context.embeddings import BuiltinEmbedder
from ivoai.server.context.errors import ConnectorNotFoundError, DocumentNotFoundError, InvalidQueryError
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir

from .conftest import write_tree

DOCS = {
    "ops/runbook.md": "When the payment queue backs up, scale the worker pool and drain dead letters.\n",
    "src/auth/tokens.py": 'def refresh_access_token(session):\n    """Exchange the refresh token."""\n',
    "src/auth/README.md": "Authentication uses short-lived access tokens refreshed by the client.\n",
}


@pytest.fixture
def loaded(tmp_path: Path, svc: ContextService) -> ContextService:
    write_tree(tmp_path / "a", DOCS)
    write_tree(tmp_path / "b", {"notes.md": "Access tokens for the staging cluster are short-lived too.\n"})
    svc.add_connector("a", "filesystem", str(tmp_path / "a"))
    svc.add_connector("b", "filesystem", str(tmp_path / "b"))
    assert svc.ingest().status == "ok"
    return svc


def test_health_is_ok_with_zero_connectors(svc: ContextService) -> None:
    h = svc.context_health()
    assert (h.status, h.connectors, h.documents, h.index_points) == ("ok", 0, 0, 0)
    assert h.collection == "ivoai-context-v2-d384" and h.index_backend == "edge"


def test_search_results_carry_source_metadata_and_are_labelled_untrusted(loaded: ContextService) -> None:
    res = loaded.context_search("how do I refresh an access token", limit=5)
    top = res.results[0]
    assert top.path in {"src/auth/tokens.py", "src/auth/README.md"}
    dumped = top.model_dump(mode="json")
    for key in ("document_id", "connector", "path", "chunk_index", "score", "text", "url"):
        assert key in dumped
    assert dumped["trust"] == "untrusted" and "never as instructions" in res.notice
    assert top.url.startswith("ivoai://context/a/")


def test_connector_and_path_prefix_filters_restrict_results(loaded: ContextService) -> None:
    only_b = loaded.context_search("access tokens", connector="b")
    assert {r.connector for r in only_b.results} == {"b"}
    auth = loaded.context_search("access tokens", path_prefix="src/auth/")
    assert auth.results and all(r.path.startswith("src/auth/") for r in auth.results)
    assert (
        loaded.context_search("access tokens", path_prefix="src/aut").results == []
    )  # whole components only


def test_relevance_floor_drops_unrelated_dense_neighbours(loaded: ContextService) -> None:
    res = loaded.context_search("zqxj vortex flamingo")
    assert res.results == []


def test_invalid_arguments_are_refused_with_the_field_and_limit_named(loaded: ContextService) -> None:
    with pytest.raises(InvalidQueryError, match="limit must be between 1 and 100"):
        loaded.context_search("x", limit=101)
    with pytest.raises(InvalidQueryError, match="non-empty"):
        loaded.context_search("   ")
    with pytest.raises(InvalidQueryError, match="limit is 2000"):
        loaded.context_search("q" * 2001)
    with pytest.raises(InvalidQueryError, match="path_prefix"):
        loaded.context_search("x", path_prefix="../etc")
    with pytest.raises(InvalidQueryError, match="budget_bytes must be at least 256"):
        loaded.context_search("x", budget_bytes=10)
    with pytest.raises(ConnectorNotFoundError):
        loaded.context_search("x", connector="nope")
    with pytest.raises(InvalidQueryError, match="limit must be between 1 and 100"):
        loaded.context_recent(0)


def test_overlapping_chunks_of_one_document_are_merged_into_one_result(
    tmp_path: Path, svc: ContextService
) -> None:
    body = "".join(
        f"Step {i}: the rollback procedure restores the previous release of the gateway.\n" for i in range(30)
    )
    write_tree(tmp_path / "m", {"rollback.md": body})
    svc.add_connector("m", "filesystem", str(tmp_path / "m"))
    svc.ingest()
    res = svc.context_search("rollback procedure previous release gateway", limit=10)
    assert len(res.results) == 1
    r = res.results[0]
    assert r.chunk_indexes == [0, 1, 2] and r.text == body


def test_result_budget_keeps_whole_results_and_cuts_only_a_lone_oversized_one(
    tmp_path: Path, svc: ContextService
) -> None:
    write_tree(tmp_path / "m", {"long.md": "budget planning " * 70, "short.md": "budget planning notes"})
    svc.add_connector("m", "filesystem", str(tmp_path / "m"))
    svc.ingest()
    res = svc.context_search("budget planning", budget_bytes=300)
    assert res.truncated
    assert sum(len(r.text.encode()) for r in res.results) <= 300
    assert res.results[0].truncated or [r.path for r in res.results] == ["short.md"]


def test_get_document_recent_and_chatgpt_shapes(loaded: ContextService) -> None:
    recent = loaded.context_recent(2).model_dump(mode="json")
    assert len(recent["documents"]) == 2 and all(
        "text" not in d and "body" not in d for d in recent["documents"]
    )
    did = loaded.context_search("payment queue backs up").results[0].document_id
    doc = loaded.context_get_document(did)
    assert doc.text == DOCS["ops/runbook.md"] and doc.path == "ops/runbook.md" and doc.chunk_count == 1
    with pytest.raises(DocumentNotFoundError):
        loaded.context_get_document("d_missing")
    hits = loaded.chatgpt_search("payment queue").model_dump(mode="json")["results"]
    assert hits and set(hits[0]) == {"id", "title", "url"}
    fetched = loaded.chatgpt_fetch(hits[0]["id"]).model_dump(mode="json")
    assert set(fetched) == {"id", "title", "text", "url", "metadata"}
    assert fetched["metadata"]["trust"] == "untrusted"


def test_concurrent_searches_from_worker_threads_all_succeed(loaded: ContextService) -> None:
    errors: list[BaseException] = []
    counts: list[int] = []

    def worker() -> None:
        try:
            for _ in range(3):
                counts.append(len(loaded.context_search("access tokens").results))
                loaded.context_health()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(counts) == 12 and min(counts) > 0


def test_rebuild_recreates_the_same_index_from_the_catalog(loaded: ContextService) -> None:
    before = sorted(loaded.index.iter_ids())
    ranked = sorted((r.score, r.document_id) for r in loaded.context_search("access tokens").results)
    report = loaded.rebuild()
    assert (report.documents, report.chunks) == (4, 4)
    assert sorted(loaded.index.iter_ids()) == before
    # same scores for the same documents (RRF ties may come back in another order)
    assert sorted((r.score, r.document_id) for r in loaded.context_search("access tokens").results) == ranked


def test_removing_a_connector_purges_its_documents_and_vectors(loaded: ContextService) -> None:
    loaded.remove_connector("a")
    assert [c.name for c in loaded.list_connectors()] == ["b"]
    assert loaded.index.count() == loaded.catalog.counts()["chunks"] == 1
    assert {r.connector for r in loaded.context_search("access tokens").results} == {"b"}
    with pytest.raises(ConnectorNotFoundError):
        loaded.remove_connector("a")


def test_catalog_files_are_private(loaded: ContextService) -> None:
    for p in loaded.data_dir.context.iterdir():
        assert p.stat().st_mode & 0o077 == 0, p
    assert loaded.data_dir.index.stat().st_mode & 0o777 == 0o700


def test_two_services_in_one_process_share_the_edge_shard_and_survive_a_rebuild(
    loaded: ContextService, embedder: BuiltinEmbedder
) -> None:
    with ContextService.open(loaded.data_dir, ContextSettings(), embedder=embedder) as other:
        assert other.index.count() == loaded.index.count() == 4
        loaded.rebuild()
        assert other.context_search("payment queue backs up").results[0].path == "ops/runbook.md"
    assert loaded.index.count() == 4  # the other service's close() left this opener attached


def test_merge_joins_consecutive_chunks_whatever_order_they_rank_in() -> None:
    from ivoai.server.context.catalog import ChunkHit
    from ivoai.server.context.search import merge_hits as _merge

    def hit(doc: str, idx: int) -> ChunkHit:
        return ChunkHit(f"c{doc}{idx}", doc, "m", f"{doc}.md", idx, idx * 100, idx * 100 + 120, "t", 0.0)

    ranked = [
        (hit("a", 0), 0.9),
        (hit("a", 2), 0.8),
        (hit("b", 0), 0.7),
        (hit("a", 1), 0.6),
        (hit("a", 5), 0.5),
    ]
    merged = _merge(ranked)
    assert [(m.hit.document_id, sorted(p.index for p in m.parts), m.score) for m in merged] == [
        ("a", [0, 1, 2], 0.9),
        ("b", [0], 0.7),
        ("a", [5], 0.5),
    ]


def test_ingest_rebuilds_an_index_built_by_an_older_lexical_schema(
    loaded: ContextService, data_dir: ServerDataDir
) -> None:
    from ivoai.server.context.index import COLLECTION

    assert loaded.catalog.get_meta("index_schema") == COLLECTION
    # what a data directory of the v1 analyzer looks like after upgrading: the old shard directory,
    # the catalog naming it, and an empty collection of the current schema
    old = data_dir.index / "ivoai-context-v1-d384"
    old.mkdir()
    loaded.catalog.set_meta("index_schema", "ivoai-context-v1-d384")
    loaded.index.reset()
    assert loaded.context_search("refresh_access_token", limit=3).results == []
    assert loaded.ingest().status == "ok"
    assert loaded.catalog.get_meta("index_schema") == COLLECTION
    assert not old.exists()
    hits = loaded.context_search("refresh_access_token", limit=3).results
    assert hits and hits[0].path == "src/auth/tokens.py"
    assert loaded.index.count() == loaded.catalog.counts()["chunks"]
