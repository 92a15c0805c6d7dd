"""Pure ranking: safe FTS5 queries, and fusion of lexical and semantic ranks with page signals."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ivoai.common.limits import MEMORY_QUERY_MAX_TERMS

RRF_K = 20  # reciprocal rank fusion constant; small so that lexical rank still separates hits
PINNED_BOOST = 1.3  # a pinned page outranks an equally relevant unpinned one
RECENCY_BOOST = 0.2  # at most +20 % for a page written just now ...
RECENCY_HALF_LIFE_DAYS = 30.0  # ... halving every 30 days
FEEDBACK_STEP = 0.1  # each net useful (or not useful) vote moves the score by 10 % ...
FEEDBACK_MIN, FEEDBACK_MAX = 0.5, 1.5  # ... within these bounds
DENSE_FLOOR = 0.80  # an e5 cosine below this is no semantic evidence (unrelated texts score ~0.75)
# FTS5 column weights: path, title, body, tags, entities.
BM25_WEIGHTS = (2.0, 5.0, 1.0, 3.0, 3.0)

# A term is a run of letters/digits; everything else (quotes, `*`, `:`, parentheses, NEAR, `^`,
# `-`, `+`) is a separator, so no FTS5 operator survives into the MATCH expression.
_TERM_RE = re.compile(r"[^\W_]+")

Match = Literal["lexical", "semantic", "both"]


def fts_terms(text: str) -> list[str]:
    """The distinct lowercase search terms of `text`, at most MEMORY_QUERY_MAX_TERMS."""
    seen: dict[str, None] = {}
    for term in _TERM_RE.findall(text.lower()):
        seen.setdefault(term, None)
        if len(seen) >= MEMORY_QUERY_MAX_TERMS:
            break
    return list(seen)


def fts_match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression: every term as a quoted string, OR-ed; None without terms."""
    terms = fts_terms(text)
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


@dataclass(frozen=True)
class Signals:
    """What ranking knows about a candidate page besides relevance."""

    pinned: bool
    updated_at: float
    useful: int
    not_useful: int


@dataclass(frozen=True)
class Ranked:
    page_id: int
    score: float
    match: Match


def adjustment(signals: Signals, now: float) -> float:
    """The multiplicative boost for pinning, recency and feedback."""
    factor = PINNED_BOOST if signals.pinned else 1.0
    age_days = max(0.0, now - signals.updated_at) / 86400.0
    factor *= 1.0 + RECENCY_BOOST * math.pow(0.5, age_days / RECENCY_HALF_LIFE_DAYS)
    net = signals.useful - signals.not_useful
    factor *= min(FEEDBACK_MAX, max(FEEDBACK_MIN, 1.0 + FEEDBACK_STEP * net))
    return factor


def fuse(
    lexical: Sequence[int],
    semantic: Sequence[tuple[int, float]],
    signals: Mapping[int, Signals],
    now: float,
) -> list[Ranked]:
    """Fuse a lexical ranking and a (page id, cosine) ranking, then apply page signals.

    Reciprocal rank fusion; a semantic candidate counts only with a cosine of at least DENSE_FLOOR.
    Ties break on page id, so equal inputs always give the same order.
    """
    scores: dict[int, float] = {}
    kinds: dict[int, set[str]] = {}
    for rank, page_id in enumerate(lexical):
        scores[page_id] = scores.get(page_id, 0.0) + 1.0 / (RRF_K + rank + 1)
        kinds.setdefault(page_id, set()).add("lexical")
    for rank, (page_id, cosine) in enumerate(semantic):
        if cosine < DENSE_FLOOR:
            continue
        scores[page_id] = scores.get(page_id, 0.0) + 1.0 / (RRF_K + rank + 1)
        kinds.setdefault(page_id, set()).add("semantic")
    ranked = []
    for page_id, base in scores.items():
        sig = signals.get(page_id)
        score = base * adjustment(sig, now) if sig is not None else base
        k = kinds[page_id]
        match: Match = "both" if len(k) == 2 else "lexical" if "lexical" in k else "semantic"
        ranked.append(Ranked(page_id, score, match))
    ranked.sort(key=lambda r: (-r.score, r.page_id))
    return ranked
