"""Errors of the orchestration layer; each carries a stable code (used as the MCP error code text)."""

from __future__ import annotations

from ivoai.common.errors import IvoaiError, NotFoundError, UsageError, ValidationError


class OrchestrationError(IvoaiError):
    """Base of every AUTO error."""

    code = "orchestration_error"


class PlanInvalidError(ValidationError):
    """A plan failed validation; `errors` holds every (field, message) found."""

    code = "plan_invalid"

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        first = errors[0] if errors else ("plan", "invalid")
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{first[0]}: {first[1]}{more}")
        self.errors = errors


class ProfileUnavailableError(OrchestrationError):
    """No runtime-verified profile can run a task (or an explicit model/effort is not available)."""

    code = "profile_unavailable"


class QuotaBlockedError(OrchestrationError):
    """A confirmed hard limit or a missing login blocks the requested client."""

    code = "quota_blocked"


class FuseOpenError(OrchestrationError):
    """The user-wide launch fuse refuses a worker launch (concurrency, rate or breaker)."""

    code = "launch_fuse_open"

    def __init__(self, message: str, *, retry_at: float | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class WorkerNotFoundError(NotFoundError):
    """No worker or task with that ID in this session."""

    code = "worker_not_found"


class OrchestrationUsageError(UsageError):
    """A tool or command argument is out of range; the message names it and the limit."""

    code = "orchestration_usage"


class AppServerError(OrchestrationError):
    """`codex app-server` could not be started or answered badly (the quota stays unknown)."""

    code = "codex_app_server_failed"
