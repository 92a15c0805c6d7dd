"""The base of every ivoai error: a stable code plus a one-line, secret-free message.

Each class also carries what an entry point answers with it: `exit_code` for the CLI, `http_status`
for the server's HTTP edge (one exception handler renders every `/v1` error from it:
`server/gateway/errors.py`). A subclass inherits both unless its meaning differs; the base is a
server-side failure (500), whose message the HTTP edge never shows.
"""

from __future__ import annotations


class IvoaiError(Exception):
    """An expected failure a user can act on; the CLI prints it as one line and exits 1."""

    code: str = "ivoai_error"
    exit_code: int = 1
    http_status: int = 500  # the server failed: logged, answered without its message
    retry_after_seconds: int | None = None  # answered as `Retry-After` when set (503)

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code


class UsageError(IvoaiError):
    """Invalid arguments; exit status 2."""

    code = "usage"
    exit_code = 2
    http_status = 400


class UnsafePathError(IvoaiError):
    """A path failed ownership, mode, symlink or containment checks."""

    code = "unsafe_path"


class LockTimeoutError(IvoaiError):
    """An advisory lock could not be taken within its timeout."""

    code = "lock_timeout"
    # Busy, not in conflict: another writer held the lock; the same request can succeed a moment later.
    http_status = 503
    retry_after_seconds = 1


class TooLargeError(IvoaiError):
    """Input exceeded a documented size limit."""

    code = "too_large"
    http_status = 413


class ValidationError(IvoaiError):
    """Input failed validation; the message names the field and the limit."""

    code = "invalid"
    http_status = 400


class NotFoundError(IvoaiError):
    """A named object does not exist."""

    code = "not_found"
    http_status = 404


class ConflictError(IvoaiError):
    """A concurrent change won; retry with fresh state."""

    code = "conflict"
    http_status = 409
