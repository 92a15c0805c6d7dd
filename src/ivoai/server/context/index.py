"""The vector index behind one interface: a Qdrant Edge shard in DIR/index (default) or a Qdrant server.

Each point is one chunk: a dense E5 vector (`dense`, cosine) and a BM25 sparse vector (`bm25`, IDF
applied by the engine) of the chunk's path and text, computed by ivoai's code-aware analyzer
(`analyzer.py`: whole identifiers plus their snake_case/camelCase parts, light stemming). Hybrid search
runs the dense query (with the relevance floor) and the lexical query (only chunks sharing a term with
the query), each for `prefetch` candidates, and fuses them here by a convex combination of min-max
normalized scores (dense weight `CONTEXT_HYBRID_DENSE_WEIGHT`), so both backends rank identically.

The index is a cache: the catalog is authoritative and `rebuild` recreates the index from it.
"""

from __future__ import annotations

import os
import shutil
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ivoai.common.limits import (
    CONTEXT_HYBRID_DENSE_WEIGHT,
    CONTEXT_INDEX_SEARCH_THREADS_MAX,
    CONTEXT_INDEX_UPSERT_BATCH,
    EMBEDDING_DIMENSIONS,
)
from ivoai.server.context.analyzer import (
    LEXICAL_SCHEMA,
    Sparse,
    convex_fusion,
    lexical_text,
    sparse_document,
    sparse_query,
)
from ivoai.server.context.errors import IndexBusyError, VectorIndexError

# The version is the lexical schema: a new analyzer means new sparse vectors, hence a new collection
# (the service rebuilds it from the catalog; see ContextService.ingest).
COLLECTION = f"ivoai-context-v{LEXICAL_SCHEMA}-d{EMBEDDING_DIMENSIONS}"
DENSE = "dense"
SPARSE = "bm25"
PAYLOAD_KEYWORDS = ("document_id", "connector", "path_prefixes")
SearchMode = Literal["hybrid", "dense", "lexical"]


@dataclass(frozen=True)
class IndexPoint:
    point_id: str
    vector: list[float] | None  # None: written with its BM25 vector only (phase 1); `set_dense` adds it
    text: str  # for the BM25 sparse vector; not stored in the payload (the catalog holds text)
    payload: dict[str, Any]


@dataclass(frozen=True)
class Hit:
    """A search result: the point and its score (the catalog holds everything else, so no payload)."""

    point_id: str
    score: float


@dataclass(frozen=True)
class SearchSpec:
    limit: int
    dense: list[float] | None = None
    query_text: str | None = None
    connector: str | None = None
    path_prefix: str | None = None
    mode: SearchMode = "hybrid"
    prefetch: int = 50
    dense_floor: float | None = None


class VectorIndex(Protocol):
    backend: str

    def upsert(self, points: Sequence[IndexPoint]) -> None: ...
    def set_dense(self, vectors: Sequence[tuple[str, list[float]]]) -> None: ...
    def candidates(self, spec: SearchSpec) -> tuple[list[Hit], list[Hit]]: ...
    def dense_vectors(self, ids: Sequence[str]) -> dict[str, list[float]]: ...
    def delete_ids(self, ids: Sequence[str]) -> None: ...
    def delete_connector(self, connector: str) -> None: ...
    def search(self, spec: SearchSpec) -> list[Hit]: ...
    def iter_ids(self) -> Iterator[str]: ...
    def iter_dense(self) -> Iterator[list[tuple[str, list[float]]]]: ...
    def count(self) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def reset(self) -> None: ...


def path_prefixes(path: str) -> list[str]:
    """Every directory prefix of a relative path plus the path itself: `a/b/c` -> [a, a/b, a/b/c]."""
    parts = path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def point_sparse(point: IndexPoint) -> Sparse:
    """The BM25 document vector of a point: its path (from the payload) and its chunk text."""
    return sparse_document(lexical_text(str(point.payload.get("path", "")), point.text))


def fuse(dense: Sequence[Hit], lexical: Sequence[Hit], limit: int) -> list[Hit]:
    """Hybrid ranking of the dense and lexical candidates (best first); the score is the fused score."""
    fused = convex_fusion(
        [(h.point_id, h.score) for h in dense],
        [(h.point_id, h.score) for h in lexical],
        CONTEXT_HYBRID_DENSE_WEIGHT,
        limit,
    )
    return [Hit(pid, score) for pid, score in fused]


