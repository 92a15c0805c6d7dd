"""Errors of the session control plane; each carries a stable code."""

from __future__ import annotations

from ivoai.common.errors import ConflictError, NotFoundError, ValidationError


class SessionNotFoundError(NotFoundError):
    """No session record has this ID."""

    code = "session_not_found"


class InvalidSessionIdError(ValidationError):
    """A session ID that ivoai could not have issued (never used to build a path)."""

    code = "session_id_invalid"


class SessionNotRunningError(ConflictError):
    """The session ended, or its recorded PID now belongs to another process: nothing is signalled."""

    code = "session_not_running"


class SessionRecordError(ValidationError):
    """A session record on disk is malformed."""

    code = "session_record_invalid"
