"""WorkingContext errors: each has a stable code; messages never contain payload bytes."""

from __future__ import annotations

from ivoai.common.errors import IvoaiError, NotFoundError, TooLargeError, UnsafePathError, ValidationError


class ArtifactError(IvoaiError):
    """Base of every ArtifactStore failure."""

    code = "artifact_error"


class InvalidArtifactIdError(ValidationError):
    """An artifact ID does not match the strict `art_<32 hex>` pattern."""

    code = "artifact_invalid_id"


class ArtifactNotFoundError(NotFoundError):
    """No artifact with this ID exists for the caller's session (another session's look the same)."""

    code = "artifact_not_found"


class ArtifactExpiredError(ArtifactError):
    """The artifact's TTL has passed; `ivoai artifacts gc` removes it."""

    code = "artifact_expired"


class ArtifactCorruptError(ArtifactError):
    """Size, SHA-256 or metadata no longer match what was written; the files are kept for inspection."""

    code = "artifact_corrupt"


class ArtifactUnsafeError(UnsafePathError):
    """A symlink, foreign owner or loose mode inside the store."""

    code = "artifact_unsafe"


class ArtifactQuotaError(TooLargeError):
    """Storing this artifact would exceed a session or global quota."""

    code = "artifact_quota_exceeded"


class ArtifactRefusedError(ValidationError):
    """The content is classified secret, credential or raw_auth and is not accepted."""

    code = "artifact_refused"


class ArtifactRangeError(ValidationError):
    """A range read is negative, beyond the end or longer than the 1 MiB limit."""

    code = "artifact_invalid_range"


class StoreUnavailableError(ArtifactError):
    """The store cannot be used at all (root unusable); projections become `degraded`."""

    code = "artifact_store_unavailable"
