"""Health of a component, separate from whether it is installed or available."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ivoai.core._text import bounded_reason


class HealthState(StrEnum):
    """Observed health."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    UNHEALTHY = "unhealthy"
    UNKNOWN = "unknown"
    NOT_PROBED = "not_probed"


@dataclass(frozen=True)
class Health:
    """A health observation with a bounded, redacted reason."""

    state: HealthState
    reason: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", bounded_reason(self.reason))

    @classmethod
    def not_probed(cls, reason: str | None = None) -> Health:
        """No health probe ran."""
        return cls(HealthState.NOT_PROBED, reason)

    def to_dict(self) -> dict[str, object]:
        """Stable JSON shape."""
        return {"state": self.state.value, "reason": self.reason}
