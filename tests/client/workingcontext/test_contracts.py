"""Boundary contracts: ArtifactRef carries no path or content; WorkerResult is bounded and untrusted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

import ivoai.client.workingcontext as wc
from ivoai.client.workingcontext import (
    ArtifactRef,
    EvidenceRole,
    ResultRef,
    StateDelta,
    WorkerResult,
    WorkerStatus,
    normalize_media_type,
)
from ivoai.common.errors import ValidationError
from ivoai.common.limits import WORKER_FINDINGS_MAX, WORKER_SUMMARY_MAX_CHARS

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def _ref(**over: Any) -> ArtifactRef:
    fields: dict[str, Any] = {
        "id": "art_" + "1" * 32,
        "payload_type": "log",
        "media_type": "text/plain",
        "size": 10,
        "original_size": 10,
        "sha256": "0" * 64,
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=24),
        "session_id": "s1",
        "sensitivity": "internal",
        "state": "complete",
    }
    fields.update(over)
    return ArtifactRef(**fields)


def test_package_exports_are_sorted_and_pinned() -> None:
    assert wc.__all__ == sorted(wc.__all__)
    assert {"ArtifactStore", "ArtifactRef", "ResultRef", "WorkerResult", "capture", "project"} <= set(
        wc.__all__
    )


def test_artifact_ref_has_metadata_fields_only() -> None:
    assert set(ArtifactRef.model_fields) == {
        "id", "payload_type", "media_type", "size", "original_size", "sha256", "created_at", "expires_at",
        "session_id", "task_id", "worker_id", "sensitivity", "state",
    }  # fmt: skip
    with pytest.raises(pydantic.ValidationError):
        _ref(path="/tmp/x")
    with pytest.raises(pydantic.ValidationError):
        _ref(content="raw output")


@pytest.mark.parametrize(
    "over",
    [
        {"id": "../x"},
        {"sensitivity": "credential"},
        {"original_size": 5},
        {"state": "truncated"},
        {"expires_at": NOW + timedelta(days=8)},
        {"expires_at": NOW},
        {"media_type": "Text/Plain"},
        {"created_at": datetime(2026, 11, 30)},
        {"size": 16 * 1024 * 1024 + 1, "original_size": 16 * 1024 * 1024 + 1},
    ],
)
def test_inconsistent_refs_are_rejected(over: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        _ref(**over)


def test_media_types_are_normalized_or_rejected_naming_the_field() -> None:
    assert (
        normalize_media_type(' Application/JSON ; Charset="UTF-8"; q=1') == "application/json; charset=utf-8"
    )
    assert normalize_media_type("text/x-diff; format=flowed") == "text/x-diff"
    for bad in ("text", "text/", "a b/c", "x" * 200):
        with pytest.raises(ValidationError, match="media_type"):
            normalize_media_type(bad)


def test_result_refs_keep_their_association_and_are_never_merged() -> None:
    ref = _ref()
    a = ResultRef(ref=ref, role=EvidenceRole.TEST, association_id="call-1")
    b = ResultRef(ref=ref, role=EvidenceRole.TEST, association_id="call-2")
    result = WorkerResult(status=WorkerStatus.SUCCEEDED, summary="ok", refs=[a, b])
    assert [r.association_id for r in result.refs] == ["call-1", "call-2"]
    with pytest.raises(pydantic.ValidationError):
        ResultRef(ref=ref, role=EvidenceRole.TEST, association_id="x" * 129)


def test_worker_result_is_labelled_untrusted_and_advisory() -> None:
    result = WorkerResult(status=WorkerStatus.SUCCEEDED, summary="done")
    dumped = result.model_dump()
    assert (dumped["trust"], dumped["advisory"]) == ("untrusted", True)
    assert (dumped["state_delta"]["trust"], dumped["state_delta"]["advisory"]) == ("untrusted", True)
    with pytest.raises(pydantic.ValidationError):
        WorkerResult(status=WorkerStatus.SUCCEEDED, summary="x", trust="trusted")  # type: ignore[arg-type]


def test_worker_result_sizes_are_bounded() -> None:
    with pytest.raises(pydantic.ValidationError):
        WorkerResult(status=WorkerStatus.SUCCEEDED, summary="x" * (WORKER_SUMMARY_MAX_CHARS + 1))
    with pytest.raises(pydantic.ValidationError):
        WorkerResult(status=WorkerStatus.SUCCEEDED, summary="x", findings=["f"] * (WORKER_FINDINGS_MAX + 1))


@pytest.mark.parametrize("status", [WorkerStatus.FAILED, WorkerStatus.CANCELLED, WorkerStatus.TIMED_OUT])
def test_failures_must_stay_explicit_in_errors(status: WorkerStatus) -> None:
    with pytest.raises(pydantic.ValidationError, match="errors"):
        WorkerResult(status=status, summary="it broke")
    assert WorkerResult(status=status, summary="it broke", errors=["pytest exit 1"]).errors == [
        "pytest exit 1"
    ]


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside", "a//b", ""])
def test_state_delta_changed_files_must_be_relative_paths(path: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="changed_files"):
        StateDelta(changed_files=[path])
    assert StateDelta(changed_files=["src/a.py"]).changed_files == ["src/a.py"]
