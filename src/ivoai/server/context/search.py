"""The search operation of the context service (`ContextService.context_search`): argument checks,
hybrid ranking of chunk hits, merging overlapping chunks of a document, and the byte budget.

Hybrid: the dense and lexical candidates are fused in `ranking`, with chunks phase 2 has not
reached ranked by their words; before any chunk is embedded the query is not embedded at all (the
first search after phase 1 does not wait for the model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from ivoai.common.limits import (
    CONTEXT_BUDGET_MIN_BYTES,
    CONTEXT_DENSE_FLOOR,
    CONTEXT_HYBRID_DENSE_WEIGHT,
    CONTEXT_PREFETCH_MIN,
    CONTEXT_QUERY_MAX_CHARS,
    SEARCH_MAX_RESULTS,
)
from ivoai.server.context import ranking
from ivoai.server.context.catalog import DENSE_EMBEDDED, Catalog, ChunkHit
from ivoai.server.context.chunker import merge_texts
from ivoai.server.context.errors import InvalidQueryError
from ivoai.server.context.index import Hit, SearchMode, SearchSpec, VectorIndex
from ivoai.server.context.models import Coverage, SearchResponse, SearchResult
from ivoai.server.context.ranking import hybrid_scores, overview_prior, project_question, with_prior


def document_url(connector: str, path: str) -> str:
    """A stable, non-network URL naming a document: ivoai://context/<connector>/<path>."""
    return f"ivoai://context/{quote(connector, safe='')}/{quote(path)}"


@dataclass
class HybridSearch:
    """Ranked chunk hits over one catalog and index; `embed_query` is called only when dense
    candidates are wanted, and the index is opened after it (as the service always did)."""

    catalog: Catalog
    index: Callable[[], VectorIndex]
    embed_query: Callable[[str], list[float]]

    def hits(
        self,
        query: str,
        mode: SearchMode,
        connector: str | None,
        prefix: str | None,
        limit: int,
        coverage: Coverage,
    ) -> list[Hit]:
        """Up to 3 × `limit` hits, best first (see module doc)."""
        use_dense = mode == "dense" or (mode == "hybrid" and coverage.embedded_chunks > 0)
        dense = self.embed_query(query) if use_dense else None
        want = min(limit * 3, SEARCH_MAX_RESULTS * 3)
        spec = SearchSpec(
            limit=want,
            dense=dense,
            query_text=query,
            connector=connector,
            path_prefix=prefix,
            mode=mode,
            prefetch=max(CONTEXT_PREFETCH_MIN, want),
            dense_floor=CONTEXT_DENSE_FLOOR if mode == "hybrid" else None,
        )
        index = self.index()
        if mode != "hybrid":
            return index.search(spec)
        dense_hits, lexical_hits = index.candidates(spec)
        priors: dict[str, float] = {}
        if ranking.DOCUMENT_SIGNALS and project_question(query):  # README and docs openings join in
            priors = {
                cid: prior
                for cid, path, idx in self.catalog.overview_chunks(connector, prefix)
                if (prior := overview_prior(path, idx)) > 0
            }
            dense_hits = _with_overview(index, dense, dense_hits, priors)
        not_embedded: dict[str, int] = {}
        if coverage.pending_chunks or coverage.lexical_only_chunks:
            in_dense = {h.point_id for h in dense_hits}
            maybe = [h.point_id for h in lexical_hits if h.point_id not in in_dense]
            not_embedded = self.catalog.not_embedded(maybe + [c for c in priors if c not in in_dense])
        ranked = hybrid_scores(
            [(h.point_id, h.score) for h in dense_hits],
            [(h.point_id, h.score) for h in lexical_hits],
            alpha=CONTEXT_HYBRID_DENSE_WEIGHT,
            not_embedded=not_embedded,
            extra=priors,
        )
        if priors:
            ranked = with_prior(ranked, priors)
        return [Hit(pid, score) for pid, score in ranked[:want]]


def _with_overview(
    index: VectorIndex, query: list[float] | None, hits: list[Hit], priors: dict[str, float]
) -> list[Hit]:
    """The dense candidates plus the overview chunks' own similarity to the query (no floor:
    the prior is the evidence that they matter), best first."""
    have = {h.point_id for h in hits}
    missing = [cid for cid in priors if cid not in have]
    if query is None or not missing:
        return hits
    vectors = index.dense_vectors(missing)
    extra = [Hit(cid, sum(a * b for a, b in zip(query, vec, strict=True))) for cid, vec in vectors.items()]
    return sorted([*hits, *extra], key=lambda h: -h.score)


