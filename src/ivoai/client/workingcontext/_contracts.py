"""Boundary contracts of WorkingContext: ArtifactRef, ResultRef, StateDelta, WorkerResult (seed 000).

These are pydantic models because they cross boundaries (meta.json on disk, the CLI's JSON, the
orchestrator MCP). Every string and list is bounded. An ArtifactRef carries no path and no
content; WorkerResult and StateDelta are untrusted, advisory data produced by a worker.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from ivoai.client.workingcontext._errors import InvalidArtifactIdError
from ivoai.common.errors import ValidationError
from ivoai.common.limits import (
    ARTIFACT_MAX_BYTES,
    ARTIFACT_MEDIA_TYPE_MAX_CHARS,
    ARTIFACT_OWNER_ID_MAX_CHARS,
    ARTIFACT_TTL_MAX_SECONDS,
    ARTIFACT_TYPE_MAX_CHARS,
    STATE_DELTA_ITEM_MAX_CHARS,
    STATE_DELTA_ITEMS_MAX,
    WORKER_ERROR_MAX_CHARS,
    WORKER_ERRORS_MAX,
    WORKER_FINDING_MAX_CHARS,
    WORKER_FINDINGS_MAX,
    WORKER_REFS_MAX,
    WORKER_SUMMARY_MAX_CHARS,
)

ARTIFACT_ID_PATTERN = r"^art_[0-9a-f]{32}$"
OWNER_ID_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._:@-]{{0,{ARTIFACT_OWNER_ID_MAX_CHARS - 1}}}$"
PAYLOAD_TYPE_PATTERN = rf"^[a-z][a-z0-9_]{{0,{ARTIFACT_TYPE_MAX_CHARS - 1}}}$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"
DEFAULT_MEDIA_TYPE = "application/octet-stream"
DEFAULT_PAYLOAD_TYPE = "output"

_ID_RE = re.compile(ARTIFACT_ID_PATTERN)
_OWNER_RE = re.compile(OWNER_ID_PATTERN)
_TYPE_RE = re.compile(PAYLOAD_TYPE_PATTERN)
_TOKEN = r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}"
_MEDIA_RE = re.compile(rf"^({_TOKEN})/({_TOKEN})$")
_CHARSET_RE = re.compile(r"^[a-z0-9][a-z0-9_.:+-]{0,39}$")

OwnerId = Annotated[str, StringConstraints(pattern=OWNER_ID_PATTERN)]
ArtifactId = Annotated[str, StringConstraints(pattern=ARTIFACT_ID_PATTERN)]


class Sensitivity(StrEnum):
    """How private a payload is; the last three are never accepted by the store."""

    PUBLIC = "public"
    INTERNAL = "internal"
    RESTRICTED = "restricted"
    SECRET = "secret"
    CREDENTIAL = "credential"
    RAW_AUTH = "raw_auth"


REFUSED_SENSITIVITIES = frozenset({Sensitivity.SECRET, Sensitivity.CREDENTIAL, Sensitivity.RAW_AUTH})
PRIVATE_SENSITIVITIES = frozenset({Sensitivity.INTERNAL, Sensitivity.RESTRICTED})


class ArtifactState(StrEnum):
    """Whether the stored bytes are the whole output or its first ARTIFACT_MAX_BYTES."""

    COMPLETE = "complete"
    TRUNCATED = "truncated"


def validate_artifact_id(value: str) -> str:
    """Return `value` when it is a well-formed artifact ID.

    Raises:
        InvalidArtifactIdError: anything else (paths, `..`, other prefixes), without echoing long input.
    """
    if not isinstance(value, str) or not _ID_RE.match(value):
        shown = value[:48] + "…" if isinstance(value, str) and len(value) > 48 else value
        raise InvalidArtifactIdError(
            f"artifact id {shown!r} is invalid: expected art_ followed by 32 hex digits"
        )
    return value


def validate_owner_id(field: str, value: str) -> str:
    """Return `value` when it is a bounded owner token (session, task, worker, association)."""
    if not _OWNER_RE.match(value):
        raise ValidationError(
            f"{field} {value[:48]!r} is invalid: 1-{ARTIFACT_OWNER_ID_MAX_CHARS} characters from "
            "A-Z a-z 0-9 . _ : @ -, starting with a letter or digit"
        )
    return value


def validate_payload_type(value: str) -> str:
    """Return `value` when it is a payload type token like `log` or `test_failure`."""
    if not _TYPE_RE.match(value):
        raise ValidationError(
            f"payload_type {value[:48]!r} is invalid: 1-{ARTIFACT_TYPE_MAX_CHARS} characters a-z 0-9 _, "
            "starting with a letter"
        )
    return value


def normalize_media_type(value: str) -> str:
    """Lower-case `type/subtype`, keep only a `charset` parameter; reject anything malformed.

    Raises:
        ValidationError: the value is not a media type or is longer than the limit.
    """
    if len(value) > ARTIFACT_MEDIA_TYPE_MAX_CHARS:
        raise ValidationError(f"media_type is longer than {ARTIFACT_MEDIA_TYPE_MAX_CHARS} characters")
    parts = [p.strip() for p in value.strip().lower().split(";")]
    if not _MEDIA_RE.match(parts[0]):
        raise ValidationError(f"media_type {value!r} is invalid: expected type/subtype, e.g. text/plain")
    out = parts[0]
    for param in parts[1:]:
        key, _, val = param.partition("=")
        val = val.strip().strip('"')
        if key.strip() == "charset" and _CHARSET_RE.match(val):
            out = f"{out}; charset={val}"
            break
    return out


_FROZEN = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)


class ArtifactRef(BaseModel):
    """An opaque reference to exact bytes in the ArtifactStore: metadata only, no path, no content."""

    model_config = _FROZEN

    id: ArtifactId
    payload_type: Annotated[str, StringConstraints(pattern=PAYLOAD_TYPE_PATTERN)]
    media_type: Annotated[str, StringConstraints(max_length=ARTIFACT_MEDIA_TYPE_MAX_CHARS)]
    size: Annotated[int, Field(ge=0, le=ARTIFACT_MAX_BYTES)]
    original_size: Annotated[int, Field(ge=0)]
    sha256: Annotated[str, StringConstraints(pattern=SHA256_PATTERN)]
    created_at: datetime
    expires_at: datetime
    session_id: OwnerId
    task_id: OwnerId | None = None
    worker_id: OwnerId | None = None
    sensitivity: Sensitivity
    state: ArtifactState

    @field_validator("media_type")
    @classmethod
    def _media(cls, value: str) -> str:
        if normalize_media_type(value) != value:
            raise ValueError("media_type is not normalized")
        return value

    @field_validator("created_at", "expires_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() != timedelta(0):
            raise ValueError("timestamps must be UTC")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ArtifactRef:
        if self.sensitivity in REFUSED_SENSITIVITIES:
            raise ValueError(f"sensitivity {self.sensitivity.value} is never stored")
        if self.original_size < self.size:
            raise ValueError("original_size is smaller than size")
        truncated = self.original_size > self.size
        if truncated != (self.state is ArtifactState.TRUNCATED):
            raise ValueError("state does not match size and original_size")
        ttl = (self.expires_at - self.created_at).total_seconds()
        if not 0 < ttl <= ARTIFACT_TTL_MAX_SECONDS:
            raise ValueError(
                f"expires_at must be after created_at and at most {ARTIFACT_TTL_MAX_SECONDS} s later"
            )
        return self


class EvidenceRole(StrEnum):
    """What a referenced artifact is evidence of."""

    OUTPUT = "output"
    STDOUT = "stdout"
    STDERR = "stderr"
    TEST = "test"
    BUILD = "build"
    SECURITY = "security"
    DIFF = "diff"
    LOG = "log"
    ERROR = "error"
    TRACE = "trace"
    OTHER = "other"


class ResultRef(BaseModel):
    """An ArtifactRef with its evidence role and the call that produced it; never merged with another."""

    model_config = _FROZEN

    ref: ArtifactRef
    role: EvidenceRole
    association_id: OwnerId | None = None


Bounded = Annotated[str, StringConstraints(max_length=STATE_DELTA_ITEM_MAX_CHARS)]
BoundedList = Annotated[list[Bounded], Field(max_length=STATE_DELTA_ITEMS_MAX)]


class TestState(StrEnum):
    """A worker's claim about tests; advisory."""

    __test__ = False  # not a pytest class

    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not_run"
    UNKNOWN = "unknown"