# ------------------------------------------------------------------------------------------------ edge
def _edge_sparse(vec: Sparse) -> Any:
    import qdrant_edge as qe

    return qe.SparseVector(indices=vec.indices, values=vec.values)


def _edge_vectors(point: IndexPoint) -> dict[str, Any]:
    vectors: dict[str, Any] = {SPARSE: _edge_sparse(point_sparse(point))}
    if point.vector is not None:
        vectors[DENSE] = point.vector
    return vectors


def _search_threads() -> int:
    """Qdrant Edge's per-shard search pool: one thread per CPU this process may run on.

    The engine's own default was 8 threads on a 2-CPU machine here: each hybrid search then paid
    ~200 forced context switches and ~0.5 ms of CPU for per-segment parallelism the cores cannot give.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, CONTEXT_INDEX_SEARCH_THREADS_MAX))


_SHARDS: dict[str, tuple[Any, int]] = {}
_SHARD_LOCKS: dict[str, threading.RLock] = {}
_SHARDS_LOCK = threading.Lock()


def _acquire_shard(path: Path) -> Any:
    import qdrant_edge as qe

    key = str(path)
    with _SHARDS_LOCK:
        if key in _SHARDS:
            shard, refs = _SHARDS[key]
            _SHARDS[key] = (shard, refs + 1)
            return shard
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=EMBEDDING_DIMENSIONS, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            max_search_threads=_search_threads(),
        )
        try:
            if (path / "segments").exists() or (path / "wal").exists():
                shard = qe.EdgeShard.load(key, config)  # checked against the shard; sets the pool size
            else:
                shard = qe.EdgeShard.create(key, config)
                for name in PAYLOAD_KEYWORDS:
                    shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        except Exception as exc:  # noqa: BLE001 - the engine raises bare Exception; classify its message
            if "WouldBlock" in str(exc) or "lock" in str(exc).lower():
                raise IndexBusyError(
                    f"the context index {path} is open in another process (is `ivoai server start` running?);"
                    " stop it or run this through the server"
                ) from None
            raise VectorIndexError(f"cannot open the context index {path}: {exc}") from None
        _SHARDS[key] = (shard, 1)
        return shard


def _release_shard(path: Path) -> None:
    key = str(path)
    with _SHARDS_LOCK:
        if key not in _SHARDS:
            return
        shard, refs = _SHARDS[key]
        if refs > 1:
            _SHARDS[key] = (shard, refs - 1)
            return
        del _SHARDS[key]
        shard.flush()
        shard.close()


def _reset_shard(path: Path) -> None:
    """Replace the open shard with an empty one, keeping every opener of this process attached."""
    key = str(path)
    with _SHARDS_LOCK:
        shard, refs = _SHARDS.pop(key)
        shard.close()
        shutil.rmtree(path, ignore_errors=True)
    _acquire_shard(path)
    with _SHARDS_LOCK:
        new, _ = _SHARDS[key]
        _SHARDS[key] = (new, refs)


def _edge_filter(spec: SearchSpec) -> Any:
    import qdrant_edge as qe

    must: list[Any] = []
    if spec.connector:
        must.append(qe.FieldCondition(key="connector", match=qe.MatchValue(spec.connector)))
    if spec.path_prefix:
        must.append(qe.FieldCondition(key="path_prefixes", match=qe.MatchValue(spec.path_prefix)))
    return qe.Filter(must=must) if must else None


def _scrolled(scroll: Callable[[Any], tuple[list[Any], Any]]) -> Iterator[list[Any]]:
    """Every page of a scroll: `scroll(offset)` answers (records, next offset); None ends it."""
    offset: Any = None
    while True:
        records, offset = scroll(offset)
        yield records
        if offset is None:
            return


@dataclass
class EdgeIndex:
    """A Qdrant Edge shard at DIR/index/ivoai-context-v1-d384 (one opener per process; shared by refcount)."""

    path: Path
    backend: str = "edge"
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _closed: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        _acquire_shard(self.path)
        with _SHARDS_LOCK:  # every opener of one shard in this process serialises on one lock
            self._lock = _SHARD_LOCKS.setdefault(str(self.path), self._lock)

    @property
    def _shard(self) -> Any:
        """The process-wide open shard (looked up per call: `reset` may have replaced it)."""
        with _SHARDS_LOCK:
            entry = _SHARDS.get(str(self.path))
        if entry is None:
            raise VectorIndexError(f"the context index {self.path} is closed")
        return entry[0]

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            with self._lock:
                return fn(*args)
        except Exception as exc:  # noqa: BLE001 - the engine raises bare Exception
            raise VectorIndexError(f"context index operation failed: {exc}") from None

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points (dense + BM25 sparse vectors, payload)."""
        import qdrant_edge as qe

        for i in range(0, len(points), CONTEXT_INDEX_UPSERT_BATCH):
            batch = [
                qe.Point(id=p.point_id, vector=_edge_vectors(p), payload=p.payload)
                for p in points[i : i + CONTEXT_INDEX_UPSERT_BATCH]
            ]
            self._call(self._shard.update, qe.UpdateOperation.upsert_points(batch))

    def set_dense(self, vectors: Sequence[tuple[str, list[float]]]) -> None:
        """Add (or replace) the dense vector of existing points; their BM25 vector and payload stay.

        Every point must exist (the engine refuses the batch otherwise): callers check under the
        data directory's write lock that the chunks are still in the catalog.
        """
        import qdrant_edge as qe

        for i in range(0, len(vectors), CONTEXT_INDEX_UPSERT_BATCH):
            batch = [
                qe.PointVectors(id=pid, vector={DENSE: vec})
                for pid, vec in vectors[i : i + CONTEXT_INDEX_UPSERT_BATCH]
            ]
            self._call(self._shard.update, qe.UpdateOperation.update_vectors(batch))

    def delete_ids(self, ids: Sequence[str]) -> None:
        """Delete points by ID (missing IDs are ignored)."""
        import qdrant_edge as qe

        for i in range(0, len(ids), CONTEXT_INDEX_UPSERT_BATCH):
            self._call(
                self._shard.update,
                qe.UpdateOperation.delete_points(list(ids[i : i + CONTEXT_INDEX_UPSERT_BATCH])),
            )

    def delete_connector(self, connector: str) -> None:
        """Delete every point of one connector."""
        import qdrant_edge as qe

        flt = qe.Filter(must=[qe.FieldCondition(key="connector", match=qe.MatchValue(connector))])
        self._call(self._shard.update, qe.UpdateOperation.delete_points_by_filter(flt))

    def search(self, spec: SearchSpec) -> list[Hit]:
        """Dense, lexical or hybrid (fused) search with optional connector and path-prefix filters."""
        if spec.mode == "dense":
            return self._run([self._request(spec, "dense", spec.limit)])[0]
        if spec.mode == "lexical":
            return self._run([self._request(spec, "lexical", spec.limit)])[0]
        dense, lexical = self.candidates(spec)
        return fuse(dense, lexical, spec.limit)

    def candidates(self, spec: SearchSpec) -> tuple[list[Hit], list[Hit]]:
        """The dense and the lexical candidate lists of a hybrid search (best first, unfused)."""
        depth = max(spec.prefetch, spec.limit)
        # One engine batch for both candidate lists: one pass over the segments, one GIL release.
        requests = [self._request(spec, "dense", depth), self._request(spec, "lexical", depth)]
        dense, lexical = self._run(requests)
        return dense, lexical

    def _request(self, spec: SearchSpec, mode: str, limit: int) -> Any:
        """The engine request for one candidate list, or None when it cannot match anything."""
        import qdrant_edge as qe

        flt = _edge_filter(spec)
        if mode == "dense":
            if spec.dense is None:
                return None
            return qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(spec.dense, using=DENSE),
                filter=flt,
                with_payload=False,
                score_threshold=spec.dense_floor,
            )
        if spec.query_text is None:
            return None
        sparse = _edge_sparse(sparse_query(spec.query_text))
        if not sparse.indices:  # no lexical token (punctuation only): nothing can match
            return None
        return qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(sparse, using=SPARSE), filter=flt, with_payload=False
        )

    def _run(self, requests: list[Any]) -> list[list[Hit]]:
        """Run the requests (None = no result) as one engine call; hits per request, in order."""
        import qdrant_edge as qe

        live = [r for r in requests if r is not None]
        if not live:
            batches: list[Any] = []
        elif len(live) == 1:
            batches = [self._call(self._shard.query, live[0])]
        else:
            batches = self._call(self._shard.query_batch, qe.QueryBatchRequest(live))
        results = iter(batches)
        return [
            [] if r is None else [Hit(str(p.id), float(p.score)) for p in next(results)] for r in requests
        ]

    def _pages(self, **request: Any) -> Iterator[list[Any]]:
        import qdrant_edge as qe

        return _scrolled(
            lambda offset: self._call(
                self._shard.scroll, qe.ScrollRequest(offset=offset, with_payload=False, **request)
            )
        )

    def iter_ids(self) -> Iterator[str]:
        """Every point ID in the index (for repair after an interrupted run)."""
        for records in self._pages(limit=1000):
            yield from (str(r.id) for r in records)

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The dense vectors of those points that have one."""
        if not ids:
            return {}
        records = self._call(self._shard.retrieve, list(ids), False, [DENSE])
        return {str(r.id): list(r.vector[DENSE]) for r in records if r.vector and DENSE in r.vector}

    def iter_dense(self) -> Iterator[list[tuple[str, list[float]]]]:
        """Pages of (point ID, dense vector) for every point that has one (rebuild saves them)."""
        import qdrant_edge as qe

        flt = qe.Filter(must=[qe.HasVectorCondition(DENSE)])
        for records in self._pages(limit=500, filter=flt, with_vector=[DENSE]):
            page = [(str(r.id), list(r.vector[DENSE])) for r in records if r.vector and DENSE in r.vector]
            if page:
                yield page

    def count(self) -> int:
        """Number of points."""
        import qdrant_edge as qe

        return int(self._call(self._shard.count, qe.CountRequest(exact=True)))

    def flush(self) -> None:
        """Persist pending writes."""
        self._call(self._shard.flush)

    def close(self) -> None:
        """Release this opener once (the shard closes with its last opener)."""
        if not self._closed:
            self._closed = True
            _release_shard(self.path)

    def reset(self) -> None:
        """Delete the shard's files and start an empty shard (rebuild refills it)."""
        with self._lock:
            _reset_shard(self.path)


