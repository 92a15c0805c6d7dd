"""Deterministic merge of federated results (pure)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from ivoai.client.knowledge.merge import SourceOutcome, attribute_single, merge_results


def ok(sid: str, items: list[dict[str, Any]], **extra: Any) -> SourceOutcome:
    return SourceOutcome(
        sid, sid, "ok", sid, {"content": [], "structuredContent": {"results": items, **extra}}
    )


def test_merge_is_identical_whatever_order_the_sources_answered_in() -> None:
    outcomes = [
        ok("b", [{"id": "b1", "score": 0.9}, {"id": "b2", "score": 0.2}]),
        ok("a", [{"id": "a1", "score": 0.9}, {"id": "a2", "score": 0.5}]),
        SourceOutcome("c", "c", "timeout", None, error="no answer within 15s"),
    ]
    rendered = {json.dumps(merge_results(list(p)), sort_keys=True) for p in itertools.permutations(outcomes)}
    assert len(rendered) == 1


def test_scored_items_are_ordered_by_score_then_source_and_carry_attribution() -> None:
    merged = merge_results(
        [
            ok("b", [{"id": "b1", "score": 0.9}, {"id": "b2", "score": 0.2}]),
            ok("a", [{"id": "a1", "score": 0.9}, {"id": "a2", "score": 0.5}]),
        ]
    )
    s = merged["structuredContent"]
    assert [(r["id"], r["knowledge_source"]) for r in s["results"]] == [
        ("a1", "a"),
        ("b1", "b"),
        ("a2", "a"),
        ("b2", "b"),
    ]
    assert s["partial"] is False and merged["isError"] is False
    assert json.loads(merged["content"][0]["text"]) == s


def test_unscored_items_interleave_by_rank_and_limit_caps_the_merge() -> None:
    merged = merge_results(
        [ok("b", [{"id": "b1"}, {"id": "b2"}]), ok("a", [{"id": "a1"}, {"id": "a2"}])], limit=3
    )
    assert [r["id"] for r in merged["structuredContent"]["results"]] == ["a1", "b1", "a2"]


def test_a_failed_source_sets_partial_and_is_reported_but_others_answer() -> None:
    merged = merge_results(
        [ok("a", [{"id": "a1"}]), SourceOutcome("b", "b", "unavailable", None, error="ConnectError")]
    )
    s = merged["structuredContent"]
    assert s["partial"] is True and merged["isError"] is False
    assert s["sources"][1] == {"source": "b", "alias": "b", "status": "unavailable", "error": "ConnectError"}


def test_tool_level_error_counts_as_not_answered() -> None:
    bad = SourceOutcome("b", "b", "ok", "b", {"content": [{"type": "text", "text": "boom"}], "isError": True})
    s = merge_results([ok("a", []), bad])["structuredContent"]
    assert (
        s["partial"] is True and s["sources"][1]["status"] == "error" and s["sources"][1]["error"] == "boom"
    )


def test_all_sources_failing_is_an_error_result() -> None:
    merged = merge_results([SourceOutcome("a", "a", "timeout", None, error="t")])
    assert merged["isError"] is True and merged["structuredContent"]["partial"] is True


def test_results_without_a_common_list_are_kept_per_source() -> None:
    merged = merge_results(
        [
            SourceOutcome("a", "a", "ok", "a", {"content": [], "structuredContent": {"pages": 3}}),
            SourceOutcome("b", "b", "ok", "b", {"content": [{"type": "text", "text": "plain words"}]}),
        ]
    )
    assert merged["structuredContent"]["by_source"] == {"a": {"pages": 3}, "b": {"text": "plain words"}}


def test_a_single_authoritative_answer_is_passed_through_with_attribution_only() -> None:
    upstream = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"k": 1}, "isError": False}
    out = attribute_single(SourceOutcome("a", "a", "ok", "a1", upstream))
    assert {k: v for k, v in out.items() if k != "_meta"} == upstream
    assert out["_meta"]["ivoai/knowledge_source"] == {"source": "a", "served_by": "a1"}


def test_not_found_at_one_source_is_an_answer_not_a_gap() -> None:
    missing = SourceOutcome(
        "b",
        "b",
        "ok",
        "b",
        {"content": [{"type": "text", "text": "not_found: no such document"}], "isError": True},
    )
    found = SourceOutcome("a", "a", "ok", "a", {"content": [], "structuredContent": {"document_id": "d1"}})
    merged = merge_results([found, missing])
    assert merged["structuredContent"]["partial"] is False and merged["isError"] is False
    assert [s["status"] for s in merged["structuredContent"]["sources"]] == ["ok", "not_found"]
    assert merge_results([missing])["isError"] is True
