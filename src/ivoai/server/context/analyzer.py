"""The code-aware lexical analyzer and BM25 sparse vectors of the context index, and the hybrid fusion.

Pure functions, no I/O; the same analyzer runs at index and at query time, for both index backends.

Analyzer: identifiers (`[A-Za-z_][A-Za-z0-9_]*`, optionally dotted) and numbers are taken from the
text. A dotted name keeps its whole lowercased form (`httpx.client.send`); each identifier keeps its
whole lowercased form when it has several parts (`request_headers`, `parseconfig`, `httpstatuserror`)
and is split into its snake_case / camelCase / acronym parts (`request`, `headers`; `parse`, `config`;
`http`, `status`, `error`). Parts are lowercased, English stopwords and one-letter parts are dropped,
and parts get a light plural stemmer (`headers` -> `header`, `entries` -> `entry`, `boxes` -> `box`;
not `class`, `status`, `analysis`). The document's path is analyzed with its text, so file and
directory names (`auth/oauth_client.py`) are words of every chunk of that file.

Sparse vectors: a token's index is the first 4 bytes of its BLAKE2b digest (stable across processes
and versions, unlike Python's `hash`); a document value is the BM25 term-frequency part
`tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len))` and a query value is 1 per distinct token;
the engine applies IDF (`Modifier.Idf`), so a score is BM25.

Changing anything here changes the sparse vectors already stored: bump `LEXICAL_SCHEMA` (it is part of
the collection name) so that existing indexes are rebuilt.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LEXICAL_SCHEMA = 2  # v1: qdrant-edge's Bm25 (code tokenizer, Snowball), chunk text only
BM25_K1 = 1.2
BM25_B = 0.75
BM25_AVG_LEN = 256.0  # tokens; a fixed length norm (an index-wide average would change every vector)

_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "no",
        "not",
        "of",
        "on",
        "or",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
    ]
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[0-9]+")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def stem(word: str) -> str:
    """Light plural stemming of a lowercased word: `headers`->`header`, `entries`->`entry`, `boxes`->`box`."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokens(text: str) -> list[str]:
    """The lexical tokens of `text` in order (whole identifiers and their stemmed parts, lowercased)."""
    out: list[str] = []
    for match in _NAME.finditer(text):
        name = match.group(0)
        segments = name.split(".")
        if len(segments) > 1:
            out.append(name.lower())
        for segment in segments:
            parts = [p.lower() for p in _PART.findall(segment)]
            whole = segment.strip("_").lower()
            if len(whole) > 1 and (len(parts) > 1 or (parts and whole != parts[0])):
                out.append(whole)
            out.extend(stem(p) for p in parts if len(p) > 1 and p not in _STOPWORDS)
    return out


def lexical_text(path: str, text: str) -> str:
    """What BM25 indexes for one chunk: its document's path, then its text."""
    return f"{path}\n{text}" if path else text


def token_index(token: str) -> int:
    """The sparse-vector index of a token (32-bit, stable across processes)."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "little")


@dataclass(frozen=True)
class Sparse:
    indices: list[int]
    values: list[float]


def _sorted(weights: dict[int, float]) -> Sparse:
    keys = sorted(weights)
    return Sparse(keys, [weights[k] for k in keys])


def sparse_document(text: str) -> Sparse:
    """The BM25 document vector of `text` (term-frequency part; the engine applies IDF)."""
    toks = tokens(text)
    counts: dict[int, int] = {}
    for t, tf in Counter(toks).items():  # hash each distinct token once (same vector as per occurrence)
        i = token_index(t)
        counts[i] = counts.get(i, 0) + tf
    norm = BM25_K1 * (1 - BM25_B + BM25_B * len(toks) / BM25_AVG_LEN)
    return _sorted({i: tf * (BM25_K1 + 1) / (tf + norm) for i, tf in counts.items()})


def sparse_query(text: str) -> Sparse:
    """The BM25 query vector of `text`: 1 per distinct token."""
    return _sorted({token_index(t): 1.0 for t in tokens(text)})


def convex_fusion(
    dense: Sequence[tuple[Any, float]], lexical: Sequence[tuple[Any, float]], alpha: float, limit: int
) -> list[tuple[Any, float]]:
    """Convex combination of min-max normalized scores: alpha * dense + (1 - alpha) * lexical.

    Each list holds (key, score) candidates, best first. Scores are normalized to [0, 1] within their
    list (all 1 when they are equal); a key missing from a list gets 0 from it. Ties keep the order of
    first appearance, dense candidates first.
    """
    fused: dict[Any, float] = {}
    for candidates, weight in ((dense, alpha), (lexical, 1.0 - alpha)):
        if not candidates:
            continue
        lo = min(score for _, score in candidates)
        span = max(score for _, score in candidates) - lo
        for key, score in candidates:
            norm = (score - lo) / span if span > 0 else 1.0
            fused[key] = fused.get(key, 0.0) + weight * norm
    order = sorted(fused.items(), key=lambda kv: -kv[1])  # stable: first appearance breaks ties
    return order[:limit]
