"""Core contracts: support values, separate facts, bounded reasons, a matrix that is never persisted."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

import ivoai.core
from ivoai.common.limits import REASON_MAX_CHARS
from ivoai.core import (
    ComponentMatrix,
    ComponentStatus,
    Fact,
    Fallback,
    Health,
    HealthState,
    Provenance,
    Source,
    Support,
)


def test_public_names_are_pinned() -> None:
    assert ivoai.core.__all__ == sorted(ivoai.core.__all__)
    assert ivoai.core.__all__ == [
        "ComponentMatrix",
        "ComponentStatus",
        "Fact",
        "Fallback",
        "Health",
        "HealthState",
        "Provenance",
        "Source",
        "Support",
    ]


def test_support_has_exactly_the_four_seed_values() -> None:
    assert [s.value for s in Support] == ["supported", "unsupported", "unknown", "not_exposed"]


def test_missing_capability_evidence_is_unknown_not_inferred() -> None:
    row = ComponentStatus("codex", "executor", capabilities={"session_start": Support.SUPPORTED})
    assert row.support("session_start") is Support.SUPPORTED
    assert row.support("diff_retrieval") is Support.UNKNOWN
    matrix = ComponentMatrix([row])
    assert matrix.support("claude", "session_start") is Support.UNKNOWN


def test_installed_available_and_healthy_are_separate_facts() -> None:
    row = ComponentStatus(
        "headroom",
        "compression_provider",
        installed=Fact.YES,
        available=Fact.NO,
        health=Health(HealthState.UNKNOWN),
    )
    doc = row.to_dict()
    assert (doc["installed"], doc["available"], doc["health"]["state"]) == ("yes", "no", "unknown")
    assert ComponentStatus("x", "executor").to_dict()["installed"] == "not_probed"
    assert Fact.of(None) is Fact.UNKNOWN
    assert Fact.of(True) is Fact.YES


def test_reasons_are_redacted_single_lines_and_bounded() -> None:
    health = Health(
        HealthState.UNHEALTHY, "proxy said\nAuthorization: Bearer sk-abcdefghijklmnopqrstuvwx " + "x" * 500
    )
    assert health.reason is not None
    assert "\n" not in health.reason
    assert "sk-abcdefghijklmnopqrstuvwx" not in health.reason
    assert len(health.reason) == REASON_MAX_CHARS


def test_fallback_records_requested_effective_and_reason() -> None:
    fb = Fallback("caveman", "direct", "authoritative memory source present")
    assert fb.fell_back is True
    assert fb.to_dict() == {
        "requested": "caveman",
        "effective": "direct",
        "reason": "authoritative memory source present",
        "fell_back": True,
    }
    assert Fallback("direct", "direct", "requested").fell_back is False


def test_provenance_serializes_its_evidence() -> None:
    prov = Provenance(Source.PROBE, "codex --version", version="0.171.0")
    assert prov.to_dict() == {
        "source": "probe",
        "detail": "codex --version",
        "version": "0.171.0",
        "digest": None,
    }


def test_matrix_orders_rows_and_later_rows_win() -> None:
    matrix = ComponentMatrix(
        [
            ComponentStatus("codex", "executor"),
            ComponentStatus("caveman", "compression_provider"),
            ComponentStatus("codex", "executor", "CodexExecutor"),
        ]
    )
    assert [(r.kind, r.component) for r in matrix] == [
        ("compression_provider", "caveman"),
        ("executor", "codex"),
    ]
    codex = matrix.get("codex", "executor")
    assert codex is not None
    assert codex.implementation == "CodexExecutor"
    json.dumps(matrix.to_list())


def test_the_matrix_refuses_to_be_persisted() -> None:
    matrix = ComponentMatrix([ComponentStatus("codex", "executor")])
    with pytest.raises(TypeError, match="never persisted"):
        pickle.dumps(matrix)
    with pytest.raises(TypeError, match="never persisted"):
        copy.deepcopy(matrix)
    assert not hasattr(matrix, "save")
