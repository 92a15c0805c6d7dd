"""Phase 1 of ingestion (lexical): discover, read safely, filter, normalize, chunk, index, catalog, reconcile.

Phase 1 writes every new chunk as an index point with its BM25 vector (and its dense vector when the
vector cache already has one for that exact text), commits the documents to the catalog, and deletes
stale points: after it, every document is searchable lexically. Phase 2 (`dense.py`) adds the dense
vectors of the chunks still `pending`, in the foreground (`ivoai server ingest`) or in a running
gateway's background.

Order of writes for a changed document: its new points are upserted first, then the catalog commits
the document and its chunk spans, then the stale points are deleted. Search resolves every hit through
the catalog, so points that are written but not yet committed (or left behind by a crash) are never
returned, and the previous version of a document stays searchable until its replacement commits.
A run that dies leaves a `running` row; the next run deletes every index point the catalog does not know.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.common.errors import LockTimeoutError
from ivoai.common.fsio import file_lock
from ivoai.common.ids import random_id
from ivoai.common.limits import (
    CONNECTOR_MAX_BYTES,
    CONNECTOR_MAX_DOCUMENTS,
    CONTEXT_LEXICAL_BATCH_CHUNKS,
    INGEST_LOCK_WAIT_SECONDS,
    INGEST_RUN_MAX_CHUNKS,
)
from ivoai.server.context.catalog import (
    DENSE_EMBEDDED,
    DENSE_LEXICAL_ONLY,
    DENSE_PENDING,
    Catalog,
    ChunkRow,
    ConnectorRow,
    DocumentRecord,
    KnownDocument,
)
from ivoai.server.context.chunker import Chunk, chunk_text
from ivoai.server.context.errors import ConnectorNotFoundError, IngestRunningError, InvalidConnectorError
from ivoai.server.context.filters import content_skip_reason, decode_text, lexical_only_reason
from ivoai.server.context.index import IndexPoint, VectorIndex, path_prefixes
from ivoai.server.context.sources import (
    Candidate,
    Skipped,
    open_root,
    read_candidate,
    walk_filesystem,
    walk_git,
)
from ivoai.server.context.vector_cache import VectorCache

INDEX_DIRTY = "index_dirty"  # set while a run writes; a run that starts with it set repairs the index first


def document_id(connector: str, path: str) -> str:
    """Stable document ID: derived from the connector name and the relative path only."""
    return "d_" + hashlib.sha256(f"{connector}\x00{path}".encode()).hexdigest()[:32]


@dataclass
class IngestProgress:
    """One progress report of a phase: counts so far, with the measured rate and ETA.

    `phase`: scan (listing the source) | lexical (phase 1: reading and indexing documents) | done
    (phase 1 finished) | embed (phase 2: adding dense vectors) | embedded (phase 2 finished).
    `note` says what happens while no rate is measured yet ("loading model"). The rate counts only
    work that finished (`chunks_done` at `measured_at`).
    """

    connector: str
    phase: str
    documents_done: int = 0
    documents_total: int = 0
    chunks_done: int = 0
    chunks_total: int = 0
    note: str = ""
    started: float = field(default_factory=time.monotonic)
    measured_at: float | None = None  # when chunks_done last moved

    def advance(self, *, chunks: int = 0, documents: int = 0) -> None:
        """Count finished work (the rate and ETA follow)."""
        self.chunks_done += chunks
        self.documents_done += documents
        if chunks or documents:
            self.measured_at = time.monotonic()
        if chunks:
            self.note = ""

    @property
    def chunks_per_second(self) -> float | None:
        """Finished chunks per second of this phase, or None before the first batch finished."""
        if self.measured_at is None or self.chunks_done <= 0:
            return None
        elapsed = self.measured_at - self.started
        return self.chunks_done / elapsed if elapsed > 0 else None

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the measured rate (phase 1: documents, whose chunks are not known ahead;
        phase 2: chunks); 0 when done; None while unknown."""
        if self.phase == "lexical":
            done, total = self.documents_done, self.documents_total
        else:
            done, total = self.chunks_done, self.chunks_total
        if total <= done:
            return 0.0
        if self.measured_at is None or done <= 0 or self.measured_at <= self.started:
            return None
        return (total - done) * (self.measured_at - self.started) / done


