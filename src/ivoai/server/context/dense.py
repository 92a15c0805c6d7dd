"""Phase 2 of ingestion (dense): add the dense vector to every chunk whose point still lacks it.

Per batch of `CONTEXT_DENSE_BATCH_CHUNKS` pending chunks (in write order, so documents complete one
after another):

1. vectors for texts seen before come from the vector cache (identical texts in one batch are
   embedded once);
2. the rest are embedded, and **stored in the cache before anything else**: from then on a crash,
   Ctrl-C or SIGKILL cannot cause that text to be embedded again;
3. in one catalog transaction: the chunks that are still pending (a document re-ingested meanwhile
   replaced its chunks; a connector may have been removed) get their dense vector in the index
   (`set_dense`), then are marked embedded. Phase 1 deletes a replaced chunk's point only after its
   own catalog commit, which waits for this transaction, so the point of a chunk seen here as
   pending still exists, and a vector is never written for a chunk that is gone.

One phase 2 per data directory at a time (`DIR/run/context-embed.lock`, not waited for: a second one
returns `busy` at once). The worker records itself and its rate in the catalog (`embed_worker`), so
status can say who is embedding, how fast, and when it will be done, and ignore a dead worker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ivoai.common.errors import LockTimeoutError
from ivoai.common.fsio import file_lock
from ivoai.common.limits import CONTEXT_DENSE_BATCH_CHUNKS
from ivoai.common.procid import is_alive, own_marker
from ivoai.server.context.catalog import Catalog, PendingChunk
from ivoai.server.context.embeddings import Embedder, cache_identity
from ivoai.server.context.index import VectorIndex
from ivoai.server.context.ingest import IngestProgress, ProgressFn
from ivoai.server.context.vector_cache import VectorCache

EMBED_WORKER_META = "embed_worker"  # JSON: pid, marker, rate (chunks/s), updated_at
_RATE_WEIGHT = 0.3  # exponential moving average of the batch rate


@dataclass
class EmbedStats:
    """What one phase 2 pass did."""

    status: str = "ok"  # ok | busy (another process embeds) | stopped (asked to stop early)
    embedded: int = 0  # vectors the embedder computed
    cached: int = 0  # vectors taken from the cache
    gone: int = 0  # chunks replaced or removed while their vectors were computed (not written)
    pending: int = 0  # still pending afterwards (in the pass's scope)
    seconds: float = 0.0


@dataclass
class WorkerInfo:
    """The process embedding this data directory, as recorded in the catalog."""

    pid: int
    rate: float | None
    updated_at: float


def read_worker(catalog: Catalog) -> WorkerInfo | None:
    """The live process running phase 2 here, or None (a dead one's record is ignored)."""
    raw = catalog.get_meta(EMBED_WORKER_META)
    if not raw:
        return None
    try:
        rec = json.loads(raw)
        pid, marker = int(rec["pid"]), str(rec.get("marker", ""))
        rate = float(rec["rate"]) if rec.get("rate") else None
        updated = float(rec.get("updated_at", 0.0))
    except (ValueError, KeyError, TypeError):
        return None
    if not rec.get("active") or not is_alive(pid, marker):
        return None
    return WorkerInfo(pid, rate, updated)


def last_rate(catalog: Catalog) -> float | None:
    """The last measured phase 2 rate (chunks/s) of this data directory, live worker or not."""
    raw = catalog.get_meta(EMBED_WORKER_META)
    try:
        rate = json.loads(raw)["rate"] if raw else None
        return float(rate) if rate else None
    except (ValueError, KeyError, TypeError):
        return None


class DenseFiller:
    """Phase 2 over one catalog and index with one embedder (see module doc)."""

    def __init__(
        self,
        catalog: Catalog,
        index: VectorIndex,
        cache: VectorCache | None,
        embedder: Embedder,
        lock_root: Path,
        lock_path: Path,
    ) -> None:
        self.catalog = catalog
        self.index = index
        self.cache = cache
        self.embedder = embedder
        self.model = cache_identity(embedder)
        self.lock_root = lock_root
        self.lock_path = lock_path
        self._rate: float | None = last_rate(catalog)

    def run(
        self,
        *,
        connector: str | None = None,
        progress: ProgressFn | None = None,
        max_chunks: int | None = None,
        batch_chunks: int = CONTEXT_DENSE_BATCH_CHUNKS,
        before_embed: Callable[[], object] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> EmbedStats:
        """Embed pending chunks (of one connector, or all) until none is left, `max_chunks` were
        handled or `should_stop()` says so; `before_embed()` runs before every embedder call (a
        background worker yields to searches there).

        Raises:
            EmbedderError, VectorIndexError: the batch in flight is not written; earlier ones stay.
        """
        t0 = time.monotonic()
        try:
            with file_lock(self.lock_root, self.lock_path, timeout=0):
                stats = self._run_locked(
                    connector, progress, max_chunks, batch_chunks, before_embed, should_stop
                )
        except LockTimeoutError:
            stats = EmbedStats(status="busy", pending=self.catalog.coverage(connector).pending)
        stats.seconds = round(time.monotonic() - t0, 3)
        return stats

    def _run_locked(
        self,
        connector: str | None,
        progress: ProgressFn | None,
        max_chunks: int | None,
        batch_chunks: int,
        before_embed: Callable[[], object] | None,
        should_stop: Callable[[], bool] | None,
    ) -> EmbedStats:
        stats = EmbedStats()
        start = self.catalog.coverage(connector)
        prog = IngestProgress(
            connector or "*", "embed", documents_total=start.pending_documents, chunks_total=start.pending
        )
        if not start.pending:
            progress = None  # nothing to embed: no phase 2 to show
        elif not getattr(self.embedder, "loaded", True):
            prog.note = "loading model"
        self._report(progress, prog)
        self._record(active=True)
        try:
            while True:
                handled = stats.embedded + stats.cached + stats.gone
                if max_chunks is not None and handled >= max_chunks:
                    break
                if should_stop is not None and should_stop():
                    stats.status = "stopped"
                    break
                limit = batch_chunks if max_chunks is None else min(batch_chunks, max_chunks - handled)
                batch = self.catalog.pending_chunks(limit, connector)
                if not batch:
                    break
                self._batch(batch, stats, before_embed, prog, progress)
                # totals follow what is left: a phase 1 running meanwhile may add pending chunks
                now = self.catalog.coverage(connector)
                prog.chunks_total = prog.chunks_done + now.pending
                prog.documents_done = max(
                    prog.documents_done, start.pending_documents - now.pending_documents
                )
                prog.documents_total = prog.documents_done + now.pending_documents
                self._report(progress, prog)
        finally:
            self._record(active=False)
        stats.pending = self.catalog.coverage(connector).pending
        prog.phase = "embedded"
        self._report(progress, prog)
        return stats

    def _batch(
        self,
        batch: list[PendingChunk],
        stats: EmbedStats,
        before_embed: Callable[[], object] | None,
        prog: IngestProgress,
        progress: ProgressFn | None,
    ) -> None:
        texts = list(dict.fromkeys(p.text for p in batch))
        vectors = self.cache.get_many(self.model, texts) if self.cache is not None else {}
        todo = [t for t in texts if t not in vectors]
        if todo:
            if before_embed is not None:
                before_embed()
            if prog.note == "loading model":
                self._report(progress, prog)
                warm = getattr(self.embedder, "warm", None)
                if callable(warm):
                    warm()
                prog.note = "embedding the first batch"
                self._report(progress, prog)
            t0 = time.monotonic()
            fresh = self.embedder.embed_passages(todo)
            self._measure(len(todo), time.monotonic() - t0)
            if self.cache is not None:  # durable first: this text is never embedded again
                self.cache.put_many(self.model, list(zip(todo, fresh, strict=True)))
            vectors.update(zip(todo, fresh, strict=True))
        with self.catalog.tx() as db:
            live = self.catalog.live_pending(db, [p.chunk_id for p in batch])
            write = [(p.chunk_id, vectors[p.text]) for p in batch if p.chunk_id in live]
            self.index.set_dense(write)
            self.catalog.mark_embedded(db, [cid for cid, _ in write])
        fresh_texts = set(todo)
        fresh_chunks = sum(1 for p in batch if p.chunk_id in live and p.text in fresh_texts)
        stats.embedded += fresh_chunks
        stats.cached += len(write) - fresh_chunks
        stats.gone += len(batch) - len(write)
        prog.advance(chunks=len(batch))

    def _measure(self, chunks: int, seconds: float) -> None:
        if seconds <= 0:
            return
        rate = chunks / seconds
        self._rate = rate if self._rate is None else _RATE_WEIGHT * rate + (1 - _RATE_WEIGHT) * self._rate
        self._record(active=True)

    def _record(self, *, active: bool) -> None:
        pid, marker = own_marker()
        rec = {"pid": pid, "marker": marker, "active": active, "rate": self._rate, "updated_at": time.time()}
        self.catalog.set_meta(EMBED_WORKER_META, json.dumps(rec, sort_keys=True))

    @staticmethod
    def _report(progress: ProgressFn | None, prog: IngestProgress) -> None:
        if progress is not None:
            progress(prog)
