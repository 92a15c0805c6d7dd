"""Qdrant Edge index: a hybrid search runs both candidate queries as one engine batch, with exactly the
results of two separate queries; the search pool is sized to the CPUs the process may use."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path

from ivoai.common.limits import CONTEXT_INDEX_SEARCH_THREADS_MAX
from ivoai.server.context.index import (
    EdgeIndex,
    Hit,
    IndexPoint,
    SearchSpec,
    _search_threads,
    fuse,
    path_prefixes,
)

WORDS = ["token", "refresh", "header", "merge", "request", "queue", "worker", "payment", "scale", "auth"]
WORDS += ["session", "cache", "retry"]


def _unit(rng: random.Random) -> list[float]:
    raw = [rng.gauss(0, 1) for _ in range(384)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def _points(rng: random.Random, count: int) -> list[IndexPoint]:
    out = []
    for i in range(count):
        path = f"{rng.choice(['src', 'docs', 'ops'])}/{rng.choice(WORDS)}/{i}.py"
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        payload = {"document_id": f"d{i}", "connector": rng.choice(["a", "b"]), "path": path}
        out.append(IndexPoint(f"00000000-0000-0000-0000-{i:012d}", _unit(rng), text, payload | {
            "path_prefixes": path_prefixes(path)
        }))  # fmt: skip
    return out


def _separately(index: EdgeIndex, spec: SearchSpec) -> list[Hit]:
    """The hybrid result as two engine queries issued one after the other (the previous behaviour)."""
    depth = max(spec.prefetch, spec.limit)
    lists = []
    for mode in ("dense", "lexical"):
        req = index._request(spec, mode, depth)
        points = [] if req is None else index._call(index._shard.query, req)
        lists.append([Hit(str(p.id), float(p.score)) for p in points])
    return fuse(lists[0], lists[1], spec.limit)


def test_hybrid_search_in_one_engine_batch_equals_two_separate_queries(tmp_path: Path) -> None:
    rng = random.Random(7)
    index = EdgeIndex(tmp_path / "edge")
    try:
        index.upsert(_points(rng, 300))
        compared = 0
        for _ in range(60):
            spec = SearchSpec(
                limit=rng.choice([1, 5, 10, 20]),
                dense=_unit(rng) if rng.random() < 0.9 else None,
                query_text=rng.choice([" ".join(rng.sample(WORDS, 2)), rng.choice(WORDS), "!!", "zzz"]),
                connector=rng.choice([None, "a", "b"]),
                path_prefix=rng.choice([None, "src", "docs/cache"]),
                prefetch=rng.choice([5, 50]),
                dense_floor=rng.choice([None, 0.0, 0.05]),
            )
            batched = index.search(spec)
            assert batched == _separately(index, spec)  # same points, same order, same float scores
            compared += len(batched)
        assert compared > 300  # the searches found things, so the comparison means something
    finally:
        index.close()


def test_dense_and_lexical_modes_return_point_ids_and_scores_only(tmp_path: Path) -> None:
    rng = random.Random(3)
    index = EdgeIndex(tmp_path / "edge")
    try:
        index.upsert(_points(rng, 50))
        for mode in ("dense", "lexical"):
            hits = index.search(SearchSpec(limit=5, dense=_unit(rng), query_text="token refresh", mode=mode))
            assert hits and all(isinstance(h.point_id, str) and isinstance(h.score, float) for h in hits)
    finally:
        index.close()


_POOL_PROBE = """
import os, random, sys
from pathlib import Path
from ivoai.server.context.index import EdgeIndex, IndexPoint, SearchSpec
rng = random.Random(1)
vec = lambda: [rng.gauss(0, 1) for _ in range(384)]
index = EdgeIndex(Path(sys.argv[1]))
if sys.argv[2] == "create":
    index.upsert([IndexPoint(f"00000000-0000-0000-0000-{i:012d}", vec(), "token refresh", {"path": "a"})
                  for i in range(10)])
index.search(SearchSpec(limit=3, dense=vec(), query_text="token"))
names = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task")]
print(len([n for n in names if n.startswith("edge-search-")]), index.count())
index.close()
"""


def test_the_search_pool_has_one_thread_per_usable_cpu(tmp_path: Path) -> None:
    usable = len(os.sched_getaffinity(0))
    assert _search_threads() == max(1, min(usable, CONTEXT_INDEX_SEARCH_THREADS_MAX))
    # In fresh processes (this one may hold other tests' shards and their pools): the engine's
    # default here was 8 threads on 2 CPUs; a created and a reopened shard both get the sized pool.
    for step in ("create", "reopen"):
        out = subprocess.run(
            [sys.executable, "-c", _POOL_PROBE, str(tmp_path / "edge"), step],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()
        assert out == [str(_search_threads()), "10"], step