class _WorkerClaim(BaseModel):
    """What a worker says: marked untrusted and advisory in every serialized form."""

    model_config = _FROZEN

    trust: Literal["untrusted"] = "untrusted"
    advisory: Literal[True] = True


class StateDelta(_WorkerClaim):
    """Changes a worker *proposes*; untrusted and advisory, the primary decides what to apply."""

    changed_files: BoundedList = Field(default_factory=list)
    tests: TestState = TestState.UNKNOWN
    facts: BoundedList = Field(default_factory=list)
    next_steps: BoundedList = Field(default_factory=list)
    open_questions: BoundedList = Field(default_factory=list)
    uncertain_effects: BoundedList = Field(default_factory=list)

    @field_validator("changed_files")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for path in value:
            parts = path.split("/")
            if not path or path.startswith("/") or "\x00" in path or any(p in ("", "..") for p in parts):
                raise ValueError(f"changed_files entry {path[:80]!r} must be a relative path without '..'")
        return value


class WorkerStatus(StrEnum):
    """How a worker's run ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    PARTIAL = "partial"


class WorkerResult(_WorkerClaim):
    """A worker's bounded, untrusted, advisory result; long evidence lives only behind its refs."""

    status: WorkerStatus
    summary: Annotated[str, StringConstraints(max_length=WORKER_SUMMARY_MAX_CHARS)]
    findings: Annotated[
        list[Annotated[str, StringConstraints(max_length=WORKER_FINDING_MAX_CHARS)]],
        Field(max_length=WORKER_FINDINGS_MAX),
    ] = Field(default_factory=list)
    refs: Annotated[list[ResultRef], Field(max_length=WORKER_REFS_MAX)] = Field(default_factory=list)
    errors: Annotated[
        list[Annotated[str, StringConstraints(max_length=WORKER_ERROR_MAX_CHARS)]],
        Field(max_length=WORKER_ERRORS_MAX),
    ] = Field(default_factory=list)
    state_delta: StateDelta = Field(default_factory=StateDelta)

    @model_validator(mode="after")
    def _failures_explicit(self) -> WorkerResult:
        if self.status is not WorkerStatus.SUCCEEDED and not self.errors:
            raise ValueError(
                f"status {self.status.value} needs at least one entry in errors (failures stay explicit)"
            )
        return self
