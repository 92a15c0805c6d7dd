"""The bounded projector and capture: budgets, exact content never altered, degraded never raw."""

from __future__ import annotations

import hashlib
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ivoai.client.compression.fidelity import FidelityClass
from ivoai.client.workingcontext import (
    ArtifactRef,
    ArtifactState,
    ArtifactStore,
    Budget,
    EvidenceRole,
    Sensitivity,
    capture,
    project,
)
from ivoai.common.limits import (
    MIB,
    PROJECTION_BUDGET_BALANCED_BYTES,
    PROJECTION_BUDGET_LIGHT_BYTES,
    PROJECTION_BUDGET_MAX_BYTES,
    PROJECTION_BUDGET_STRONG_BYTES,
)

SESSION = "proj-session"


def _log(lines: int) -> bytes:
    return b"".join(b"line %06d: compiled module number %d\n" % (i, i) for i in range(lines))


def test_budgets_are_the_documented_sizes() -> None:
    assert (
        [b.bytes for b in Budget]
        == [
            PROJECTION_BUDGET_LIGHT_BYTES,
            PROJECTION_BUDGET_BALANCED_BYTES,
            PROJECTION_BUDGET_STRONG_BYTES,
            PROJECTION_BUDGET_MAX_BYTES,
        ]
        == [4096, 8192, 12288, 16384]
    )


@pytest.mark.parametrize("budget", list(Budget))
def test_compressible_output_gets_a_bounded_deterministic_head_and_tail(
    store: ArtifactStore, budget: Budget
) -> None:
    data = _log(5000)
    cap = capture(store, data, session_id=SESSION, payload_type="log", budget=budget)
    p = cap.projection
    assert p.mode == "head_tail" and p.fidelity is FidelityClass.COMPRESSIBLE
    assert len(p.text.encode()) <= budget.bytes
    assert cap.result_ref is not None and cap.result_ref.ref.id in p.text
    assert f"{len(data)} bytes, 5000 lines" in p.text
    head = data[: p.head_bytes].decode()
    tail = data[len(data) - p.tail_bytes :].decode()
    assert head in p.text and tail in p.text and head.endswith("\n")
    assert p.omitted_bytes == len(data) - p.head_bytes - p.tail_bytes > 0
    # Deterministic: the same bytes project to the same text.
    again = project(cap.result_ref.ref, data, fidelity=FidelityClass.COMPRESSIBLE, budget=budget)
    assert again.text == p.text


def test_output_that_fits_is_sent_verbatim(store: ArtifactStore) -> None:
    data = b"all tests passed\n"
    p = capture(store, data, session_id=SESSION, payload_type="log").projection
    assert (p.mode, p.text) == ("verbatim", data.decode())


def test_exact_required_content_that_fits_is_verbatim_and_otherwise_only_referenced(
    store: ArtifactStore,
) -> None:
    small = b"Traceback (most recent call last):\n  File 'x.py', line 1\nValueError: boom\n"
    p = capture(store, small, session_id=SESSION, payload_type="stack_trace", budget=Budget.LIGHT).projection
    assert (p.mode, p.text) == ("verbatim", small.decode())
    big = b"".join(b"FAILED test_%05d\n" % i for i in range(2000))
    cap = capture(store, big, session_id=SESSION, payload_type="log", failed=True, budget=Budget.MAX)
    p = cap.projection
    assert p.fidelity is FidelityClass.EXACT_REQUIRED and p.mode == "reference_only"
    assert "FAILED test_" not in p.text  # never a partial (altered) view of exact content
    assert cap.result_ref is not None and cap.result_ref.ref.id in p.text
    assert "orchestration_artifact_read" in p.text
    assert store.read(cap.result_ref.ref.id, session_id=SESSION)[1] == big


def test_binary_and_unsupported_content_is_only_referenced(store: ArtifactStore) -> None:
    p = capture(store, b"\x89PNG\r\n\x1a\n\x00\x00", session_id=SESSION, payload_type="binary").projection
    assert p.mode == "reference_only" and p.fidelity is FidelityClass.UNSUPPORTED
    p = capture(store, b"\xff\xfe bad utf-8", session_id=SESSION, payload_type="error").projection
    assert p.mode == "reference_only"


