"""Ingest throughput end to end vs the embedder alone on the same chunks; re-ingest of an unchanged corpus.

Corpus: source files of the installed `rich` package (real code and docstrings), capped to keep the run
to a couple of minutes on 2 shared cores. One JSON line per figure.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import rich

from ivoai.server.context.chunker import chunk_text
from ivoai.server.context.embeddings import builtin_embedder
from ivoai.server.context.ingest import document_id
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir

MAX_CHUNKS = int(sys.argv[1]) if len(sys.argv) > 1 else 120


def main() -> None:
    src = Path(rich.__file__).parent
    tmp = Path(tempfile.mkdtemp(prefix="ivoai-bench-"))
    corpus = tmp / "corpus"
    corpus.mkdir()
    chunks: list[str] = []
    for f in sorted(src.glob("*.py")):
        text = f.read_text(encoding="utf-8")
        cs = chunk_text(document_id("bench", f.name), text)
        if len(chunks) + len(cs) > MAX_CHUNKS:
            continue
        shutil.copy(f, corpus / f.name)
        chunks.extend(c.text for c in cs)
    emb = builtin_embedder()
    emb.embed_passages(["warm up"])

    def embed_alone() -> float:
        t0 = time.perf_counter()
        for i in range(0, len(chunks), 16):
            emb.embed_passages(chunks[i : i + 16])
        return time.perf_counter() - t0

    # the machine is shared: measure the reference before and after the ingest and use the mean
    alone_before = embed_alone()
    svc = ContextService.open(ServerDataDir(tmp / "server"), ContextSettings(), embedder=emb)
    svc.add_connector("bench", "filesystem", str(corpus))
    t0 = time.perf_counter()
    report = svc.ingest()
    full = time.perf_counter() - t0
    embedded = report.connectors[0].chunks_embedded
    t0 = time.perf_counter()
    again = svc.ingest()
    re = time.perf_counter() - t0
    svc.close()
    alone_after = embed_alone()
    alone = (alone_before + alone_after) / 2
    shutil.rmtree(tmp)
    print(
        json.dumps(
            {
                "figure": "ingest_throughput_vs_embedder_alone",
                "chunks": len(chunks),
                "chunks_embedded": embedded,
                "embedder_alone_chunks_per_s": round(len(chunks) / alone, 2),
                "embedder_alone_before_after_s": [round(alone_before, 1), round(alone_after, 1)],
                "ingest_chunks_per_s": round(embedded / full, 2),
                "ratio": round((embedded / full) / (len(chunks) / alone), 3),
                "goal": ">= 0.85",
            }
        )
    )
    print(
        json.dumps(
            {
                "figure": "reingest_unchanged_fraction_of_first_run",
                "first_run_s": round(full, 3),
                "reingest_s": round(re, 4),
                "reembedded": again.connectors[0].chunks_embedded,
                "ratio": round(re / full, 4),
                "goal": "<= 0.05",
            }
        )
    )


if __name__ == "__main__":
    main()
