"""A bounded circuit breaker per upstream server: closed -> open after N failures -> half-open probe.

Pure state with an injectable clock. After `threshold` consecutive failures the breaker opens for
`open_seconds`; while open, calls are refused without touching the network. When the period ends
one trial call is let through (half-open): success closes the breaker, failure opens it again.
The breaker keeps the last failure's reason, so a refusal while it is open can still name the
first cause (connection refused, timeout) instead of only "circuit open".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ivoai.common.limits import BREAKER_FAILURE_THRESHOLD, BREAKER_OPEN_SECONDS

State = Literal["closed", "open", "half_open"]


@dataclass
class CircuitBreaker:
    """Consecutive-failure breaker; not thread-safe (the router uses it from one event loop)."""

    threshold: int = BREAKER_FAILURE_THRESHOLD
    open_seconds: float = BREAKER_OPEN_SECONDS
    clock: Callable[[], float] = time.monotonic
    failures: int = 0
    opened_at: float | None = None
    last_error: str | None = None
    _trial_in_flight: bool = field(default=False, repr=False)

    @property
    def state(self) -> State:
        if self.opened_at is None:
            return "closed"
        if self.clock() - self.opened_at >= self.open_seconds:
            return "half_open"
        return "open"

    def allow(self) -> bool:
        """May a call go out now? In half-open state only one trial at a time."""
        state = self.state
        if state == "closed":
            return True
        if state == "half_open" and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def record_success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self.last_error = None
        self._trial_in_flight = False

    def record_failure(self, reason: str | None = None) -> None:
        """Count one failure; `reason` (one line, no secret) is kept for refusals while open."""
        self._trial_in_flight = False
        self.failures += 1
        if reason:
            self.last_error = reason
        if self.failures >= self.threshold or self.opened_at is not None:
            self.opened_at = self.clock()

    def retry_after(self) -> float:
        """Seconds until a trial call is allowed (0 when not open)."""
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.open_seconds - (self.clock() - self.opened_at))

    def refusal(self) -> str:
        """Why a call is not sent now: the last failure, and when the next trial is allowed."""
        cause = self.last_error or "failed"
        return f"{cause} (circuit open: not retried for {self.retry_after():.0f}s)"