ProgressFn = Callable[[IngestProgress], None]


@dataclass
class ConnectorStats:
    connector: str
    status: str = "ok"  # ok | quota_exceeded | removed | error
    message: str = ""
    documents_seen: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    chunks_written: int = 0  # new index points (phase 1)
    chunks_embedded: int = 0  # dense vectors computed by the embedder (phase 2)
    chunks_cached: int = 0  # dense vectors taken from the vector cache (identical text seen before)
    chunks_reused: int = 0  # unchanged chunks of changed documents: their points were kept
    chunks_lexical_only: int = 0  # new chunks of lockfile/generated/minified documents: not embedded
    chunks_pending: int = 0  # chunks of this connector still without a dense vector after the run
    lexical_only_documents: int = 0
    lexical_only_reasons: dict[str, int] = field(default_factory=dict)
    lexical_seconds: float = 0.0
    embed_seconds: float = 0.0
    seconds: float = 0.0


@dataclass
class _Doc:
    cand: Candidate
    text: str
    content_hash: str
    chunks: list[Chunk]
    kind: str  # added | updated | touched (same bytes, new mtime)
    lexical_only: str | None  # why the document is not embedded, or None


class Ingestor:
    """Phase 1 over the connectors of a catalog, writing to one index (no embedder is called)."""

    def __init__(
        self,
        catalog: Catalog,
        index: VectorIndex,
        cache: VectorCache | None,
        model: str,
        lock_root: Path,
        lock_path: Path,
        progress: ProgressFn | None = None,
    ) -> None:
        """`model`: the embedder identity whose cached vectors new chunks may take (`cache_identity`)."""
        self.catalog = catalog
        self.index = index
        self.cache = cache
        self.model = model
        self.lock_root = lock_root
        self.lock_path = lock_path
        self.progress = progress
        self.run_chunks = 0
        self.repaired_points = 0

    def run(self, connector: str | None = None) -> tuple[str, list[ConnectorStats]]:
        """Phase 1 for one connector or all; returns the run ID and per-connector statistics.

        Raises:
            IngestRunningError: another ingestion holds the lock for this data directory.
            ConnectorNotFoundError: the named connector does not exist.
            VectorIndexError: the run stopped; committed documents stay consistent.
        """
        try:
            with file_lock(self.lock_root, self.lock_path, timeout=INGEST_LOCK_WAIT_SECONDS):
                return self._run_locked(connector)
        except IngestRunningError:
            raise
        except LockTimeoutError:
            raise IngestRunningError(
                "another ingestion is running on this data directory; wait for it to finish"
            ) from None

    def _run_locked(self, connector: str | None) -> tuple[str, list[ConnectorStats]]:
        targets = [self.catalog.connector(connector)] if connector is not None else self.catalog.connectors()
        self.repaired_points = self.repair()
        run_id = random_id("run", 8)
        self.catalog.set_meta(INDEX_DIRTY, "1")
        self.catalog.start_run(run_id, connector)
        stats: list[ConnectorStats] = []
        status = "failed"
        try:
            for c in targets:
                if c.state != "active":
                    continue
                stats.append(self._connector(c))
            self.index.flush()
            self.catalog.set_meta(INDEX_DIRTY, "0")
            status = "ok"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            self.catalog.finish_run(run_id, status, {"connectors": [s.__dict__ for s in stats]})
        return run_id, stats

    def repair(self) -> int:
        """After a run that failed or died: delete every index point the catalog does not know."""
        for run_id in self.catalog.interrupted_runs():
            self.catalog.finish_run(run_id, "interrupted", {})
        if self.catalog.get_meta(INDEX_DIRTY) != "1":
            return 0
        known = self.catalog.all_chunk_ids()
        orphans = [pid for pid in self.index.iter_ids() if pid not in known]
        self.index.delete_ids(orphans)
        self.index.flush()
        self.catalog.set_meta(INDEX_DIRTY, "0")
        return len(orphans)

    # ------------------------------------------------------------------------------------------
    def _report(self, p: IngestProgress) -> None:
        if self.progress is not None:
            self.progress(p)

    def _connector(self, c: ConnectorRow) -> ConnectorStats:
        st = ConnectorStats(c.name)
        t0 = time.monotonic()
        try:
            root_fd = open_root(c.path)
        except InvalidConnectorError as exc:
            st.status, st.message = "error", exc.message
            return st
        try:
            self._connector_fd(c, root_fd, st)
        except InvalidConnectorError as exc:
            st.status, st.message = "error", exc.message
        finally:
            os.close(root_fd)
            st.lexical_seconds = st.seconds = round(time.monotonic() - t0, 3)
        return st

    def _connector_fd(self, c: ConnectorRow, root_fd: int, st: ConnectorStats) -> None:
        known = self.catalog.known_documents(c.name)
        embed_generated = bool(self.catalog.connector_options(c.name).get("embed_generated"))
        prog = IngestProgress(c.name, "scan")
        self._report(prog)
        discovered = list(walk_git(root_fd, c.path) if c.type == "git" else walk_filesystem(root_fd))
        cands = [d for d in discovered if isinstance(d, Candidate)]
        skipped = [(d.path, d.reason) for d in discovered if isinstance(d, Skipped)]
        prog = IngestProgress(c.name, "lexical", documents_total=len(cands))
        self._report(prog)

        batch: list[_Doc] = []
        batch_chunks = 0
        seen: set[str] = set()
        total_bytes = 0
        quota_hit = ""
        for cand in cands:
            if len(seen) >= CONNECTOR_MAX_DOCUMENTS:
                quota_hit = (
                    f"connector {c.name!r} has more than {CONNECTOR_MAX_DOCUMENTS} documents (the limit)"
                )
                break
            if total_bytes + cand.size > CONNECTOR_MAX_BYTES:
                quota_hit = f"connector {c.name!r} holds more than {CONNECTOR_MAX_BYTES} bytes (the limit)"
                break
            prev = known.get(cand.path)
            mtime_key = f"{cand.size}:{cand.mtime!r}"
            if prev is not None and prev.content_hash.endswith("|" + mtime_key):
                seen.add(cand.path)
                total_bytes += cand.size
                st.unchanged += 1
                prog.advance(documents=1)
                self._report(prog)
                continue
            doc, reason = self._read(c, root_fd, cand, prev, mtime_key, embed_generated)
            if doc is None:
                skipped.append((cand.path, reason))
                prog.documents_total -= 1
                continue
            seen.add(cand.path)
            total_bytes += cand.size
            if doc.kind != "touched":
                if self.run_chunks + len(doc.chunks) > INGEST_RUN_MAX_CHUNKS:
                    quota_hit = f"this run would exceed {INGEST_RUN_MAX_CHUNKS} chunks (the per-run limit)"
                    break
                self.run_chunks += len(doc.chunks)
            batch.append(doc)
            batch_chunks += len(doc.chunks)
            if batch_chunks >= CONTEXT_LEXICAL_BATCH_CHUNKS:
                if not self._flush(c, batch, st, prog):
                    return
                batch, batch_chunks = [], 0
        if batch and not self._flush(c, batch, st, prog):
            return
        st.documents_seen = len(seen)
        st.skipped = len(skipped)
        if quota_hit:
            st.status, st.message = "quota_exceeded", quota_hit + "; documents already ingested were kept"
        else:
            gone = [p for p in known if p not in seen]
            ids = self.catalog.delete_documents(c.name, gone)
            self.index.delete_ids(sorted(ids))
            st.removed = len(gone)
        self.catalog.record_skipped(c.name, skipped)
        prog.phase = "done"
        self._report(prog)

    def _read(
        self,
        c: ConnectorRow,
        root_fd: int,
        cand: Candidate,
        prev: KnownDocument | None,
        mtime_key: str,
        embed_generated: bool,
    ) -> tuple[_Doc | None, str]:
        """The document to write, or (None, why it is skipped)."""
        data = read_candidate(root_fd, cand.path)
        if isinstance(data, Skipped):
            return None, data.reason
        text = decode_text(data)
        if text is None:
            return None, "binary or not UTF-8 text"
        reason = content_skip_reason(cand.path, text)
        if reason is not None:
            return None, reason
        lexical = None if embed_generated else lexical_only_reason(cand.path, text)
        content_hash = hashlib.sha256(data).hexdigest() + "|" + mtime_key
        if prev is not None and prev.content_hash.split("|")[0] == content_hash.split("|")[0]:
            # same bytes, new mtime: refresh the stored key so the next run skips reading it
            return _Doc(cand, text, content_hash, chunk_text(prev.document_id, text), "touched", lexical), ""
        chunks = chunk_text(document_id(c.name, cand.path), text)
        return _Doc(cand, text, content_hash, chunks, "added" if prev is None else "updated", lexical), ""

    def _flush(self, c: ConnectorRow, batch: list[_Doc], st: ConnectorStats, prog: IngestProgress) -> bool:
        existing = self.catalog.existing_chunk_ids(ch.chunk_id for d in batch for ch in d.chunks)
        todo = [(d, ch) for d in batch for ch in d.chunks if ch.chunk_id not in existing]
        cached: dict[str, list[float]] = {}
        if self.cache is not None:
            cached = self.cache.get_many(self.model, [ch.text for d, ch in todo if d.lexical_only is None])
        states: dict[str, int] = {}
        points = []
        for d, ch in todo:
            vec = cached.get(ch.text) if d.lexical_only is None else None
            states[ch.chunk_id] = (
                DENSE_LEXICAL_ONLY if d.lexical_only else DENSE_EMBEDDED if vec is not None else DENSE_PENDING
            )
            points.append(IndexPoint(ch.chunk_id, vec, ch.text, _payload(c, d, ch)))
        written = [pt.point_id for pt in points]
        try:
            self.index.upsert(points)
        except BaseException:
            self._forget(written)
            raise
        records = [
            DocumentRecord(
                document_id(c.name, d.cand.path),
                c.name,
                d.cand.path,
                d.cand.size,
                d.content_hash,
                d.cand.mtime,
                d.text,
                tuple(
                    ChunkRow(
                        ch.chunk_id,
                        ch.index,
                        ch.start,
                        ch.end,
                        states.get(ch.chunk_id, DENSE_LEXICAL_ONLY if d.lexical_only else DENSE_PENDING),
                    )
                    for ch in d.chunks
                ),
                _metadata(c, d),
            )
            for d in batch
        ]
        stale = self.catalog.commit_documents(c.name, records)
        if stale is None:  # the connector was removed while we wrote: undo our own writes
            self._forget(written)
            st.status, st.message = "removed", f"connector {c.name!r} was removed during ingestion"
            return False
        self.index.delete_ids(sorted(stale - set(written)))
        for d in batch:
            if d.kind == "added":
                st.added += 1
            elif d.kind == "updated":
                st.updated += 1
            else:
                st.unchanged += 1
            if d.lexical_only is not None and d.kind != "touched":
                st.lexical_only_documents += 1
                st.lexical_only_reasons[d.lexical_only] = st.lexical_only_reasons.get(d.lexical_only, 0) + 1
        st.chunks_written += len(points)
        st.chunks_cached += sum(1 for s in states.values() if s == DENSE_EMBEDDED)
        st.chunks_lexical_only += sum(1 for s in states.values() if s == DENSE_LEXICAL_ONLY)
        st.chunks_reused += sum(len(d.chunks) for d in batch if d.kind != "touched") - len(
            [1 for d, _ in todo if d.kind != "touched"]
        )
        prog.advance(chunks=len(points), documents=len(batch))
        prog.chunks_total = prog.chunks_done
        self._report(prog)
        return True

    def _forget(self, ids: list[str]) -> None:
        """Best effort: remove points of an uncommitted batch (the next run's repair is the backstop)."""
        with contextlib.suppress(Exception):  # already failing; the repair at the next run covers this
            self.index.delete_ids(ids)


def _extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name[1:] else ""


def _metadata(c: ConnectorRow, d: _Doc) -> dict[str, Any]:
    meta: dict[str, Any] = {"connector_type": c.type, "extension": _extension(d.cand.path)}
    if d.lexical_only is not None:
        meta["lexical_only"] = d.lexical_only
    return meta


def _payload(c: ConnectorRow, d: _Doc, ch: Chunk) -> dict[str, Any]:
    return {
        "document_id": document_id(c.name, d.cand.path),
        "connector": c.name,
        "path": d.cand.path,
        "path_prefixes": path_prefixes(d.cand.path),
        "chunk_index": ch.index,
    }


__all__ = ["ConnectorNotFoundError", "ConnectorStats", "IngestProgress", "Ingestor", "document_id"]