# ---------------------------------------------------------------------------------------------- qdrant
@dataclass
class QdrantIndex:
    """A collection on a Qdrant server (or qdrant-client's local mode) through `qdrant-client`."""

    client: Any
    collection: str = COLLECTION
    backend: str = "qdrant"

    def __post_init__(self) -> None:
        from qdrant_client import models as m

        try:
            if not self.client.collection_exists(self.collection):
                self.client.create_collection(
                    self.collection,
                    vectors_config={
                        DENSE: m.VectorParams(size=EMBEDDING_DIMENSIONS, distance=m.Distance.COSINE)
                    },
                    sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                )
                with warnings.catch_warnings():
                    # qdrant-client's local mode warns payload indexes are a no-op there; a server uses them
                    warnings.filterwarnings(
                        "ignore", message="Payload indexes have no effect", category=UserWarning
                    )
                    for name in PAYLOAD_KEYWORDS:
                        self.client.create_payload_index(self.collection, name, m.PayloadSchemaType.KEYWORD)
        except Exception as exc:  # noqa: BLE001 - qdrant-client raises many transport types
            raise VectorIndexError(
                f"cannot open Qdrant collection {self.collection}: {type(exc).__name__}: {exc}"
            ) from None

    def _sparse(self, vec: Sparse) -> Any:
        from qdrant_client import models as m

        return m.SparseVector(indices=vec.indices, values=vec.values)

    def _filter(self, spec: SearchSpec) -> Any:
        from qdrant_client import models as m

        must: list[Any] = []
        if spec.connector:
            must.append(m.FieldCondition(key="connector", match=m.MatchValue(value=spec.connector)))
        if spec.path_prefix:
            must.append(m.FieldCondition(key="path_prefixes", match=m.MatchValue(value=spec.path_prefix)))
        return m.Filter(must=must) if must else None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - qdrant-client raises many transport types
            raise VectorIndexError(f"Qdrant operation failed: {type(exc).__name__}: {exc}") from None

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points."""
        from qdrant_client import models as m

        for i in range(0, len(points), CONTEXT_INDEX_UPSERT_BATCH):
            batch = [
                m.PointStruct(
                    id=p.point_id,
                    vector={SPARSE: self._sparse(point_sparse(p))}
                    | ({DENSE: p.vector} if p.vector is not None else {}),
                    payload=p.payload,
                )
                for p in points[i : i + CONTEXT_INDEX_UPSERT_BATCH]
            ]
            self._call(self.client.upsert, self.collection, batch, wait=True)

    def set_dense(self, vectors: Sequence[tuple[str, list[float]]]) -> None:
        """Add (or replace) the dense vector of existing points (see `EdgeIndex.set_dense`)."""
        from qdrant_client import models as m

        for i in range(0, len(vectors), CONTEXT_INDEX_UPSERT_BATCH):
            batch = [
                m.PointVectors(id=pid, vector={DENSE: vec})
                for pid, vec in vectors[i : i + CONTEXT_INDEX_UPSERT_BATCH]
            ]
            self._call(self.client.update_vectors, self.collection, points=batch, wait=True)

    def delete_ids(self, ids: Sequence[str]) -> None:
        """Delete points by ID."""
        from qdrant_client import models as m

        if ids:
            self._call(self.client.delete, self.collection, m.PointIdsList(points=list(ids)), wait=True)

    def delete_connector(self, connector: str) -> None:
        """Delete every point of one connector."""
        from qdrant_client import models as m

        flt = m.Filter(must=[m.FieldCondition(key="connector", match=m.MatchValue(value=connector))])
        self._call(self.client.delete, self.collection, m.FilterSelector(filter=flt), wait=True)

    def search(self, spec: SearchSpec) -> list[Hit]:
        """Dense, lexical or hybrid (fused as for Edge) search."""
        if spec.mode == "dense":
            return self._query(spec, "dense", spec.limit)
        if spec.mode == "lexical":
            return self._query(spec, "lexical", spec.limit)
        dense, lexical = self.candidates(spec)
        return fuse(dense, lexical, spec.limit)

    def candidates(self, spec: SearchSpec) -> tuple[list[Hit], list[Hit]]:
        """The dense and the lexical candidate lists of a hybrid search (best first, unfused)."""
        depth = max(spec.prefetch, spec.limit)
        return self._query(spec, "dense", depth), self._query(spec, "lexical", depth)

    def _query(self, spec: SearchSpec, mode: str, limit: int) -> list[Hit]:
        flt = self._filter(spec)
        if mode == "dense":
            if spec.dense is None:
                return []
            query: Any = spec.dense
            using, threshold = DENSE, spec.dense_floor
        else:
            if spec.query_text is None:
                return []
            sparse = sparse_query(spec.query_text)
            if not sparse.indices:
                return []
            query, using, threshold = self._sparse(sparse), SPARSE, None
        res = self._call(
            self.client.query_points,
            self.collection,
            query=query,
            using=using,
            limit=limit,
            query_filter=flt,
            score_threshold=threshold,
            with_payload=False,
        )
        return [Hit(str(p.id), float(p.score)) for p in res.points]

    def _pages(self, limit: int, vectors: bool | list[str]) -> Iterator[list[Any]]:
        return _scrolled(
            lambda offset: self._call(
                self.client.scroll,
                self.collection,
                limit=limit,
                offset=offset,
                with_payload=False,
                with_vectors=vectors,
            )
        )

    def iter_ids(self) -> Iterator[str]:
        """Every point ID."""
        for records in self._pages(1000, False):
            yield from (str(r.id) for r in records)

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The dense vectors of those points that have one."""
        if not ids:
            return {}
        records = self._call(self.client.retrieve, self.collection, list(ids), with_vectors=[DENSE])
        return {
            str(r.id): list(r.vector[DENSE])
            for r in records
            if isinstance(r.vector, dict) and DENSE in r.vector
        }

    def iter_dense(self) -> Iterator[list[tuple[str, list[float]]]]:
        """Pages of (point ID, dense vector) for every point that has one."""
        for records in self._pages(500, [DENSE]):
            page = [
                (str(r.id), list(r.vector[DENSE]))
                for r in records
                if isinstance(r.vector, dict) and DENSE in r.vector
            ]
            if page:
                yield page

    def count(self) -> int:
        """Number of points."""
        return int(self._call(self.client.count, self.collection, exact=True).count)

    def flush(self) -> None:
        """Writes are acknowledged with wait=True; nothing to do."""

    def close(self) -> None:
        """Close the client."""
        self._call(self.client.close)

    def reset(self) -> None:
        """Delete and recreate the collection (rebuild refills it)."""
        self._call(self.client.delete_collection, self.collection)
        self.__post_init__()
