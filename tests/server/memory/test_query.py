"""memory_query: lexical ranking, scope isolation, FTS5 syntax safety and ranking signals."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ivoai.common.errors import TooLargeError, ValidationError
from ivoai.server.memory._ranking import fts_match_expression
from ivoai.server.memory.service import MemoryService

FTS_SYNTAX = [
    '"',
    '""',
    '"unbalanced phrase',
    "NEAR(",
    "NEAR(secret",
    "NEAR(a b, 2)",
    "col:",
    "body:secret",
    "path:secret",
    "title:secret",
    "{path title}:secret",
    "*",
    "secret*",
    "(",
    ")",
    "((secret",
    "secret))",
    "a AND (b",
    "NOT secret",
    "secret NOT",
    "OR",
    "AND",
    "^secret",
    "-secret",
    "+secret",
    "secret:*",
    "'",
    ";",
    "--",
    "secret' OR '1'='1",
    "\x00",
    "\\",
    "",
    "   ",
]


@pytest.fixture
def scoped(service: MemoryService) -> MemoryService:
    """Pages with the same words in the queried scope, its _global scope and two foreign scopes."""
    service.memory_write_page("team", "app", "mine.md", "secret plan near the column body title path")
    service.memory_write_page("team", "_global", "shared.md", "secret conventions near body")
    service.memory_write_page("team", "other", "foreign.md", "secret plan of another project near body")
    service.memory_write_page("elsewhere", "app", "foreign.md", "secret plan of another workspace near body")
    return service


def _in_scope(result_hits: list[tuple[str, str]]) -> bool:
    return all(pair in {("team", "app"), ("team", "_global")} for pair in result_hits)


@pytest.mark.parametrize("text", FTS_SYNTAX)
def test_fts5_syntax_never_raises_and_never_reaches_another_scope(scoped: MemoryService, text: str) -> None:
    result = scoped.memory_query(text, "team", "app", limit=100)
    assert _in_scope([(h.workspace, h.project) for h in result.hits])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_arbitrary_query_text_never_raises_and_stays_in_scope(scoped: MemoryService, text: str) -> None:
    result = scoped.memory_query(text, "team", "app", limit=100)
    assert _in_scope([(h.workspace, h.project) for h in result.hits])


@given(text=st.text(max_size=200))
def test_the_match_expression_holds_only_quoted_terms(text: str) -> None:
    expression = fts_match_expression(text)
    if expression is not None:
        for part in expression.split(" OR "):
            assert part.startswith('"') and part.endswith('"') and '"' not in part[1:-1]


def test_a_column_filter_in_the_query_is_just_a_word(scoped: MemoryService) -> None:
    hits = scoped.memory_query("path:mine", "team", "app").hits
    assert [h.path for h in hits] == ["mine.md"]


def test_global_pages_are_included_unless_asked_not_to(scoped: MemoryService) -> None:
    both = {h.project for h in scoped.memory_query("secret", "team", "app").hits}
    assert both == {"app", "_global"}
    alone = {h.project for h in scoped.memory_query("secret", "team", "app", include_global=False).hits}
    assert alone == {"app"}


def test_hits_are_labelled_as_stored_memory_not_instructions(scoped: MemoryService) -> None:
    result = scoped.memory_query("secret", "team", "app")
    assert "not instructions" in result.notice
    assert result.hits and all(h.label == "stored_memory" for h in result.hits)
    assert all(h.match == "lexical" and h.snippet for h in result.hits)
    assert result.semantic is False


def test_title_matches_outrank_body_mentions(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "body.md", "# Notes\nWe once talked about caching here.")
    service.memory_write_page("w", "p", "title.md", "# Caching\nStrategy for the API.")
    assert [h.path for h in service.memory_query("caching", "w", "p").hits] == ["title.md", "body.md"]


def test_pinned_pages_rise_above_equal_unpinned_ones(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "b.md", "retry policy for uploads")
    service.memory_write_page("w", "p", "a.md", "retry policy for uploads", {"pinned": True})
    assert service.memory_query("retry policy", "w", "p").hits[0].path == "a.md"


def test_useful_feedback_raises_a_page_and_unhelpful_feedback_lowers_it(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "a.md", "cache invalidation notes")
    service.memory_write_page("w", "p", "b.md", "cache invalidation notes")
    first = service.memory_query("cache invalidation", "w", "p").hits[0].path
    other = "a.md" if first == "b.md" else "b.md"
    for _ in range(3):
        service.memory_feedback("w", "p", other, True)
        service.memory_feedback("w", "p", first, False)
    assert service.memory_query("cache invalidation", "w", "p").hits[0].path == other


def test_a_recently_updated_page_outranks_an_old_equal_one(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "old.md", "flaky test quarantine")
    service.memory_write_page("w", "p", "new.md", "flaky test quarantine")
    conn = service._db.get()
    conn.execute("UPDATE pages SET updated_at = updated_at - 90 * 86400 WHERE path = 'old.md'")
    assert [h.path for h in service.memory_query("flaky quarantine", "w", "p").hits] == ["new.md", "old.md"]


@pytest.mark.parametrize("limit", [0, -1, 101, True])
def test_limit_outside_one_to_one_hundred_is_refused(service: MemoryService, limit: int) -> None:
    with pytest.raises(ValidationError, match="1 to 100"):
        service.memory_query("x", "w", "p", limit=limit)


def test_an_over_long_query_is_refused_naming_the_limit(service: MemoryService) -> None:
    with pytest.raises(TooLargeError, match="2000"):
        service.memory_query("x" * 2001, "w", "p")


def test_limit_bounds_the_number_of_hits(service: MemoryService) -> None:
    for i in range(12):
        service.memory_write_page("w", "p", f"n{i}", "common words everywhere")
    assert len(service.memory_query("common", "w", "p", limit=5).hits) == 5
    assert len(service.memory_query("common", "w", "p", limit=100).hits) == 12
