"""Hybrid search latency (dense query + BM25 query, fused in ivoai) on a Qdrant Edge shard of N chunks
with synthetic vectors and synthetic text, against a raw qdrant-edge dense query on the same shard.

Usage: python benchmarks/context_latency.py [N]   (default 100000; HNSW build via optimize() dominates)
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import qdrant_edge as qe

from ivoai.server.context.index import DENSE, EdgeIndex, IndexPoint, SearchSpec, path_prefixes

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
QUERIES = 200


def main() -> None:
    rng = np.random.default_rng(7)
    random.seed(7)
    vocab = [f"w{i}" for i in range(20_000)] + [
        "config",
        "parser",
        "retry",
        "socket",
        "token",
        "cache",
        "deploy",
    ]
    tmp = Path(tempfile.mkdtemp(prefix="ivoai-lat-"))
    index = EdgeIndex(tmp / "shard")
    t0 = time.perf_counter()
    batch: list[IndexPoint] = []
    for i in range(N):
        v = rng.standard_normal(384).astype(np.float32)
        v /= np.linalg.norm(v)
        text = " ".join(random.choices(vocab, k=120))
        path = f"dir{i % 50}/file{i % 5000}.py"
        batch.append(
            IndexPoint(
                str(uuid.UUID(int=i + 1)),
                v.tolist(),
                text,
                {
                    "document_id": f"d{i // 4}",
                    "connector": "c",
                    "path": path,
                    "path_prefixes": path_prefixes(path),
                    "chunk_index": i % 4,
                },
            )
        )
        if len(batch) == 2000:
            index.upsert(batch)
            batch = []
            if (i + 1) % 20_000 == 0:
                print(f"{i + 1} points in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    index.upsert(batch)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    print("optimize (HNSW build) ...", file=sys.stderr, flush=True)
    index._shard.optimize()
    opt = time.perf_counter() - t0
    queries = []
    for _ in range(QUERIES):
        q = rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        queries.append((q.tolist(), " ".join(random.choices(vocab, k=4))))

    def timed(fn: object) -> list[float]:
        out = []
        for q in queries:
            t = time.perf_counter()
            fn(q)  # type: ignore[operator]
            out.append((time.perf_counter() - t) * 1000)
        return out

    raw = timed(
        lambda q: index._shard.query(
            qe.QueryRequest(limit=30, query=qe.Query.Nearest(q[0], using=DENSE), with_payload=True)
        )
    )
    hybrid = timed(lambda q: index.search(SearchSpec(limit=30, dense=q[0], query_text=q[1], prefetch=50)))
    index.close()
    shutil.rmtree(tmp)

    def pct(xs: list[float], p: float) -> float:
        return round(sorted(xs)[int(len(xs) * p) - 1], 3)

    print(
        json.dumps(
            {
                "figure": "hybrid_latency_vs_raw_edge_dense",
                "points": N,
                "build_s": round(build, 1),
                "optimize_s": round(opt, 1),
                "raw_p50_ms": pct(raw, 0.5),
                "raw_p95_ms": pct(raw, 0.95),
                "hybrid_p50_ms": pct(hybrid, 0.5),
                "hybrid_p95_ms": pct(hybrid, 0.95),
                "ratio_p50": round(statistics.median(hybrid) / statistics.median(raw), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
