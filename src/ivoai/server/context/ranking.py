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

import re
from collections.abc import Iterable, Mapping, Sequence

from ivoai.common.limits import CONTEXT_LEXICAL_ONLY_RANK_FACTOR, CONTEXT_PROJECT_PRIOR_WEIGHT
from ivoai.server.context.catalog import DENSE_LEXICAL_ONLY, DENSE_PENDING

IMPUTE_PENDING = True  # the rule above; the quality benchmark measures it against 0 (`context_quality.py`)
DOCUMENT_SIGNALS = True  # README/docs openings for project questions (below); the benchmark turns it off


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
    impute_pending: bool | None = None,
    extra: Iterable[str] = (),
) -> list[tuple[str, float]]:
    """(chunk ID, fused score) best first; ties keep first appearance, dense candidates first.

    `not_embedded` maps the candidates without a dense vector to DENSE_PENDING or DENSE_LEXICAL_ONLY;
    `extra` are candidates found by neither list (scored 0 here, a prior may lift them).
    """
    impute = IMPUTE_PENDING if impute_pending is None else impute_pending
    d = _normalized(dense)
    lex = _normalized(lexical)
    fused: dict[str, float] = {}
    keys = dict.fromkeys([*d, *lex, *extra])
    for key in keys:
        state = not_embedded.get(key)
        lexical_part = lex.get(key, 0.0)
        if key in d:
            score = alpha * d[key] + (1.0 - alpha) * lexical_part
        elif state == DENSE_PENDING and impute:
            score = lexical_part
        else:
            score = (1.0 - alpha) * lexical_part
        if state == DENSE_LEXICAL_ONLY:
            score *= CONTEXT_LEXICAL_ONLY_RANK_FACTOR
        fused[key] = score
    return sorted(fused.items(), key=lambda kv: -kv[1])


# ------------------------------------------------------------------------- document-level signals
# A question about the project as a whole ("what does this project do and how do I run it") is
# answered by a README's opening and the docs' first sections, which rarely share its words and
# resemble it less than code that happens to mention running things. For such questions those
# sections join the candidates with their real dense similarity, and the score blends in a prior
# (`overview_prior`): 1 for a top-level README's first section, 0.6 for a docs index or overview
# page, 0.3 for the first section of another docs page or README; with weight 0.6 the README's
# opening leads, and docs pages that also match the question come before code that merely does.
_PROJECT_WORDS = re.compile(
    r"\b(?:this|the|our|your)\s+(?:project|repo|repository|codebase|code\s*base|app|application|tool|"
    r"library|package|service|program)\b|\b(?:overview|readme|getting\s+started|get\s+started)\b",
    re.IGNORECASE,
)
_PROJECT_QUESTION = re.compile(
    r"\bwhat\s+(?:is|does)\s+(?:this|it)\b|\bhow\s+(?:do|can|should|to)\s+(?:i|we|you)?\s*"
    r"(?:run|install|start|set\s*up|setup|use|try|build|deploy)\s+(?:it|this)\b",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]|[A-Za-z]\.[A-Za-z]|\(\)|`")
_OVERVIEW_NAMES = re.compile(r"^(?:index|overview|getting[-_]started|quickstart|introduction|intro)\.", re.I)
_README = re.compile(r"^readme(?:\.[a-z0-9]+)?$", re.IGNORECASE)
_DOCS_DIRS = frozenset({"docs", "doc", "documentation"})


def project_question(query: str) -> bool:
    """Whether `query` asks about the project as a whole (and names no identifier)."""
    if _IDENTIFIER.search(query):
        return False
    return bool(_PROJECT_WORDS.search(query) or _PROJECT_QUESTION.search(query))


def overview_prior(path: str, chunk_index: int) -> float:
    """How much a chunk introduces its project: a README's or a docs page's opening section."""
    parts = path.split("/")
    name = parts[-1]
    in_docs = len(parts) > 1 and parts[0].lower() in _DOCS_DIRS
    if not (chunk_index == 0 or (chunk_index == 1 and len(parts) == 1)):
        return 0.0
    if _README.match(name):
        return 1.0 if len(parts) == 1 else 0.6 if in_docs and len(parts) == 2 else 0.3
    if in_docs and name.lower().endswith((".md", ".rst", ".txt", ".adoc")):
        return 0.6 if _OVERVIEW_NAMES.match(name) else 0.3
    return 0.0


def with_prior(
    ranked: Sequence[tuple[str, float]],
    priors: Mapping[str, float],
    weight: float = CONTEXT_PROJECT_PRIOR_WEIGHT,
) -> list[tuple[str, float]]:
    """Blend a document prior into fused scores (already in [0, 1]), best first; ties go to the prior."""
    scored = [(key, (1.0 - weight) * score + weight * priors.get(key, 0.0)) for key, score in ranked]
    return sorted(scored, key=lambda kv: (-kv[1], -priors.get(kv[0], 0.0)))