def test_compressible_binary_is_cut_and_still_within_budget(store: ArtifactStore) -> None:
    data = bytes(range(256)) * 200
    p = capture(store, data, session_id=SESSION, payload_type="text", budget=Budget.LIGHT).projection
    assert p.mode == "head_tail" and len(p.text.encode()) <= Budget.LIGHT.bytes


def test_a_16_mib_output_projects_within_budget_and_records_truncation(store: ArtifactStore) -> None:
    data = _log(400_000)
    data = data + b"x" * (16 * MIB + 100 - len(data))
    cap = capture(store, io.BytesIO(data), session_id=SESSION, payload_type="log", role=EvidenceRole.BUILD)
    assert cap.result_ref is not None
    ref = cap.result_ref.ref
    assert (ref.state.value, ref.original_size) == ("truncated", len(data))
    assert "truncated from" in cap.projection.text
    assert len(cap.projection.text.encode()) <= Budget.BALANCED.bytes


def test_store_unavailable_gives_degraded_without_raw_output(xdg_root: Path) -> None:
    xdg_root.parent.mkdir(parents=True, exist_ok=True)
    xdg_root.write_text("not a directory")
    store = ArtifactStore(xdg_root)
    secret_looking_but_plain = b"RAW-OUTPUT-MARKER " * 10
    cap = capture(store, secret_looking_but_plain, session_id=SESSION, payload_type="log")
    assert cap.degraded and cap.result_ref is None
    assert "RAW-OUTPUT-MARKER" not in cap.projection.text
    assert "degraded" in cap.projection.text and len(cap.projection.text.encode()) <= Budget.BALANCED.bytes
    assert str(xdg_root) not in cap.projection.text


def test_quota_exhaustion_is_degraded_with_an_explicit_reason(small_store: ArtifactStore) -> None:
    for _ in range(4):
        small_store.put(b"x", session_id=SESSION)
    cap = capture(small_store, b"more output", session_id=SESSION, payload_type="log")
    assert cap.degraded and cap.projection.reason is not None
    assert cap.projection.reason.startswith("artifact_quota_exceeded")
    assert "more output" not in cap.projection.text


def test_credential_output_is_withheld_with_no_preview_and_nothing_stored(store: ArtifactStore) -> None:
    data = b"line 1\nexport GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123\nline 3\n"
    cap = capture(store, data, session_id=SESSION, payload_type="log")
    assert cap.projection.mode == "withheld" and cap.result_ref is None
    assert "ghp_" not in cap.projection.text and "line 1" not in cap.projection.text
    assert store.list().refs == ()


@pytest.fixture
def xdg_root(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "working-context"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=40_000) | st.text(max_size=12_000).map(lambda t: t.encode("utf-8")),
    budget=st.sampled_from(list(Budget)),
    fidelity=st.sampled_from(list(FidelityClass)),
)
def test_any_output_projects_within_budget_deterministically(
    data: bytes, budget: Budget, fidelity: FidelityClass
) -> None:
    ref = _fake_ref(data)
    p = project(ref, data, fidelity=fidelity, budget=budget)
    assert len(p.text.encode("utf-8")) <= budget.bytes
    assert project(ref, data, fidelity=fidelity, budget=budget) == p
    if fidelity is not FidelityClass.COMPRESSIBLE:
        assert p.mode in ("verbatim", "reference_only")
        if p.mode == "verbatim":
            assert p.text.encode("utf-8") == data  # exact content is never altered
    if p.mode == "head_tail" and _utf8(data):
        shown_head = p.text.split("]\n", 1)[1].encode("utf-8")[: p.head_bytes]
        assert shown_head == data[: p.head_bytes]


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _fake_ref(data: bytes) -> ArtifactRef:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    return ArtifactRef(
        id="art_" + "f" * 32,
        payload_type="log",
        media_type="text/plain",
        size=len(data),
        original_size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        created_at=now,
        expires_at=now + timedelta(hours=1),
        session_id="s",
        sensitivity=Sensitivity.INTERNAL,
        state=ArtifactState.COMPLETE,
    )
