"""Memory service errors: each subclasses a common error class and carries a stable code.

HTTP status comes with the class (`common/errors.py`): invalid input 400, too large 413, not found
404, version conflict 409, busy 503 (retry), closed 503, schema and store failures 500.
"""

from __future__ import annotations

from ivoai.common.errors import (
    ConflictError,
    IvoaiError,
    LockTimeoutError,
    NotFoundError,
    TooLargeError,
    ValidationError,
)


class MemoryValidationError(ValidationError):
    """An argument failed validation; the message names the field and the limit."""

    code = "memory_invalid"


class MemoryNameError(MemoryValidationError):
    """A workspace or project name does not match `^[a-z0-9][a-z0-9._-]*$` (or is too long)."""

    code = "memory_invalid_name"


class MemoryPathError(MemoryValidationError):
    """A page path is absolute, escapes its scope, holds control characters or is too long."""

    code = "memory_invalid_path"


class MemoryConfirmError(MemoryValidationError):
    """`confirm` of a delete did not equal the normalized page path."""

    code = "memory_confirm_mismatch"


class MemoryTooLargeError(TooLargeError):
    """A body, query or hook event exceeded its documented size."""

    code = "memory_too_large"


class MemoryNotFoundError(NotFoundError):
    """The page (or the requested version) does not exist or was deleted."""

    code = "memory_not_found"


class MemoryConflictError(ConflictError):
    """`expected_version` did not match the page's current version: re-read and retry."""

    code = "memory_version_conflict"


class MemoryBusyError(LockTimeoutError):
    """The database stayed locked by another writer for longer than the busy timeout."""

    code = "memory_busy"


class MemorySchemaError(IvoaiError):
    """The database was written by a newer ivoai (or has an unknown history): refused, untouched."""

    code = "memory_schema_unsupported"


class MemoryStoreError(IvoaiError):
    """The database file is unusable (corrupt, unreadable, not a database)."""

    code = "memory_store_error"


class MemoryClosedError(IvoaiError):
    """The service was closed (the gateway is shutting down): a later request reaches a new one."""

    code = "memory_closed"
    http_status = 503
