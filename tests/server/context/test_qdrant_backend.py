"""The `qdrant` index backend, exercised through qdrant-client's local mode (`QdrantClient(":memory:")`),
which runs the same client API in process; a Qdrant server is not available here."""

from __future__ import annotations

from pathlib import Path

from qdrant_client import QdrantClient

from ivoai.server.context.embeddings import BuiltinEmbedder
from ivoai.server.context.index import COLLECTION, QdrantIndex
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir

from .conftest import write_tree


def test_qdrant_backend_ingests_searches_hybrid_filters_and_purges(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    index = QdrantIndex(QdrantClient(":memory:"))
    assert index.collection == COLLECTION
    write_tree(
        tmp_path / "d",
        {
            "a/billing.md": "Invoices are generated nightly by the billing cron job.\n",
            "b/search.md": "The search service uses hybrid retrieval with BM25.\n",
        },
    )
    with ContextService.open(data_dir, ContextSettings(), embedder=embedder, index=index) as svc:
        svc.add_connector("d", "filesystem", str(tmp_path / "d"))
        assert svc.ingest().status == "ok"
        assert index.count() == 2
        top = svc.context_search("when are invoices generated", limit=2).results[0]
        assert top.path == "a/billing.md"
        assert [r.path for r in svc.context_search("BM25", mode="lexical").results] == ["b/search.md"]
        assert [r.path for r in svc.context_search("retrieval", path_prefix="b").results] == ["b/search.md"]
        assert svc.ingest().connectors[0].chunks_embedded == 0
        svc.remove_connector("d")
        assert index.count() == 0


def test_edge_and_qdrant_backends_rank_hybrid_searches_identically(tmp_path: Path) -> None:
    import math

    from ivoai.server.context.index import EdgeIndex, IndexPoint, SearchSpec, path_prefixes

    texts = {
        "src/auth/tokens.py": "def refresh_access_token(session): exchange the refresh token",
        "src/auth/README.md": "Authentication uses short-lived access tokens refreshed by the client.",
        "src/http/headers.py": "def merge_request_headers(request, extra_headers): return merged headers",
        "docs/search.md": "Hybrid retrieval fuses dense and lexical scores.",
        "ops/runbook.md": "When the payment queue backs up, scale the worker pool.",
    }

    def unit(i: int) -> list[float]:
        raw = [math.sin(i * 7 + d) for d in range(384)]
        norm = math.sqrt(sum(x * x for x in raw))
        return [x / norm for x in raw]

    points = [
        IndexPoint(
            f"00000000-0000-0000-0000-00000000000{i + 1}",
            unit(i),
            text,
            {"document_id": f"d{i}", "connector": "c", "path": path, "path_prefixes": path_prefixes(path)},
        )
        for i, (path, text) in enumerate(texts.items())
    ]
    edge = EdgeIndex(tmp_path / "edge")
    server = QdrantIndex(QdrantClient(":memory:"))
    try:
        for index in (edge, server):
            index.upsert(points)
        for query_text, dense_of in (("refresh access tokens", 0), ("request headers", 3), ("auth", 4)):
            spec = SearchSpec(limit=5, dense=unit(dense_of), query_text=query_text, prefetch=5)
            a, b = edge.search(spec), server.search(spec)
            assert len(a) >= 2
            assert [h.point_id for h in a] == [h.point_id for h in b]
            assert [round(h.score, 5) for h in a] == [round(h.score, 5) for h in b]
    finally:
        edge.close()
        server.close()
