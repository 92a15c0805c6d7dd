"""Ingestion: discover, read safely, filter, normalize, chunk, embed, index, catalog, reconcile.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.common.errors import LockTimeoutError
from ivoai.common.fsio import file_lock
from ivoai.common.ids import random_id
from ivoai.common.limits import (
    CONNECTOR_MAX_BYTES,
    CONNECTOR_MAX_DOCUMENTS,
    CONTEXT_WORK_BATCH_CHUNKS,
    INGEST_LOCK_WAIT_SECONDS,
    INGEST_RUN_MAX_CHUNKS,
)
from ivoai.server.context.catalog import Catalog, ChunkRow, ConnectorRow, DocumentRecord
from ivoai.server.context.chunker import Chunk, chunk_text
from ivoai.server.context.embeddings import Embedder
from ivoai.server.context.errors import ConnectorNotFoundError, IngestRunningError, InvalidConnectorError
from ivoai.server.context.filters import content_skip_reason, decode_text
from ivoai.server.context.index import IndexPoint, VectorIndex, path_prefixes
from ivoai.server.context.sources import (
    Candidate,
    Skipped,
    open_root,
    read_candidate,
    walk_filesystem,
    walk_git,
)

INDEX_DIRTY = "index_dirty"  # set while a run writes; a run that starts with it set repairs the index first


def document_id(connector: str, path: str) -> str:
    """Stable document ID: derived from the connector name and the relative path only."""
    return "d_" + hashlib.sha256(f"{connector}\x00{path}".encode()).hexdigest()[:32]


@dataclass
class IngestProgress:
    """One progress report: counts so far in this run, with rate and ETA."""

    connector: str
    phase: str  # scan | embed | done
    documents_done: int = 0
    documents_total: int = 0
    chunks_done: int = 0
    chunks_total: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def chunks_per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.chunks_done / elapsed if elapsed > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        rate = self.chunks_per_second
        if rate <= 0 or self.chunks_total <= self.chunks_done:
            return None if self.chunks_total > self.chunks_done else 0.0
        return (self.chunks_total - self.chunks_done) / rate


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
    chunks_embedded: int = 0
    chunks_reused: int = 0
    seconds: float = 0.0


@dataclass
class _Pending:
    cand: Candidate
    text: str
    content_hash: str
    chunks: list[Chunk]
    kind: str  # added | updated | touched (same bytes, new mtime)


class Ingestor:
    """One ingestion run over the connectors of a catalog, writing to one index with one embedder."""

    def __init__(
        self,
        catalog: Catalog,
        index: VectorIndex,
        embedder: Embedder,
        lock_root: Path,
        lock_path: Path,
        progress: ProgressFn | None = None,
    ) -> None:
        self.catalog = catalog
        self.index = index
        self.embedder = embedder
        self.lock_root = lock_root
        self.lock_path = lock_path
        self.progress = progress
        self.run_chunks = 0
        self.repaired_points = 0

    def run(self, connector: str | None = None) -> tuple[str, list[ConnectorStats]]:
        """Ingest one connector or all; returns the run ID and per-connector statistics.

        Raises:
            IngestRunningError: another ingestion holds the lock for this data directory.
            ConnectorNotFoundError: the named connector does not exist.
            EmbedderError, VectorIndexError: the run stopped; committed documents stay consistent.
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
        try:
            for c in targets:
                if c.state != "active":
                    continue
                stats.append(self._connector(c))
        except BaseException:
            self.catalog.finish_run(run_id, "failed", {"connectors": [s.__dict__ for s in stats]})
            raise
        self.index.flush()
        self.catalog.finish_run(run_id, "ok", {"connectors": [s.__dict__ for s in stats]})
        self.catalog.set_meta(INDEX_DIRTY, "0")
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
            st.seconds = round(time.monotonic() - t0, 3)
        return st

    def _connector_fd(self, c: ConnectorRow, root_fd: int, st: ConnectorStats) -> None:
        known = self.catalog.known_documents(c.name)
        discovered = list(walk_git(root_fd, c.path) if c.type == "git" else walk_filesystem(root_fd))
        cands = [d for d in discovered if isinstance(d, Candidate)]
        skipped = [(d.path, d.reason) for d in discovered if isinstance(d, Skipped)]
        prog = IngestProgress(c.name, "scan", documents_total=len(cands))
        self._report(prog)

        pending: list[_Pending] = []
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
                prog.documents_done += 1
                continue
            data = read_candidate(root_fd, cand.path)
            if isinstance(data, Skipped):
                skipped.append((data.path, data.reason))
                continue
            text = decode_text(data)
            if text is None:
                skipped.append((cand.path, "binary or not UTF-8 text"))
                continue
            reason = content_skip_reason(cand.path, text)
            if reason is not None:
                skipped.append((cand.path, reason))
                continue
            seen.add(cand.path)
            total_bytes += len(data)
            content_hash = hashlib.sha256(data).hexdigest() + "|" + mtime_key
            if prev is not None and prev.content_hash.split("|")[0] == content_hash.split("|")[0]:
                # same bytes, new mtime: refresh the stored key so the next run skips reading it
                pending.append(
                    _Pending(cand, text, content_hash, chunk_text(prev.document_id, text), "touched")
                )
                continue
            did = document_id(c.name, cand.path)
            chunks = chunk_text(did, text)
            if self.run_chunks + len(chunks) > INGEST_RUN_MAX_CHUNKS:
                quota_hit = f"this run would exceed {INGEST_RUN_MAX_CHUNKS} chunks (the per-run limit)"
                break
            self.run_chunks += len(chunks)
            pending.append(_Pending(cand, text, content_hash, chunks, "added" if prev is None else "updated"))
        st.documents_seen = len(seen)
        st.skipped = len(skipped)

        existing = self.catalog.existing_chunk_ids(ch.chunk_id for p in pending for ch in p.chunks)
        prog.phase = "embed"
        prog.chunks_total = sum(1 for p in pending for ch in p.chunks if ch.chunk_id not in existing)
        self._report(prog)
        if not self._embed_and_commit(c, pending, existing, st, prog):
            return
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

    def _embed_and_commit(
        self,
        c: ConnectorRow,
        pending: Sequence[_Pending],
        existing: set[str],
        st: ConnectorStats,
        prog: IngestProgress,
    ) -> bool:
        batch: list[_Pending] = []
        todo = 0
        for p in pending:
            batch.append(p)
            todo += sum(1 for ch in p.chunks if ch.chunk_id not in existing)
            if todo >= CONTEXT_WORK_BATCH_CHUNKS:
                if not self._flush(c, batch, existing, st, prog):
                    return False
                batch, todo = [], 0
        return not batch or self._flush(c, batch, existing, st, prog)

    def _flush(
        self,
        c: ConnectorRow,
        batch: list[_Pending],
        existing: set[str],
        st: ConnectorStats,
        prog: IngestProgress,
    ) -> bool:
        todo = [(p, ch) for p in batch for ch in p.chunks if ch.chunk_id not in existing]
        vectors: list[list[float]] = []
        step = 16
        for i in range(0, len(todo), step):
            vectors.extend(self.embedder.embed_passages([ch.text for _, ch in todo[i : i + step]]))
            prog.chunks_done += len(todo[i : i + step])
            self._report(prog)
        points = [
            IndexPoint(ch.chunk_id, vec, ch.text, _payload(c, p, ch))
            for (p, ch), vec in zip(todo, vectors, strict=True)
        ]
        written = [pt.point_id for pt in points]
        try:
            self.index.upsert(points)
        except BaseException:
            self._forget(written)
            raise
        records = [
            DocumentRecord(
                document_id(c.name, p.cand.path),
                c.name,
                p.cand.path,
                p.cand.size,
                p.content_hash,
                p.cand.mtime,
                p.text,
                tuple(ChunkRow(ch.chunk_id, ch.index, ch.start, ch.end) for ch in p.chunks),
                {"connector_type": c.type, "extension": _extension(p.cand.path)},
            )
            for p in batch
        ]
        stale = self.catalog.commit_documents(c.name, records)
        if stale is None:  # the connector was removed while we embedded: undo our own writes
            self._forget(written)
            st.status, st.message = "removed", f"connector {c.name!r} was removed during ingestion"
            return False
        self.index.delete_ids(sorted(stale - set(written)))
        for p in batch:
            if p.kind == "added":
                st.added += 1
            elif p.kind == "updated":
                st.updated += 1
            else:
                st.unchanged += 1
        st.chunks_embedded += len(points)
        st.chunks_reused += sum(len(p.chunks) for p in batch) - len(points)
        existing.update(written)
        prog.documents_done += len(batch)
        self._report(prog)
        return True

    def _forget(self, ids: list[str]) -> None:
        """Best effort: remove points of an uncommitted batch (the next run's repair is the backstop)."""
        with contextlib.suppress(Exception):  # already failing; the repair at the next run covers this
            self.index.delete_ids(ids)


def _extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name[1:] else ""


def _payload(c: ConnectorRow, p: _Pending, ch: Chunk) -> dict[str, Any]:
    return {
        "document_id": document_id(c.name, p.cand.path),
        "connector": c.name,
        "path": p.cand.path,
        "path_prefixes": path_prefixes(p.cand.path),
        "chunk_index": ch.index,
    }


__all__ = ["ConnectorNotFoundError", "ConnectorStats", "IngestProgress", "Ingestor", "document_id"]
