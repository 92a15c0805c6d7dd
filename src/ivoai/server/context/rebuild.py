"""Rebuilding the vector index from the catalog (`ContextService.rebuild`, `ivoai server context rebuild`).

The index is dropped and recreated: BM25 vectors for every chunk, dense vectors from the vector
cache, into which the dense vectors of the index about to be dropped are saved first (when they were
made by the same embedder). Phase 1 and phase 2 locks are both held, so no ingestion or embedding
writes meanwhile. The service then runs phase 2 for what the cache did not have.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import file_lock
from ivoai.common.limits import CONTEXT_LEXICAL_BATCH_CHUNKS, INGEST_LOCK_WAIT_SECONDS
from ivoai.server.context.catalog import DENSE_EMBEDDED, DENSE_LEXICAL_ONLY, DENSE_PENDING, Catalog, ChunkHit
from ivoai.server.context.errors import IngestRunningError
from ivoai.server.context.index import COLLECTION, IndexPoint, VectorIndex, path_prefixes
from ivoai.server.context.ingest import IngestProgress
from ivoai.server.context.vector_cache import VectorCache

INDEX_SCHEMA_META = "index_schema"  # catalog meta: the collection (schema) the index was last built as
INDEX_EMBEDDER_META = "index_embedder"  # catalog meta: the embedder identity of the index's dense vectors
ProgressFn = Callable[[IngestProgress], None]


@dataclass
class Rebuilt:
    """What one rebuild wrote (before phase 2)."""

    documents: int
    chunks: int
    cached: int
    backend: str


@dataclass
class IndexRebuild:
    """One rebuild of `index` from `catalog`, with dense vectors of embedder `model` from `cache`."""

    catalog: Catalog
    cache: VectorCache
    model: str
    progress: ProgressFn | None = None

    def run(
        self, root: Path, locks: tuple[Path, Path], index: Callable[[], VectorIndex], *, edge_dir: Path | None
    ) -> Rebuilt:
        """Hold both `locks` (phase 1, phase 2; below `root`), harvest, reset and refill the index;
        `edge_dir`: the Qdrant Edge directory whose older-schema shards are then deleted.

        Raises:
            IngestRunningError: an ingestion or an embedding pass holds a lock.
        """
        ingest_lock, embed_lock = locks
        try:
            with (
                file_lock(root, ingest_lock, timeout=INGEST_LOCK_WAIT_SECONDS),
                file_lock(root, embed_lock, timeout=INGEST_LOCK_WAIT_SECONDS),
            ):
                rebuilt = self._refill(index())
                if edge_dir is not None:
                    _remove_old_shards(edge_dir)
                return rebuilt
        except IngestRunningError:
            raise
        except IvoaiError as exc:
            if exc.code == "lock_timeout":
                raise IngestRunningError(
                    "an ingestion or embedding is running on this data directory; rebuild after it"
                ) from None
            raise

    def _refill(self, index: VectorIndex) -> Rebuilt:
        self._harvest(index)
        index.reset()
        docs = chunks = cached = 0
        total = self.catalog.counts()
        prog = IngestProgress(
            "*", "lexical", documents_total=total["documents"], chunks_total=total["chunks"]
        )
        buf: list[ChunkHit] = []
        for did, _conn, _path, _body in self.catalog.iter_documents():
            docs += 1
            buf.extend(self.catalog.chunks_of(did))
            if len(buf) >= CONTEXT_LEXICAL_BATCH_CHUNKS:
                cached += self._batch(index, buf, prog)
                chunks += len(buf)
                buf = []
            prog.documents_done = docs
        cached += self._batch(index, buf, prog)
        chunks += len(buf)
        index.flush()
        self.catalog.set_meta("index_dirty", "0")
        self.catalog.set_meta(INDEX_SCHEMA_META, COLLECTION)
        return Rebuilt(docs, chunks, cached, index.backend)

    def _harvest(self, index: VectorIndex) -> None:
        """Save the dense vectors of the index about to be dropped into the vector cache (by text)."""
        if self.catalog.get_meta(INDEX_EMBEDDER_META) != self.model:
            return  # made by another embedder: its vectors must not be reused for this one
        try:
            for part in index.iter_dense():
                texts = self.catalog.resolve_chunks([pid for pid, _ in part])
                self.cache.put_many(self.model, [(texts[pid].text, vec) for pid, vec in part if pid in texts])
        except IvoaiError:
            return  # a damaged index: rebuild re-embeds what it cannot save

    def _batch(self, index: VectorIndex, buf: list[ChunkHit], prog: IngestProgress) -> int:
        if not buf:
            return 0
        vectors = self.cache.get_many(self.model, [ch.text for ch in buf if ch.dense != DENSE_LEXICAL_ONLY])
        index.upsert(
            [
                IndexPoint(
                    ch.chunk_id,
                    vectors.get(ch.text) if ch.dense != DENSE_LEXICAL_ONLY else None,
                    ch.text,
                    {
                        "document_id": ch.document_id,
                        "connector": ch.connector,
                        "path": ch.path,
                        "path_prefixes": path_prefixes(ch.path),
                        "chunk_index": ch.index,
                    },
                )
                for ch in buf
            ]
        )
        states = [
            (DENSE_EMBEDDED if ch.text in vectors else DENSE_PENDING, ch.chunk_id)
            for ch in buf
            if ch.dense != DENSE_LEXICAL_ONLY
        ]
        with self.catalog.tx() as db:
            db.executemany("UPDATE chunks SET dense=? WHERE chunk_id=?", states)
        prog.advance(chunks=len(buf))
        if self.progress is not None:
            self.progress(prog)
        return sum(1 for state, _ in states if state == DENSE_EMBEDDED)


def _remove_old_shards(index_dir: Path) -> None:
    """Delete Edge shards of older index schemas (`ivoai-context-v1-d384`, …): rebuild replaced them."""
    for old in index_dir.glob("ivoai-context-v*-d*"):
        if old.name != COLLECTION and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
