"""Hybrid ranking while phase 2 runs, and document-level signals (pure functions)."""

from __future__ import annotations

import pytest

from ivoai.server.context.catalog import DENSE_LEXICAL_ONLY, DENSE_PENDING
from ivoai.server.context.ranking import hybrid_scores, overview_prior, project_question, with_prior


def test_a_pending_chunk_is_ranked_by_its_words_instead_of_being_buried() -> None:
    dense = [("embedded-a", 0.90), ("embedded-b", 0.85), ("embedded-c", 0.80)]
    lexical = [("pending", 12.0), ("embedded-c", 3.0), ("embedded-a", 1.0)]
    ranked = dict(hybrid_scores(dense, lexical, alpha=0.75, not_embedded={"pending": DENSE_PENDING}))
    assert ranked["pending"] == pytest.approx(1.0)  # its lexical score stands in for the dense part
    buried = dict(
        hybrid_scores(
            dense, lexical, alpha=0.75, not_embedded={"pending": DENSE_PENDING}, impute_pending=False
        )
    )
    assert buried["pending"] == pytest.approx(0.25)  # counting the missing dense part as 0


def test_a_lexical_only_chunk_ranks_below_hand_written_text_with_the_same_words() -> None:
    dense = [("prose", 0.82)]
    lexical = [("lockfile", 10.0), ("prose", 9.0), ("other", 1.0)]
    ranked = hybrid_scores(dense, lexical, alpha=0.75, not_embedded={"lockfile": DENSE_LEXICAL_ONLY})
    order = [key for key, _ in ranked]
    assert order.index("prose") < order.index("lockfile")
    assert dict(ranked)["lockfile"] == pytest.approx(0.25 * 0.5)


def test_with_everything_embedded_the_fusion_is_the_plain_convex_combination() -> None:
    from ivoai.server.context.analyzer import convex_fusion

    dense = [("a", 0.9), ("b", 0.85), ("c", 0.81)]
    lexical = [("c", 5.0), ("d", 4.0), ("a", 1.0)]
    assert hybrid_scores(dense, lexical, alpha=0.75, not_embedded={}) == convex_fusion(
        dense, lexical, 0.75, 10
    )


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what does this project do and how do I run it", True),
        ("how do I install this", True),
        ("give me an overview of the repository", True),
        ("what is this", True),
        ("Return the value of the given header", False),
        ("parse_header", False),
        ("how do I use httpx.Client with a proxy", False),
        ("how does the retry decorator back off", False),
    ],
)
def test_questions_about_the_project_as_a_whole_are_recognised(query: str, expected: bool) -> None:
    assert project_question(query) is expected


def test_a_readme_opening_leads_a_project_question_and_docs_openings_follow() -> None:
    assert overview_prior("README.md", 0) == overview_prior("README.md", 1) == 1.0
    assert overview_prior("README.md", 2) == 0.0
    assert overview_prior("docs/index.md", 0) == overview_prior("docs/README.md", 0) == 0.6
    assert overview_prior("docs/context.md", 0) == overview_prior("pkg/README.md", 0) == 0.3
    assert overview_prior("docs/context.md", 1) == overview_prior("src/app.py", 0) == 0.0
    ranked = [("code", 1.0), ("docs", 0.6), ("readme", 0.0)]
    blended = with_prior(ranked, {"readme": 1.0, "docs": 0.3})
    assert [k for k, _ in blended] == ["readme", "docs", "code"]
