"""Semantic candidates: each scope's page vectors, cached in memory while the scope is unchanged.

Validity comes from the database, not from this process: triggers bump a per-scope generation
whenever a vector or a page's liveness, version, recency or expiry changes (see `_schema`), so a
write by another process invalidates this cache too. Expiry is applied at query time.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ivoai.common.limits import MEMORY_SEMANTIC_SCAN_MAX_PAGES, MEMORY_VECTOR_CACHE_MAX_VECTORS


@dataclass(frozen=True)
class _Entry:
    generations: tuple[int, ...]
    ids: Any  # numpy int64[n]
    expires: Any  # numpy float64[n]; +inf when the page never expires
    matrix: Any  # numpy float32[n, dims]


class VectorCache:
    """Per-scope vector matrices, least recently used evicted beyond MEMORY_VECTOR_CACHE_MAX_VECTORS."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def candidates(
        self,
        conn: sqlite3.Connection,
        workspace: str,
        projects: Sequence[str],
        model: str,
        query: Sequence[float],
        k: int,
        now: float,
        generations: tuple[int, ...] | None = None,
    ) -> list[tuple[int, float]]:
        """The `k` live, unexpired pages of the scope closest to `query`: (page id, cosine), best first.

        Call inside a read transaction so the generations and the vectors come from one snapshot;
        `generations` (one per project, read in that transaction) saves reading them again.
        """
        import numpy as np

        if generations is None:
            generations = tuple(_generation(conn, workspace, p) for p in projects)
        key = (workspace, tuple(projects), model, len(query))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None or entry.generations != generations:
            entry = _load(conn, workspace, projects, model, len(query), generations)
            self._store(key, entry)
        if len(entry.ids) == 0:
            return []
        # einsum, not `@`: a BLAS matrix-vector product wakes OpenBLAS worker threads that keep
        # spinning afterwards and slowed the SQLite work of the same query ~2.5x on two cores.
        sims = np.einsum("ij,j->i", entry.matrix, np.asarray(query, dtype=np.float32))
        sims = np.where(entry.expires > now, sims, -np.inf)
        order = np.argsort(-sims, kind="stable")[:k]
        pairs = zip(entry.ids[order].tolist(), sims[order].tolist(), strict=True)
        return [(page_id, cosine) for page_id, cosine in pairs if math.isfinite(cosine)]

    def _store(self, key: tuple[Any, ...], entry: _Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            total = sum(len(e.ids) for e in self._entries.values())
            while total > MEMORY_VECTOR_CACHE_MAX_VECTORS and len(self._entries) > 1:
                _old_key, old = self._entries.popitem(last=False)
                total -= len(old.ids)

    def clear(self) -> None:
        """Forget every cached scope."""
        with self._lock:
            self._entries.clear()


def _generation(conn: sqlite3.Connection, workspace: str, project: str) -> int:
    row = conn.execute(
        "SELECT gen FROM scope_generations WHERE workspace = ? AND project = ?", (workspace, project)
    ).fetchone()
    return int(row[0]) if row else 0


def _load(
    conn: sqlite3.Connection,
    workspace: str,
    projects: Sequence[str],
    model: str,
    dims: int,
    generations: tuple[int, ...],
) -> _Entry:
    import numpy as np

    # Choose the pages first (small rows, sorted), then read their vectors unsorted: sorting the
    # 1.5 KiB blobs themselves made this query several times slower.
    rows = conn.execute(
        "SELECT v.page_id, s.expires_at, v.vec FROM (SELECT p.id, p.version, p.expires_at FROM pages p "
        f"WHERE p.workspace = ? AND p.project IN ({','.join('?' * len(projects))}) AND p.deleted = 0 "
        "ORDER BY p.updated_at DESC LIMIT ?) AS s CROSS JOIN page_vectors v ON v.page_id = s.id "
        "WHERE v.version = s.version AND v.model = ? AND v.dims = ?",
        [workspace, *projects, MEMORY_SEMANTIC_SCAN_MAX_PAGES, model, dims],
    ).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    expires = np.fromiter(
        (math.inf if r[1] is None else r[1] for r in rows), dtype=np.float64, count=len(rows)
    )
    if rows:
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dims)
    else:
        matrix = np.zeros((0, dims), dtype=np.float32)
    return _Entry(generations, ids, expires, matrix)