def check_arguments(
    query: str, limit: int, path_prefix: str | None, budget_bytes: int | None
) -> tuple[str, str | None]:
    """The stripped query and the normalized path prefix.

    Raises:
        InvalidQueryError: empty/too long query, limit outside 1..100, bad path prefix or budget.
    """
    query = _check_query(query)
    if not 1 <= limit <= SEARCH_MAX_RESULTS:
        raise InvalidQueryError(f"limit must be between 1 and {SEARCH_MAX_RESULTS} (got {limit})")
    if budget_bytes is not None and budget_bytes < CONTEXT_BUDGET_MIN_BYTES:
        raise InvalidQueryError(
            f"budget_bytes must be at least {CONTEXT_BUDGET_MIN_BYTES} (got {budget_bytes})"
        )
    return query, _check_prefix(path_prefix)


def _check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError("query must be a non-empty string")
    if len(query) > CONTEXT_QUERY_MAX_CHARS:
        raise InvalidQueryError(f"query is {len(query)} characters; the limit is {CONTEXT_QUERY_MAX_CHARS}")
    return query.strip()


def _check_prefix(prefix: str | None) -> str | None:
    if prefix is None or prefix in ("", ".", "./", "/"):
        return None
    p = prefix.strip().removeprefix("./").strip("/")
    parts = p.split("/")
    if any(x in ("", ".", "..") for x in parts) or "\x00" in p:
        raise InvalidQueryError(
            f"path_prefix {prefix!r} must be a relative path without '.' or '..' components"
        )
    return p


@dataclass
class Merged:
    """Consecutive chunks of one document found together: one search result."""

    hit: ChunkHit
    score: float
    rank: int
    parts: list[ChunkHit]

    def result(self) -> SearchResult:
        """The search result: the merged text of the parts, named by the best part's document."""
        start, end, text = merge_texts([(p.start, p.end, p.text) for p in self.parts])
        return SearchResult(
            document_id=self.hit.document_id,
            connector=self.hit.connector,
            path=self.hit.path,
            chunk_index=min(p.index for p in self.parts),
            chunk_indexes=sorted(p.index for p in self.parts),
            score=round(self.score, 6),
            text=text,
            start=start,
            end=end,
            url=document_url(self.hit.connector, self.hit.path),
            embedded=all(p.dense == DENSE_EMBEDDED for p in self.parts),
        )


def merge_hits(ranked: list[tuple[ChunkHit, float]]) -> list[Merged]:
    """Merge hits that are consecutive chunks of one document (they overlap) into one result.

    Runs of consecutive chunk indexes form one result ranked by its best member (best score too),
    whatever order the members arrived in.
    """
    by_doc: dict[str, list[tuple[int, ChunkHit, float]]] = {}
    for rank, (hit, score) in enumerate(ranked):
        by_doc.setdefault(hit.document_id, []).append((rank, hit, score))
    merged: list[Merged] = []
    for members in by_doc.values():
        members.sort(key=lambda m: m[1].index)
        run: list[tuple[int, ChunkHit, float]] = []
        for m in members:
            if run and m[1].index > run[-1][1].index + 1:
                merged.append(_run(run))
                run = []
            if not run or m[1].index != run[-1][1].index:
                run.append(m)
        merged.append(_run(run))
    merged.sort(key=lambda g: g.rank)
    return merged


def _run(run: list[tuple[int, ChunkHit, float]]) -> Merged:
    best = min(run, key=lambda m: m[0])
    return Merged(best[1], max(m[2] for m in run), best[0], [m[1] for m in run])


def apply_budget(resp: SearchResponse) -> SearchResponse:
    """Keep whole results while their text fits `budget_bytes`; cut the first one if it alone does not."""
    budget = resp.budget_bytes
    if budget is None:
        return resp
    kept: list[SearchResult] = []
    used = 0
    for r in resp.results:
        size = len(r.text.encode("utf-8"))
        if used + size <= budget:
            kept.append(r)
            used += size
            continue
        if not kept:
            cut = r.text.encode("utf-8")[:budget].decode("utf-8", "ignore")
            kept.append(r.model_copy(update={"text": cut, "truncated": True}))
        resp.truncated = True
        break
    resp.results = kept
    return resp
