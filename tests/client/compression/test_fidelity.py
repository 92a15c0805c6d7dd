"""Fidelity classification (seed 000): deterministic, fail-safe, never less faithful than the rules."""

from __future__ import annotations

import pytest

from ivoai.client.compression.fidelity import (
    FidelityClass,
    classify,
    normalize_payload_type,
    provider_eligible,
)

C, E, B, U = (
    FidelityClass.COMPRESSIBLE,
    FidelityClass.EXACT_REQUIRED,
    FidelityClass.BYPASS,
    FidelityClass.UNSUPPORTED,
)


@pytest.mark.parametrize(
    "payload_type", ["json", "log", "logs", "code", "diff", "search_results", "text", "JSON"]
)
def test_seed_compressible_types_are_compressible(payload_type: str) -> None:
    assert classify(payload_type) is C


@pytest.mark.parametrize(
    "payload_type",
    [
        "memory_response", "context_response", "skill_registry", "skill_metadata", "security_evidence",
        "error", "stack_trace", "traceback", "test_failure", "build_failure", "policy", "authority",
    ],
)  # fmt: skip
def test_seed_exact_required_types_are_exact_required(payload_type: str) -> None:
    assert classify(payload_type) is E


@pytest.mark.parametrize(
    "payload_type", ["mystery", "", "   ", "../etc", "a" * 200, "x;y", "application/x-unknown"]
)
def test_unknown_or_malformed_types_favour_fidelity(payload_type: str) -> None:
    assert classify(payload_type) is E


def test_bypass_and_unsupported_types() -> None:
    assert classify("worker_result") is B and classify("tool_call") is B
    assert (
        classify("image/png") is U and classify("application/octet-stream") is U and classify("binary") is U
    )


def test_media_types_map_to_payload_types() -> None:
    assert normalize_payload_type("Application/JSON; charset=utf-8") == "json"
    assert normalize_payload_type("application/vnd.api+json") == "json"
    assert normalize_payload_type("text/x-diff") == "diff"
    assert normalize_payload_type("search-results") == "search_results"
    assert classify("text/plain") is C


@pytest.mark.parametrize(("failed", "cancelled"), [(True, False), (False, True), (True, True)])
def test_failure_or_cancellation_overrides_a_compressible_suggestion(failed: bool, cancelled: bool) -> None:
    assert classify("log", suggested=C, failed=failed, cancelled=cancelled) is E
    assert classify("json", failed=failed, cancelled=cancelled) is E


def test_a_suggestion_never_lowers_fidelity() -> None:
    assert classify("log", suggested=E) is E
    assert classify("log", suggested=B) is B
    for payload_type in ("memory_response", "mystery", "error"):
        assert classify(payload_type, suggested=C) is E
    assert classify("image/png", suggested=C) is U


def test_only_compressible_is_provider_eligible() -> None:
    assert [provider_eligible(c) for c in (C, E, B, U)] == [True, False, False, False]


def test_classification_is_deterministic() -> None:
    types = ["json", "error", "x", "image/png", "tool_call"]
    assert [classify(t) for t in types] == [classify(t) for t in types]
