"""The base of every ivoai error: a stable code plus a one-line, secret-free message."""

from __future__ import annotations


class IvoaiError(Exception):
    """An expected failure a user can act on; the CLI prints it as one line and exits 1."""

    code: str = "ivoai_error"
    exit_code: int = 1

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


class UnsafePathError(IvoaiError):
    """A path failed ownership, mode, symlink or containment checks."""

    code = "unsafe_path"


class LockTimeoutError(IvoaiError):
    """An advisory lock could not be taken within its timeout."""

    code = "lock_timeout"


class TooLargeError(IvoaiError):
    """Input exceeded a documented size limit."""

    code = "too_large"


class ValidationError(IvoaiError):
    """Input failed validation; the message names the field and the limit."""

    code = "invalid"


class NotFoundError(IvoaiError):
    """A named object does not exist."""

    code = "not_found"


class ConflictError(IvoaiError):
    """A concurrent change won; retry with fresh state."""

    code = "conflict"
