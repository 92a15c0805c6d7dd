"""WorkingContext: the private ArtifactStore, refs, WorkerResult, projector, GC (seed 000).

Exact worker output goes into the ArtifactStore first; only a bounded projection and opaque refs
reach the primary. See docs/working-context.md.
"""

from ivoai.client.workingcontext._contracts import (
    ARTIFACT_ID_PATTERN,
    ArtifactRef,
    ArtifactState,
    EvidenceRole,
    ResultRef,
    Sensitivity,
    StateDelta,
    TestState,
    WorkerResult,
    WorkerStatus,
    normalize_media_type,
    validate_artifact_id,
)
from ivoai.client.workingcontext._errors import (
    ArtifactCorruptError,
    ArtifactError,
    ArtifactExpiredError,
    ArtifactNotFoundError,
    ArtifactQuotaError,
    ArtifactRangeError,
    ArtifactRefusedError,
    ArtifactUnsafeError,
    InvalidArtifactIdError,
    StoreUnavailableError,
)
from ivoai.client.workingcontext._projector import Budget, Capture, Projection, capture, project
from ivoai.client.workingcontext._secrets import scan_bytes
from ivoai.client.workingcontext._store import (
    DEFAULT_LIMITS,
    ArtifactStore,
    GcReport,
    ListResult,
    Problem,
    RangeRead,
    SessionUsage,
    StoreLimits,
    StoreStats,
)

__all__ = [
    "ARTIFACT_ID_PATTERN",
    "ArtifactCorruptError",
    "ArtifactError",
    "ArtifactExpiredError",
    "ArtifactNotFoundError",
    "ArtifactQuotaError",
    "ArtifactRangeError",
    "ArtifactRef",
    "ArtifactRefusedError",
    "ArtifactState",
    "ArtifactStore",
    "ArtifactUnsafeError",
    "Budget",
    "Capture",
    "DEFAULT_LIMITS",
    "EvidenceRole",
    "GcReport",
    "InvalidArtifactIdError",
    "ListResult",
    "Problem",
    "Projection",
    "RangeRead",
    "ResultRef",
    "Sensitivity",
    "SessionUsage",
    "StateDelta",
    "StoreLimits",
    "StoreStats",
    "StoreUnavailableError",
    "TestState",
    "WorkerResult",
    "WorkerStatus",
    "capture",
    "normalize_media_type",
    "project",
    "scan_bytes",
    "validate_artifact_id",
]
