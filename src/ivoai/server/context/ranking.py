"""Hybrid ranking while phase 2 runs, and document-level signals. Pure functions, no I/O.

`hybrid_scores` is the convex fusion of `analyzer.convex_fusion` (min-max normalized dense and
lexical candidate scores, `alpha` dense) with two rules for chunks without a dense vector:

- a chunk still **pending** (phase 2 has not reached it) cannot be in the dense list; counting its
  dense part as 0 would bury it below every embedded chunk that merely resembles the query, so its
  lexical score stands in for the missing dense one (search is "hybrid over what is embedded and
  lexical over the rest");
- a chunk **lexical-only by rule** (lockfile, generated, minified, vendored) keeps 0 for its dense
  part and its score is multiplied by `CONTEXT_LEXICAL_ONLY_RANK_FACTOR`: such text matches many
  words without answering questions, so it ranks below hand-written text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ivoai.common.limits import CONTEXT_LEXICAL_ONLY_RANK_FACTOR
from ivoai.server.context.catalog import DENSE_LEXICAL_ONLY, DENSE_PENDING


def _normalized(candidates: Sequence[tuple[str, float]]) -> dict[str, float]:
    if not candidates:
        return {}
    lo = min(score for _, score in candidates)
    span = max(score for _, score in candidates) - lo
    return {key: (score - lo) / span if span > 0 else 1.0 for key, score in candidates}


def hybrid_scores(
    dense: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    *,
    alpha: float,
    not_embedded: Mapping[str, int],
    impute_pending: bool = True,
) -> list[tuple[str, float]]:
    """(chunk ID, fused score) best first; ties keep first appearance, dense candidates first.

    `not_embedded` maps the candidates without a dense vector to DENSE_PENDING or DENSE_LEXICAL_ONLY.
    """
    d = _normalized(dense)
    lex = _normalized(lexical)
    fused: dict[str, float] = {}
    for key in [*d, *(k for k in lex if k not in d)]:
        state = not_embedded.get(key)
        lexical_part = lex.get(key, 0.0)
        if key in d:
            score = alpha * d[key] + (1.0 - alpha) * lexical_part
        elif state == DENSE_PENDING and impute_pending:
            score = lexical_part
        else:
            score = (1.0 - alpha) * lexical_part
        if state == DENSE_LEXICAL_ONLY:
            score *= CONTEXT_LEXICAL_ONLY_RANK_FACTOR
        fused[key] = score
    return sorted(fused.items(), key=lambda kv: -kv[1])
