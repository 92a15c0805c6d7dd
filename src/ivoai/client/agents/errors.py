"""Errors of the agent launcher; each carries a stable code."""

from __future__ import annotations

from ivoai.common.errors import IvoaiError, NotFoundError, UsageError


class LaunchUsageError(UsageError):
    """The launch command line is invalid (exit 2); the message names the option."""

    code = "launch_usage"


class ExecutorNotFoundError(NotFoundError):
    """The official client is not installed on PATH nor in ivoai's managed data root."""

    code = "executor_not_found"


class LaunchError(IvoaiError):
    """The official client could not be started (before it ran: nothing to clean up in the client)."""

    code = "launch_failed"


class SessionEndedError(IvoaiError):
    """The session was ended by ivoai after the client had started (e.g. the compression proxy died)."""

    code = "session_ended"
