"""Deterministic chunking: up to CHUNK_MAX_CODEPOINTS code points, about CHUNK_OVERLAP_CODEPOINTS of
overlap, cut at a newline when one is near the end of the window, else at a word boundary, else hard.

Chunk IDs derive from the document ID, the chunk index and the chunk text, so an unchanged chunk keeps
its ID (and its vector) across runs and any change produces a new ID.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from ivoai.common.limits import CHUNK_MAX_CODEPOINTS, CHUNK_OVERLAP_CODEPOINTS

# A boundary is only taken when it keeps at least this fraction of the window (no tiny chunks).
_MIN_KEEP_FRACTION = 0.5


@dataclass(frozen=True)
class Chunk:
    chunk_id: str  # UUID string (a valid Qdrant point id)
    index: int
    start: int  # code-point offsets into the document text
    end: int
    text: str


def chunk_id(document_id: str, index: int, text: str) -> str:
    """UUID derived from (document ID, chunk index, chunk text)."""
    digest = hashlib.sha256(f"{document_id}\x00{index}\x00{text}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


def _cut(text: str, start: int, limit: int) -> int:
    end = start + limit
    if end >= len(text):
        return len(text)
    floor = start + int(limit * _MIN_KEEP_FRACTION)
    nl = text.rfind("\n", floor, end)
    if nl != -1:
        return nl + 1
    for i in range(end, floor, -1):
        if text[i - 1].isspace():
            return i
    return end


def _overlap_start(text: str, start: int, end: int, overlap: int) -> int:
    """Where the next chunk starts: ~`overlap` before `end`, moved forward to a line or word start."""
    target = max(start + 1, end - overlap)
    nl = text.find("\n", target, end)
    if nl != -1 and nl + 1 < end:
        return nl + 1
    for i in range(target, end):
        if text[i - 1].isspace() and not text[i].isspace():
            return i
    return target


def chunk_text(
    document_id: str,
    text: str,
    *,
    max_codepoints: int = CHUNK_MAX_CODEPOINTS,
    overlap: int = CHUNK_OVERLAP_CODEPOINTS,
) -> list[Chunk]:
    """Split `text` into overlapping chunks; an empty or blank text yields no chunks."""
    if not text.strip():
        return []
    chunks: list[Chunk] = []
    start = 0
    while start < len(text):
        end = _cut(text, start, max_codepoints)
        piece = text[start:end]
        if piece.strip():
            idx = len(chunks)
            chunks.append(Chunk(chunk_id(document_id, idx, piece), idx, start, end, piece))
        if end >= len(text):
            break
        start = _overlap_start(text, start, end, overlap)
    return chunks


def merge_texts(parts: list[tuple[int, int, str]]) -> tuple[int, int, str]:
    """Join overlapping (start, end, text) spans of one document, sorted by start, into one span."""
    parts = sorted(parts)
    start, end, text = parts[0]
    for s, e, t in parts[1:]:
        if s > end:  # not contiguous: keep the gap visible
            text += "\n…\n" + t
        elif e > end:
            text += t[end - s :]
        end = max(end, e)
    return start, end, text
