"""The code-aware lexical analyzer, BM25 sparse vectors and hybrid score fusion: pure functions, no I/O."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ivoai.server.context.analyzer import (
    BM25_K1,
    convex_fusion,
    lexical_text,
    sparse_document,
    sparse_query,
    stem,
    token_index,
    tokens,
)


def test_snake_case_identifier_keeps_the_whole_name_and_yields_its_parts() -> None:
    assert tokens("request_headers") == ["request_headers", "request", "header"]


def test_camel_case_and_acronyms_are_split_at_word_boundaries() -> None:
    assert tokens("parseConfig") == ["parseconfig", "parse", "config"]
    assert tokens("HTTPStatusError") == ["httpstatuserror", "http", "status", "error"]


def test_dotted_name_keeps_its_whole_form_and_each_segment() -> None:
    assert tokens("httpx.Client.send") == ["httpx.client.send", "httpx", "client", "send"]


def test_query_words_meet_identifier_parts_of_the_code() -> None:
    code = set(tokens("def merge_request_headers(self, extra_headers): ..."))
    assert {"merge", "request", "header", "extra"} <= code
    assert set(tokens("Merge the headers of a request")) <= code


def test_stopwords_and_one_letter_parts_are_dropped_but_code_words_are_kept() -> None:
    assert tokens("the x of a Console") == ["console"]
    assert tokens("return self.width") == ["return", "self.width", "self", "width"]


def test_plural_stemming_is_light_and_keeps_words_ending_in_ss_us_is() -> None:
    assert [stem(w) for w in ["headers", "entries", "boxes", "class", "status", "analysis", "bus"]] == [
        "header",
        "entry",
        "box",
        "class",
        "status",
        "analysis",
        "bus",
    ]


def test_the_path_is_part_of_the_lexical_text() -> None:
    assert lexical_text("auth/oauth_client.py", "x = 1") == "auth/oauth_client.py\nx = 1"
    assert {"auth", "oauth", "client"} <= set(tokens(lexical_text("auth/oauth_client.py", "x = 1")))
    assert lexical_text("", "body") == "body"


def test_token_index_is_a_stable_32_bit_number() -> None:
    assert token_index("header") == token_index("header") != token_index("headers")
    assert 0 <= token_index("header") < 2**32
    assert token_index("header") == 4218692903  # fixed: stored sparse vectors depend on it


def test_document_vector_weights_repeated_terms_with_bm25_saturation() -> None:
    once = sparse_document("alpha beta")
    twice = sparse_document("alpha alpha beta")
    a = token_index("alpha")
    w1 = once.values[once.indices.index(a)]
    w2 = twice.values[twice.indices.index(a)]
    assert w1 < w2 < BM25_K1 + 1
    assert once.indices == sorted(once.indices)


def test_query_vector_is_one_per_distinct_token() -> None:
    q = sparse_query("headers header Headers")
    assert q.indices == [token_index("header")] and q.values == [1.0]
    assert sparse_query("?? -- !!").indices == []


@given(st.text(max_size=300))
def test_vectors_are_sorted_unique_finite_and_positive_for_any_text(text: str) -> None:
    for vec in (sparse_document(text), sparse_query(text)):
        assert vec.indices == sorted(set(vec.indices))
        assert len(vec.values) == len(vec.indices)
        assert all(0 < v < BM25_K1 + 1 or v == 1.0 for v in vec.values)


def test_fusion_combines_min_max_normalized_scores_with_the_dense_weight() -> None:
    dense = [("a", 0.75), ("b", 0.625), ("c", 0.5)]  # binary fractions: exact arithmetic
    lexical = [("c", 12.0), ("d", 4.0)]
    fused = dict(convex_fusion(dense, lexical, alpha=0.75, limit=10))
    assert fused == {"a": 0.75, "b": 0.75 * 0.5, "c": 0.25, "d": 0.0}


def test_fusion_lets_a_strong_lexical_match_lift_a_middling_dense_hit_over_the_dense_leader() -> None:
    dense = [("leader", 0.91), ("exact_identifier", 0.89), ("other", 0.83)]
    lexical = [("exact_identifier", 20.0), ("noise", 2.0)]
    ranked = [k for k, _ in convex_fusion(dense, lexical, alpha=0.75, limit=10)]
    assert ranked[:2] == ["exact_identifier", "leader"]


def test_fusion_keeps_dense_order_on_ties_and_handles_single_or_empty_lists() -> None:
    assert convex_fusion([("a", 0.9), ("b", 0.9)], [], alpha=0.75, limit=10) == [("a", 0.75), ("b", 0.75)]
    assert convex_fusion([], [("x", 3.0)], alpha=0.75, limit=10) == [("x", 0.25)]
    assert convex_fusion([], [], alpha=0.75, limit=10) == []
    assert [k for k, _ in convex_fusion([("a", 1.0), ("b", 0.5)], [("c", 1.0)], 0.75, limit=1)] == ["a"]
