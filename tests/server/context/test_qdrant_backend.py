"""The `qdrant` index backend, exercised through qdrant-client's local mode (`QdrantClient(":memory:")`),
which runs the same client API in process; a Qdrant server is not available here."""

from __future__ import annotations

from pathlib import Path

from qdrant_client import QdrantClient

from ivoai.server.context.embeddings import BuiltinEmbedder
from ivoai.server.context.index import COLLECTION, QdrantIndex
from ivoai.server.context.service import ContextService
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
    with ContextService.open(data_dir, embedder=embedder, index=index) as svc:
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
